/* t/rdma/harness.h: shared scaffolding for the RDMA tests that run inside
 * the Soft-RoCE guest: contexts on the guest's rxe address, an event loop
 * over several contexts with a deadline, a test echo/rendezvous server, and
 * data patterns. Header-only (static functions); each test program includes
 * it once. Not a part of the substrate: it only uses its public headers. */
#ifndef MCR_T_RDMA_HARNESS_H
#define MCR_T_RDMA_HARNESS_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdma/ctx.h"
#include "rdma/endpoint.h"
#include "rdma/mr.h"
#include "rdma/rc.h"
#include "t/rdma/tap.h"

static inline const char *rxe_addr(void)
{
    const char *a = getenv("RXE_VM_ADDR");
    if (a == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    return a;
}

static inline uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline struct mcr_rdma_ctx *make_ctx(struct mcr_rdma_ctx_opts *opts)
{
    char err[256];
    struct mcr_rdma_ctx *ctx = mcr_rdma_ctx_create(opts, err, sizeof(err));
    if (ctx == NULL)
        tap_bail("context on %s: %s", opts->addr, err);
    return ctx;
}

/* Test contexts: no RNR retries at all, so a single receiver-not-ready
 * would fail the connection and the test. */
static inline void test_opts(struct mcr_rdma_ctx_opts *opts)
{
    opts->addr = rxe_addr();
    mcr_rdma_ctx_opts_default(opts);
    opts->rnr_retry = 0;
}

#define MAX_LOOP_CTX 16
static struct mcr_rdma_ctx *loop_ctx[MAX_LOOP_CTX];
static int loop_nctx;

static inline void loop_add(struct mcr_rdma_ctx *ctx)
{
    loop_ctx[loop_nctx++] = ctx;
}

static inline void loop_remove(struct mcr_rdma_ctx *ctx)
{
    for (int i = 0; i < loop_nctx; i++)
        if (loop_ctx[i] == ctx)
            loop_ctx[i] = loop_ctx[--loop_nctx];
}

/* When set, waits for and handles events of every context for up to
 * timeout_ms instead of the built-in poll() loop (e.g. a libevent loop). */
static void (*loop_driver)(int timeout_ms);

/* Drives every context until done(arg) or timeout_ms passed; returns done. */
static inline bool run_until(bool (*done)(void *), void *arg, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        if (done(arg))
            return true;
        if (now_ms() >= deadline)
            return false;
        if (loop_driver != NULL) {
            loop_driver(20);
            continue;
        }
        struct pollfd pfd[MAX_LOOP_CTX];
        for (int i = 0; i < loop_nctx; i++)
            pfd[i] = (struct pollfd){.fd = mcr_rdma_ctx_fd(loop_ctx[i]), .events = POLLIN};
        poll(pfd, (nfds_t)loop_nctx, 20);
        for (int i = 0; i < loop_nctx; i++)
            if (mcr_rdma_ctx_progress(loop_ctx[i], 0) < 0)
                tap_bail("progress failed");
    }
}

static inline bool never(void *arg)
{
    (void)arg;
    return false;
}

/* Lets pending events settle for ms milliseconds. */
static inline void run_for(int ms)
{
    run_until(never, NULL, ms);
}

static inline void fill_pattern(unsigned char *buf, size_t len, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (unsigned char)x;
    }
}

