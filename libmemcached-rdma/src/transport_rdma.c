/* transport_rdma.c: the RDMA transport (reliable connection through the
 * rdma/ substrate) for servers given as rdma://host:port. Owns one RC
 * endpoint per server connection, on a substrate context the client's
 * RDMA connections share (transport_rdma_ctx.c: one device opening, one
 * protection domain, one completion queue and one registration of the
 * send and receive pools per client; the sending half is in
 * transport_rdma_send.c). Knows nothing of memcached protocols or
 * requests.
 *
 * Byte stream over messages, as the server sees it: the bytes the pipeline
 * sends are cut into eager messages of at most the endpoint's eager payload,
 * and the payloads of received messages, in order, are the reply stream
 * (binary-protocol frames). Bytes the endpoint cannot take at once (all send
 * buffers busy) are kept here and go out on the next call, so send never
 * reports EAGAIN (the descriptor below can only signal input).
 *
 * What the server may reach: only the region of the transfer advertised,
 * and only until that transfer ends (transport_rdma_grant.h: a memory
 * window bound for it and invalidated at its end, or a registration made
 * for it and dropped at its end). Nothing of ours is registered with remote
 * access otherwise.
 *
 * Large replies: a 1 MiB landing buffer is opened for remote write and
 * advertised with RNDV_WRITE; the server RDMA-WRITEs up to that much of the
 * reply stream into it and sends RNDV_DONE with the byte count and the
 * stream bytes that come before the written ones (a reply's header); the
 * buffer is closed, both join the input, and the buffer is opened and
 * advertised again (under a new rkey). An RNDV_DONE that does not match
 * closes the connection.
 *
 * Values straight into a caller's buffer: for a GET into a caller's buffer
 * (iget) larger than one message's payload, the buffer is opened for
 * remote write (its window's registration made on the fly, or kept in a
 * registration cache when LIBMEMCACHED_RDMA_REGCACHE asks for one) and
 * advertised with RNDV_WRITE and MCR_RDMA_F_VALUE under the request's
 * opaque, on the message that carries the request (push_iov). When the server writes
 * the value there, its RNDV_DONE (same flag, same opaque) inserts a
 * segment into the input that refers to the caller's buffer instead of
 * holding bytes; recv into that very buffer returns it without a copy
 * (into anywhere else, it copies). When the request completes the buffer
 * is closed, and the call returns only once the server can no longer
 * reach it. The value buffers' side of this is in transport_rdma_value.c.
 *
 * The descriptor the pipeline polls is an epoll set over the context's
 * descriptor (completions, connection events) and an eventfd that this file
 * keeps readable while received bytes wait in the input buffer or the
 * connection has gone (so the reader sees end of stream).
 *
 * An rdma:// connection (the endpoint's movable) sends HELLO as a control
 * record first; the server's MOVE moves it to UD (transport_rdma_move.h).
 */
#include "transport.h"

#include "config.h"

#ifdef HAVE_RDMA

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "rdma/ctx.h"
#include "rdma/iov_cut.h"
#include "rdma/mr.h"
#include "rdma/rc.h"
#include "transport_rdma_stream.h"

/* Bytes kept for later beyond which send waits for the endpoint. */
#define RDMA_OUT_HIGH (8u * 1024 * 1024)
/* How long send may wait for that, and close for a clean disconnect. */
#define RDMA_OUT_WAIT_MS 5000
#define RDMA_CLOSE_WAIT_MS 1000
/* memcached_test calls between two reads of connection events. */
#define RDMA_EVENT_CHECK_POLLS 64
/* Default reply polling budget before sleeping (LIBMEMCACHED_RDMA_SPIN_US). */
#define RDMA_SPIN_US_DEFAULT 200
/* LIBMEMCACHED_RDMA_REGCACHE (0 .. RDMA_REGCACHE_MAX, default 0):
 * registrations of caller buffers kept for reuse (with memory windows only:
 * they have no remote access). Only for programs that never free a buffer
 * they passed to iget while the connection is open (a cached registration
 * keeps the memory it was made for, not what a later allocation maps at
 * the same address). */
