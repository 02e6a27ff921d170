/* transport_ud.c: the RDMA UD transport (rdma/ud_ep.h, made reliable per
 * peer by rdma/ud_reliable.c) for servers given as rdma+ud://host:port.
 *
 * One UD context (device, one UD queue pair, registered datagram buffers)
 * per memcached_st, shared by all its UD servers, each of which is one peer
 * of it; the context goes with the memcached_st (lmr_transport_ud_release).
 * The byte stream each way is the payloads of whole UD messages in order
 * (requests cut into messages of at most UD_STREAM_MSG_MAX bytes, values of
 * any size as several), an empty message ends it (sent when the connection
 * closes). No rendezvous: UD has no RDMA READ or WRITE.
 *
 * The descriptor the pipeline polls is one epoll set per context over its
 * completion channel, its RDMA CM channel and a timerfd armed for the
 * reliability layer's next timer (retransmission, ack), so a lost datagram
 * is sent again while the program sleeps in the pipeline. A server that
 * stops answering for the dead timeout (UD_DEAD_MS) reads as end of
 * stream: its requests complete with MEMCACHED_CONNECTION_FAILURE, and the
 * server's error says why (transport.h: why), as for every end here.
 *
 * An rdma:// connection (the endpoint's movable) marks its peer movable
 * with MCR_RDMA_UD_HELLO; its messages then carry an enum mcr_rdma_ctl
 * byte, and the server's MOVE moves it to RC (transport_rdma_move.h).
 */
#include "config.h"

#ifdef HAVE_RDMA

#include "transport_ud.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "mcr/iov_gather.h"
#include "mcr/rdma_wire.h"
#include "rdma/stream.h"
#include "rdma/ud_ep.h"
#include "rdma/ud_reliable.h"
#include "server.h"
#include "transport_rdma_move.h"

/* Largest message of request bytes (the server's largest for replies). */
#define UD_STREAM_MSG_MAX (64 * 1024)
/* A peer unused this long is set up again before its next request: the
 * server frees peers that do not answer its keepalive probes
 * (-o rdma_ud_keepalive_ms, 30 s by default), and an idle program does not
 * answer them. LIBMEMCACHED_RDMA_UD_IDLE_MS sets it. */
#define UD_IDLE_RECONNECT_MS 20000u
#define UD_CONNECT_TIMEOUT_MS 4000
/* Longest a send waits for room in the peer's send queue. */
#define UD_SEND_WAIT_MAX_MS 10000
/* A server that acknowledges nothing we sent for this long is dead (the
 * reliability layer's default, named here for the error it gives). */
#define UD_DEAD_MS 5000u

struct ud_stream;

/* The context of one memcached_st. */
struct lmr_ud_ctx {
    struct mcr_udep_ctx *ctx;
    int epfd, timerfd;
    struct ud_stream *streams; /* its open connections */
    unsigned idle_reconnect_ms;
    char scratch[UD_STREAM_MSG_MAX]; /* a message gathered from several pieces */
};

/* One server connection: a peer of the context. */
struct ud_stream {
    struct ud_stream *next, *prev;
    struct lmr_ud_ctx *u;
    struct mcr_udep_peer *peer; /* NULL once dead */
    struct lmr_conn *conn;      /* the pipeline's connection: why it ended goes to conn->why */
    struct mcr_rdma_bytes in;   /* received, not yet read */
    bool ended;                 /* end of stream: the server is gone */
    int64_t last_use_ms;
    char host[MEMCACHED_NI_MAXHOST];
    uint16_t port;
    int connect_timeout_ms;
    struct lmr_rdma_move move; /* move.movable: the messages carry a control byte */
};

static int64_t coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The stream ends (reads as end of stream) because of `why`. */
static void end_stream(struct ud_stream *s, const char *why)
{
    lmr_conn_note_why(s->conn, "RDMA UD: %s", why);
    s->ended = true;
}

static memcached_instance_st *instance_of_conn(struct lmr_conn *conn)
{
    return (memcached_instance_st *)((char *)conn - offsetof(memcached_instance_st, conn));
}

static struct lmr_client *client_of_conn(struct lmr_conn *conn)
{
    return instance_of_conn(conn)->client;
}

