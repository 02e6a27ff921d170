/*
 * net_rdma_conn.c: the life of one RDMA connection of the daemon: accepted
 * on a worker's context, made a conn (conn.c) with the protocol engine -B
 * selects (negotiated on the first byte by default, as over TCP),
 * readiness reported to conn.c from a per-connection libevent event (or
 * the worker's ready list), never from inside a substrate callback, so the
 * connection is never re-entered; failures, close, and the transport table
 * conn.c uses.
 *
 * Pinning: conn.c hands the transport the items it releases while closing
 * (adopt_item); while an RDMA READ into or WRITE from slab memory is in
 * flight the transport keeps them referenced until it completed or was
 * flushed, so item memory is never reused under a transfer.
 */
#include "net_rdma_conn.h"

#ifdef HAVE_RDMA

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "net_rdma_move.h"
#include "settings.h"
#include "stats.h"
#include "thread.h"

/* How soon a worker handles its context's events again while an endpoint
 * of it closes (rdma_watch_reaps). */
#define RDMA_REAP_CHECK_MS 100

/* RDMA connections have no descriptor: they are numbered from here (plus
 * their serial) where connections go by descriptor (log lines, watch,
 * "stats conns"), above any descriptor the process can have. */
#define RDMA_CONN_NUMBER_BASE (1 << 30)

/* RC connections accepted and not yet established (counted), all
 * workers: with them -o rdma_rc_max holds while several workers accept at
 * once (a connection is counted only once established). */
static uint64_t rc_accepting;

/* The connection no longer waits to be established: it is counted now, or
 * it never will be. */
static void accepting_done(struct rdma_conn *rc)
{
    if (rc->accepting) {
        rc->accepting = false;
        __atomic_sub_fetch(&rc_accepting, 1, __ATOMIC_RELAXED);
    }
}

/* ---- connection bookkeeping ------------------------------------------------------- */
void rconn_unlink_free(struct rdma_conn *rc)
{
    struct rdma_worker *rw = rc->rw;
    accepting_done(rc);
    if (rc->prev)
        rc->prev->next = rc->next;
    else
        rw->conns = rc->next;
    if (rc->next)
        rc->next->prev = rc->prev;
    if (rw->serving == rc)
        rw->serving = NULL;
    if (rc->ready_listed) {
        struct rdma_conn **at = &rw->ready;
        while (*at != rc)
            at = &(*at)->ready_next;
        *at = rc->ready_next;
    }
    if (rc->ready_ev)
        event_free(rc->ready_ev);
    mcr_rdma_region_deregister(&rc->stage_reg);
    free(rc->stage);
    mcr_rdma_region_deregister(&rc->rstage_reg);
    free(rc->rstage);
    for (unsigned i = 0; i < rc->nheld; i++)
        item_release(rc->held[i]);
    free(rc->held);
    mcr_rdma_bytes_free(&rc->in);
    free(rc);
}

/* Gives back the items kept for transfers once none is in flight. */
void rconn_release_held(struct rdma_conn *rc)
{
    if (rc->zr.inflight || rc->zw.pieces > 0)
        return;
    for (unsigned i = 0; i < rc->nheld; i++)
        item_release(rc->held[i]);
    rc->nheld = 0;
}

/* An endpoint closing or waiting for a deadline (a lingering close, a
 * departed client's messages not read yet) ends at a later reap: make sure
 * one comes soon, also to a worker that would sleep with nothing else to
 * wake it. */
void rdma_watch_reaps(struct rdma_worker *rw)
{
    static const struct timeval soon = {0, RDMA_REAP_CHECK_MS * 1000};
    if (rw->reap_ev && mcr_rdma_ctx_wants_reap(rw->ctx) && !evtimer_pending(rw->reap_ev, NULL))
        event_add(rw->reap_ev, &soon);
}

/* The client disconnected, and its endpoint delivers what it held or is
 * gone: output has no reader any more and is dropped, as a socket takes
 * writes after the peer's FIN, while the input it sent is still served
 * (a noreply store after a reply is not lost behind that reply). */
bool rconn_client_gone(const struct rdma_conn *rc)
{
    return rc->client_left || (rc->ep && mcr_rdma_ep_peer_left(rc->ep));
}

/* Reports readiness later: right after the completions being handled
 * (the worker's ready list), or else from the connection's own event. */