#define RDMA_REGCACHE_MAX 4096
int64_t lmr_rdma_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- substrate callbacks ------------------------------------------------------------- */
static void on_connected(struct mcr_rdma_ep *ep, void *user)
{
    (void)ep;
    ((struct rdma_stream *)user)->connected = true;
}

/* Messages in, bytes out (rdma/stream.h): the server sends stream bytes,
 * READ_DONE for our request region (a reply may ride along) and RNDV_DONE
 * for the landing buffer or a caller's value buffer, nothing else. */
static void on_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user)
{
    struct rdma_stream *s = user;
    struct mcr_rdma_stream_in in;
    switch (mcr_rdma_stream_classify(msg, &in)) {
    case MCR_RDMA_IN_READ_DONE:
        /* the server has pulled our RNDV_READ region */
        if (!s->src_busy || msg->request_id != s->src_id)
            break;
        s->src_busy = false;
        lmr_grant_close(&s->src_grant, ep);
        __attribute__((fallthrough)); /* its payload is stream bytes */
    case MCR_RDMA_IN_BYTES:
        if (!mcr_rdma_bytes_append(&s->in, in.bytes, in.len))
            break;
        s->in_received += in.len;
        return;
    case MCR_RDMA_IN_VALUE_DONE: {
        /* the server wrote the next done.count bytes (a value) into a
         * caller's buffer: a segment of the input that refers to it */
        struct value_buf *vb = NULL;
        for (unsigned i = 0; i < s->nvbufs && vb == NULL; i++)
            if (s->vbufs[i].opaque == msg->request_id && !s->vbufs[i].written)
                vb = &s->vbufs[i];
        if (vb == NULL || in.done.count > vb->len || s->nsegs == RDMA_VALUE_BUFS ||
            !mcr_rdma_bytes_append(&s->in, in.bytes, in.len))
            break;
        s->in_received += in.len;
        vb->written = true;
        s->segs[(s->seg_first + s->nsegs++) % RDMA_VALUE_BUFS] = (struct value_seg){
            .at = s->in_received, .ptr = vb->buf, .len = in.done.count, .opaque = vb->opaque};
        s->in_received += in.done.count;
        return;
    }
    case MCR_RDMA_IN_CONTROL: {
        /* a move: MOVE to UD, or the server's END after ours */
        const unsigned char *rec = in.bytes;
        if (s->move.movable && rec[0] == MCR_RDMA_CTL_MOVE && in.len == MCR_RDMA_MOVE_LEN &&
            rec[1] == MCR_RDMA_MOVE_TO_UD && !s->move.server_end) {
            s->move.to = MCR_RDMA_MOVE_TO_UD;
            return;
        }
        if (s->move.end_sent && rec[0] == MCR_RDMA_CTL_END && in.len == 1 && !s->move.server_end) {
            s->move.server_end = true;
            return;
        }
        break;
    }
    case MCR_RDMA_IN_WRITE_DONE:
        /* the server wrote the next done.count bytes of the stream into
         * the landing buffer */
        if (!s->land_out || msg->request_id != s->land_id || in.done.count > RDMA_LAND_SIZE ||
            !mcr_rdma_bytes_reserve(&s->in, (size_t)in.len + in.done.count))
            break;
        lmr_grant_close(&s->land_grant, ep); /* the transfer is over */
        mcr_rdma_bytes_append(&s->in, in.bytes, in.len);
        mcr_rdma_bytes_append(&s->in, s->land, in.done.count);
        s->in_received += in.len + in.done.count;
        s->land_out = false;
        s->land_need = true;
        return;
    default:
        break;
    }
    char why[64];
    snprintf(why, sizeof(why), "unexpected message from the server (type %u)", msg->type);
    lmr_rdma_abort(s, why); /* the reader sees the end of the stream */
}