static uint64_t fnv1a(const unsigned char *p, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* ---- test server ---------------------------------------------------------
 * EAGER: echoes the payload under the same request id.
 * RNDV_READ: pulls the advertised region into its slab, replies (READ_DONE)
 *   with the 8-byte FNV-1a of what it pulled.
 * RNDV_WRITE: pushes the first rndv.len slab bytes into the advertised region,
 *   replies (RNDV_DONE) with nothing.
 * Anything failing is counted in errors. */
#define SERVER_SLAB (8u << 20)
struct test_server {
    struct mcr_rdma_ctx *ctx;
    struct mcr_rdma_listener *listener;
    uint16_t port;
    unsigned char *slab;
    struct mcr_rdma_region slab_region;
    int accepted, connected, closed;
    int errors;
    int range_checks_ok; /* out-of-range rendezvous attempts refused */
    int rdma_done, rdma_failed;
    bool sink;                   /* count EAGER messages instead of echoing */
    uint32_t sunk;               /* EAGER messages counted while sink */
    struct mcr_rdma_ep *last_ep; /* most recently accepted endpoint */
    void (*on_message_hook)(struct test_server *srv, struct mcr_rdma_ep *ep,
                            const struct mcr_rdma_msg *msg);
};

struct rndv_job {
    struct test_server *srv;
    uint32_t request_id;
    uint32_t len;
    uint8_t type;
};

static inline void server_reply(struct mcr_rdma_ep *ep, uint32_t request_id, uint16_t flags,
                                const void *data, size_t len, struct test_server *srv)
{
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    struct mcr_rdma_send s = {.type = MCR_RDMA_MSG_EAGER,
                              .flags = flags,
                              .request_id = request_id,
                              .iov = &iov,
                              .iovcnt = len ? 1 : 0};
    int rc = mcr_rdma_ep_send(ep, &s);
    if (rc != 0 && rc != -ENOTCONN) {
        tap_diag("server reply failed: %s", strerror(-rc));
        srv->errors++;
    }
}

static inline void server_on_rdma_done(struct mcr_rdma_ep *ep, void *cookie, int status, void *user)
{
    struct test_server *srv = user;
    struct rndv_job *job = cookie;
    if (status != 0) {
        srv->rdma_failed++;
        free(job);
        return;
    }
    srv->rdma_done++;
    if (job->type == MCR_RDMA_MSG_RNDV_READ) {
        uint64_t sum = fnv1a(srv->slab, job->len);
        server_reply(ep, job->request_id, MCR_RDMA_F_READ_DONE, &sum, sizeof(sum), srv);
    } else {
        server_reply(ep, job->request_id, MCR_RDMA_F_RNDV_DONE, NULL, 0, srv);
    }
    free(job);
}

static inline void server_on_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg,
                                     void *user)
{
    struct test_server *srv = user;
    if (srv->on_message_hook != NULL)
        srv->on_message_hook(srv, ep, msg);
    if (msg->type == MCR_RDMA_MSG_EAGER && srv->sink) {
        srv->sunk++;
        return;
    }
    if (msg->type == MCR_RDMA_MSG_EAGER) {
        server_reply(ep, msg->request_id, 0, msg->payload, msg->payload_len, srv);
        return;
    }
    if (msg->rndv.len > SERVER_SLAB) {
        srv->errors++;
        return;
    }
    /* The substrate must refuse any access beyond the advertised region. */
    int rc = msg->type == MCR_RDMA_MSG_RNDV_READ
                 ? mcr_rdma_ep_rdma_read(ep, &msg->rndv, 1, srv->slab, srv->slab_region.mr,
                                         msg->rndv.len, NULL)
                 : mcr_rdma_ep_rdma_write(ep, &msg->rndv, msg->rndv.len, srv->slab,
                                          srv->slab_region.mr, 1, NULL);
    if (rc == -ERANGE)
        srv->range_checks_ok++;
    else
        srv->errors++;
    struct rndv_job *job = calloc(1, sizeof(*job));
    *job = (struct rndv_job){srv, msg->request_id, msg->rndv.len, msg->type};
    rc = msg->type == MCR_RDMA_MSG_RNDV_READ
             ? mcr_rdma_ep_rdma_read(ep, &msg->rndv, 0, srv->slab, srv->slab_region.mr,
                                     msg->rndv.len, job)
             : mcr_rdma_ep_rdma_write(ep, &msg->rndv, 0, srv->slab, srv->slab_region.mr,
                                      msg->rndv.len, job);
    if (rc != 0) {
        tap_diag("server rendezvous failed to start: %s", strerror(-rc));
        srv->errors++;
        free(job);
    }
}

