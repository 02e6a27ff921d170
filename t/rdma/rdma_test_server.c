/* t/rdma/rdma_test_server.c: memcached-rdma served over RDMA, driven by a
 * small binary-protocol client written on the substrate (server_harness.h).
 * Runs inside the Soft-RoCE guest:
 *   rdma_test_server SERVER_BINARY [SERVER_ARG...]
 *
 * Owns the checks against one server started with -o rdma_listen on the
 * guest's rxe address (-m 128 -I 16m): every binary command over RDMA;
 * values whose frames end just below, at and above one eager message, and
 * large values (many messages); a client that disconnects mid-request, one
 * killed mid-request, a malformed RDMA message and a malformed binary frame
 * each close only their connection while another client keeps being
 * served; the RDMA stats lines. Zero copy: sets pulled by RDMA READ from a
 * region the client advertises (RNDV_READ) and gets written into its
 * landing buffer (RNDV_WRITE), one byte above a message .. 8 MiB,
 * byte-exact, with rdma_zero_copy_reads/writes moving; a region holding a
 * set and the next request; a bad rkey on such a region; a client killed
 * during a large READ (the key keeps its old value or gets the whole new
 * one, others are served). Value buffers (RNDV_WRITE with
 * MCR_RDMA_F_VALUE): a get's value written into the buffer advertised
 * under its opaque, gets without one answered eagerly, more buffers than
 * the server keeps, a bad rkey and the flag on an eager message. Servers
 * started with options of their own are rdma_test_server_options'. */
#include "t/rdma/server_harness.h"

static uint16_t port;
static pid_t server_pid;

static bool cl_connect(struct client *c)
{
    return cl_connect_via(c, cctx, port);
}

static uint64_t arith(struct client *c, uint8_t op, const char *key, uint64_t delta, int *st)
{
    unsigned char ext[20];
    mcr_be_put64(ext, delta);
    mcr_be_put64(ext + 8, 100);
    mcr_be_put32(ext + 16, 0);
    unsigned char *body = NULL;
    uint32_t blen = 0;
    *st = roundtrip(c, op, ext, 20, key, NULL, 0, &body, &blen);
    uint64_t v = (*st == 0 && blen == 8) ? mcr_be_get64(body) : 0;
    free(body);
    return v;
}

static void start_server(void)
{
    port = base_port();
    server_pid = spawn_server(port, NULL);
}

/* A client process of its own (to be killed): its context and connection. */
static bool child_connect(struct client *k)
{
    client_ctx_create(64, 32);
    return cl_connect(k);
}

/* The client that gets killed: connects, sends part of a request, waits. */
static int stuck_client(void)
{
    struct client k;
    if (!child_connect(&k))
        return 1;
    unsigned char partial[MCR_BIN_HEADER_LEN + 8 + 4];
    mcr_bin_request_encode(partial, MCR_BIN_OP_SET, 8, 4, 8 + 4 + 100000, 6, 0);
    memset(partial + MCR_BIN_HEADER_LEN, 0, 8);
    memcpy(partial + MCR_BIN_HEADER_LEN + 8, "kill", 4);
    if (!cl_send(&k, partial, sizeof(partial)) || !run_until(ep_sent_all, &k, 10000) ||
        write(1, "s", 1) != 1) /* the server's device has it */
        return 1;
    for (int i = 0; i < 600; i++) /* killed long before */
        mcr_rdma_ctx_progress(cctx, 100);
    return 0;
}

/* The value the killed client sets (and its size). */
#define KILL_VALUE_LEN (12u << 20)

/* The client killed during a large RDMA READ: advertises a set of a 12 MiB
 * value with RNDV_READ, says so on stdout, and waits. */
static int rndv_kill_client(void)
{
    struct client k;
    if (!child_connect(&k) || !cl_rndv_setup(&k))
        return 1;
    unsigned char *val = malloc(KILL_VALUE_LEN);
    if (!val)
        return 1;
    fill_pattern(val, KILL_VALUE_LEN, 99);
    static const unsigned char ext[8] = {0};
    size_t at = 0;
    frame_put(k.src, &at, MCR_BIN_OP_SET, ext, 8, "victim", val, KILL_VALUE_LEN, 1);
    if (!cl_send_region(&k, at, k.src_reg.mr->rkey))
        return 1;
    run_for(5); /* the message is out */
    if (write(1, "r", 1) != 1)
        return 1;
    for (int i = 0; i < 600; i++) /* killed long before */
        mcr_rdma_ctx_progress(cctx, 100);
    return 0;
}