/* Received bytes wait to be read (in `in` or in a value segment), or the
 * server's END of a move. */
static bool input_waiting(const struct rdma_stream *s)
{
    return s->in.len > 0 || s->nsegs > 0 || s->move.server_end;
}

/* One control record on a message of its own: 0 or -errno (-EAGAIN: no
 * send buffer). */
static int send_control(struct rdma_stream *s, const void *record, size_t len)
{
    struct iovec iov = {.iov_base = (void *)record, .iov_len = len};
    struct mcr_rdma_send m = {
        .type = MCR_RDMA_MSG_EAGER, .flags = MCR_RDMA_F_CONTROL, .iov = &iov, .iovcnt = 1};
    return s->ep == NULL ? -EPIPE : mcr_rdma_ep_send(s->ep, &m);
}

/* Window operations only (this side starts no RDMA READ or WRITE): a bind
 * (no cookie) or a grant's invalidation. A failed one has failed the
 * connection, whose QP takes no remote access any more. */
static void on_rdma_done(struct mcr_rdma_ep *ep, void *cookie, int status, void *user)
{
    (void)ep;
    (void)status;
    (void)user;
    if (cookie != NULL)
        lmr_grant_closed(cookie);
}

/* The connection is gone: its windows and registrations with it. */
static void drop_grants(struct rdma_stream *s)
{
    lmr_grant_drop(&s->land_grant);
    lmr_grant_drop(&s->src_grant);
    for (unsigned i = 0; i < RDMA_VALUE_BUFS; i++)
        lmr_grant_drop(&s->value_grants[i]);
}

/* Why the connection went, for the pipeline's report (transport.h: why):
 * the substrate's words (a failed work completion with its status and
 * operation, a connection manager event, the peer's disconnect). Not for a
 * close of ours (0) nor our own abort (lmr_rdma_abort said why first). */
static void on_closed(struct mcr_rdma_ep *ep, int reason, const char *why, void *user)
{
    (void)ep;
    struct rdma_stream *s = user;
    if (reason != 0 && reason != -ECONNABORTED && s->conn != NULL)
        lmr_conn_note_why(s->conn, "RDMA: %s", why);
    s->closed = true;
    s->close_reason = reason;
    s->ep = NULL;
    drop_grants(s); /* before the QP they are bound to goes */
}

static const struct mcr_rdma_ep_callbacks stream_callbacks = {
    .on_connected = on_connected,
    .on_message = on_message,
    .on_rdma_done = on_rdma_done,
    .on_closed = on_closed,
};

void lmr_rdma_sync_signal(struct rdma_stream *s)
{
    bool want = input_waiting(s) || s->closed;
    uint64_t v = 1;
    if (want && !s->signaled) {
        if (write(s->evfd, &v, sizeof(v)) == (ssize_t)sizeof(v))
            s->signaled = true;
    } else if (!want && s->signaled) {
        if (read(s->evfd, &v, sizeof(v)) == (ssize_t)sizeof(v))
            s->signaled = false;
    }
}

void lmr_rdma_abort(struct rdma_stream *s, const char *why)
{
    if (s->ep == NULL || s->closed)
        return;
    if (s->conn != NULL)
        lmr_conn_note_why(s->conn, "RDMA: %s", why);
    mcr_rdma_ep_abort(s->ep);
}

/* Handles what the context has for us, sends what waits. timeout_ms > 0
 * waits that long for events; 0 handles every kind of event without
 * waiting; -1 only polls the completion queue (no system call: the fast
 * path of send and recv). */