/* ---- the context's callbacks --------------------------------------------------------- */
static void on_message(struct mcr_udep_peer *peer, const void *msg, size_t len, void *user)
{
    (void)user;
    struct ud_stream *s = mcr_udep_peer_user(peer);
    if (s == NULL || s->ended)
        return;
    if (s->move.movable && len > 0) {
        const unsigned char *m = msg;
        if (m[0] == MCR_RDMA_CTL_MOVE && len == MCR_RDMA_MOVE_LEN && !s->move.server_end) {
            if (m[1] == MCR_RDMA_MOVE_TO_RC) /* the only move from UD */
                s->move.to = MCR_RDMA_MOVE_TO_RC;
            return;
        }
        if (m[0] == MCR_RDMA_CTL_END && len == 1 && s->move.end_sent) {
            s->move.server_end = true;
            return;
        }
        if (m[0] != MCR_RDMA_CTL_DATA || len < 2 || s->move.server_end) {
            end_stream(s, "unexpected message from the server");
            return;
        }
        msg = m + 1;
        len--;
    }
    if (len == 0)
        end_stream(s, "the server closed the connection");
    else if (!mcr_rdma_bytes_append(&s->in, msg, len))
        end_stream(s, "no memory for a received message");
}

/* reason is -ETIMEDOUT, the only one the layer gives */
static void on_dead(struct mcr_udep_peer *peer, int reason, void *user)
{
    (void)user;
    struct ud_stream *s = mcr_udep_peer_user(peer);
    if (s == NULL)
        return;
    s->peer = NULL; /* the context frees it */
    char why[96];
    snprintf(why, sizeof(why), "server silent for %u ms (nothing acknowledged: %s)", UD_DEAD_MS,
             strerror(-reason));
    end_stream(s, why);
}

static const struct mcr_udep_callbacks ud_callbacks = {.on_message = on_message,
                                                       .on_dead = on_dead};

/* ---- the context -------------------------------------------------------------------- */
static struct lmr_ud_ctx *ctx_open(const char *host, char *err, size_t errlen)
{
    struct lmr_ud_ctx *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    u->epfd = u->timerfd = -1;
    u->idle_reconnect_ms =
        lmr_env_unsigned("LIBMEMCACHED_RDMA_UD_IDLE_MS", 3600000u, UD_IDLE_RECONNECT_MS);
    struct mcr_udep_opts o = {.addr = host};
    mcr_udep_opts_default(&o);
    o.recv_bufs = 256;
    o.send_bufs = 128;
    o.max_peers = 1024;
    o.max_msg = UD_STREAM_MSG_MAX;
    o.dead_ms = UD_DEAD_MS;
    u->ctx = mcr_udep_open(&o, &ud_callbacks, u, err, errlen);
    if (u->ctx == NULL) {
        free(u);
        return NULL;
    }
    int fds[2];
    mcr_udep_fds(u->ctx, fds);
    u->epfd = epoll_create1(EPOLL_CLOEXEC);
    u->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event ev[3] = {{.events = EPOLLIN, .data.u32 = 0},
                                {.events = EPOLLIN, .data.u32 = 1},
                                {.events = EPOLLIN, .data.u32 = 2}};
    if (u->epfd < 0 || u->timerfd < 0 || epoll_ctl(u->epfd, EPOLL_CTL_ADD, fds[0], &ev[0]) != 0 ||
        epoll_ctl(u->epfd, EPOLL_CTL_ADD, fds[1], &ev[1]) != 0 ||
        epoll_ctl(u->epfd, EPOLL_CTL_ADD, u->timerfd, &ev[2]) != 0) {
        snprintf(err, errlen, "epoll: %s", strerror(errno));
        if (u->timerfd >= 0)
            close(u->timerfd);
        if (u->epfd >= 0)
            close(u->epfd);
        mcr_udep_close(u->ctx);
        free(u);
        return NULL;
    }
    return u;
}

void lmr_transport_ud_release(struct lmr_client *c)
{
    struct lmr_ud_ctx *u = c->ud;
    if (u == NULL)
        return;
    c->ud = NULL;
    close(u->timerfd);
    close(u->epfd);
    mcr_udep_close(u->ctx); /* its connections were closed before */
    free(u);
}

/* Handles what came: completions (messages, acks), CM events, due timers. */
static void progress(struct lmr_ud_ctx *u)
{
    mcr_udep_poll(u->ctx, 0);
}

/* The same without a system call (completions and timers only): for the
 * pipeline's polling loops. */
static void progress_quietly(struct lmr_ud_ctx *u)
{
    mcr_udep_poll_cq(u->ctx);
}