void rconn_poke(struct rdma_conn *rc)
{
    if (!rc->ready_ev || !rc->conn)
        return;
    struct rdma_worker *rw = rc->rw;
    if (!rw->collecting) {
        event_active(rc->ready_ev, EV_READ, 0);
    } else if (!rc->ready_listed) {
        rc->ready_listed = true;
        rc->ready_next = rw->ready;
        rw->ready = rc;
    }
}

/* A peer broke the protocol, or a transfer failed: close this connection
 * only (a client that left makes its transfers fail: no warning then). */
void rconn_fail(struct rdma_conn *rc, const char *why)
{
    log_msg(rconn_client_gone(rc) ? LOG_CMDS : LOG_WARN, "<rdma %s: %s, closing",
            rc->conn ? rc->conn->peer_addr : "?", why);
    rc->peer_gone = true;
    if (rc->ep)
        mcr_rdma_ep_abort(rc->ep);
    rconn_poke(rc);
}

void rconn_ready_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rdma_conn *rc = arg;
    if (!rc->conn)
        return;
    bool readable = rc->peer_gone || (rc->want_read && rconn_input_ready(rc));
    bool writable = rc->want_write && !rc->send_blocked;
    if (rc->peer_gone)
        writable = rc->want_write;
    if (readable || writable) {
        struct rdma_worker *rw = rc->rw;
        rw->serving = rc;
        conn_on_ready(rc->conn, readable, writable);
        if (rw->serving != rc)
            return; /* it closed, and rconn_unlink_free freed it */
        rw->serving = NULL;
    }
    if (rc->rdone_owed && !rc->rdone_pending)
        rconn_send_read_done(rc); /* no output carried it */
}

void rconn_count_stalls(struct rdma_conn *rc)
{
    if (!rc->ep)
        return;
    uint64_t stalls = mcr_rdma_ep_credit_stalls(rc->ep); /* no copy of the stats per send */
    if (stalls > rc->stalls_seen) {
        CTR_ADD(rc->rw, credit_stalls, stalls - rc->stalls_seen);
        rc->stalls_seen = stalls;
    }
}

static void rdma_close(struct conn *c);

static void on_connected(struct mcr_rdma_ep *ep, void *user)
{
    struct rdma_conn *rc = user;
    struct rdma_worker *rw = rc->rw;
    rc->ready_ev = event_new(rw->w->base, -1, 0, rconn_ready_cb, rc);
    if (!rc->ready_ev) {
        mcr_rdma_ep_abort(ep);
        return;
    }
    rc->counted = true;
    CTR_ADD(rw, curr_connections, 1);
    accepting_done(rc); /* after it counts: the two never both miss it */
    CTR_ADD(rw, total_connections, 1);
    stats_conn_opened();
    /* conn_new calls describe, attach (which sets rc->conn) and want */
    int number = RDMA_CONN_NUMBER_BASE + (int)(rc->serial % RDMA_CONN_NUMBER_BASE);
    if (!conn_new(rw->w, &net_rdma_transport, number, rc, conn_engine_for_new(), rc->listen_addr)) {
        struct conn tmp;
        memset(&tmp, 0, sizeof(tmp));
        tmp.tp_data = rc;
        rdma_close(&tmp);
    }
}

static void on_rdma_done(struct mcr_rdma_ep *ep, void *cookie, int status, void *user)
{
    (void)ep;
    struct rdma_conn *rc = user;
    if (cookie == &rc->rstage_reg || cookie == &rc->zr) {
        rconn_read_done(rc, cookie == &rc->zr, status);
        return;
    }
    if (cookie == &rc->zw) {
        rconn_zero_copy_write_done(rc, status);
        return;
    }
    rc->write_inflight = false; /* the staging buffer is ours again */
    if (status != 0 && !rconn_client_gone(rc)) {
        if (rc->conn && !rc->peer_gone)
            rconn_fail(rc, "rendezvous write failed");
        return;
    }
    if (rc->want_write) {
        rc->send_blocked = false;
        rconn_poke(rc);
    }
}

static void on_closed(struct mcr_rdma_ep *ep, int reason, const char *why, void *user)
{
    struct rdma_conn *rc = user;
    rc->ep = NULL;
    if (rc->conn) {
        struct mcr_rdma_ep_stats st;
        mcr_rdma_ep_stats(ep, &st);
        log_msg(LOG_CMDS, "<rdma %s: %s (%d); %llu messages received, %llu sent",
                rc->conn->peer_addr, why ? why : "closed", reason,
                (unsigned long long)st.msgs_received, (unsigned long long)st.msgs_sent);
        rc->peer_gone = true;
        rc->client_left = reason == -ECONNRESET;
        rconn_poke(rc); /* conn.c reads end of stream and closes */
        return;
    }
    rconn_unlink_free(rc);
}

