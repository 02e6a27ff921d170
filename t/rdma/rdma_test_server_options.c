/* t/rdma/rdma_test_server_options.c: memcached-rdma servers started with
 * options of their own, each driven over RDMA by the binary-protocol client
 * of server_harness.h. Runs inside the Soft-RoCE guest:
 *   rdma_test_server_options SERVER_BINARY [SERVER_ARG...]
 *
 * Owns: a client that leaves while a server with 64 KiB buffers holds its
 * messages (all stored, its connection closed); the memory a server with
 * -m 100 pins for its registrations; values on flash (-o ext_path) read
 * back eagerly and by RDMA WRITE; with one worker (-t 1 -v), the RC
 * connection the substrate refuses for lack of receive credits (stats, log
 * line, served again once one left). The checks against one server with
 * the default options are rdma_test_server's. */
#include "t/rdma/server_harness.h"

/* How many of held0 .. held<n-1> the server holds with their values. */
static int held_values_stored(struct client *c, int n, size_t len)
{
    unsigned char *want = malloc(len);
    int stored = 0;
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof(key), "held%d", i);
        fill_pattern(want, len, 700u + (uint32_t)i);
        unsigned char *v = NULL;
        size_t vlen = 0;
        stored += do_get(c, key, &v, &vlen) == 0 && vlen == len && memcmp(v, want, len) == 0;
        free(v);
    }
    free(want);
    return stored;
}

/* A client that leaves while the server holds its messages: with the
 * server stopped (SIGSTOP), a client sends noreply sets (SETQ) of 60 KB,
 * one per message (server and client with 64 KiB buffers), more than the
 * 256 KiB of input after which the server pauses a connection, with a get
 * (which has a reply) among them, and disconnects. Resumed, the server
 * pauses the connection part way through them; it must still store every
 * one (as a socket's reader gets the data before the end of stream, and
 * a write after the peer's FIN does not fail), and then close the
 * connection. */
static void test_held_at_disconnect(uint16_t p)
{
    enum { N = 24, VALUE_LEN = 60000 };
    /* 32 credits (a hybrid server's default is 8): all 25 messages go
     * while the server is stopped */
    static const char *const big_buffers[] = {"-o", "rdma_eager_max=65536,rdma_rc_credits=32",
                                              NULL};
    pid_t pid = spawn_server(p, big_buffers);
    struct mcr_rdma_ctx_opts o;
    test_opts(&o);
    o.buf_size = 65536;
    o.recv_bufs = 64;
    o.send_bufs = 64;
    struct mcr_rdma_ctx *big_ctx = make_ctx(&o);
    loop_add(big_ctx);
    struct client big, check;
    bool up = cl_connect_via(&big, big_ctx, p) && cl_connect_via(&check, cctx, p);
    long long conns_before = -1; /* both, once the server has seen them established */
    for (int wait = 0; up && wait < 50 && conns_before != 2; wait++) {
        conns_before = stat_value(&check, "rdma_curr_connections");
        if (conns_before != 2)
            run_for(100);
    }
    size_t frame_cap = MCR_BIN_HEADER_LEN + 8 + 16 + VALUE_LEN;
    unsigned char *frame = malloc(frame_cap), *val = malloc(VALUE_LEN);
    kill(pid, SIGSTOP);
    int sent = 0;
    for (int i = 0; up && i < N; i++) {
        static const unsigned char ext[8] = {0};
        char key[16];
        snprintf(key, sizeof(key), "held%d", i);
        fill_pattern(val, VALUE_LEN, 700u + (uint32_t)i);
        size_t at = 0;
        frame_put(frame, &at, MCR_BIN_OP_SETQ, ext, 8, key, val, VALUE_LEN, (uint32_t)i);
        struct iovec iov = {frame, at};
        struct mcr_rdma_send m = {.type = MCR_RDMA_MSG_EAGER, .iov = &iov, .iovcnt = 1};
        sent += mcr_rdma_ep_send(big.ep, &m) == 0;
        if (i == N / 2) { /* a reply to write, after the client has gone */
            at = 0;
            frame_put(frame, &at, MCR_BIN_OP_GET, NULL, 0, "held0", NULL, 0, 1000);
            iov.iov_len = at;
            sent += mcr_rdma_ep_send(big.ep, &m) == 0;
        }
    }
    bool delivered = up && run_until(ep_sent_all, &big, 10000) && !big.closed;
    cl_close(&big); /* while the server is stopped */
    kill(pid, SIGCONT);
    int stored = 0;
    for (int wait = 0; up && wait < 50 && stored < N; wait++) {
        stored = held_values_stored(&check, N, VALUE_LEN);
        if (stored < N)
            run_for(100);
    }
    tap_ok(sent == N + 1 && delivered && stored == N,
           "a client that sent %d noreply sets of %d bytes (more than the input at which the "
           "server pauses it) and a get, and left: all stored, intact (%d)",
           N, VALUE_LEN, stored);
    long long conns = -1;
    for (int wait = 0; up && wait < 50; wait++) {
        conns = stat_value(&check, "rdma_curr_connections");
        if (conns == conns_before - 1)
            break;
        run_for(100);
    }
    tap_ok(conns_before == 2 && conns == 1,
           "and its connection is closed (rdma_curr_connections %lld -> %lld)", conns_before,
           conns);
    cl_close(&check);
    free(val);
    free(frame);
    stop_server(pid, "the server with 64 KiB buffers");
    loop_remove(big_ctx);
    mcr_rdma_ctx_destroy(big_ctx);
}