/* ---- transport ---------------------------------------------------------------------- */
static memcached_return_t connect_peer(struct ud_stream *s, int *sys_errno)
{
    char err[256] = "";
    s->peer =
        mcr_udep_connect(s->u->ctx, s->host, s->port, s->connect_timeout_ms, err, sizeof(err));
    if (s->peer == NULL) {
        *sys_errno = ECONNREFUSED;
        lmr_conn_note_why(s->conn, "RDMA UD: %s", err[0] != '\0' ? err : "connect failed");
        return MEMCACHED_CONNECTION_FAILURE;
    }
    mcr_udep_peer_set_user(s->peer, s);
    s->last_use_ms = coarse_ms();
    s->move.to = 0; /* a new peer: a move asked of the old one is void */
    s->move.end_sent = s->move.server_end = false;
    int hello;
    if (s->move.movable &&
        (hello = mcr_udep_send(s->peer, MCR_RDMA_UD_HELLO, MCR_RDMA_UD_HELLO_LEN)) != 0) {
        mcr_udep_peer_close(s->peer);
        s->peer = NULL;
        *sys_errno = ECONNRESET;
        lmr_conn_note_why(s->conn, "RDMA UD: sending HELLO failed: %s", strerror(-hello));
        return MEMCACHED_CONNECTION_FAILURE;
    }
    return MEMCACHED_SUCCESS;
}

static memcached_return_t ud_open(struct lmr_conn *conn, const struct lmr_endpoint *ep,
                                  int *sys_errno)
{
    struct lmr_client *c = client_of_conn(conn);
    *sys_errno = 0;
    conn->why[0] = '\0'; /* an RC try before (rdma://) is not why this one fails */
    if (ep->unix_socket || ep->port == 0 || ep->port > 65535) {
        *sys_errno = EINVAL;
        return MEMCACHED_CONNECTION_FAILURE;
    }
    char err[256] = "";
    if (c->ud == NULL && (c->ud = ctx_open(ep->hostname, err, sizeof(err))) == NULL) {
        *sys_errno = ENODEV;
        lmr_conn_note_why(conn, "RDMA UD: %s", err);
        return MEMCACHED_CONNECTION_FAILURE;
    }
    struct ud_stream *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    s->conn = conn;
    s->u = c->ud;
    snprintf(s->host, sizeof(s->host), "%s", ep->hostname);
    s->port = (uint16_t)ep->port;
    s->connect_timeout_ms =
        ep->connect_timeout_ms > 0 ? ep->connect_timeout_ms : UD_CONNECT_TIMEOUT_MS;
    lmr_rdma_move_init(&s->move, ep);
    memcached_return_t rc = connect_peer(s, sys_errno);
    if (rc != MEMCACHED_SUCCESS) {
        free(s);
        /* a context no connection uses goes (an rdma:// server that
         * refused RC may refuse UD too: nothing listens there) */
        if (c->ud->streams == NULL)
            lmr_transport_ud_release(c);
        return rc;
    }
    s->next = s->u->streams;
    if (s->next)
        s->next->prev = s;
    s->u->streams = s;
    conn->fd = -1;
    conn->ops = &lmr_transport_ud;
    conn->transport_state = s;
    conn->spin_us = lmr_env_unsigned("LIBMEMCACHED_RDMA_SPIN_US", LMR_SPIN_US_MAX, 200);
    return MEMCACHED_SUCCESS;
}

/* Ends the stream for the server (an empty message) and frees the peer. */
static void release_peer(struct ud_stream *s)
{
    if (s->peer == NULL)
        return;
    if (!s->ended)
        mcr_udep_send(s->peer, "", 0);
    mcr_udep_peer_close(s->peer);
    s->peer = NULL;
}

/* mcr_rdma_stream_sink: one message of request bytes. */
static ssize_t ud_sink(void *owner, const struct mcr_rdma_stream_out *out,
                       const struct iovec *msg_iov, int n, size_t msg_len, bool whole)
{
    (void)out;
    (void)whole;
    struct ud_stream *s = owner;
    const void *msg;
    size_t len = msg_len;
    if (s->move.movable) { /* DATA and the bytes */
        s->u->scratch[0] = MCR_RDMA_CTL_DATA;
        mcr_iov_gather(msg_iov, n, s->u->scratch + 1, msg_len);
        msg = s->u->scratch;
        len++;
    } else {
        msg = mcr_rdma_iov_flat(s->u->scratch, msg_iov, n);
    }
    int rc = mcr_udep_send(s->peer, msg, len);
    if (rc == -EAGAIN)
        return 0;
    if (rc != 0) {
        char why[96];
        snprintf(why, sizeof(why), "send failed: %s", strerror(-rc));
        end_stream(s, why);
        return -1;
    }
    return (ssize_t)msg_len;
}