static void progress(struct rdma_stream *s, int timeout_ms)
{
    int rc = timeout_ms > 0    ? mcr_rdma_ctx_progress(s->ctx, timeout_ms)
             : timeout_ms == 0 ? mcr_rdma_ctx_handle_events(s->ctx)
                               : mcr_rdma_ctx_poll(s->ctx);
    if (rc < 0) {
        char why[96];
        snprintf(why, sizeof(why), "handling the device's events failed: %s", strerror(-rc));
        lmr_rdma_abort(s, why);
    }
    if (!lmr_rdma_flush_out(s))
        lmr_rdma_abort(s, "sending the bytes kept for later failed");
    if (timeout_ms >= 0) {
        lmr_rdma_advertise(s);
        /* the context's other connections may have got input or ended
         * meanwhile: their descriptors say so before the pipeline sleeps */
        for (struct rdma_stream *o = s->shared->streams; o != NULL; o = o->ctx_next)
            lmr_rdma_sync_signal(o);
    }
}

/* ---- the transport table ---------------------------------------------------------------- */
static void close_descriptors(struct rdma_stream *s)
{
    if (s->epfd >= 0)
        close(s->epfd);
    if (s->evfd >= 0)
        close(s->evfd);
    s->epfd = s->evfd = -1;
}

/* Ends the connection and waits (briefly) until the substrate freed it. */
static void end_endpoint(struct rdma_stream *s)
{
    if (s->ep != NULL && !s->closed) {
        mcr_rdma_ep_abort(s->ep);
        int64_t deadline = lmr_rdma_now_ms() + RDMA_CLOSE_WAIT_MS;
        while (!s->closed && lmr_rdma_now_ms() < deadline)
            mcr_rdma_ctx_progress(s->ctx, 10);
    }
}

static void stream_free(struct rdma_stream *s)
{
    end_endpoint(s);
    drop_grants(s); /* windows before the registrations they lie in */
    for (unsigned i = 0; i < s->nvbufs; i++)
        if (s->vbufs[i].mr != NULL)
            mcr_rdma_regcache_put(s->regcache, s->vbufs[i].mr);
    mcr_rdma_regcache_destroy(s->regcache);
    mcr_rdma_region_deregister(&s->land_reg); /* before its protection domain */
    free(s->land);
    mcr_rdma_region_deregister(&s->src_reg);
    free(s->src);
    close_descriptors(s);
    if (s->shared != NULL) /* the last connection on it destroys it */
        lmr_rdma_ctx_release(s->shared, s);
    mcr_rdma_bytes_free(&s->out);
    mcr_rdma_bytes_free(&s->in);
    free(s);
}

const struct lmr_transport_ops lmr_transport_rdma;

/* Attaches s to a context of the client's (a new one when fresh), opens
 * its descriptors and connects its endpoint within timeout_ms. SUCCESS,
 * or a failure with *sys_errno, s then holding no context nor endpoint. */