/* kB of memory pinned by process pid (VmPin: registered memory), -1 if unknown. */
static long pinned_kb(pid_t pid)
{
    char path[64], line[128];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmPin: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* Registered slab memory is resident and pinned, so the server maps no
 * more of it than -m allows: a server with -m 100 filled with 150 values
 * of 1 MiB pins at most about 100 MiB of slab memory per worker (its slab
 * regions would otherwise grow to 128 MiB: 64 MiB, then as much again),
 * and 12 MiB of message buffers. */
static void test_registered_within_limit(uint16_t p)
{
    enum { LIMIT_MB = 100, VALUES = 150 };
    static const char *const small_memory[] = {"-m", "100", NULL};
    pid_t pid = spawn_server(p, small_memory);
    struct client c;
    bool up = cl_connect_via(&c, cctx, p) && cl_rndv_setup(&c);
    size_t len = 1u << 20;
    unsigned char *val = malloc(len);
    fill_pattern(val, len, 4242);
    int stored = 0;
    for (int i = 0; up && i < VALUES; i++) {
        char key[16];
        snprintf(key, sizeof(key), "fill%d", i);
        stored += rndv_set(&c, key, val, len) == 0;
    }
    long workers = stat_value(&c, "threads");
    long pinned = pinned_kb(pid);
    long bound = workers * (LIMIT_MB + 24) * 1024;
    tap_ok(stored == VALUES && workers >= 1 && pinned > 0 && pinned <= bound,
           "a server with -m %d filled with %d values of 1 MiB pins %ld MiB of memory (at most "
           "%ld: %ld workers' registrations of no more than the limit, and their buffers)",
           LIMIT_MB, VALUES, pinned / 1024, bound / 1024, workers);
    cl_close(&c);
    free(val);
    stop_server(pid, "the server with -m 100");
}

/* Values on flash (-o ext_path): the value of a flash-resident item is
 * read into a fresh item first, so eager replies and RDMA WRITEs into a
 * landing buffer send it like any other, byte-exact. */
static void test_flash_gets(uint16_t p)
{
    char path[64], opt[192];
    snprintf(path, sizeof(path), "/tmp/mcr-rdma-flash.%d", (int)getpid());
    snprintf(opt, sizeof(opt),
             "ext_page_size=16,ext_wbuf_size=16,ext_path=%s:64m,ext_item_size=64,"
             "ext_item_age=0",
             path);
    const char *const flash[] = {"-o", opt, NULL};
    pid_t pid = spawn_server(p, flash);
    struct client e, z;
    bool up = cl_connect_via(&e, cctx, p) && cl_connect_via(&z, cctx, p) && cl_rndv_setup(&z);
    size_t eager = up ? mcr_rdma_ep_max_eager_payload(e.ep) : 0;
    const size_t sizes[] = {200, eager / 2, 65536, 1u << 20};
    enum { NSIZES = sizeof(sizes) / sizeof(sizes[0]) };
    unsigned char *val[NSIZES];
    bool stored = up;
    for (int i = 0; i < NSIZES; i++) {
        char key[16];
        snprintf(key, sizeof(key), "flash%d", i);
        val[i] = malloc(sizes[i]);
        fill_pattern(val[i], sizes[i], 500u + (uint32_t)i);
        stored = stored && do_set(&e, MCR_BIN_OP_SET, key, val[i], sizes[i]) == 0;
    }
    long long written = 0;
    for (int i = 0; stored && i < 50 && written < NSIZES; i++) {
        run_for(200);
        written = stat_value(&e, "extstore_objects_written");
    }
    tap_ok(stored && written >= NSIZES, "%d values of %zu .. %zu B went to flash (%lld written)",
           NSIZES, sizes[0], sizes[NSIZES - 1], written);
    long long reads0 = stat_value(&e, "get_extstore");
    bool exact = stored;
    for (int i = 0; i < NSIZES; i++) {
        char key[16];
        snprintf(key, sizeof(key), "flash%d", i);
        bool got_e = exact && check_value(&e, key, val[i], sizes[i]);
        bool got_z = exact && check_value(&z, key, val[i], sizes[i]);
        if (!got_e || !got_z)
            tap_diag("flash value of %zu B: eager %d, rendezvous %d", sizes[i], got_e, got_z);
        exact = got_e && got_z;
        free(val[i]);
    }
    long long reads1 = stat_value(&e, "get_extstore");
    tap_ok(exact && !z.rndv_bad && reads1 >= reads0 + 2 * NSIZES,
           "flash values read back over RDMA, eagerly and by RDMA WRITE, byte-exact "
           "(get_extstore %lld -> %lld)",
           reads0, reads1);
    cl_close(&e);
    cl_close(&z);
    stop_server(pid, "the server with ext_path");
    unlink(path);
}

/* Lines of the file at path that contain text (-1 when it cannot be
 * read); the first of them into first (len bytes). */
static int lines_with(const char *path, const char *text, char *first, size_t len)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char line[1024];
    int n = 0;
    first[0] = '\0';
    while (fgets(line, sizeof(line), f))
        if (strstr(line, text) != NULL && n++ == 0)
            snprintf(first, len, "%.*s", (int)strcspn(line, "\n"), line);
    fclose(f);
    return n;
}