static const struct mcr_rdma_ep_callbacks rconn_callbacks = {
    .on_connected = on_connected,
    .on_message = rconn_on_message,
    .on_rdma_done = on_rdma_done,
    .on_closed = on_closed,
};

static struct rdma_worker *worker_of_ctx(struct rdma_group *g, const struct mcr_rdma_ctx *ctx)
{
    for (unsigned i = 0; i < g->nworkers; i++)
        if (g->workers[i].ctx == ctx)
            return &g->workers[i];
    return NULL;
}

/* On the chosen worker's thread. */
int rdma_on_accept(struct mcr_rdma_listener *listener, struct mcr_rdma_ep *ep, void *user)
{
    (void)listener;
    struct rdma_listen *l = user;
    struct rdma_worker *rw = worker_of_ctx(l->group, ep->ctx);
    if (!rw) {
        log_msg(LOG_WARN, "RDMA connection refused: placed on a context no worker owns");
        return -1;
    }
    if (stats_curr_conns() >= (uint64_t)settings.maxconns) {
        stats_conn_rejected();
        log_msg(LOG_WARN, "Too many open connections (RDMA connection refused)");
        return -1;
    }
    uint64_t accepting = __atomic_add_fetch(&rc_accepting, 1, __ATOMIC_RELAXED);
    if (settings.rdma_rc_max > 0 && rdma_rc_conns() + accepting > settings.rdma_rc_max) {
        __atomic_sub_fetch(&rc_accepting, 1, __ATOMIC_RELAXED);
        log_msg(LOG_WARN, "RDMA RC connection refused: %u RC connections open (-o rdma_rc_max)%s",
                settings.rdma_rc_max,
                settings.rdma_transport & RDMA_SERVE_UD ? "; the client may use UD" : "");
        return -1;
    }
    struct rdma_conn *rc = calloc(1, sizeof(*rc));
    if (!rc) {
        __atomic_sub_fetch(&rc_accepting, 1, __ATOMIC_RELAXED);
        log_msg(LOG_WARN, "RDMA connection refused: no memory for the connection");
        return -1;
    }
    rc->accepting = true;
    static uint64_t serials;
    rc->rw = rw;
    rc->ep = ep;
    rc->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    snprintf(rc->listen_addr, sizeof(rc->listen_addr), "rdma:%s", l->addr);
    if (mcr_rdma_ep_peer_name(ep, rc->peer, sizeof(rc->peer)) != 0)
        rc->peer[0] = '\0';
    rc->next = rw->conns;
    if (rw->conns)
        rw->conns->prev = rc;
    rw->conns = rc;
    mcr_rdma_ep_set_callbacks(ep, &rconn_callbacks, rc);
    return 0;
}

/* On the thread of the context that refused it. */
void rdma_refused(struct mcr_rdma_listener *listener, const char *peer, int err, const char *why,
                  void *user)
{
    (void)listener;
    struct rdma_listen *l = user;
    log_msg(LOG_WARN, "RDMA connection request from %s to rdma:%s refused: %s (%s)",
            peer[0] ? peer : "an unknown address", l->addr, why, strerror(-err));
}

/* On the listener's thread. */
struct mcr_rdma_ctx *rdma_place(struct mcr_rdma_listener *listener, void *user)
{
    (void)listener;
    struct rdma_listen *l = user;
    struct rdma_group *g = l->group;
    unsigned i = __atomic_fetch_add(&g->next_worker, 1, __ATOMIC_RELAXED) % g->nworkers;
    /* in turn, skipping workers without room for another connection's
     * credits (sized by -o rdma_rc_max: rc_conns_per_worker) */
    for (unsigned k = 0; k < g->nworkers; k++) {
        struct mcr_rdma_ctx *ctx = g->workers[(i + k) % g->nworkers].ctx;
        if (mcr_rdma_ctx_credits_left(ctx) >= mcr_rdma_ctx_options(ctx)->credits)
            return ctx;
    }
    return g->workers[i].ctx; /* all full: the substrate refuses it */
}

/* ---- transport table ------------------------------------------------------------------ */
static int rdma_attach(struct conn *c, struct event_base *base)
{
    (void)base;
    struct rdma_conn *rc = c->tp_data;
    rc->conn = c;
    return 0;
}

