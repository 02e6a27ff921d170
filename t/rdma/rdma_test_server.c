/* t/rdma/rdma_test_server.c: memcached-rdma served over RDMA, driven by a
 * small binary-protocol client written on the substrate. Runs inside the
 * Soft-RoCE guest: rdma_test_server SERVER_BINARY [SERVER_ARG...].
 *
 * Starts the server with -o rdma_listen on the guest's rxe address, then:
 * every binary command over RDMA; values whose frames end just below, at
 * and above one eager message, and large values (many messages); a client
 * that disconnects mid-request, one killed mid-request, a malformed RDMA
 * message and a malformed binary frame each close only their connection
 * while another client keeps being served; the RDMA stats lines. Zero
 * copy: sets pulled by RDMA READ from a region the client advertises
 * (RNDV_READ) and gets written into its landing buffer (RNDV_WRITE), one byte
 * above a message .. 8 MiB, byte-exact, with rdma_zero_copy_reads/writes moving; a
 * region holding a set and the next request; a bad rkey on such a region;
 * a client killed during a large READ (the key keeps its old value or
 * gets the whole new one, others are served). Value buffers (RNDV_WRITE
 * with MCR_RDMA_F_VALUE): a get's value written into the buffer advertised
 * under its opaque, gets without one answered eagerly, more buffers than
 * the server keeps, a bad rkey and the flag on an eager message. Values on
 * flash (-o ext_path) read back eagerly and by RDMA WRITE. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mcr/binary_wire.h"
#include "t/rdma/harness.h"
#include "t/rdma/proc.h"

static struct mcr_rdma_ctx *cctx;
static const char *server_bin;
/* more server arguments from the command line (e.g. -o rdma_poll=spin) */
static char **extra_argv;
static int extra_argc;
static uint16_t port;
static pid_t server_pid;

/* Rendezvous buffers of a client (cl_rndv_setup). */
#define CL_SRC_SIZE (16u << 20)
#define CL_LAND_SIZE (1u << 20)

struct client {
    struct mcr_rdma_ep *ep;
    bool connected, closed;
    unsigned char *in;
    size_t len, cap;
    /* rendezvous: requests the server READs from src, replies it WRITEs
     * into land (advertised again after each RNDV_DONE) */
    unsigned char *src, *land;
    struct mcr_rdma_region src_reg, land_reg;
    uint32_t src_id, land_id, read_dones;
    bool rndv_bad; /* an RNDV_DONE or READ_DONE that does not fit */
    /* a value buffer (MCR_RDMA_F_VALUE) the test advertised, and the
     * opaque and count of the last value written into it */
    unsigned char *vbuf;
    size_t vbuf_len;
    uint32_t vdone_id, vdone_len, vdones;
};

static void cl_append(struct client *c, const void *data, size_t n)
{
    if (c->len + n > c->cap) {
        size_t cap = c->cap ? c->cap : 65536;
        while (cap < c->len + n)
            cap *= 2;
        c->in = realloc(c->in, cap);
        if (!c->in)
            tap_bail("out of memory");
        c->cap = cap;
    }
    memcpy(c->in + c->len, data, n);
    c->len += n;
}

/* Offers the landing buffer for the next large reply. */
static bool cl_advertise(struct client *c)
{
    struct mcr_rdma_rndv r = {
        .addr = (uintptr_t)c->land, .rkey = c->land_reg.mr->rkey, .len = CL_LAND_SIZE};
    struct mcr_rdma_send adv = {
        .type = MCR_RDMA_MSG_RNDV_WRITE, .request_id = ++c->land_id, .advertise = &r};
    return mcr_rdma_ep_send(c->ep, &adv) == 0;
}

static void cl_connected(struct mcr_rdma_ep *ep, void *user)
{
    (void)ep;
    ((struct client *)user)->connected = true;
}