/* A connection request the substrate refuses by itself: with one worker
 * (32 RC connections without rdma_rc_max) every receive credit of its
 * context is granted after 32 connections, and the listener refuses the
 * next request (no endpoint for it). The refusal counts once in
 * rdma_rejected_connections, not in rejected_connections (-c refusals),
 * the server logs one line for it at -v, and it keeps serving: the
 * connections it has, and a new one once one of them left. */
static void test_refused_connection(uint16_t p)
{
    enum { PER_WORKER = 32, MAX_CONNS = PER_WORKER + 4 };
    static const char *const refused_text = "refused: no receive credits left";
    char log_path[64];
    snprintf(log_path, sizeof(log_path), "/tmp/mcr-rdma-refused.%d.log", (int)getpid());
    static const char *const one_worker[] = {"-t", "1", "-v", NULL};
    pid_t pid = spawn_server_logged(p, one_worker, log_path);
    /* a client context for that many connections: few credits each */
    struct mcr_rdma_ctx_opts o;
    test_opts(&o);
    o.credits = 8;
    o.recv_bufs = 8 * (MAX_CONNS + 2);
    o.send_bufs = 64;
    struct mcr_rdma_ctx *many_ctx = make_ctx(&o);
    loop_add(many_ctx);
    static struct client cl[MAX_CONNS];
    int n = cl_connect_via(&cl[0], many_ctx, p) ? 1 : 0;
    long long rej0 = n ? stat_value(&cl[0], "rdma_rejected_connections") : -1;
    long long conn_rej0 = n ? stat_value(&cl[0], "rejected_connections") : -1;
    /* spawn_server's probe connection gives its credits back only once the
     * server freed its endpoint: a refusal before the 32nd connection is
     * that (counted too), retried after a pause */
    int refusals = 0;
    while (n > 0 && n < MAX_CONNS && refusals < 20) {
        if (cl_connect_via(&cl[n], many_ctx, p)) {
            n++;
            continue;
        }
        cl_close(&cl[n]);
        refusals++;
        if (n >= PER_WORKER)
            break;
        run_for(250);
    }
    bool refused = refusals > 0 && n == PER_WORKER;
    long long rej1 = rej0;
    for (int wait = 0; refused && wait < 50 && rej1 != rej0 + refusals; wait++) {
        rej1 = stat_value(&cl[0], "rdma_rejected_connections");
        if (rej1 != rej0 + refusals)
            run_for(100);
    }
    long long conn_rej1 = stat_value(&cl[0], "rejected_connections");
    tap_ok(rej0 == 0 && refused && rej1 == rej0 + refusals && conn_rej1 == conn_rej0,
           "one worker: %d RC connections accepted, the next refused by the substrate (%d "
           "refusals in all): rdma_rejected_connections %lld -> %lld, rejected_connections "
           "%lld -> %lld",
           n, refusals, rej0, rej1, conn_rej0, conn_rej1);
    char line[1024];
    int logged = lines_with(log_path, refused_text, line, sizeof(line));
    tap_ok(logged == refusals,
           "the server logged each refusal once at -v (%d lines with \"%s\" for %d refusals: %s)",
           logged, refused_text, refusals, line);
    static const unsigned char val[] = "still served";
    tap_ok(n > 0 && do_set(&cl[0], MCR_BIN_OP_SET, "refused", val, sizeof(val)) == 0 &&
               check_value(&cl[n - 1], "refused", val, sizeof(val)),
           "after the refusal the first and the last connection are served");
    /* one leaves: its credits come back once the server freed its
     * endpoint; a request before that is refused too (and counted) */
    cl_close(&cl[1]);
    struct client late;
    bool late_up = false;
    int late_refused = 0;
    for (int i = 0; n > 1 && i < 20 && !late_up; i++) {
        late_up = cl_connect_via(&late, many_ctx, p);
        if (!late_up) {
            late_refused++;
            cl_close(&late);
            run_for(250);
        }
    }
    long long rej2 = -1;
    for (int wait = 0; late_up && wait < 50; wait++) {
        rej2 = stat_value(&late, "rdma_rejected_connections");
        if (rej2 == rej1 + late_refused)
            break;
        run_for(100);
    }
    tap_ok(late_up && check_value(&late, "refused", val, sizeof(val)) &&
               rej2 == rej1 + late_refused,
           "once a connection left, a new one is accepted and served (%d refused before it; "
           "rdma_rejected_connections %lld)",
           late_refused, rej2);
    if (late_up)
        cl_close(&late);
    for (int i = 0; i < n; i++)
        if (i != 1)
            cl_close(&cl[i]);
    stop_server(pid, "the server with one worker");
    loop_remove(many_ctx);
    mcr_rdma_ctx_destroy(many_ctx);
    unlink(log_path);
}

int main(int argc, char **argv)
{
    server_tests_begin(argc, argv, "rdma_test_server_options SERVER_BINARY [SERVER_ARG...]");
    uint16_t port = base_port();
    test_held_at_disconnect((uint16_t)(port + 1));
    test_registered_within_limit((uint16_t)(port + 2));
    test_flash_gets((uint16_t)(port + 3));
    test_refused_connection((uint16_t)(port + 4));
    return server_tests_end();
}