/* Values of several sizes set by RNDV_READ and read back into the landing
 * buffer by client z, and by client e with eager replies. */
static void test_zero_copy(struct client *z, struct client *e, struct client *s)
{
    long long zr0 = stat_value(s, "rdma_zero_copy_reads");
    long long zw0 = stat_value(s, "rdma_zero_copy_writes");
    tap_ok(zr0 >= 0 && zw0 >= 0, "stats: rdma_zero_copy_reads %lld, rdma_zero_copy_writes %lld",
           zr0, zw0);
    /* the first: one byte more than one message carries (after its reply header) */
    static const size_t zsizes[] = {8192 - MCR_RDMA_HDR_MAX + 1, 65536, 1u << 20, 8u << 20};
    unsigned char *val = malloc(8u << 20);
    for (size_t i = 0; i < sizeof(zsizes) / sizeof(zsizes[0]); i++) {
        size_t n = zsizes[i];
        fill_pattern(val, n, (uint32_t)(1000 + i));
        int st = rndv_set(z, "zc", val, n);
        bool got_z = st == 0 && check_value(z, "zc", val, n);
        bool got_e = st == 0 && check_value(e, "zc", val, n);
        tap_ok(got_z && got_e && !z->rndv_bad,
               "%zu B: set by RDMA READ, read back by RDMA WRITE and eagerly, byte-exact "
               "(set status %d)",
               n, st);
    }
    long long zr1 = stat_value(s, "rdma_zero_copy_reads");
    long long zw1 = stat_value(s, "rdma_zero_copy_writes");
    tap_ok(zr1 >= zr0 + 4,
           "values were READ straight into items (rdma_zero_copy_reads %lld -> %lld)", zr0, zr1);
    tap_ok(zw1 >= zw0 + 4 + 7,
           "values were WRITTEN straight from items (rdma_zero_copy_writes %lld -> %lld)", zw0,
           zw1);

    /* one region holding a set and the get after it: the value goes
     * straight into the item, the rest through the staging buffer */
    fill_pattern(val, 65536, 7);
    static const unsigned char ext[8] = {0};
    size_t at = 0;
    frame_put(z->src, &at, MCR_BIN_OP_SET, ext, 8, "zc2", val, 65536, 0x51);
    frame_put(z->src, &at, MCR_BIN_OP_GET, NULL, 0, "zc2", NULL, 0, 0x52);
    struct mcr_bin_header h1, h2;
    unsigned char *body = NULL;
    bool ok = cl_send_region(z, at, z->src_reg.mr->rkey) && cl_response(z, &h1, NULL) &&
              cl_response(z, &h2, &body) && run_until(region_returned, z, 20000);
    tap_ok(ok && h1.opaque == 0x51 && h1.vbucket_or_status == 0 && h2.opaque == 0x52 &&
               h2.vbucket_or_status == 0 && h2.bodylen == 4 + 65536 &&
               memcmp(body + 4, val, 65536) == 0,
           "a region holding a set and a get: both answered in order, value byte-exact");
    free(body);
    free(val);
}

/* An RNDV_READ region with an rkey that is not the client's: that
 * connection closes, the key keeps its value. */
static void test_bad_read_rkey(struct client *other)
{
    struct client m;
    bool ok =
        do_set(other, MCR_BIN_OP_SET, "rk", "old", 3) == 0 && cl_connect(&m) && cl_rndv_setup(&m);
    unsigned char *val = calloc(1, 100000);
    static const unsigned char ext[8] = {0};
    size_t at = 0;
    if (ok && val)
        frame_put(m.src, &at, MCR_BIN_OP_SET, ext, 8, "rk", val, 100000, 3);
    ok = ok && val && cl_send_region(&m, at, 0x5a5a5a5au);
    run_until(cl_is_closed, &m, 5000);
    tap_ok(ok && m.closed, "an RNDV_READ region with a bad rkey closes that connection");
    cl_close(&m);
    free(val);
    tap_ok(check_value(other, "rk", "old", 3), "the key keeps its value, others are served");
}

