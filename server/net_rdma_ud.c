/*
 * net_rdma_ud.c: the daemon's UD clients (net_rdma_ud.h): one UD endpoint
 * context per listen address, all of its peers served by one worker thread
 * (the context is single-threaded, and the RDMA CM gives one listener per
 * address and port); each peer a conn over the byte stream its messages
 * carry, with the protocol engine -B selects, as over TCP and RC.
 *
 * The stream: every UD message a peer sends carries the next bytes of its
 * request stream (whole messages arrive in order; the reliability layer
 * segments them at the path MTU), and an empty message ends the stream
 * (the client closed). Replies are cut into messages of at most
 * UD_STREAM_MSG_MAX bytes. No rendezvous: a value of any size travels as
 * segmented messages.
 *
 * Life of a peer: the client's connect makes it (on_peer), a conn is made
 * over it; the client's empty message, or no answer for the dead timeout
 * (a killed client: the context probes peers silent for
 * -o rdma_ud_keepalive_ms, dead timeout as long), reads as end of stream and conn.c closes. A
 * conn that closes while its replies are unacknowledged keeps its peer
 * until they are (or the peer is dead), as a socket's kernel sends what
 * was written before close.
 *
 * Moves (rdma_transport=hybrid, net_rdma_move.h): a client that follows
 * the server's choice marks its peer movable with MCR_RDMA_UD_HELLO as its
 * first message; every later message either way then starts with an
 * enum mcr_rdma_ctl byte. A movable client whose rate reaches
 * -o rdma_promote_rate while an RC slot is free is sent MOVE (to RC); its
 * END mark is answered with ours once conn.c has answered everything
 * before it (ud_try_end), and the client then closes the peer and
 * connects over RC.
 */
#include "net_rdma_ud.h"

#ifdef HAVE_RDMA

#include <errno.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "log.h"
#include "mcr/rdma_wire.h"
#include "net_rdma_move.h"
#include "rdma/stream.h"
#include "rdma/ud_ep.h"
#include "settings.h"
#include "thread.h"

/* Largest message of reply bytes. */
#define UD_STREAM_MSG_MAX (64 * 1024)
/* Received and not yet read: beyond this a peer is closed (UD has no
 * pause; a client sends at most its send queue ahead of the replies). */
#define UD_INPUT_MAX (64u * 1024 * 1024)
/* Passes of one service call while work keeps coming (then the event loop
 * runs the worker's other events first). */
#define UD_SERVICE_PASSES 16
/* Spin and adaptive polling (-o rdma_poll): a pass polls the completion
 * queue at most this many times, and returns to the event loop as soon as
 * a poll handled something (the peers' conns run from there); adaptive
 * polling stops this long after the last completion. */
#define UD_SPIN_PASS_POLLS 512
#define UD_SPIN_YIELD_POLLS 1024
#define UD_ADAPTIVE_US 200
/* Connections are numbered from here (plus their serial) where connections
 * go by descriptor: above any descriptor, apart from RC's numbers. */
#define UD_CONN_NUMBER_BASE ((1 << 30) + (1 << 29))

struct ud_listen;

/* One peer and the conn over it. */
struct ud_conn {
    struct ud_conn *next, *prev; /* listener's list */
    /* on a list of conns that wait for a poll: a writer for room in the
     * peer's send queue, a lingering close for its replies' acks (the
     * list's head: ul->waiting, or ul->wait_todo while ud_after_poll runs) */
    struct ud_conn *wait_next, *wait_prev, **wait_head;
    struct ud_listen *ul;
    struct mcr_udep_peer *peer; /* NULL once dead */
    struct conn *conn;          /* NULL after close (lingering) */
    struct event *ready_ev;     /* reports readiness to conn.c */
    struct mcr_rdma_bytes in;   /* received, not yet read */
    bool ended;                 /* end of stream: the client closed, died or misbehaved */
    bool want_read, want_write;
    bool send_blocked; /* the peer's send queue was full */
    bool counted;
    uint64_t serial;
    char peer_name[56]; /* the client's address and port ("" unknown) */
    /* moves: the first message was seen; it was MCR_RDMA_UD_HELLO (the
     * messages carry an enum mcr_rdma_ctl byte); MOVE went, holding an RC
     * slot (slot_held, given back at close or after MOVE_SLOT_HOLD_MS);
     * the client's END came; ours went */
    bool hello_seen, movable, move_sent, slot_held, end_in, end_out;
    unsigned move_ticks; /* intervals since MOVE went */
    uint64_t msgs;       /* messages in the current interval */
};