static void rdma_want(struct conn *c, bool readable, bool writable)
{
    struct rdma_conn *rc = c->tp_data;
    rc->want_read = readable;
    rc->want_write = writable;
    if ((readable && (rconn_input_ready(rc) || rc->peer_gone)) || (writable && !rc->send_blocked))
        rconn_poke(rc);
    if (rc->end_in && !rc->end_out)
        rconn_try_end(rc);
}

/* Every -o rdma_move_interval_ms (hybrid): the client's rate, and MOVE to
 * UD when the policy demotes it (net_rdma_move.h). */
void rconn_move_tick(struct rdma_conn *rc, unsigned interval_ms)
{
    uint64_t rate = rdma_move_rate(rc->msgs, interval_ms);
    rc->msgs = 0;
    /* moved: the client's disconnect is overdue (RDMA_MOVE_END_GRACE_MS) */
    if (rc->end_out && rc->conn && rc->ep && !rc->peer_gone &&
        ++rc->end_ticks * (uint64_t)interval_ms >= RDMA_MOVE_END_GRACE_MS) {
        rconn_fail(rc, "still connected after the move to UD ended");
        return;
    }
    if (!rc->conn || !rc->movable || rc->move_sent || !rc->ep || rc->peer_gone ||
        rconn_client_gone(rc) || !rdma_move_demote(rate))
        return;
    unsigned char m[MCR_RDMA_MOVE_LEN] = {MCR_RDMA_CTL_MOVE, MCR_RDMA_MOVE_TO_UD};
    if (rconn_send_control(rc, m, sizeof(m)) != 0)
        return; /* the next interval tries again */
    rc->move_sent = true;
    log_msg(LOG_CMDS, "<rdma %s: %llu messages a second: asked to move to UD", rc->conn->peer_addr,
            (unsigned long long)rate);
}

/* conn.c closes while an RDMA READ into or WRITE from slab memory may be
 * in flight: keep the item it releases until the transfers ended. */
static bool rdma_adopt_item(struct conn *c, item *it)
{
    struct rdma_conn *rc = c->tp_data;
    if (!rc || (!rc->zr.inflight && rc->zw.pieces == 0))
        return false;
    if (rc->nheld == rc->held_cap) {
        unsigned cap = rc->held_cap ? rc->held_cap * 2 : 8;
        item **grown = realloc(rc->held, cap * sizeof(*grown));
        if (!grown) {
            /* the transfer must not outlive the item, and there is no room
             * to note it for release: its reference is kept for good */
            log_msg(LOG_WARN,
                    "<rdma %s: out of memory keeping an item during a transfer; its memory "
                    "stays allocated",
                    c->peer_addr);
            return true;
        }
        rc->held = grown;
        rc->held_cap = cap;
    }
    rc->held[rc->nheld++] = it;
    return true;
}

static void rdma_close(struct conn *c)
{
    struct rdma_conn *rc = c->tp_data;
    c->tp_data = NULL;
    if (!rc)
        return;
    rc->conn = NULL;
    if (rc->ready_ev) {
        event_free(rc->ready_ev);
        rc->ready_ev = NULL;
    }
    if (rc->counted) {
        rc->counted = false;
        CTR_SUB(rc->rw, curr_connections, 1);
        stats_conn_closed();
    }
    /* the client's regions need no ending any more: the connection ends */
    rc->rdone_owed = rc->rdone_pending = rc->done_pending = false;
    if (rc->ep) {
        rconn_count_stalls(rc);
        struct rdma_worker *rw = rc->rw;
        mcr_rdma_ep_close(rc->ep); /* on_closed frees rc */
        rdma_watch_reaps(rw);
    } else {
        rconn_unlink_free(rc);
    }
}

static void rdma_describe(struct conn *c, char *buf, size_t len)
{
    struct rdma_conn *rc = c->tp_data;
    /* the client's address, as a socket's peer; the serial tells apart
     * clients that share one */
    snprintf(buf, len, "rdma:%s#%llu", rc->peer[0] ? rc->peer : rc->listen_addr + 5,
             (unsigned long long)rc->serial);
}

const struct transport_ops net_rdma_transport = {
    .name = "rdma",
    .attach = rdma_attach,
    .recv = rconn_recv,
    .sendv = rconn_sendv,
    .want = rdma_want,
    .close = rdma_close,
    .adopt_item = rdma_adopt_item,
    .describe = rdma_describe,
};

#endif