/* Advertises buf as the buffer for the value of the get with `opaque`. */
static bool cl_value_buffer(struct client *c, uint32_t opaque, void *buf, uint32_t rkey,
                            uint32_t len)
{
    struct mcr_rdma_rndv r = {.addr = (uintptr_t)buf, .rkey = rkey, .len = len};
    struct mcr_rdma_send adv = {.type = MCR_RDMA_MSG_RNDV_WRITE,
                                .flags = MCR_RDMA_F_VALUE,
                                .request_id = opaque,
                                .advertise = &r};
    return mcr_rdma_ep_send(c->ep, &adv) == 0;
}

/* Value buffers, by a client without a landing buffer; `val` is the
 * 100000-byte value of key "lie". */
static void test_value_buffers(struct client *other, const unsigned char *val)
{
    enum { VLEN = 100000 };
    static unsigned char vbuf[1 << 17];
    struct mcr_rdma_region reg = {0};
    struct client m;
    bool ok = cl_connect(&m) && mcr_rdma_region_register(mcr_rdma_ctx_pd(cctx), vbuf, sizeof(vbuf),
                                                         MCR_RDMA_ACCESS_REMOTE_WRITE, &reg) == 0;
    if (!ok) {
        tap_ok(0, "value buffers: a client with a registered buffer");
        cl_close(&m);
        return;
    }
    m.vbuf = vbuf;
    m.vbuf_len = sizeof(vbuf);
    long long w0 = stat_value(other, "rdma_value_buffer_writes");
    /* 70 buffers for the gets 100..169: the server keeps the newest 64 */
    for (uint32_t id = 100; ok && id < 170; id++)
        ok = cl_value_buffer(&m, id, vbuf, reg.mr->rkey, sizeof(vbuf));
    struct mcr_bin_header h;
    unsigned char *body = NULL;
    bool eager = ok && cl_request(&m, MCR_BIN_OP_GET, NULL, 0, "lie", NULL, 0, 100) &&
                 cl_response(&m, &h, &body) && h.opaque == 100 && h.bodylen == 4 + VLEN &&
                 memcmp(body + 4, val, VLEN) == 0 && m.vdones == 0;
    free(body);
    body = NULL;
    tap_ok(eager, "a get whose value buffer was dropped (70 advertised, 64 kept) is answered "
                  "eagerly, byte-exact");
    bool placed = true;
    for (uint32_t id = 110; id <= 120; id += 10) {
        memset(vbuf, 0, sizeof(vbuf));
        placed = placed && cl_request(&m, MCR_BIN_OP_GET, NULL, 0, "lie", NULL, 0, id) &&
                 cl_response(&m, &h, &body) && h.opaque == id && h.bodylen == 4 + VLEN &&
                 memcmp(body + 4, val, VLEN) == 0 && m.vdone_id == id && m.vdone_len == VLEN &&
                 memcmp(vbuf, val, VLEN) == 0;
        free(body);
        body = NULL;
    }
    long long w1 = stat_value(other, "rdma_value_buffer_writes");
    tap_ok(placed && m.vdones == 2 && w1 == w0 + 2 && !m.closed && !m.rndv_bad,
           "gets 110 and 120 are written into their value buffers, byte-exact "
           "(rdma_value_buffer_writes %lld -> %lld)",
           w0, w1);
    /* the advertisement riding on the message that carries the get itself */
    unsigned char get_frame[MCR_BIN_HEADER_LEN + 3];
    mcr_bin_request_encode(get_frame, MCR_BIN_OP_GET, 0, 3, 3, 130, 0);
    memcpy(get_frame + MCR_BIN_HEADER_LEN, "lie", 3);
    struct iovec get_iov = {get_frame, sizeof(get_frame)};
    struct mcr_rdma_rndv carried = {.addr = (uintptr_t)vbuf, .rkey = reg.mr->rkey, .len = VLEN};
    struct mcr_rdma_send with_get = {.type = MCR_RDMA_MSG_RNDV_WRITE,
                                     .flags = MCR_RDMA_F_VALUE,
                                     .request_id = 130,
                                     .iov = &get_iov,
                                     .iovcnt = 1,
                                     .advertise = &carried};
    memset(vbuf, 0, sizeof(vbuf));
    ok = mcr_rdma_ep_send(m.ep, &with_get) == 0 && cl_response(&m, &h, &body) && h.opaque == 130 &&
         h.bodylen == 4 + VLEN && m.vdone_id == 130 && memcmp(vbuf, val, VLEN) == 0;
    free(body);
    body = NULL;
    tap_ok(ok && m.vdones == 3, "a value buffer advertised in the message that carries its get");
    /* a small value fits one message: the buffer stays unused */
    ok = do_set(&m, MCR_BIN_OP_SET, "small", "tiny", 4) == 0 &&
         cl_value_buffer(&m, 500, vbuf, reg.mr->rkey, sizeof(vbuf)) &&
         cl_request(&m, MCR_BIN_OP_GET, NULL, 0, "small", NULL, 0, 500) &&
         cl_response(&m, &h, &body) && h.bodylen == 8 && memcmp(body + 4, "tiny", 4) == 0;
    free(body);
    body = NULL;
    tap_ok(ok && m.vdones == 3, "a small value goes eagerly even with a value buffer");
    /* a buffer too small for the value: the value comes the usual way */
    ok = cl_value_buffer(&m, 501, vbuf, reg.mr->rkey, VLEN - 1) &&
         cl_request(&m, MCR_BIN_OP_GET, NULL, 0, "lie", NULL, 0, 501) &&
         cl_response(&m, &h, &body) && memcmp(body + 4, val, VLEN) == 0;
    free(body);
    tap_ok(ok && m.vdones == 3 && !m.closed, "a value larger than its buffer is sent eagerly");
    cl_close(&m);
    mcr_rdma_region_deregister(&reg);

    /* a value buffer with an rkey that is not the client's */
    ok = cl_connect(&m) && cl_value_buffer(&m, 9, vbuf, 0x5a5a5a5au, sizeof(vbuf)) &&
         cl_request(&m, MCR_BIN_OP_GET, NULL, 0, "lie", NULL, 0, 9);
    run_until(cl_is_closed, &m, 5000);
    tap_ok(ok && m.closed, "a value buffer with a bad rkey closes that connection");
    cl_close(&m);
    /* the value flag on an eager message */
    ok = cl_connect(&m);
    struct iovec iov = {"x", 1};
    struct mcr_rdma_send bad = {
        .type = MCR_RDMA_MSG_EAGER, .flags = MCR_RDMA_F_VALUE, .iov = &iov, .iovcnt = 1};
    ok = ok && mcr_rdma_ep_send(m.ep, &bad) == 0;
    run_until(cl_is_closed, &m, 5000);
    tap_ok(ok && m.closed, "the value flag on an eager message closes that connection");
    cl_close(&m);
    /* READ_DONE from the client: only the server ends regions it read */
    ok = cl_connect(&m);
    bad = (struct mcr_rdma_send){
        .type = MCR_RDMA_MSG_EAGER, .flags = MCR_RDMA_F_READ_DONE, .iov = &iov, .iovcnt = 1};
    ok = ok && mcr_rdma_ep_send(m.ep, &bad) == 0;
    run_until(cl_is_closed, &m, 5000);
    tap_ok(ok && m.closed, "READ_DONE from a client closes that connection");
    cl_close(&m);
    tap_ok(check_value(other, "lie", val, VLEN), "another client is still served");
}