/* An RC slot a MOVE claimed is given back after this long without the
 * client's END (a client that stopped calling the library). */
#define MOVE_SLOT_HOLD_MS 5000

struct ud_counters {
    uint64_t peers, retransmits, duplicates, malformed;
    uint64_t bytes_read, bytes_written; /* stream bytes, as conn.c counts them */
    uint64_t rejected;                  /* peers refused by on_peer (-c, no memory) */
};

struct ud_listen {
    struct ud_listen *next;
    struct mcr_udep_ctx *ctx;
    struct worker *w;
    struct event *cq_ev, *cm_ev, *timer_ev;
    struct event *move_ev; /* hybrid: every -o rdma_move_interval_ms */
    struct event *poll_ev; /* rdma_poll spin or adaptive: the next polling pass */
    bool polling;          /* passes poll the queue (it is not armed) */
    bool cq_unwatched;     /* polling: cq_ev is out of the event loop */
    unsigned empty_polls;  /* in a row, across passes */
    uint64_t last_busy_us; /* adaptive: the last pass that handled something */
    uint64_t timer_due_us; /* when timer_ev fires (mcr_udep_now_us; UINT64_MAX: not armed) */
    struct ud_conn *conns;
    struct ud_conn *waiting, *wait_todo; /* see struct ud_conn's wait_head */
    struct ud_counters ctr;              /* written by the worker, read by "stats" */
    char addr[64];
};

static struct ud_listen *ud_listens;

static unsigned ud_next_worker;

#define UD_CTR_SET(ul, field, v) __atomic_store_n(&(ul)->ctr.field, (v), __ATOMIC_RELAXED)
#define UD_CTR_ADD(ul, field, n) __atomic_add_fetch(&(ul)->ctr.field, (n), __ATOMIC_RELAXED)

/* ---- connections ------------------------------------------------------------------- */
static void ud_kick(struct ud_listen *ul);
static void ud_timer_follow(struct ud_listen *ul);
static void ud_try_end(struct ud_conn *uc);

static void wait_unlink(struct ud_conn *uc)
{
    if (!uc->wait_head)
        return;
    if (uc->wait_prev)
        uc->wait_prev->wait_next = uc->wait_next;
    else
        *uc->wait_head = uc->wait_next;
    if (uc->wait_next)
        uc->wait_next->wait_prev = uc->wait_prev;
    uc->wait_next = uc->wait_prev = NULL;
    uc->wait_head = NULL;
}

/* The conn waits for a poll (its writer for room, or its lingering close
 * for acks): ud_after_poll looks at it, not at every peer. */
static void wait_for_poll(struct ud_conn *uc)
{
    if (uc->wait_head)
        return;
    struct ud_listen *ul = uc->ul;
    uc->wait_prev = NULL;
    uc->wait_next = ul->waiting;
    if (ul->waiting)
        ul->waiting->wait_prev = uc;
    ul->waiting = uc;
    uc->wait_head = &ul->waiting;
}

/* The peer's send queue was full: the writer tries again after a poll. */
static void uconn_block(struct ud_conn *uc)
{
    uc->send_blocked = true;
    wait_for_poll(uc);
}

static void uconn_release_slot(struct ud_conn *uc)
{
    if (uc->slot_held) {
        uc->slot_held = false;
        rdma_move_release_slot();
    }
}

static void uconn_free(struct ud_conn *uc)
{
    struct ud_listen *ul = uc->ul;
    uconn_release_slot(uc);
    ud_kick(ul); /* a pass over the context refreshes the counters (rdma_ud_peers) */
    wait_unlink(uc);
    if (uc->prev)
        uc->prev->next = uc->next;
    else
        ul->conns = uc->next;
    if (uc->next)
        uc->next->prev = uc->prev;
    if (uc->peer)
        mcr_udep_peer_close(uc->peer);
    if (uc->ready_ev)
        event_free(uc->ready_ev);
    mcr_rdma_bytes_free(&uc->in);
    free(uc);
}

static void uconn_poke(struct ud_conn *uc)
{
    if (uc->ready_ev && uc->conn)
        event_active(uc->ready_ev, EV_READ, 0);
}