static inline void server_on_connected(struct mcr_rdma_ep *ep, void *user)
{
    (void)ep;
    ((struct test_server *)user)->connected++;
}

static inline void server_on_closed(struct mcr_rdma_ep *ep, int reason, const char *why, void *user)
{
    (void)ep;
    (void)reason;
    (void)why;
    ((struct test_server *)user)->closed++;
}

static inline int server_accept(struct mcr_rdma_listener *l, struct mcr_rdma_ep *ep, void *user)
{
    (void)l;
    struct test_server *srv = user;
    static const struct mcr_rdma_ep_callbacks cb = {
        .on_connected = server_on_connected,
        .on_message = server_on_message,
        .on_rdma_done = server_on_rdma_done,
        .on_closed = server_on_closed,
    };
    mcr_rdma_ep_set_callbacks(ep, &cb, srv);
    srv->accepted++;
    srv->last_ep = ep;
    return 0;
}

static inline void server_start(struct test_server *srv, struct mcr_rdma_ctx_opts *opts)
{
    memset(srv, 0, sizeof(*srv));
    srv->ctx = make_ctx(opts);
    srv->slab = aligned_alloc(4096, SERVER_SLAB);
    if (srv->slab == NULL ||
        mcr_rdma_region_register(mcr_rdma_ctx_pd(srv->ctx), srv->slab, SERVER_SLAB,
                                 MCR_RDMA_ACCESS_LOCAL, &srv->slab_region) != 0)
        tap_bail("registering the server slab");
    int rc = mcr_rdma_rc_listen(srv->ctx, rxe_addr(), 0, 64, server_accept, srv, &srv->listener);
    if (rc != 0)
        tap_bail("listen on %s: %s", rxe_addr(), strerror(-rc));
    srv->port = mcr_rdma_listener_port(srv->listener);
    loop_add(srv->ctx);
}

static inline void server_stop(struct test_server *srv)
{
    loop_remove(srv->ctx);
    mcr_rdma_listener_destroy(srv->listener);
    mcr_rdma_region_deregister(&srv->slab_region); /* before its protection domain */
    mcr_rdma_ctx_destroy(srv->ctx);
    free(srv->slab);
}

/* ---- test client ---------------------------------------------------------- */
struct test_client {
    struct mcr_rdma_ctx *ctx;
    struct mcr_rdma_ep *ep;
    bool connected, closed;
    int close_reason;
    char close_why[128];
    uint32_t replies;       /* messages received */
    uint32_t next_expected; /* request id of the next in-order reply */
    int bad_replies;
    /* last reply */
    uint32_t last_id;
    uint16_t last_flags;
    unsigned char last_payload[8192];
    uint32_t last_len;
    /* expected echo content: pattern seeded by request id, length */
    uint32_t echo_len;
    /* called after each message is counted (NULL: none) */
    void (*on_message_hook)(struct test_client *c, struct mcr_rdma_ep *ep,
                            const struct mcr_rdma_msg *msg);
};

static inline void client_on_connected(struct mcr_rdma_ep *ep, void *user)
{
    (void)ep;
    ((struct test_client *)user)->connected = true;
}

static inline void client_on_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg,
                                     void *user)
{
    (void)ep;
    struct test_client *c = user;
    c->replies++;
    c->last_id = msg->request_id;
    c->last_flags = msg->flags;
    c->last_len = msg->payload_len;
    if (msg->payload_len <= sizeof(c->last_payload))
        memcpy(c->last_payload, msg->payload, msg->payload_len);
    if (msg->request_id != c->next_expected)
        c->bad_replies++;
    c->next_expected = msg->request_id + 1;
    if (c->on_message_hook != NULL)
        c->on_message_hook(c, ep, msg);
}

static inline void client_on_closed(struct mcr_rdma_ep *ep, int reason, const char *why, void *user)
{
    (void)ep;
    struct test_client *c = user;
    c->closed = true;
    c->close_reason = reason;
    snprintf(c->close_why, sizeof(c->close_why), "%s", why);
    c->ep = NULL;
}