static memcached_return_t connect_stream(struct rdma_stream *s, const struct lmr_endpoint *ep,
                                         int timeout, bool fresh, int *sys_errno)
{
    char err[256];
    s->conn->why[0] = '\0'; /* a try before (another device's) is not why this one fails */
    s->shared = lmr_rdma_ctx_acquire(ep->shared, ep->hostname, ep->shared_peers, timeout, fresh, s,
                                     err, sizeof(err));
    if (s->shared == NULL) {
        *sys_errno = ENODEV;
        lmr_conn_note_why(s->conn, "RDMA: %s", err);
        return MEMCACHED_CONNECTION_FAILURE;
    }
    s->ctx = s->shared->ctx;
    s->connected = s->closed = false;
    s->close_reason = 0;
    memcached_return_t rc = MEMCACHED_SUCCESS;
    s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev_ctx = {.events = EPOLLIN, .data.u32 = 0};
    struct epoll_event ev_in = {.events = EPOLLIN, .data.u32 = 1};
    int crc;
    if (s->evfd < 0 || s->epfd < 0 ||
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, mcr_rdma_ctx_fd(s->ctx), &ev_ctx) != 0 ||
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &ev_in) != 0) {
        *sys_errno = errno;
        rc = MEMCACHED_CONNECTION_FAILURE;
    } else if ((crc = mcr_rdma_rc_connect(s->ctx, ep->hostname, (uint16_t)ep->port,
                                          &stream_callbacks, s, &s->ep)) != 0) {
        *sys_errno = crc < 0 ? -crc : crc;
        s->ep = NULL;
        rc = MEMCACHED_CONNECTION_FAILURE;
        lmr_conn_note_why(s->conn, "RDMA: %s", strerror(*sys_errno));
    } else {
        int64_t deadline = lmr_rdma_now_ms() + timeout;
        while (!s->connected && !s->closed && lmr_rdma_now_ms() < deadline)
            mcr_rdma_ctx_progress(s->ctx, 10);
        if (!s->connected || s->closed) {
            *sys_errno = s->closed ? (s->close_reason == -EXDEV ? EXDEV : ECONNREFUSED) : ETIMEDOUT;
            rc = *sys_errno == ETIMEDOUT ? MEMCACHED_TIMEOUT : MEMCACHED_CONNECTION_FAILURE;
            if (!s->closed)
                lmr_conn_note_why(s->conn, "RDMA: no answer within %d ms", timeout);
        }
    }
    if (rc != MEMCACHED_SUCCESS) {
        end_endpoint(s);
        close_descriptors(s);
        lmr_rdma_ctx_release(s->shared, s);
        s->shared = NULL;
        s->ctx = NULL;
    }
    return rc;
}