static void uconn_end(struct ud_conn *uc)
{
    uc->ended = true;
    uconn_poke(uc);
}

static void uconn_ready_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ud_conn *uc = arg;
    if (!uc->conn)
        return;
    bool readable = uc->want_read && (uc->in.len > 0 || uc->ended);
    bool writable = uc->want_write && (!uc->send_blocked || uc->ended);
    if (readable || writable)
        conn_on_ready(uc->conn, readable, writable);
}

/* ---- driving the context ---------------------------------------------------------------- */
static void refresh_counters(struct ud_listen *ul)
{
    struct mcr_udep_stats st;
    mcr_udep_stats(ul->ctx, &st);
    UD_CTR_SET(ul, peers, st.peers);
    UD_CTR_SET(ul, retransmits, st.retransmits);
    UD_CTR_SET(ul, duplicates, st.duplicates);
    UD_CTR_SET(ul, malformed,
               st.malformed + st.bad_grh + st.bad_length + st.bad_header + st.unknown_peer +
                   st.bad_source);
}

/* After a poll: lets writers that waited for room try again and frees
 * lingering peers that are done (those on the waiting list only: one that
 * is still waiting goes back on it). */
static void ud_after_poll(struct ud_listen *ul)
{
    if (!ul->waiting)
        return;
    ul->wait_todo = ul->waiting;
    ul->waiting = NULL;
    for (struct ud_conn *uc = ul->wait_todo; uc; uc = uc->wait_next)
        uc->wait_head = &ul->wait_todo;
    while (ul->wait_todo) {
        struct ud_conn *uc = ul->wait_todo;
        wait_unlink(uc);
        if (!uc->conn) {
            if (!uc->peer || mcr_udep_peer_idle(uc->peer))
                uconn_free(uc); /* a lingering close is done */
            else
                wait_for_poll(uc);
        } else if (uc->send_blocked) {
            uc->send_blocked = false;
            if (uc->want_write)
                uconn_poke(uc);
            ud_try_end(uc);
        }
    }
}

/* The completion channel's descriptor is watched only while the queue may
 * be armed: while passes poll it, an event the channel still got (the
 * queue was armed before polling began) would wake the loop at every
 * pass, since nothing reads it until the queue is armed again. */
static void ud_watch_cq(struct ud_listen *ul, bool watch)
{
    if (watch != ul->cq_unwatched || !ul->cq_ev)
        return;
    ul->cq_unwatched = !watch;
    if (watch)
        event_add(ul->cq_ev, NULL);
    else
        event_del(ul->cq_ev);
}

/* Spin and adaptive polling: whether the next pass polls (peers exist and,
 * adaptive, something came within UD_ADAPTIVE_US); schedules it. */
static bool ud_keep_polling(struct ud_listen *ul, int handled)
{
    if (settings.rdma_poll == 0 || !ul->poll_ev)
        return false;
    uint64_t now = settings.rdma_poll == 1 ? 0 : mcr_udep_now_us(); /* spin needs no clock */
    if (handled > 0)
        ul->last_busy_us = now;
    ul->polling =
        ul->conns != NULL && (settings.rdma_poll == 1 || now - ul->last_busy_us < UD_ADAPTIVE_US);
    ud_watch_cq(ul, !ul->polling);
    if (ul->polling) {
        /* a zero timeout, not event_active(): the conns made ready by this
         * pass run first */
        static const struct timeval next_pass = {0, 0};
        event_add(ul->poll_ev, &next_pass);
    }
    return ul->polling;
}

static void ud_service(struct ud_listen *ul);

/* After a poll of a polling pass that found completions. Never inlined:
 * with the completions' dispatch, the work of a poll that found something
 * (benchmarks/rdma-instructions counts it by this name, apart from the
 * idle polls). */
__attribute__((noinline)) static void ud_serve_polled(struct ud_listen *ul)
{
    ul->empty_polls = 0;
    ud_after_poll(ul);
    refresh_counters(ul);
}

/* One polling pass (rdma_poll spin or adaptive): completions and due
 * timers without a system call, back to the event loop at the first poll
 * that handled something or after UD_SPIN_PASS_POLLS. When polling stops
 * the queue is armed again (ud_service). */