static inline bool client_settled(void *arg)
{
    struct test_client *c = arg;
    return c->connected || c->closed;
}

static inline bool client_closed(void *arg)
{
    return ((struct test_client *)arg)->closed;
}

/* Creates the client's own context (opts may be NULL for defaults) and
 * connects; returns whether it connected within the time limit. */
static inline bool client_connect(struct test_client *c, struct mcr_rdma_ctx_opts *opts,
                                  uint16_t port)
{
    memset(c, 0, sizeof(*c));
    struct mcr_rdma_ctx_opts defaults;
    if (opts == NULL) {
        test_opts(&defaults);
        opts = &defaults;
    }
    c->ctx = make_ctx(opts);
    loop_add(c->ctx);
    static const struct mcr_rdma_ep_callbacks cb = {
        .on_connected = client_on_connected,
        .on_message = client_on_message,
        .on_closed = client_on_closed,
    };
    int rc = mcr_rdma_rc_connect(c->ctx, rxe_addr(), port, &cb, c, &c->ep);
    if (rc != 0) {
        tap_diag("connect: %s", strerror(-rc));
        return false;
    }
    run_until(client_settled, c, 10000);
    return c->connected && !c->closed;
}

static inline void client_destroy(struct test_client *c)
{
    loop_remove(c->ctx);
    mcr_rdma_ctx_destroy(c->ctx);
    c->ctx = NULL;
    c->ep = NULL;
}

struct reply_wait {
    struct test_client *c;
    uint32_t count;
};

static inline bool have_replies(void *arg)
{
    struct reply_wait *w = arg;
    return w->c->replies >= w->count || w->c->closed;
}

static inline bool wait_replies(struct test_client *c, uint32_t count, int timeout_ms)
{
    struct reply_wait w = {c, count};
    return run_until(have_replies, &w, timeout_ms) && c->replies >= count;
}

/* Sends n eager messages of 200 pattern bytes on ep, request ids base to
 * base + n - 1; the number the endpoint took. */
static inline int send_burst(struct mcr_rdma_ep *ep, uint32_t base, uint32_t n)
{
    unsigned char buf[200];
    int sent = 0;
    for (uint32_t i = 0; i < n; i++) {
        fill_pattern(buf, sizeof(buf), base + i);
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
        struct mcr_rdma_send s = {
            .type = MCR_RDMA_MSG_EAGER, .request_id = base + i, .iov = &iov, .iovcnt = 1};
        sent += mcr_rdma_ep_send(ep, &s) == 0;
    }
    return sent;
}

/* run_until predicates on a test server's counts, past a count taken
 * before: its side of the newest connection established (the client may
 * see it first), or more endpoints closed. */
struct server_count_wait {
    const struct test_server *srv;
    int past;
};

static inline bool server_connected_past(void *arg)
{
    const struct server_count_wait *w = arg;
    return w->srv->connected > w->past;
}

static inline bool server_closed_past(void *arg)
{
    const struct server_count_wait *w = arg;
    return w->srv->closed > w->past;
}

/* Sends len pattern bytes under request id and waits for the echo. */
static inline bool ping(struct test_client *c, uint32_t id, uint32_t len)
{
    static unsigned char buf[8192], expect[8192];
    fill_pattern(buf, len, id);
    memcpy(expect, buf, len);
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct mcr_rdma_send s = {
        .type = MCR_RDMA_MSG_EAGER, .request_id = id, .iov = &iov, .iovcnt = 1};
    c->next_expected = id;
    uint32_t before = c->replies;
    if (c->ep == NULL || mcr_rdma_ep_send(c->ep, &s) != 0)
        return false;
    if (!wait_replies(c, before + 1, 10000))
        return false;
    return c->last_id == id && c->last_len == len && memcmp(c->last_payload, expect, len) == 0;
}

#endif