static void cl_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user)
{
    (void)ep;
    struct client *c = user;
    /* RNDV_DONE: the count written, then the bytes that come before them */
    const unsigned char *p = msg->payload;
    uint32_t count = msg->payload_len < 4 ? 0
                                          : (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                                                (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    uint32_t head_len = msg->payload_len < 4 ? 0 : msg->payload_len - 4;
    if (msg->flags == (MCR_RDMA_F_RNDV_DONE | MCR_RDMA_F_VALUE)) {
        /* a value went into the value buffer: it is the next n bytes */
        if (c->vbuf == NULL || count == 0 || count > c->vbuf_len) {
            c->rndv_bad = true;
            return;
        }
        c->vdone_id = msg->request_id;
        c->vdone_len = count;
        c->vdones++;
        if (head_len > 0)
            cl_append(c, p + 4, head_len);
        cl_append(c, c->vbuf, count);
        return;
    }
    if (msg->flags & MCR_RDMA_F_RNDV_DONE) {
        if (msg->payload_len >= 4 && c->land && msg->request_id == c->land_id) {
            /* the landing buffer holds the next n bytes of the replies */
            if (count == 0 || count > CL_LAND_SIZE) {
                c->rndv_bad = true;
                return;
            }
            if (head_len > 0)
                cl_append(c, p + 4, head_len);
            cl_append(c, c->land, count);
            if (!cl_advertise(c))
                c->rndv_bad = true;
        } else {
            c->rndv_bad = true;
        }
        return;
    }
    if (msg->flags == MCR_RDMA_F_READ_DONE) {
        /* the server pulled src; the reply may ride along */
        if (msg->request_id != c->src_id)
            c->rndv_bad = true;
        c->read_dones++;
    }
    cl_append(c, msg->payload, msg->payload_len);
}

static void cl_rdma_done(struct mcr_rdma_ep *ep, void *cookie, int status, void *user)
{
    (void)ep;
    (void)cookie;
    (void)status;
    (void)user;
}

static void cl_closed(struct mcr_rdma_ep *ep, int reason, const char *why, void *user)
{
    (void)ep;
    (void)reason;
    (void)why;
    struct client *c = user;
    c->closed = true;
    c->ep = NULL;
}

static const struct mcr_rdma_ep_callbacks cl_cb = {cl_connected, cl_message, cl_rdma_done,
                                                   cl_closed};

static bool cl_settled(void *arg)
{
    struct client *c = arg;
    return c->connected || c->closed;
}

static bool cl_is_closed(void *arg)
{
    return ((struct client *)arg)->closed;
}

/* Connects c through ctx to the server on port p. */
static bool cl_connect_via(struct client *c, struct mcr_rdma_ctx *ctx, uint16_t p)
{
    memset(c, 0, sizeof(*c));
    if (mcr_rdma_rc_connect(ctx, rxe_addr(), p, &cl_cb, c, &c->ep) != 0)
        return false;
    run_until(cl_settled, c, 10000);
    return c->connected && !c->closed;
}

static bool cl_connect(struct client *c)
{
    return cl_connect_via(c, cctx, port);
}

static void cl_close(struct client *c)
{
    if (c->ep && !c->closed) {
        mcr_rdma_ep_close(c->ep);
        run_until(cl_is_closed, c, 5000);
    }
    mcr_rdma_region_deregister(&c->land_reg);
    free(c->land);
    c->land = NULL;
    mcr_rdma_region_deregister(&c->src_reg);
    free(c->src);
    c->src = NULL;
    free(c->in);
    c->in = NULL;
}

/* Registers the request region (remote read) and the landing buffer
 * (remote write) and advertises the landing buffer. */
static bool cl_rndv_setup(struct client *c)
{
    c->src = malloc(CL_SRC_SIZE);
    c->land = malloc(CL_LAND_SIZE);
    struct ibv_pd *pd = mcr_rdma_ctx_pd(cctx);
    return c->src && c->land &&
           mcr_rdma_region_register(pd, c->src, CL_SRC_SIZE, MCR_RDMA_ACCESS_REMOTE_READ,
                                    &c->src_reg) == 0 &&
           mcr_rdma_region_register(pd, c->land, CL_LAND_SIZE, MCR_RDMA_ACCESS_REMOTE_WRITE,
                                    &c->land_reg) == 0 &&
           cl_advertise(c);
}

/* Appends one binary request to a buffer at *at. */
static void frame_put(unsigned char *buf, size_t *at, uint8_t op, const void *ext, uint8_t extlen,
                      const char *key, const void *val, size_t vlen, uint32_t opaque)
{
    size_t klen = key ? strlen(key) : 0;
    unsigned char *p = buf + *at;
    mcr_bin_request_encode(p, op, extlen, (uint16_t)klen, (uint32_t)(extlen + klen + vlen), opaque,
                           0);
    p += MCR_BIN_HEADER_LEN;
    if (extlen)
        memcpy(p, ext, extlen);
    if (klen)
        memcpy(p + extlen, key, klen);
    if (vlen)
        memcpy(p + extlen + klen, val, vlen);
    *at += MCR_BIN_HEADER_LEN + extlen + klen + vlen;
}

/* Sends the first len bytes of c->src as request stream the server pulls
 * with RDMA READ (RNDV_READ, no payload). */
static bool cl_send_region(struct client *c, size_t len, uint32_t rkey)
{
    struct mcr_rdma_rndv r = {.addr = (uintptr_t)c->src, .rkey = rkey, .len = (uint32_t)len};
    struct mcr_rdma_send s = {
        .type = MCR_RDMA_MSG_RNDV_READ, .request_id = ++c->src_id, .advertise = &r};
    return mcr_rdma_ep_send(c->ep, &s) == 0;
}

static bool region_returned(void *arg)
{
    struct client *c = arg;
    return c->read_dones == c->src_id || c->closed;
}

static bool cl_response(struct client *c, struct mcr_bin_header *h, unsigned char **body);

/* A set whose frame goes by RNDV_READ; returns the status or -1. */
static int rndv_set(struct client *c, const char *key, const void *val, size_t len)
{
    static const unsigned char ext[8] = {0, 0, 0, 7, 0, 0, 0, 0};
    size_t at = 0;
    frame_put(c->src, &at, MCR_BIN_OP_SET, ext, 8, key, val, len, 0x77);
    struct mcr_bin_header h;
    if (!cl_send_region(c, at, c->src_reg.mr->rkey) || !cl_response(c, &h, NULL) ||
        !run_until(region_returned, c, 20000) || c->read_dones != c->src_id)
        return -1;
    return h.opcode == MCR_BIN_OP_SET && h.opaque == 0x77 ? h.vbucket_or_status : -2;
}

/* Sends bytes as a stream of eager messages. */
static bool cl_send(struct client *c, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t deadline = now_ms() + 10000;
    while (len > 0 && c->ep && !c->closed) {
        size_t max = mcr_rdma_ep_max_eager_payload(c->ep);
        size_t n = len < max ? len : max;
        struct iovec iov = {(void *)p, n};
        struct mcr_rdma_send s = {.type = MCR_RDMA_MSG_EAGER, .iov = &iov, .iovcnt = 1};
        int rc = mcr_rdma_ep_send(c->ep, &s);
        if (rc == -EAGAIN) {
            if (now_ms() > deadline)
                return false;
            mcr_rdma_ctx_progress(cctx, 5);
            continue;
        }
        if (rc != 0)
            return false;
        p += n;
        len -= n;
    }
    return len == 0;
}

struct want_bytes {
    struct client *c;
    size_t n;
};

static bool have_bytes(void *arg)
{
    struct want_bytes *w = arg;
    return w->c->len >= w->n || w->c->closed;
}

/* Reads one response; body (malloc'd) returned in *body. */
static bool cl_response(struct client *c, struct mcr_bin_header *h, unsigned char **body)
{
    struct want_bytes w = {c, MCR_BIN_HEADER_LEN};
    if (!run_until(have_bytes, &w, 20000) || c->len < MCR_BIN_HEADER_LEN)
        return false;
    mcr_bin_header_decode(c->in, h);
    w.n = MCR_BIN_HEADER_LEN + h->bodylen;
    if (!run_until(have_bytes, &w, 20000) || c->len < w.n)
        return false;
    if (body) {
        *body = malloc(h->bodylen + 1);
        memcpy(*body, c->in + MCR_BIN_HEADER_LEN, h->bodylen);
    }
    memmove(c->in, c->in + w.n, c->len - w.n);
    c->len -= w.n;
    return h->magic == MCR_BIN_MAGIC_RESPONSE;
}

/* Builds and sends one request. */
static bool cl_request(struct client *c, uint8_t op, const void *ext, uint8_t extlen,
                       const char *key, const void *val, size_t vlen, uint32_t opaque)
{
    size_t klen = key ? strlen(key) : 0;
    size_t total = MCR_BIN_HEADER_LEN + extlen + klen + vlen;
    unsigned char *buf = malloc(total);
    mcr_bin_request_encode(buf, op, extlen, (uint16_t)klen, (uint32_t)(extlen + klen + vlen),
                           opaque, 0);
    if (extlen)
        memcpy(buf + MCR_BIN_HEADER_LEN, ext, extlen);
    if (klen)
        memcpy(buf + MCR_BIN_HEADER_LEN + extlen, key, klen);
    if (vlen)
        memcpy(buf + MCR_BIN_HEADER_LEN + extlen + klen, val, vlen);
    bool ok = cl_send(c, buf, total);
    free(buf);
    return ok;
}

/* request + one response; returns the status or -1 */
static int roundtrip(struct client *c, uint8_t op, const void *ext, uint8_t extlen, const char *key,
                     const void *val, size_t vlen, unsigned char **body, uint32_t *bodylen)
{
    struct mcr_bin_header h;
    if (!cl_request(c, op, ext, extlen, key, val, vlen, 0x1234) || !cl_response(c, &h, body))
        return -1;
    if (bodylen)
        *bodylen = h.bodylen;
    if (h.opaque != 0x1234 || h.opcode != op)
        return -2;
    return h.vbucket_or_status;
}

static int do_set(struct client *c, uint8_t op, const char *key, const void *val, size_t len)
{
    unsigned char ext[8] = {0, 0, 0, 7, 0, 0, 0, 0};
    return roundtrip(c, op, ext, 8, key, val, len, NULL, NULL);
}

/* get: returns status, value copied to *val */
static int do_get(struct client *c, const char *key, unsigned char **val, size_t *len)
{
    unsigned char *body = NULL;
    uint32_t blen = 0;
    int st = roundtrip(c, MCR_BIN_OP_GET, NULL, 0, key, NULL, 0, &body, &blen);
    if (st == 0 && blen >= 4) {
        *len = blen - 4;
        *val = malloc(*len + 1);
        memcpy(*val, body + 4, *len);
    }
    free(body);
    return st;
}

static bool check_value(struct client *c, const char *key, const void *want, size_t len)
{
    unsigned char *v = NULL;
    size_t vlen = 0;
    int st = do_get(c, key, &v, &vlen);
    bool ok = st == 0 && vlen == len && memcmp(v, want, len) == 0;
    if (!ok)
        tap_diag("get %s: status %d, %zu bytes (want %zu)", key, st, vlen, len);
    free(v);
    return ok;
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

/* Reads "stats" and returns the value of one line (-1 when missing). */
static long long stat_value(struct client *c, const char *name)
{
    long long v = -1;
    if (!cl_request(c, MCR_BIN_OP_STAT, NULL, 0, NULL, NULL, 0, 9))
        return -1;
    for (int i = 0; i < 500; i++) {
        struct mcr_bin_header h;
        unsigned char *body = NULL;
        if (!cl_response(c, &h, &body))
            return -1;
        if (h.keylen == 0) {
            free(body);
            break;
        }
        if (h.keylen == strlen(name) && memcmp(body, name, h.keylen) == 0) {
            char num[32] = "";
            size_t n = h.bodylen - h.keylen < 31 ? h.bodylen - h.keylen : 31;
            memcpy(num, body + h.keylen, n);
            v = atoll(num);
        }
        free(body);
    }
    return v;
}

/* Starts the server with RDMA on port p, the command line's extra
 * arguments and then `more` (NULL-terminated, or NULL), its standard error
 * into the file log_path unless NULL; its pid. */
static pid_t spawn_server_logged(uint16_t p, const char *const *more, const char *log_path)
{
    char listen[128];
    snprintf(listen, sizeof(listen), "rdma_listen=%s:%u", rxe_addr(), p);
    pid_t pid = proc_fork();
    if (pid == 0) {
        if (log_path != NULL) {
            int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || dup2(fd, 2) < 0)
                _exit(126);
            close(fd);
        }
        char *args[32] = {(char *)server_bin,
                          "-u",
                          "root",
                          "-p",
                          "0",
                          "-t",
                          "2",
                          "-m",
                          "128",
                          "-I",
                          "16m",
                          "-o",
                          listen};
        int n = 13;
        for (int i = 0; i < extra_argc && n < 27; i++)
            args[n++] = extra_argv[i];
        for (int i = 0; more && more[i] && n < 31; i++)
            args[n++] = (char *)more[i];
        args[n] = NULL;
        execv(server_bin, args);
        _exit(127);
    }
    /* connect until the listener is up */
    for (int i = 0; i < 100; i++) {
        int status = 0;
        if (!proc_alive(pid, &status))
            tap_bail("server for RDMA port %u exited at start-up (status %d)", p, status);
        struct client c;
        bool ok = cl_connect_via(&c, cctx, p);
        cl_close(&c);
        if (ok)
            return pid;
        usleep(200000);
    }
    tap_bail("server did not start listening on RDMA port %u", p);
}

static pid_t spawn_server(uint16_t p, const char *const *more)
{
    return spawn_server_logged(p, more, NULL);
}

/* Stops a server with SIGTERM: it must exit cleanly (a check). */
static void stop_server(pid_t pid, const char *what)
{
    kill(pid, SIGTERM);
    proc_check_clean_exit(proc_reap(pid, 10000), what);
}

static void start_server(void)
{
    port = (uint16_t)(21000 + getpid() % 2000);
    server_pid = spawn_server(port, NULL);
}

/* A client process of its own (to be killed): its context and connection. */
static bool child_connect(struct client *k)
{
    struct mcr_rdma_ctx_opts o;
    test_opts(&o);
    o.recv_bufs = 64;
    o.send_bufs = 32;
    cctx = make_ctx(&o);
    loop_add(cctx);
    return cl_connect(k);
}

/* The client's messages have all reached the server's device. */
static bool ep_sent_all(void *arg)
{
    struct client *c = arg;
    if (c->ep == NULL || c->closed)
        return true;
    struct mcr_rdma_ep_stats st;
    mcr_rdma_ep_stats(c->ep, &st);
    return st.sends_unfinished == 0;
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
    if (argc == 3 && strcmp(argv[1], "--stuck-client") == 0) {
        port = (uint16_t)atoi(argv[2]);
        return stuck_client();
    }
    if (argc == 3 && strcmp(argv[1], "--rndv-kill-client") == 0) {
        port = (uint16_t)atoi(argv[2]);
        return rndv_kill_client();
    }
    if (argc < 2)
        tap_bail("usage: rdma_test_server SERVER_BINARY");
    const char *self = argv[0];
    server_bin = argv[1];
    extra_argv = argv + 2;
    extra_argc = argc - 2;
    signal(SIGPIPE, SIG_IGN);
    struct mcr_rdma_ctx_opts opts;
    test_opts(&opts);
    opts.recv_bufs = 512;
    opts.send_bufs = 256;
    cctx = make_ctx(&opts);
    loop_add(cctx);
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

    test_held_at_disconnect((uint16_t)(port + 1));
    test_registered_within_limit((uint16_t)(port + 2));
    test_flash_gets((uint16_t)(port + 3));
    test_refused_connection((uint16_t)(port + 4));

    cl_close(&a);
    cl_close(&b);
    stop_server(server_pid, "the server");
    loop_remove(cctx);
    mcr_rdma_ctx_destroy(cctx);
    tap_no_plan_end();
    return tap_exit_status();
}