static void ud_poll_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ud_listen *ul = arg;
    int handled = 0;
    for (unsigned polls = 0; polls < UD_SPIN_PASS_POLLS && handled == 0; polls++) {
        int n = mcr_udep_poll_cq(ul->ctx);
        if (n < 0) {
            log_msg(LOG_WARN, "rdma ud %s: polling failed: %s", ul->addr, strerror(-n));
            break;
        }
        handled = n;
        if (n == 0 && ++ul->empty_polls >= UD_SPIN_YIELD_POLLS) {
            ul->empty_polls = 0;
            sched_yield(); /* rxe does part of its work in kernel threads */
        }
    }
    if (handled > 0)
        ud_serve_polled(ul);
    else
        refresh_counters(ul); /* the timers may have retransmitted */
    if (!ud_keep_polling(ul, handled))
        ud_service(ul); /* arms the queue and the timer */
}

/* Handles what came (completions, CM events, timers), lets writers that
 * waited for room try again, frees lingering peers that are done, and
 * arms the context's descriptors and timer for the next wake-up (while
 * polling passes run instead: neither). */
static void ud_service(struct ud_listen *ul)
{
    int timeout_ms = -1;
    for (unsigned pass = 0;; pass++) {
        int n = mcr_udep_poll(ul->ctx, 0);
        if (n < 0)
            log_msg(LOG_WARN, "rdma ud %s: polling failed: %s", ul->addr, strerror(-n));
        ud_after_poll(ul);
        if (ul->polling || ud_keep_polling(ul, n)) {
            refresh_counters(ul);
            event_del(ul->timer_ev);
            ul->timer_due_us = UINT64_MAX;
            return;
        }
        int armed = mcr_udep_arm(ul->ctx, &timeout_ms);
        if (armed <= 0)
            break;
        if (pass + 1 >= UD_SERVICE_PASSES) {
            timeout_ms = 0; /* more work: come back after the other events */
            break;
        }
    }
    refresh_counters(ul);
    if (timeout_ms < 0) {
        event_del(ul->timer_ev);
        ul->timer_due_us = UINT64_MAX;
    } else {
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        event_add(ul->timer_ev, &tv);
        ul->timer_due_us = timeout_ms == 0 ? 0 : mcr_udep_next_deadline(ul->ctx);
    }
}

static void ud_event_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ud_service(arg);
}

/* After a send: the context's timers changed (a retransmission is due
 * later); re-arm them once the current callbacks are done (polling passes
 * look at the timers anyway). */
static void ud_kick(struct ud_listen *ul)
{
    static const struct timeval now = {0, 0};
    if (ul->timer_ev && !ul->polling) { /* NULL once detached from the worker (shutting down) */
        event_add(ul->timer_ev, &now);
        ul->timer_due_us = 0;
    }
}

/* After a reply: its retransmission timer may be due before the wake-up
 * timer_ev is armed for; if so, that timer is brought forward (no pass
 * over the context: the reply's completion, and the ack, come to one). */
static void ud_timer_follow(struct ud_listen *ul)
{
    if (!ul->timer_ev || ul->polling)
        return;
    uint64_t due = mcr_udep_next_deadline(ul->ctx);
    if (due >= ul->timer_due_us)
        return;
    uint64_t now = mcr_udep_now_us(), left = due > now ? due - now : 0;
    struct timeval tv = {(time_t)(left / 1000000u), (suseconds_t)(left % 1000000u)};
    event_add(ul->timer_ev, &tv);
    ul->timer_due_us = due;
}

static void ud_close(struct conn *c);

/* ---- moves ------------------------------------------------------------------------------ */
/* After the client's END: once conn.c has read and answered everything
 * before it (nothing unread, nothing parsed but unanswered, no reply
 * waiting), our END goes after those replies. Retried from ud_want and
 * ud_service. */
static void ud_try_end(struct ud_conn *uc)
{
    struct conn *c = uc->conn;
    if (!c || !uc->end_in || uc->end_out || uc->ended || !uc->peer || uc->in.len > 0)
        return;
    if (c->state != CONN_PARSE || c->rlen > 0 || c->resp_head || c->write_blocked)
        return;
    unsigned char end = MCR_RDMA_CTL_END;
    int rc = mcr_udep_send(uc->peer, &end, 1);
    if (rc == -EAGAIN) {
        uconn_block(uc);
        return;
    }
    if (rc != 0) {
        uconn_end(uc);
        return;
    }
    uc->end_out = true;
    rdma_move_done(true);
    ud_kick(uc->ul);
}

