/* t/rdma/server_harness.h: what rdma_test_server and rdma_test_server_options
 * share: memcached-rdma processes started with -o rdma_listen on the guest's
 * rxe address (and the command line's extra server arguments), stopped with
 * SIGTERM and checked for a clean exit, and a binary-protocol client of them
 * written on the substrate: eager request streams, rendezvous regions the
 * server READs (RNDV_READ), a landing buffer it WRITEs large replies into
 * (RNDV_WRITE) and value buffers (MCR_RDMA_F_VALUE). Header-only (static
 * functions); each program sets server_bin and creates cctx through
 * server_tests_begin. */
#ifndef MCR_T_RDMA_SERVER_HARNESS_H
#define MCR_T_RDMA_SERVER_HARNESS_H

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

static inline void cl_append(struct client *c, const void *data, size_t n)
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
static inline bool cl_advertise(struct client *c)
{
    struct mcr_rdma_rndv r = {
        .addr = (uintptr_t)c->land, .rkey = c->land_reg.mr->rkey, .len = CL_LAND_SIZE};
    struct mcr_rdma_send adv = {
        .type = MCR_RDMA_MSG_RNDV_WRITE, .request_id = ++c->land_id, .advertise = &r};
    return mcr_rdma_ep_send(c->ep, &adv) == 0;
}

static inline void cl_connected(struct mcr_rdma_ep *ep, void *user)
{
    (void)ep;
    ((struct client *)user)->connected = true;
}

static inline void cl_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user)
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

static inline void cl_rdma_done(struct mcr_rdma_ep *ep, void *cookie, int status, void *user)
{
    (void)ep;
    (void)cookie;
    (void)status;
    (void)user;
}

static inline void cl_closed(struct mcr_rdma_ep *ep, int reason, const char *why, void *user)
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

static inline bool cl_settled(void *arg)
{
    struct client *c = arg;
    return c->connected || c->closed;
}

static inline bool cl_is_closed(void *arg)
{
    return ((struct client *)arg)->closed;
}

/* Connects c through ctx to the server on port p. */
static inline bool cl_connect_via(struct client *c, struct mcr_rdma_ctx *ctx, uint16_t p)
{
    memset(c, 0, sizeof(*c));
    if (mcr_rdma_rc_connect(ctx, rxe_addr(), p, &cl_cb, c, &c->ep) != 0)
        return false;
    run_until(cl_settled, c, 10000);
    return c->connected && !c->closed;
}

static inline void cl_close(struct client *c)
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
static inline bool cl_rndv_setup(struct client *c)
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
static inline void frame_put(unsigned char *buf, size_t *at, uint8_t op, const void *ext,
                             uint8_t extlen, const char *key, const void *val, size_t vlen,
                             uint32_t opaque)
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
static inline bool cl_send_region(struct client *c, size_t len, uint32_t rkey)
{
    struct mcr_rdma_rndv r = {.addr = (uintptr_t)c->src, .rkey = rkey, .len = (uint32_t)len};
    struct mcr_rdma_send s = {
        .type = MCR_RDMA_MSG_RNDV_READ, .request_id = ++c->src_id, .advertise = &r};
    return mcr_rdma_ep_send(c->ep, &s) == 0;
}

static inline bool region_returned(void *arg)
{
    struct client *c = arg;
    return c->read_dones == c->src_id || c->closed;
}

static inline bool cl_response(struct client *c, struct mcr_bin_header *h, unsigned char **body);

/* A set whose frame goes by RNDV_READ; returns the status or -1. */
static inline int rndv_set(struct client *c, const char *key, const void *val, size_t len)
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
static inline bool cl_send(struct client *c, const void *data, size_t len)
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

static inline bool have_bytes(void *arg)
{
    struct want_bytes *w = arg;
    return w->c->len >= w->n || w->c->closed;
}

/* Reads one response; body (malloc'd) returned in *body. */
static inline bool cl_response(struct client *c, struct mcr_bin_header *h, unsigned char **body)
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
static inline bool cl_request(struct client *c, uint8_t op, const void *ext, uint8_t extlen,
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
static inline int roundtrip(struct client *c, uint8_t op, const void *ext, uint8_t extlen,
                            const char *key, const void *val, size_t vlen, unsigned char **body,
                            uint32_t *bodylen)
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

static inline int do_set(struct client *c, uint8_t op, const char *key, const void *val, size_t len)
{
    unsigned char ext[8] = {0, 0, 0, 7, 0, 0, 0, 0};
    return roundtrip(c, op, ext, 8, key, val, len, NULL, NULL);
}

/* get: returns status, value copied to *val */
static inline int do_get(struct client *c, const char *key, unsigned char **val, size_t *len)
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

static inline bool check_value(struct client *c, const char *key, const void *want, size_t len)
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

/* Reads "stats" and returns the value of one line (-1 when missing). */
static inline long long stat_value(struct client *c, const char *name)
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
static inline pid_t spawn_server_logged(uint16_t p, const char *const *more, const char *log_path)
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

static inline pid_t spawn_server(uint16_t p, const char *const *more)
{
    return spawn_server_logged(p, more, NULL);
}

/* Stops a server with SIGTERM: it must exit cleanly (a check). */
static inline void stop_server(pid_t pid, const char *what)
{
    kill(pid, SIGTERM);
    proc_check_clean_exit(proc_reap(pid, 10000), what);
}

/* The client's messages have all reached the server's device. */
static inline bool ep_sent_all(void *arg)
{
    struct client *c = arg;
    if (c->ep == NULL || c->closed)
        return true;
    struct mcr_rdma_ep_stats st;
    mcr_rdma_ep_stats(c->ep, &st);
    return st.sends_unfinished == 0;
}

/* The RDMA port of a program's first server: one of 2,000 by its pid. */
static inline uint16_t base_port(void)
{
    return (uint16_t)(21000 + getpid() % 2000);
}

/* Creates the client context cctx (a test context with recv_bufs receive
 * and send_bufs send buffers) and adds it to the event loop. */
static inline void client_ctx_create(uint32_t recv_bufs, uint32_t send_bufs)
{
    struct mcr_rdma_ctx_opts opts;
    test_opts(&opts);
    opts.recv_bufs = recv_bufs;
    opts.send_bufs = send_bufs;
    cctx = make_ctx(&opts);
    loop_add(cctx);
}

/* Takes SERVER_BINARY [SERVER_ARG...] from the command line (bails out
 * with usage without them) and creates the client context cctx. */
static inline void server_tests_begin(int argc, char **argv, const char *usage)
{
    if (argc < 2)
        tap_bail("usage: %s", usage);
    server_bin = argv[1];
    extra_argv = argv + 2;
    extra_argc = argc - 2;
    signal(SIGPIPE, SIG_IGN);
    client_ctx_create(512, 256);
}

/* Destroys cctx and ends the TAP stream: the program's exit status. */
static inline int server_tests_end(void)
{
    loop_remove(cctx);
    mcr_rdma_ctx_destroy(cctx);
    tap_no_plan_end();
    return tap_exit_status();
}

#endif