static ssize_t ud_send(struct lmr_conn *conn, const struct iovec *iov, int iovcnt)
{
    struct ud_stream *s = conn->transport_state;
    if (s->ended || s->peer == NULL) {
        errno = ECONNRESET;
        return -1;
    }
    int64_t now = coarse_ms();
    s->last_use_ms = now;
    /* The descriptor polled cannot say "writable" (an epoll set signals
     * input only): with the peer's send queue full this waits here for
     * acks, bounded by the layer's dead timeout (then the server is gone). */
    bool failed = false;
    size_t sent = 0;
    int64_t give_up = now + UD_SEND_WAIT_MAX_MS;
    for (;;) {
        sent = mcr_rdma_stream_push(iov, iovcnt, UD_STREAM_MSG_MAX - (s->move.movable ? 1 : 0),
                                    ud_sink, s, &failed);
        if (sent > 0 || failed || coarse_ms() >= give_up)
            break;
        mcr_udep_poll(s->u->ctx, 10); /* acks make room */
        if (s->ended || s->peer == NULL)
            break;
    }
    s->last_use_ms = coarse_ms(); /* a wait for room is not idleness */
    if (failed || s->peer == NULL || s->ended) {
        errno = ECONNRESET;
        return -1;
    }
    if (sent == 0) {
        lmr_conn_note_why(conn, "RDMA UD: no room to send for %d ms", UD_SEND_WAIT_MAX_MS);
        errno = ETIMEDOUT;
        return -1;
    }
    return (ssize_t)sent;
}

static ssize_t ud_recv(struct lmr_conn *conn, void *buf, size_t len)
{
    struct ud_stream *s = conn->transport_state;
    if (s->in.len == 0)
        progress_quietly(s->u);
    if (s->in.len == 0) {
        if (s->move.server_end && !s->ended)
            return lmr_rdma_move_finish(conn, &s->move);
        if (s->ended)
            return 0;
        errno = EAGAIN;
        return -1;
    }
    s->last_use_ms = coarse_ms();
    return (ssize_t)mcr_rdma_bytes_take(&s->in, buf, len);
}

static int ud_poll_fd(const struct lmr_conn *conn)
{
    const struct ud_stream *s = conn->transport_state;
    return s->u->epfd;
}

static bool ud_poll_input(struct lmr_conn *conn)
{
    struct ud_stream *s = conn->transport_state;
    progress_quietly(s->u);
    return s->in.len > 0 || s->ended || s->move.server_end;
}

/* Before the pipeline sleeps: completion events armed, the timerfd set for
 * the next timer. True when any connection of the context has input (the
 * context's poll may have moved another server's reply) or work came. */
static bool ud_prepare_sleep(struct lmr_conn *conn)
{
    struct ud_stream *s = conn->transport_state;
    struct lmr_ud_ctx *u = s->u;
    progress(u);
    int timeout_ms = -1;
    int armed = mcr_udep_arm(u->ctx, &timeout_ms);
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (timeout_ms >= 0) {
        its.it_value.tv_sec = timeout_ms / 1000;
        its.it_value.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
        if (timeout_ms == 0)
            its.it_value.tv_nsec = 1; /* 0 would disarm it */
    }
    timerfd_settime(u->timerfd, 0, &its, NULL); /* also clears an expiry */
    bool ready = armed != 0;
    for (struct ud_stream *t = u->streams; t && !ready; t = t->next)
        ready = t->in.len > 0 || t->ended || t->move.server_end;
    return ready;
}

static void ud_poll_events(struct lmr_conn *conn)
{
    struct ud_stream *s = conn->transport_state;
    progress(s->u);
}

/* Waits until the server acknowledged everything sent (or the deadline). */
static void wait_idle(struct ud_stream *s, int64_t deadline_ms)
{
    while (s->peer != NULL && !s->ended && !mcr_udep_peer_idle(s->peer)) {
        int64_t left = deadline_ms - coarse_ms();
        if (left <= 0)
            break;
        mcr_udep_poll(s->u->ctx, left > 10 ? 10 : (int)left);
    }
}

static void ud_drain(struct lmr_conn *conn, int timeout_ms)
{
    struct ud_stream *s = conn->transport_state;
    wait_idle(s, coarse_ms() + (timeout_ms < 0 ? 0 : timeout_ms));
}