/* Every -o rdma_move_interval_ms: each movable client's rate, and MOVE
 * to those the policy promotes. */
static void ud_move_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ud_listen *ul = arg;
    unsigned interval = settings.rdma_move_interval_ms;
    for (struct ud_conn *uc = ul->conns; uc; uc = uc->next) {
        uint64_t rate = rdma_move_rate(uc->msgs, interval);
        uc->msgs = 0;
        if (uc->move_sent) {
            if (uc->slot_held && ++uc->move_ticks * (uint64_t)interval >= MOVE_SLOT_HOLD_MS)
                uconn_release_slot(uc);
            continue;
        }
        if (!uc->conn || !uc->movable || uc->ended || !uc->peer || !rdma_move_promote(rate))
            continue;
        unsigned char m[MCR_RDMA_MOVE_LEN] = {MCR_RDMA_CTL_MOVE, MCR_RDMA_MOVE_TO_RC};
        if (mcr_udep_send(uc->peer, m, sizeof(m)) != 0) {
            rdma_move_release_slot(); /* the next interval tries again */
            continue;
        }
        uc->move_sent = uc->slot_held = true;
        uc->move_ticks = 0;
        log_msg(LOG_CMDS, "<rdma+ud %s: %llu messages a second: asked to move to RC",
                uc->conn->peer_addr, (unsigned long long)rate);
    }
    ud_kick(ul);
}

/* ---- the context's callbacks (on the worker's thread, inside mcr_udep_poll) --------------- */
/* A client's connect request (and a peer just made, on_peer): -c refuses
 * it at once, so the client's connect fails with the refusal; counted in
 * rejected_connections and rdma_rejected_connections (as RC's). */
static bool admit(void *user)
{
    struct ud_listen *ul = user;
    if (stats_curr_conns() < (uint64_t)settings.maxconns)
        return true;
    stats_conn_rejected();
    UD_CTR_ADD(ul, rejected, 1);
    log_msg(LOG_WARN, "Too many open connections (RDMA UD peer refused)");
    return false;
}

static void on_peer(struct mcr_udep_peer *peer, void *user)
{
    struct ud_listen *ul = user;
    /* admitted, but the limit may have filled since (other workers'
     * connections): the peer is closed at once, and the client finds the
     * server silent */
    if (!admit(ul)) {
        mcr_udep_peer_close(peer);
        return;
    }
    struct ud_conn *uc = calloc(1, sizeof(*uc));
    if (uc)
        uc->ready_ev = event_new(ul->w->base, -1, 0, uconn_ready_cb, uc);
    if (!uc || !uc->ready_ev) {
        UD_CTR_ADD(ul, rejected, 1);
        log_msg(LOG_WARN, "rdma ud %s: out of memory for a new peer (refused)", ul->addr);
        free(uc);
        mcr_udep_peer_close(peer);
        return;
    }
    static uint64_t serials;
    uc->ul = ul;
    uc->peer = peer;
    uc->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    snprintf(uc->peer_name, sizeof(uc->peer_name), "%s", mcr_udep_peer_name(peer));
    uc->next = ul->conns;
    if (ul->conns)
        ul->conns->prev = uc;
    ul->conns = uc;
    mcr_udep_peer_set_user(peer, uc);
    uc->counted = true;
    stats_conn_opened();
    char listen_addr[80];
    snprintf(listen_addr, sizeof(listen_addr), "rdma+ud:%s", ul->addr);
    int number = UD_CONN_NUMBER_BASE + (int)(uc->serial % (1 << 29));
    /* conn_new calls describe, attach (which sets uc->conn) and want */
    if (!conn_new(ul->w, &net_rdma_ud_transport, number, uc, conn_engine_for_new(), listen_addr)) {
        struct conn tmp;
        memset(&tmp, 0, sizeof(tmp));
        tmp.tp_data = uc;
        uc->ended = true;
        ud_close(&tmp);
    }
}