static memcached_return_t rdma_open(struct lmr_conn *conn, const struct lmr_endpoint *ep,
                                    int *sys_errno)
{
    *sys_errno = 0;
    if (ep->unix_socket || ep->port == 0 || ep->port > 65535 || ep->shared == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    struct rdma_stream *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    s->epfd = s->evfd = -1;
    s->conn = conn;
    int timeout = ep->connect_timeout_ms > 0 ? ep->connect_timeout_ms : 4000;
    memcached_return_t rc = connect_stream(s, ep, timeout, false, sys_errno);
    /* reached through another device than the client's context's: a
     * context of its own on that device */
    if (rc != MEMCACHED_SUCCESS && *sys_errno == EXDEV)
        rc = connect_stream(s, ep, timeout, true, sys_errno);
    if (rc != MEMCACHED_SUCCESS) {
        stream_free(s);
        return rc;
    }
    /* Memory windows where the device binds them (unless
     * LIBMEMCACHED_RDMA_MEMORY_WINDOWS=0): the buffers are registered once
     * without remote access and a window opens them per transfer; otherwise
     * each transfer registers its region and drops it at its end. Without a
     * landing buffer, replies simply stay eager; without a request buffer,
     * requests do. */
    lmr_rdma_move_init(&s->move, ep);
    s->windows = mcr_rdma_ctx_has_windows(s->ctx) &&
                 lmr_env_unsigned("LIBMEMCACHED_RDMA_MEMORY_WINDOWS", 1, 1) == 1;
    s->land = aligned_alloc(4096, RDMA_LAND_SIZE);
    if (s->land != NULL && s->windows &&
        mcr_rdma_region_register(mcr_rdma_ctx_pd(s->ctx), s->land, RDMA_LAND_SIZE,
                                 MCR_RDMA_ACCESS_WINDOW, &s->land_reg) != 0) {
        free(s->land);
        s->land = NULL;
    }
    /* the landing buffer's window is bound before anything is sent: a bind
     * behind a message not yet acknowledged waits for its acknowledgement
     * (rdma/rc_data.c, bind_after_completions), and so would the first
     * request behind it */
    if (s->land != NULL) {
        s->land_need = true;
        (void)lmr_rdma_land_open(s); /* a failure shows in advertise, which gives up */
    }
    static const unsigned char hello = MCR_RDMA_CTL_HELLO;
    if (s->move.movable && send_control(s, &hello, 1) != 0)
        s->move.movable = false; /* served, but never moved */
    if (s->land != NULL)
        lmr_rdma_advertise(s);
    s->src = aligned_alloc(4096, RDMA_LAND_SIZE);
    if (s->src != NULL && s->windows &&
        mcr_rdma_region_register(mcr_rdma_ctx_pd(s->ctx), s->src, RDMA_LAND_SIZE,
                                 MCR_RDMA_ACCESS_WINDOW, &s->src_reg) != 0) {
        free(s->src);
        s->src = NULL;
    }
    /* without it, values simply come in the stream */
    s->regcache = mcr_rdma_regcache_create(
        mcr_rdma_ctx_pd(s->ctx),
        lmr_env_unsigned("LIBMEMCACHED_RDMA_REGCACHE", RDMA_REGCACHE_MAX, 0));
    /* completions raise no events until the pipeline is about to sleep
     * (rdma_prepare_sleep): the fast path makes no system call but the send */
    mcr_rdma_ctx_set_polling(s->ctx, true);
    conn->fd = s->epfd;
    conn->spin_us =
        lmr_env_unsigned("LIBMEMCACHED_RDMA_SPIN_US", LMR_SPIN_US_MAX, RDMA_SPIN_US_DEFAULT);
    conn->transport_state = s;
    conn->ops = &lmr_transport_rdma;
    return MEMCACHED_SUCCESS;
}

/* Bytes go straight to the endpoint; the completion queue is polled (send
 * buffers and credits taken back) only when some had to wait, since every
 * poll on the way to a request's send adds to its latency. */
static ssize_t rdma_send(struct lmr_conn *conn, const struct iovec *iov, int iovcnt)
{
    struct rdma_stream *s = conn->transport_state;
    if (s->closed) {
        errno = EPIPE;
        return -1;
    }
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    ssize_t taken = 0;
    if (s->out.len == 0) {
        taken = lmr_rdma_push_iov(s, iov, iovcnt);
        if (taken < 0) {
            errno = EPIPE;
            return -1;
        }
    }
    /* keep the rest, in order, for later */
    size_t skip = (size_t)taken;
    if (skip < total && !mcr_rdma_bytes_reserve(&s->out, total - skip)) {
        errno = ENOMEM;
        return -1;
    }
    for (int i = 0; i < iovcnt && skip < total; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        mcr_rdma_bytes_append(&s->out, (const char *)iov[i].iov_base + skip, iov[i].iov_len - skip);
        skip = 0;
    }
    if (s->out.len > 0)
        progress(s, -1);              /* sends what waited if room came back */
    if (s->out.len > RDMA_OUT_HIGH) { /* the clock only then: in some guests it is a system call */
        int64_t deadline = lmr_rdma_now_ms() + RDMA_OUT_WAIT_MS;
        while (s->out.len > RDMA_OUT_HIGH && !s->closed && lmr_rdma_now_ms() < deadline)
            progress(s, 10);
    }
    if (s->closed || s->out.len > RDMA_OUT_HIGH) {
        errno = s->closed ? EPIPE : ETIMEDOUT;
        return -1;
    }
    return (ssize_t)total;
}

static ssize_t rdma_recv(struct lmr_conn *conn, void *buf, size_t len)
{
    struct rdma_stream *s = conn->transport_state;
    if (!input_waiting(s))
        progress(s, -1); /* only then: a poll costs every reply some latency */
    if (s->in.len == 0 && s->nsegs == 0 && s->move.server_end && !s->closed)
        return lmr_rdma_move_finish(conn, &s->move);
    if (!input_waiting(s)) {
        if (s->closed)
            return 0;
        errno = EAGAIN;
        return -1;
    }
    struct value_seg *seg = s->nsegs > 0 ? &s->segs[s->seg_first] : NULL;
    if (seg != NULL && seg->at == s->in_read) {
        /* a value the server wrote into a caller's buffer: when that is
         * where it is wanted, there is nothing to copy */
        size_t n = len < seg->len ? len : seg->len;
        if (buf != seg->ptr)
            memmove(buf, seg->ptr, n);
        seg->at += n;
        seg->ptr += n;
        seg->len -= n;
        s->in_read += n;
        if (seg->len == 0) {
            s->seg_first = (s->seg_first + 1) % RDMA_VALUE_BUFS;
            s->nsegs--;
        }
        lmr_rdma_sync_signal(s);
        return (ssize_t)n;
    }
    size_t n = len;
    if (seg != NULL && n > seg->at - s->in_read)
        n = (size_t)(seg->at - s->in_read); /* up to the segment */
    n = mcr_rdma_bytes_take(&s->in, buf, n);
    s->in_read += n;
    lmr_rdma_sync_signal(s);
    return (ssize_t)n;
}

static int rdma_poll_fd(const struct lmr_conn *conn)
{
    return conn->fd;
}

static bool rdma_poll_input(struct lmr_conn *conn)
{
    struct rdma_stream *s = conn->transport_state;
    progress(s, -1);
    if (input_waiting(s))
        return true;
    lmr_rdma_advertise(s); /* nothing read yet: the server may wait for a landing buffer */
    return s->closed;
}

/* Before the pipeline sleeps on the descriptor: RDMA CM events, and the
 * completion queue armed so the next completion wakes the descriptor. */
static bool rdma_prepare_sleep(struct lmr_conn *conn)
{
    struct rdma_stream *s = conn->transport_state;
    mcr_rdma_ctx_set_polling(s->ctx, false);
    progress(s, 0);
    mcr_rdma_ctx_set_polling(s->ctx, true);
    return input_waiting(s) || s->closed;
}

/* Everything send took is with the server: nothing kept, the request
 * region read, every message acknowledged by the server's device. */
static bool sent_all(struct rdma_stream *s)
{
    if (s->out.len > 0 || s->src_busy)
        return false;
    struct mcr_rdma_ep_stats st;
    mcr_rdma_ep_stats(s->ep, &st);
    return st.sends_unfinished == 0;
}

/* Bytes send took that still need a call into the library to go out:
 * kept here, or waiting in the endpoint for credit. */
static bool held_back(struct rdma_stream *s, struct mcr_rdma_ep_stats *st)
{
    if (s->ep == NULL || s->closed)
        return false;
    mcr_rdma_ep_stats(s->ep, st);
    return s->out.len > 0 || st->sends_waiting > 0;
}

/* Waits for the server's credits to hand on what is held back. A server
 * that gave none back during a whole earlier wait (stopped, or too busy)
 * is not waited for again until messages move again (one of ours
 * completes, which takes a credit, or one of its arrives): its bytes stay
 * held, like a full socket buffer's, and the next call or the close's
 * drain sends them. */
static void rdma_push(struct lmr_conn *conn, int64_t *deadline_ms, int timeout_ms)
{
    struct rdma_stream *s = conn->transport_state;
    struct mcr_rdma_ep_stats st;
    if (!held_back(s, &st))
        return;
    if (s->push_stalled) { /* credits may have come back since: look first */
        progress(s, -1);
        if (!held_back(s, &st) || st.msgs_sent + st.msgs_received == s->stall_moved)
            return;
    }
    if (*deadline_ms < 0)
        *deadline_ms = lmr_rdma_now_ms() + timeout_ms;
    else if (lmr_rdma_now_ms() >= *deadline_ms)
        return; /* another server took the whole wait: not a stall of this one */
    s->push_stalled = false;
    do
        progress(s, 10);
    while (held_back(s, &st) && lmr_rdma_now_ms() < *deadline_ms);
    if (held_back(s, &st)) {
        s->push_stalled = true;
        s->stall_moved = st.msgs_sent + st.msgs_received;
    }
}

static void rdma_drain(struct lmr_conn *conn, int timeout_ms)
{
    struct rdma_stream *s = conn->transport_state;
    int64_t deadline = lmr_rdma_now_ms() + timeout_ms;
    while (s->ep != NULL && !s->closed && !sent_all(s) && lmr_rdma_now_ms() < deadline)
        progress(s, 1);
}

/* For a caller that polls with memcached_test: the landing buffer's next
 * advertisement, and connection events (the server went away), which
 * rdma_recv's fast path does not look at. Those cost a system call, so a
 * program polling in a tight loop pays it once every RDMA_EVENT_CHECK_POLLS
 * calls only. */
static void rdma_poll_events(struct lmr_conn *conn)
{
    struct rdma_stream *s = conn->transport_state;
    if (++s->event_polls % RDMA_EVENT_CHECK_POLLS == 0) {
        progress(s, 0); /* events, then the advertisement */
    } else {
        progress(s, -1);
        lmr_rdma_advertise(s);
    }
}

static bool rdma_switching(const struct lmr_conn *conn)
{
    const struct rdma_stream *s = conn->transport_state;
    return s->move.to != 0 && !s->closed;
}

/* Between two whole requests while a move is asked for: END, once, after
 * every byte taken (what waits in `out` goes first); then nothing more on
 * this connection. */
static bool rdma_hold_sends(struct lmr_conn *conn)
{
    struct rdma_stream *s = conn->transport_state;
    if (s->move.to == 0 || s->closed)
        return false;
    if (s->move.end_sent)
        return true;
    if (!lmr_rdma_flush_out(s) || s->closed)
        return false; /* the send that follows fails the server */
    if (s->out.len > 0) {
        progress(s, -1);
        return true; /* END goes at a later call */
    }
    static const unsigned char end = MCR_RDMA_CTL_END;
    int r = send_control(s, &end, 1);
    if (r == -EAGAIN) {
        progress(s, -1);
        return true;
    }
    if (r != 0)
        return false;
    s->move.end_sent = true;
    return true;
}

/* A reply awaited for a whole poll timeout: this connection's messages
 * acknowledged by the server's device ("sent"), not yet (posted, or
 * waiting for credit or for the device: "waiting"), the credits left,
 * the messages received, and a move under way. */
static void rdma_stall_why(struct lmr_conn *conn, char *buf, size_t len)
{
    struct rdma_stream *s = conn->transport_state;
    if (s->ep == NULL || s->closed) {
        snprintf(buf, len, "RDMA: the connection closed");
        return;
    }
    struct mcr_rdma_ep_stats st;
    mcr_rdma_ep_stats(s->ep, &st);
    snprintf(buf, len,
             "RDMA: %llu sent, %u unacknowledged (%u waiting, %u credits), %llu received%s%s",
             (unsigned long long)st.msgs_sent, st.sends_unfinished, st.sends_waiting,
             st.credits_left, (unsigned long long)st.msgs_received,
             s->move.to != 0 ? ", moving" : "", s->move.end_sent ? ", END sent" : "");
}

static void rdma_close(struct lmr_conn *conn)
{
    if (conn->transport_state != NULL)
        stream_free(conn->transport_state);
    conn->transport_state = NULL;
    conn->fd = -1;
    conn->ops = NULL;
}

const struct lmr_transport_ops lmr_transport_rdma = {
    .name = "rdma",
    .copies_on_send = true,
    .open = rdma_open,
    .send = rdma_send,
    .recv = rdma_recv,
    .poll_fd = rdma_poll_fd,
    .close = rdma_close,
    .poll_input = rdma_poll_input,
    .prepare_sleep = rdma_prepare_sleep,
    .offer_value_buffer = lmr_rdma_offer_value_buffer,
    .release_value_buffer = lmr_rdma_release_value_buffer,
    .poll_events = rdma_poll_events,
    .drain = rdma_drain,
    .push = rdma_push,
    .switching = rdma_switching,
    .hold_sends = rdma_hold_sends,
    .stall_why = rdma_stall_why,
};

#endif