/* A client killed while the server READs a 12 MiB value from it. */
static void test_kill_during_read(const char *self, struct client *s)
{
    bool ok = do_set(s, MCR_BIN_OP_SET, "victim", "old", 3) == 0;
    long long before = stat_value(s, "rdma_curr_connections");
    long long zr0 = stat_value(s, "rdma_zero_copy_reads");
    int fds[2];
    ok = ok && pipe(fds) == 0;
    pid_t child = ok ? proc_fork() : -1;
    if (child == 0) {
        char portstr[16];
        snprintf(portstr, sizeof(portstr), "%u", port);
        dup2(fds[1], 1);
        execl(self, self, "--rndv-kill-client", portstr, (char *)NULL);
        _exit(126);
    }
    char r = 0;
    if (ok) {
        close(fds[1]);
        ok = read(fds[0], &r, 1) == 1 && r == 'r';
        close(fds[0]);
    }
    /* the server pulls the header, then READs the value into the item */
    for (int i = 0; ok && i < 200 && stat_value(s, "rdma_zero_copy_reads") == zr0; i++)
        run_for(2);
    if (child > 0) {
        kill(child, SIGKILL);
        proc_reap(child, 10000);
    }
    tap_ok(ok, "a client advertised a 12 MiB set by RNDV_READ and was killed");
    long long curr = -1;
    for (int i = 0; i < 50; i++) {
        curr = stat_value(s, "rdma_curr_connections");
        if (curr == before)
            break;
        run_for(200);
    }
    tap_ok(curr == before, "the killed client is cleaned up (rdma_curr_connections %lld)", curr);
    unsigned char *want = malloc(KILL_VALUE_LEN);
    fill_pattern(want, KILL_VALUE_LEN, 99);
    unsigned char *v = NULL;
    size_t vlen = 0;
    int st = do_get(s, "victim", &v, &vlen);
    bool old = st == 0 && vlen == 3 && memcmp(v, "old", 3) == 0;
    bool whole = st == 0 && vlen == KILL_VALUE_LEN && memcmp(v, want, vlen) == 0;
    tap_ok(old || whole, "the key has its old value or the whole new one (%s)",
           old     ? "old"
           : whole ? "new, the READ had completed"
                   : "neither");
    free(v);
    free(want);
    want = malloc(1u << 20);
    fill_pattern(want, 1u << 20, 5);
    tap_ok(do_set(s, MCR_BIN_OP_SET, "after", want, 1u << 20) == 0 &&
               check_value(s, "after", want, 1u << 20),
           "others are served after the kill (1 MiB set and get)");
    free(want);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--stuck-client") == 0) {
        port = (uint16_t)atoi(argv[2]);
        return stuck_client();
    }
    if (argc == 3 && strcmp(argv[1], "--rndv-kill-client") == 0) {
        port = (uint16_t)atoi(argv[2]);
        return rndv_kill_client();
    }
    const char *self = argv[0];
    server_tests_begin(argc, argv, "rdma_test_server SERVER_BINARY [SERVER_ARG...]");
    start_server();

    struct client a, b;
    tap_ok(cl_connect(&a), "client A connected over RDMA");
    tap_ok(cl_connect(&b), "client B connected over RDMA");

    /* ---- every binary command ------------------------------------------------------ */
    tap_ok(do_set(&a, MCR_BIN_OP_SET, "k1", "hello", 5) == 0, "SET");
    tap_ok(check_value(&a, "k1", "hello", 5), "GET returns the value");
    tap_ok(check_value(&b, "k1", "hello", 5), "the other client sees it");
    tap_ok(do_set(&a, MCR_BIN_OP_ADD, "k1", "x", 1) == MCR_BIN_STATUS_KEY_EEXISTS,
           "ADD of an existing key: KEY_EEXISTS");
    tap_ok(do_set(&a, MCR_BIN_OP_ADD, "k2", "two", 3) == 0, "ADD of a new key");
    tap_ok(do_set(&a, MCR_BIN_OP_REPLACE, "k2", "TWO", 3) == 0 && check_value(&a, "k2", "TWO", 3),
           "REPLACE");
    tap_ok(do_set(&a, MCR_BIN_OP_REPLACE, "nokey", "x", 1) == MCR_BIN_STATUS_KEY_ENOENT,
           "REPLACE of a missing key: KEY_ENOENT");
    tap_ok(roundtrip(&a, MCR_BIN_OP_APPEND, NULL, 0, "k1", "!", 1, NULL, NULL) == 0 &&
               roundtrip(&a, MCR_BIN_OP_PREPEND, NULL, 0, "k1", ">", 1, NULL, NULL) == 0 &&
               check_value(&a, "k1", ">hello!", 7),
           "APPEND and PREPEND");
    int st;
    uint64_t v = arith(&a, MCR_BIN_OP_INCREMENT, "n", 5, &st);
    tap_ok(st == 0 && v == 100, "INCREMENT creates with the initial value (%llu)",
           (unsigned long long)v);
    v = arith(&a, MCR_BIN_OP_INCREMENT, "n", 5, &st);
    tap_ok(st == 0 && v == 105, "INCREMENT");
    v = arith(&a, MCR_BIN_OP_DECREMENT, "n", 10, &st);
    tap_ok(st == 0 && v == 95, "DECREMENT");
    unsigned char texp[4] = {0, 0, 0, 100};
    tap_ok(roundtrip(&a, MCR_BIN_OP_TOUCH, texp, 4, "k1", NULL, 0, NULL, NULL) == 0, "TOUCH");
    unsigned char *body = NULL;
    uint32_t blen = 0;
    st = roundtrip(&a, MCR_BIN_OP_GAT, texp, 4, "k2", NULL, 0, &body, &blen);
    tap_ok(st == 0 && blen == 7 && memcmp(body + 4, "TWO", 3) == 0, "GAT");
    free(body);
    tap_ok(roundtrip(&a, MCR_BIN_OP_DELETE, NULL, 0, "k2", NULL, 0, NULL, NULL) == 0 &&
               roundtrip(&a, MCR_BIN_OP_GET, NULL, 0, "k2", NULL, 0, NULL, NULL) ==
                   MCR_BIN_STATUS_KEY_ENOENT,
           "DELETE, then GET misses");
    body = NULL;
    st = roundtrip(&a, MCR_BIN_OP_VERSION, NULL, 0, NULL, NULL, 0, &body, &blen);
    tap_ok(st == 0 && blen > 5 && memcmp(body, "1.6.", 4) == 0, "VERSION");
    free(body);
    tap_ok(roundtrip(&a, MCR_BIN_OP_NOOP, NULL, 0, NULL, NULL, 0, NULL, NULL) == 0, "NOOP");
    /* quiet commands then NOOP: only the GETKQ hit and the NOOP answer */
    {
        unsigned char ext[8] = {0};
        bool ok = cl_request(&a, MCR_BIN_OP_SETQ, ext, 8, "q1", "quiet", 5, 1) &&
                  cl_request(&a, MCR_BIN_OP_GETKQ, NULL, 0, "q1", NULL, 0, 2) &&
                  cl_request(&a, MCR_BIN_OP_GETQ, NULL, 0, "nokey", NULL, 0, 3) &&
                  cl_request(&a, MCR_BIN_OP_NOOP, NULL, 0, NULL, NULL, 0, 4);
        struct mcr_bin_header h1, h2;
        ok = ok && cl_response(&a, &h1, NULL) && cl_response(&a, &h2, NULL);
        tap_ok(ok && h1.opcode == MCR_BIN_OP_GETKQ && h1.opaque == 2 &&
                   h2.opcode == MCR_BIN_OP_NOOP && h2.opaque == 4,
               "SETQ, GETKQ hit, GETQ miss, NOOP: two replies in order");
    }
    /* many quiet sets, each a message of its own and none with a reply:
     * the client runs out of credits several times over and gets them
     * back without replies to carry them (a spinning server holds some
     * receive buffers back before it posts them again: not those of a
     * peer low on credits) */
    {
        enum { QUIET_SETS = 300 };
        unsigned char ext[8] = {0};
        bool ok = true;
        for (int i = 0; ok && i < QUIET_SETS; i++) {
            char key[16], val[16];
            snprintf(key, sizeof(key), "qs%d", i);
            snprintf(val, sizeof(val), "v%d", i);
            ok = cl_request(&a, MCR_BIN_OP_SETQ, ext, 8, key, val, strlen(val), (uint32_t)i);
        }
        struct mcr_bin_header h;
        ok = ok && cl_request(&a, MCR_BIN_OP_NOOP, NULL, 0, NULL, NULL, 0, 9999) &&
             cl_response(&a, &h, NULL) && h.opcode == MCR_BIN_OP_NOOP && h.opaque == 9999;
        char want[16];
        snprintf(want, sizeof(want), "v%d", QUIET_SETS - 1);
        unsigned char *val = NULL;
        size_t vlen = 0;
        char last[16];
        snprintf(last, sizeof(last), "qs%d", QUIET_SETS - 1);
        ok = ok && do_get(&a, last, &val, &vlen) == 0 && vlen == strlen(want) &&
             memcmp(val, want, vlen) == 0;
        free(val);
        tap_ok(ok, "%d SETQs in messages of their own, then NOOP: its reply, and the last stored",
               QUIET_SETS);
    }
    tap_ok(stat_value(&a, "rdma_curr_connections") == 2, "stats: rdma_curr_connections 2");
    tap_ok(stat_value(&a, "rdma_eager_msgs") > 0, "stats: rdma_eager_msgs counts");
    tap_ok(roundtrip(&a, MCR_BIN_OP_FLUSH, NULL, 0, NULL, NULL, 0, NULL, NULL) == 0 &&
               roundtrip(&a, MCR_BIN_OP_GET, NULL, 0, "k1", NULL, 0, NULL, NULL) ==
                   MCR_BIN_STATUS_KEY_ENOENT,
           "FLUSH empties the cache");

    /* ---- sizes around one eager message and beyond ------------------------------------ */
    size_t eager = mcr_rdma_ep_max_eager_payload(a.ep);
    size_t frame_fixed = MCR_BIN_HEADER_LEN + 8 + 4; /* header, extras, key "size" */
    size_t sizes[] = {0,
                      1,
                      eager - frame_fixed - 1,
                      eager - frame_fixed,
                      eager - frame_fixed + 1,
                      eager - 28 - 4 - 1, /* reply frame: header + flags + value */
                      eager - 28,
                      eager - 28 + 1,
                      2 * eager,
                      65536,
                      1000 * 1000};
    bool all = true;
    unsigned char *val = malloc(1000 * 1000);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        fill_pattern(val, sizes[i], (uint32_t)i + 1);
        bool ok = do_set(&a, MCR_BIN_OP_SET, "size", val, sizes[i]) == 0 &&
                  check_value(&b, "size", val, sizes[i]);
        if (!ok)
            tap_diag("value of %zu bytes failed", sizes[i]);
        all = all && ok;
    }
    tap_ok(all, "values of 0, 1, eager limit -1/0/+1 (set and reply frames), 2x, 64 KiB, 1 MB");
    free(val);

    /* ---- rendezvous: zero copy into and out of items ------------------------------------ */
    struct client z;
    if (!tap_ok(cl_connect(&z) && cl_rndv_setup(&z), "client Z connected with rendezvous buffers"))
        tap_bail("cannot go on without rendezvous buffers");
    test_zero_copy(&z, &b, &a);
    test_bad_read_rkey(&b);
    test_kill_during_read(self, &a);
    tap_ok(!z.closed && !z.rndv_bad, "client Z is still connected");
    cl_close(&z);

    /* ---- misbehaving clients close only their own connection -------------------------- */
    struct client m;
    bool ok = cl_connect(&m);
    unsigned char partial[MCR_BIN_HEADER_LEN + 8 + 3];
    mcr_bin_request_encode(partial, MCR_BIN_OP_SET, 8, 3, 8 + 3 + 100000, 5, 0);
    memset(partial + MCR_BIN_HEADER_LEN, 0, 8);
    memcpy(partial + MCR_BIN_HEADER_LEN + 8, "mid", 3);
    ok = ok && cl_send(&m, partial, sizeof(partial));
    run_for(200);
    cl_close(&m);
    tap_ok(ok && do_set(&b, MCR_BIN_OP_SET, "alive", "1", 1) == 0 &&
               check_value(&b, "alive", "1", 1),
           "a client that disconnects mid-request: others are served");

    ok = cl_connect(&m);
    unsigned char bad[32];
    memset(bad, 0xab, sizeof(bad));
    ok = ok && mcr_rdma_rc_send_raw(m.ep, bad, sizeof(bad)) == 0;
    run_until(cl_is_closed, &m, 5000);
    tap_ok(ok && m.closed, "a malformed RDMA message closes that connection");
    cl_close(&m);
    tap_ok(check_value(&b, "alive", "1", 1), "another client is still served");

    ok = cl_connect(&m);
    unsigned char badframe[MCR_BIN_HEADER_LEN + 10];
    memset(badframe, 0, sizeof(badframe));
    /* a request whose key is longer than its body (a first byte other than
     * 0x80 would select the text protocol, as over TCP) */
    badframe[0] = 0x80;
    badframe[3] = 10; /* key length 10 (the key follows), body length 0 */
    ok = ok && cl_send(&m, badframe, sizeof(badframe));
    run_until(cl_is_closed, &m, 5000);
    tap_ok(ok && m.closed, "a malformed binary frame closes that connection");
    cl_close(&m);
    tap_ok(check_value(&a, "alive", "1", 1), "another client is still served");

    /* lying rendezvous landing buffers (RNDV_WRITE) close only their connection: one
     * too small to be a landing buffer, one with an rkey that is not the client's */
    static unsigned char landing[1 << 20];
    unsigned char *bigval = calloc(1, 100000);
    ok = bigval && do_set(&b, MCR_BIN_OP_SET, "lie", bigval, 100000) == 0;
    for (int lie = 0; lie < 2; lie++) {
        ok = cl_connect(&m) && ok;
        struct mcr_rdma_rndv r = {.addr = (uintptr_t)landing,
                                  .rkey = 0x5a5a5a5au,
                                  .len = lie == 0 ? 100u : (uint32_t)sizeof(landing)};
        struct mcr_rdma_send adv = {
            .type = MCR_RDMA_MSG_RNDV_WRITE, .request_id = 1, .advertise = &r};
        ok = ok && mcr_rdma_ep_send(m.ep, &adv) == 0;
        if (lie == 1) /* a reply too large for one message goes to the landing buffer */
            ok = ok && cl_request(&m, MCR_BIN_OP_GET, NULL, 0, "lie", NULL, 0, 1);
        run_until(cl_is_closed, &m, 5000);
        tap_ok(ok && m.closed, "a rendezvous landing buffer with %s closes that connection",
               lie == 0 ? "a bad length" : "a bad rkey");
        cl_close(&m);
        tap_ok(check_value(&a, "lie", bigval, 100000), "another client is still served");
    }
    test_value_buffers(&a, bigval);
    free(bigval);

    /* a client process killed in the middle of a request */
    /* a fresh process (verbs resources do not survive fork()) */
    int sent_fds[2];
    if (pipe(sent_fds) != 0)
        tap_bail("pipe: %s", strerror(errno));
    pid_t child = proc_fork();
    if (child == 0) {
        char portstr[16];
        snprintf(portstr, sizeof(portstr), "%u", port);
        dup2(sent_fds[1], 1);
        execl(self, self, "--stuck-client", portstr, (char *)NULL);
        _exit(126);
    }
    close(sent_fds[1]);
    char sent_mark = 0;
    bool partial_sent = read(sent_fds[0], &sent_mark, 1) == 1 && sent_mark == 's';
    close(sent_fds[0]);
    long long during = -1;
    for (int i = 0; i < 50 && during != 3; i++) {
        run_for(200);
        during = stat_value(&a, "rdma_curr_connections");
    }
    tap_ok(partial_sent && during == 3,
           "the client to be killed is connected and has sent part of a request "
           "(rdma_curr_connections %lld)",
           during);
    kill(child, SIGKILL);
    proc_reap(child, 10000);
    long long curr = -1;
    for (int i = 0; i < 50; i++) {
        curr = stat_value(&a, "rdma_curr_connections");
        if (curr == 2)
            break;
        run_for(200);
    }
    tap_ok(curr == 2, "a killed client is cleaned up (rdma_curr_connections back to 2: %lld)",
           curr);
    tap_ok(check_value(&b, "alive", "1", 1), "others are still served");
    long long total = stat_value(&a, "rdma_total_connections");
    tap_ok(total >= 6, "rdma_total_connections counts every connection (%lld)", total);

    cl_close(&a);
    cl_close(&b);
    stop_server(server_pid, "the server");
    return server_tests_end();
}