static void on_message(struct mcr_udep_peer *peer, const void *msg, size_t len, void *user)
{
    (void)user;
    struct ud_conn *uc = mcr_udep_peer_user(peer);
    if (!uc || !uc->conn || uc->ended)
        return;
    if (len == 0) {
        uconn_end(uc); /* the client closed */
        return;
    }
    uc->msgs++;
    if (!uc->hello_seen) {
        uc->hello_seen = true;
        if (len == MCR_RDMA_UD_HELLO_LEN && memcmp(msg, MCR_RDMA_UD_HELLO, len) == 0) {
            uc->movable = true;
            return;
        }
    }
    if (uc->movable) {
        const unsigned char *m = msg;
        if (m[0] == MCR_RDMA_CTL_END && len == 1 && uc->move_sent && !uc->end_in) {
            uc->end_in = true;
            ud_try_end(uc);
            return;
        }
        if (m[0] != MCR_RDMA_CTL_DATA || len < 2 || uc->end_in) {
            log_msg(LOG_WARN, "<rdma+ud %s: unexpected control message (%u, %zu bytes), closing",
                    uc->conn->peer_addr, m[0], len);
            uconn_end(uc);
            return;
        }
        msg = m + 1;
        len--;
    }
    if (uc->in.len + len > UD_INPUT_MAX || !mcr_rdma_bytes_append(&uc->in, msg, len)) {
        log_msg(LOG_WARN, "<rdma+ud %s: %zu bytes of input unread, closing", uc->conn->peer_addr,
                uc->in.len);
        uconn_end(uc);
        return;
    }
    uconn_poke(uc);
}

static void on_dead(struct mcr_udep_peer *peer, int reason, void *user)
{
    (void)reason;
    (void)user;
    struct ud_conn *uc = mcr_udep_peer_user(peer);
    if (!uc)
        return;
    uc->peer = NULL; /* freed by the context when this returns */
    if (uc->conn) {
        log_msg(LOG_CMDS, "<rdma+ud %s: the client stopped answering", uc->conn->peer_addr);
        uconn_end(uc);
    } else {
        uconn_free(uc);
    }
}

static const struct mcr_udep_callbacks ud_callbacks = {
    .admit = admit,
    .on_peer = on_peer,
    .on_message = on_message,
    .on_dead = on_dead,
};

/* ---- transport table ------------------------------------------------------------------ */
static int ud_attach(struct conn *c, struct event_base *base)
{
    (void)base;
    struct ud_conn *uc = c->tp_data;
    uc->conn = c;
    return 0;
}

static ssize_t ud_recv(struct conn *c, void *buf, size_t len)
{
    struct ud_conn *uc = c->tp_data;
    if (uc->in.len == 0) {
        if (uc->ended)
            return 0;
        errno = EAGAIN;
        return -1;
    }
    size_t n = mcr_rdma_bytes_take(&uc->in, buf, len);
    UD_CTR_ADD(uc->ul, bytes_read, n);
    return (ssize_t)n;
}

/* mcr_rdma_stream_sink: one message of reply bytes to the peer. */
static ssize_t ud_sink(void *owner, const struct mcr_rdma_stream_out *out,
                       const struct iovec *msg_iov, int n, size_t msg_len, bool whole)
{
    (void)out;
    (void)whole;
    struct ud_conn *uc = owner;
    int rc;
    if (uc->movable) { /* DATA and the bytes */
        static const unsigned char data_mark = MCR_RDMA_CTL_DATA;
        struct iovec with_mark[MCR_RDMA_MSG_IOV_MAX + 1];
        with_mark[0] = (struct iovec){.iov_base = (void *)&data_mark, .iov_len = 1};
        memcpy(with_mark + 1, msg_iov, (size_t)n * sizeof(*msg_iov));
        rc = mcr_udep_sendv(uc->peer, with_mark, n + 1);
    } else {
        rc = mcr_udep_sendv(uc->peer, msg_iov, n); /* gathered into the send queue */
    }
    if (rc == -EAGAIN) {
        uconn_block(uc);
        return 0;
    }
    return rc == 0 ? (ssize_t)msg_len : -1;
}

static ssize_t ud_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
    struct ud_conn *uc = c->tp_data;
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (uc->ended || !uc->peer)
        return (ssize_t)total; /* no reader any more: dropped, as after a socket's FIN */
    bool failed = false;
    size_t sent = mcr_rdma_stream_push(iov, iovcnt, UD_STREAM_MSG_MAX - (uc->movable ? 1 : 0),
                                       ud_sink, uc, &failed);
    if (sent > 0) {
        UD_CTR_ADD(uc->ul, bytes_written, sent);
        ud_timer_follow(uc->ul);
    }
    if (failed) {
        uconn_end(uc);
        return sent > 0 ? (ssize_t)sent : (ssize_t)total;
    }
    if (sent == 0 && total > 0) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)sent;
}