static void ud_push(struct lmr_conn *conn, int64_t *deadline_ms, int timeout_ms)
{
    struct ud_stream *s = conn->transport_state;
    if (s->peer == NULL || s->ended || mcr_udep_peer_idle(s->peer))
        return;
    if (*deadline_ms < 0)
        *deadline_ms = coarse_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    wait_idle(s, *deadline_ms);
}

/* Before a request, nothing awaited: the server may have freed a peer
 * this idle (its last reply unacknowledged: an idle program acks
 * nothing), so a new one starts, and the pipeline logs it in. Not while
 * something we sent is unacknowledged (a NOREPLY request whose push gave
 * up at the poll timeout): a new peer would drop it unsent; the peer we
 * have delivers it, or dies after its dead timeout and the request fails
 * as a lost connection. Not while moving: the move makes a new one. */
static bool ud_renew(struct lmr_conn *conn)
{
    struct ud_stream *s = conn->transport_state;
    if (s->ended || s->peer == NULL || s->move.to != 0 || s->in.len > 0 ||
        coarse_ms() - s->last_use_ms < (int64_t)s->u->idle_reconnect_ms ||
        !mcr_udep_peer_sent_all(s->peer))
        return false;
    int sys_errno;
    release_peer(s);
    if (connect_peer(s, &sys_errno) != MEMCACHED_SUCCESS)
        s->ended = true; /* connect_peer said why; the send that follows fails */
    return true;
}

static bool ud_switching(const struct lmr_conn *conn)
{
    const struct ud_stream *s = conn->transport_state;
    return s->move.to != 0 && !s->ended;
}

/* Between two whole requests while a move is asked for: END, once; then
 * nothing more goes on this peer. The END waits for room in the peer's
 * send queue as a send does. */
static bool ud_hold_sends(struct lmr_conn *conn)
{
    struct ud_stream *s = conn->transport_state;
    if (s->move.to == 0 || s->ended || s->peer == NULL)
        return false;
    if (s->move.end_sent)
        return true;
    unsigned char end = MCR_RDMA_CTL_END;
    int64_t give_up = coarse_ms() + UD_SEND_WAIT_MAX_MS;
    int rc;
    while ((rc = mcr_udep_send(s->peer, &end, 1)) == -EAGAIN && coarse_ms() < give_up &&
           !s->ended && s->peer != NULL)
        mcr_udep_poll(s->u->ctx, 10);
    if (rc != 0) {
        char why[96];
        snprintf(why, sizeof(why), "sending the move's END failed: %s", strerror(-rc));
        end_stream(s, why); /* reads as a lost connection */
        return false;
    }
    s->move.end_sent = true;
    return true;
}

/* What the peer's reliability layer knows of a silence, for the server's
 * timeout error. */
static void ud_stall_why(struct lmr_conn *conn, char *buf, size_t len)
{
    struct ud_stream *s = conn->transport_state;
    if (s->peer == NULL || s->ended) {
        snprintf(buf, len, "RDMA UD: the peer is gone");
        return;
    }
    const struct udr_stats *st = mcr_udep_peer_stats(s->peer);
    snprintf(
        buf, len,
        "RDMA UD: %llu sent (%s acknowledged, %llu resent), %llu received, %zu bytes unread%s%s%s",
        (unsigned long long)st->msgs_sent, mcr_udep_peer_sent_all(s->peer) ? "all" : "not all",
        (unsigned long long)st->retransmits, (unsigned long long)st->msgs_delivered, s->in.len,
        s->move.to != 0 ? ", moving" : "", s->move.end_sent ? ", END sent" : "",
        s->move.server_end ? ", server's END in" : "");
}

static void ud_close(struct lmr_conn *conn)
{
    struct ud_stream *s = conn->transport_state;
    if (s == NULL)
        return;
    conn->transport_state = NULL;
    conn->ops = NULL;
    release_peer(s);
    if (s->prev)
        s->prev->next = s->next;
    else
        s->u->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    mcr_rdma_bytes_free(&s->in);
    free(s);
}

const struct lmr_transport_ops lmr_transport_ud = {
    .name = "rdma+ud",
    .copies_on_send = true,
    .open = ud_open,
    .send = ud_send,
    .recv = ud_recv,
    .poll_fd = ud_poll_fd,
    .close = ud_close,
    .poll_input = ud_poll_input,
    .prepare_sleep = ud_prepare_sleep,
    .poll_events = ud_poll_events,
    .drain = ud_drain,
    .push = ud_push,
    .switching = ud_switching,
    .hold_sends = ud_hold_sends,
    .renew = ud_renew,
    .stall_why = ud_stall_why,
};

#endif