static void ud_want(struct conn *c, bool readable, bool writable)
{
    struct ud_conn *uc = c->tp_data;
    uc->want_read = readable;
    uc->want_write = writable;
    if ((readable && (uc->in.len > 0 || uc->ended)) || (writable && !uc->send_blocked))
        uconn_poke(uc);
    ud_try_end(uc);
}

static void ud_close(struct conn *c)
{
    struct ud_conn *uc = c->tp_data;
    c->tp_data = NULL;
    if (!uc)
        return;
    uc->conn = NULL;
    uconn_release_slot(uc);
    if (uc->counted) {
        uc->counted = false;
        stats_conn_closed();
    }
    if (uc->ready_ev) {
        event_free(uc->ready_ev);
        uc->ready_ev = NULL;
    }
    mcr_rdma_bytes_free(&uc->in);
    /* replies not yet acknowledged keep the peer (ud_after_poll frees it) */
    if (uc->peer && !uc->ended && !mcr_udep_peer_idle(uc->peer)) {
        wait_for_poll(uc);
        ud_kick(uc->ul);
    } else
        uconn_free(uc);
}

static void ud_describe(struct conn *c, char *buf, size_t len)
{
    struct ud_conn *uc = c->tp_data;
    /* as a socket names its peer: the client's address, else the listener's */
    snprintf(buf, len, "rdma+ud:%s#%llu", uc->peer_name[0] ? uc->peer_name : uc->ul->addr,
             (unsigned long long)uc->serial);
}

const struct transport_ops net_rdma_ud_transport = {
    .name = "rdma+ud",
    .attach = ud_attach,
    .recv = ud_recv,
    .sendv = ud_sendv,
    .want = ud_want,
    .close = ud_close,
    .describe = ud_describe,
};

/* ---- opening and closing ------------------------------------------------------------------ */
/* On the worker's thread. */
static void ud_attach_worker(struct worker *w, void *arg)
{
    struct ud_listen *ul = arg;
    int fds[2];
    mcr_udep_fds(ul->ctx, fds);
    ul->cq_ev = event_new(w->base, fds[0], EV_READ | EV_PERSIST, ud_event_cb, ul);
    ul->cm_ev = event_new(w->base, fds[1], EV_READ | EV_PERSIST, ud_event_cb, ul);
    ul->timer_ev = event_new(w->base, -1, 0, ud_event_cb, ul);
    if (settings.rdma_poll != 0)
        ul->poll_ev = event_new(w->base, -1, 0, ud_poll_cb, ul);
    if (!ul->cq_ev || !ul->cm_ev || !ul->timer_ev || (settings.rdma_poll != 0 && !ul->poll_ev) ||
        event_add(ul->cq_ev, NULL) != 0 || event_add(ul->cm_ev, NULL) != 0) {
        log_msg(LOG_ALWAYS, "rdma ud %s: worker %u cannot watch its context", ul->addr, w->id);
        return;
    }
    if (rdma_move_enabled()) {
        unsigned ms = settings.rdma_move_interval_ms;
        struct timeval every = {ms / 1000, (ms % 1000) * 1000};
        ul->move_ev = event_new(w->base, -1, EV_PERSIST, ud_move_cb, ul);
        if (!ul->move_ev || event_add(ul->move_ev, &every) != 0)
            log_msg(LOG_ALWAYS, "rdma ud %s: no timer for moves to RC", ul->addr);
    }
    ud_service(ul);
}

static void ud_detach_worker(struct worker *w, void *arg)
{
    (void)w;
    struct ud_listen *ul = arg;
    struct event **evs[] = {&ul->move_ev, &ul->poll_ev, &ul->timer_ev, &ul->cm_ev, &ul->cq_ev};
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
        if (*evs[i]) {
            event_free(*evs[i]);
            *evs[i] = NULL;
        }
}

int net_rdma_ud_open(const char *host, uint16_t port)
{
    struct ud_listen *ul = calloc(1, sizeof(*ul));
    if (!ul)
        return 0;
    struct mcr_udep_opts o = {.addr = host};
    mcr_udep_opts_default(&o);
    o.port = port;
    o.max_peers = settings.maxconns < 65536 ? (uint32_t)settings.maxconns : 65536;
    o.max_msg = UD_STREAM_MSG_MAX; /* both ways: values of any size go as several */
    /* An idle client does not answer (it runs the layer only inside the
     * library): its peer is probed after this long silent and freed after
     * as long again unanswered, or once a reply stays unacknowledged this
     * long. The client library sets a peer up anew after 20 s unused. */
    o.keepalive_ms = settings.rdma_ud_keepalive_ms;
    o.dead_ms = settings.rdma_ud_keepalive_ms;
    char err[256] = "";
    ul->ctx = mcr_udep_open(&o, &ud_callbacks, ul, err, sizeof(err));
    if (!ul->ctx) {
        log_msg(LOG_ALWAYS, "RDMA UD unavailable for %s:%u: %s", host, port, err);
        free(ul);
        return 0;
    }
    snprintf(ul->addr, sizeof(ul->addr), "%s:%u", host, port);
    ul->w = worker_at(ud_next_worker++ % workers_count());
    ul->next = ud_listens;
    ud_listens = ul;
    if (worker_call(ul->w, ud_attach_worker, ul) != 0)
        log_msg(LOG_ALWAYS, "rdma ud %s: cannot reach its worker", ul->addr);
    struct mcr_udep_stats st;
    mcr_udep_stats(ul->ctx, &st);
    log_msg(LOG_WARN,
            "listening on rdma+ud:%s (UD, worker %u; path MTU %u; up to %u peers; messages of "
            "up to %u bytes; keepalive and dead timeout %u ms)",
            ul->addr, ul->w->id, st.mtu, o.max_peers, o.max_msg, o.keepalive_ms);
    if (o.test_drop_ppm || o.test_dup_ppm || o.test_delay_ppm)
        log_msg(LOG_ALWAYS,
                "rdma ud %s: testing a lossy network (MCR_UD_TEST_NETWORK): of a million "
                "datagrams received, %u dropped, %u duplicated, %u held back",
                ul->addr, o.test_drop_ppm, o.test_dup_ppm, o.test_delay_ppm);
    return 1;
}

void net_rdma_ud_close(void)
{
    for (struct ud_listen *ul = ud_listens; ul; ul = ul->next)
        if (worker_call(ul->w, ud_detach_worker, ul) != 0)
            log_msg(LOG_ALWAYS, "rdma ud %s: cannot reach its worker", ul->addr);
}

void net_rdma_ud_shutdown(void)
{
    while (ud_listens) {
        struct ud_listen *ul = ud_listens;
        ud_listens = ul->next;
        while (ul->conns) /* lingering peers (the workers closed their conns) */
            uconn_free(ul->conns);
        mcr_udep_close(ul->ctx);
        free(ul);
    }
}

/* The counters of every listener, summed (for "stats"). */
static void ud_sum(struct ud_counters *sum)
{
    memset(sum, 0, sizeof(*sum));
    for (struct ud_listen *ul = ud_listens; ul; ul = ul->next) {
#define S(f) sum->f += __atomic_load_n(&ul->ctr.f, __ATOMIC_RELAXED)
        S(peers);
        S(retransmits);
        S(duplicates);
        S(malformed);
        S(bytes_read);
        S(bytes_written);
        S(rejected);
#undef S
    }
}

void net_rdma_ud_totals(struct net_rdma_ud_totals *out)
{
    struct ud_counters sum;
    ud_sum(&sum);
    out->bytes_read = sum.bytes_read;
    out->bytes_written = sum.bytes_written;
    out->rejected = sum.rejected;
}

void net_rdma_ud_stats(stat_emit_fn emit, void *ctx)
{
    struct ud_counters sum;
    ud_sum(&sum);
    char buf[32];
    const struct {
        const char *name;
        uint64_t v;
    } lines[] = {{"rdma_ud_peers", sum.peers},
                 {"rdma_ud_retransmits", sum.retransmits},
                 {"rdma_ud_duplicates", sum.duplicates},
                 {"rdma_ud_malformed", sum.malformed}};
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lines[i].v);
        emit(ctx, lines[i].name, buf);
    }
}

#endif
