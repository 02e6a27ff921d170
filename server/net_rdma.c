/*
 * net_rdma.c: clients over RDMA reliable connections (rdma/ substrate).
 *
 * Listeners (-o rdma_listen=ADDR:PORT, repeatable) live on a small context
 * of their own, driven by the main event base; each one spreads connection
 * requests over one context per worker thread (for the listener's device),
 * whose single descriptor is watched by that worker's event base. An
 * accepted endpoint becomes a conn (conn.c) on its worker with the binary
 * protocol engine fixed.
 *
 * Byte stream over messages: the payloads of eager messages, in order, form
 * the connection's input stream (memcached binary-protocol frames), and
 * replies are cut into eager messages of at most the endpoint's eager
 * payload. conn.c and proto_bin.c therefore serve RDMA connections
 * unchanged. Received payloads are copied out of the receive buffer (which
 * goes back to the shared receive queue) into a per-connection input
 * buffer; when that holds more than RDMA_INPUT_HIGH bytes the endpoint is
 * paused, so the peer stops at its credits. Readiness is reported to
 * conn.c from a per-connection libevent event, never from inside a
 * substrate callback, so the connection is never re-entered.
 *
 * Rendezvous for output: a client may advertise a landing buffer with an
 * RNDV_WRITE message (one at a time, 4 KiB .. 16 MiB). Output larger than
 * one message then goes by RDMA WRITE, followed by an eager RNDV_DONE
 * message whose payload is the 4-byte count of bytes written; RC ordering
 * puts the data in place before that message. A value in slab memory
 * (registered once, local access only: net_rdma_mem.c) is written straight
 * from the item; the bytes before it (reply header, extras, key) ride on
 * the RNDV_DONE after the count when they are few (RDMA_DONE_HEAD_MAX),
 * else go first as eager messages; its bytes count as sent, and conn.c
 * releases the item, only once the WRITE completed. Other output is copied
 * into a per-connection staging buffer (local access only: nothing of the
 * server is ever remotely accessible) and written from there. Until the
 * client advertises again, large output waits. A landing buffer out of
 * bounds, a second one while one is held, a failed WRITE (a bad rkey) or an
 * RNDV_DONE or READ_DONE from the client close that connection only.
 *
 * Value buffers: a client may also advertise a region for the value of
 * one GET reply (RNDV_WRITE with MCR_RDMA_F_VALUE, request_id = the
 * request's opaque: a caller's iget buffer). When that reply's value is in
 * slab memory and fits, it is written straight from the item into that
 * region instead of the landing buffer, and the RNDV_DONE carries
 * MCR_RDMA_F_VALUE and the opaque (net_rdma_vbuf.c matches values to
 * replies); the value is then copied on neither side.
 *
 * Rendezvous for input: an RNDV_READ message advertises the next bytes of
 * the client's request stream; the endpoint is paused (later messages wait
 * in their receive buffers, keeping the order) and the region is pulled as
 * conn.c asks for bytes: straight into the buffer it offers when that is
 * registered slab memory (an item's value), else through a local-only
 * staging buffer into the input. Once all of it was pulled, an EAGER
 * message with READ_DONE frees the client's region: the first message of
 * output that follows in the same pass (usually the set's reply) carries
 * it, else one of its own goes when the connection has been served
 * (doc/rdma.md).
 *
 * Pinning: conn.c hands the transport the items it releases while closing
 * (adopt_item); while an RDMA READ into or WRITE from slab memory is in
 * flight the transport keeps them referenced until it completed or was
 * flushed, so item memory is never reused under a transfer.
 */
#include "net_rdma.h"

#include "config.h"

#include <stdio.h>

#include "log.h"
#include "settings.h"

#ifndef HAVE_RDMA

const struct transport_ops net_rdma_transport = {.name = "rdma"};

int net_rdma_open(struct event_base *base)
{
    (void)base;
    if (settings.rdma_listen)
        log_msg(LOG_ALWAYS,
                "RDMA disabled: built without rdma-core (-o rdma_listen=%s ignored); "
                "serving TCP only",
                settings.rdma_listen);
    return 0;
}

void net_rdma_close(void) {}

void net_rdma_shutdown(void) {}

#else

#include <errno.h>
#include <event2/event.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "items.h"
#include "net_rdma_mem.h"
#include "net_rdma_vbuf.h"
#include "rdma/ctx.h"
#include "rdma/mr.h"
#include "rdma/iov_cut.h"
#include "rdma/rc.h"
#include "stats.h"
#include "thread.h"

/* How soon a worker handles its context's events again while an endpoint
 * of it closes (watch_reaps). */
#define RDMA_REAP_CHECK_MS 100
/* RDMA connections have no descriptor: they are numbered from here (plus
 * their serial) where connections go by descriptor (log lines, watch,
 * "stats conns"), above any descriptor the process can have. */
#define RDMA_CONN_NUMBER_BASE (1 << 30)
/* Input buffered per connection before the endpoint is paused. */
#define RDMA_INPUT_HIGH (256 * 1024)
/* Adaptive polling keeps polling this long after the last completion. */
#define RDMA_ADAPTIVE_US 200
/* A polling pass polls the completion queue at most this many times and
 * serves at most RDMA_SPIN_PASS_COMPLETIONS completions before it returns
 * to the event loop (counted, not timed: where the clock is an emulated
 * device, a virtual machine's HPET, each read is a system call that costs
 * as much as dozens of polls, and a completion arriving during it waits).
 * About 20-40 us on hardware, a few hundred in the emulated test guest:
 * the longest a socket on a spinning worker waits for its turn. */
#define RDMA_SPIN_PASS_POLLS 512
#define RDMA_SPIN_PASS_COMPLETIONS 64
/* A spinning worker offers the processor to other threads after this many
 * empty polls in a row: rarely, because on an emulated device every system
 * call between two doorbells makes the next one slower. A worker that may
 * run on one processor only offers it far more often: there a yield is
 * how a client on the same machine gets to run, and the scheduler ignores
 * the yield of a thread that is owed much time, which long spins build up
 * (a spinning client and server on one processor: 4.4 ms a get, against
 * 0.4 ms with frequent yields). */
#define RDMA_SPIN_YIELD_POLLS 1024
#define RDMA_SPIN_YIELD_POLLS_ONE_CPU 64
/* Largest landing buffer a client may advertise for RDMA WRITEs. */
#define RDMA_LAND_MAX (16u * 1024 * 1024)
/* Output bytes ahead of a value (a reply's header and flags, or its key)
 * that ride on the value's RNDV_DONE instead of a message of their own. */
#define RDMA_DONE_HEAD_MAX 512
/* Staging buffer for region bytes that do not go straight into a value. */
#define RDMA_RSTAGE_SIZE (1024u * 1024)
/* The first staged READ of a region: enough for a request's header,
 * extras and key, so that a value behind them goes straight to its item. */
#define RDMA_RPEEK 1024u

struct rdma_worker;

/* Counters written by one worker only (same rule as stats.h). */
struct rdma_counters {
    uint64_t curr_connections;
    uint64_t total_connections;
    uint64_t bytes_read;
    uint64_t bytes_written;
    uint64_t eager_msgs;
    uint64_t rendezvous_reads;
    uint64_t rendezvous_writes;
    uint64_t zero_copy_reads;
    uint64_t zero_copy_writes;
    uint64_t value_buffer_writes;
    uint64_t credit_stalls;
    uint64_t doorbells;     /* posts to the send queues */
    uint64_t work_requests; /* work requests they carried */
};

/* One RDMA connection: the endpoint and the conn over it. Freed when both
 * the conn has closed its transport and the endpoint is gone. */
struct rdma_conn {
    struct rdma_conn *next, *prev; /* worker's list */
    struct rdma_worker *rw;
    struct mcr_rdma_ep *ep;       /* NULL once the substrate freed it */
    struct conn *conn;            /* NULL before established and after close */
    struct event *ready_ev;       /* reports readiness to conn.c */
    struct rdma_conn *ready_next; /* worker's ready list (ready_listed) */
    bool ready_listed;
    char *in; /* received bytes in[in_off, in_off+in_len) */
    size_t in_off, in_len, in_cap;
    uint64_t stalls_seen; /* endpoint's credit_stalls already counted */
    bool peer_gone;
    bool client_left; /* the client disconnected (not a failure): see client_gone */
    bool want_read, want_write;
    bool send_blocked; /* no send buffer was free */
    bool paused;
    bool counted; /* in curr_connections */
    /* Rendezvous for output (RDMA WRITE): the landing buffer the client
     * advertised with RNDV_WRITE (one at a time), our local-only staging
     * buffer the WRITE is sent from, and a RNDV_DONE that waits for a send
     * buffer (nothing else may go out before it). */
    struct mcr_rdma_rndv land;
    uint32_t land_id;
    bool land_valid, land_ever, write_inflight, done_pending;
    /* the RNDV_DONE to send: count, request id, flags, and the output
     * bytes that come before the written ones */
    uint32_t done_len, done_id;
    uint16_t done_flags;
    uint16_t done_head_len;
    unsigned char done_head[RDMA_DONE_HEAD_MAX];
    /* Regions advertised for the value of one GET reply each. */
    struct rdma_vbufs vbufs;
    char *stage;
    struct mcr_rdma_region stage_reg;
    /* Rendezvous for input (RDMA READ): the region of an RNDV_READ, pulled
     * piecewise as conn.c asks for bytes (rsrc_off: asked so far), the
     * endpoint paused until all of it is in (READ_DONE is then owed). A
     * piece goes straight into conn.c's buffer when that is registered
     * slab memory (zr), else into rstage (local-only) and the input. */
    struct mcr_rdma_rndv rsrc;
    uint32_t rsrc_id;
    uint32_t rsrc_off;
    bool rsrc_active; /* advertised and not yet given back */
    bool rsrc_peeked; /* its first staged READ was made */
    bool read_inflight;
    /* READ_DONE for the pulled region: owed (rides on the next output
     * message, or goes alone once the connection has been served), and
     * pending when no send buffer was free for it */
    bool rdone_owed, rdone_pending;
    uint32_t rdone_id;
    uint32_t rstage_len; /* bytes of the staged READ */
    char *rstage;
    struct mcr_rdma_region rstage_reg;
    struct {
        char *buf; /* conn.c's buffer (item memory) */
        uint32_t len;
        bool inflight, ready; /* ready: in place, not yet returned by recv */
    } zr;
    /* Zero-copy output: RDMA WRITEs straight from slab memory into the
     * landing buffer (one per value segment); their bytes are reported
     * sent when conn.c offers the same output again after completion. */
    struct {
        const void *base; /* first byte written */
        uint32_t len;
        unsigned pieces; /* WRITEs in flight */
        bool failed, ready;
    } zw;
    /* Items conn.c released while closing during a transfer (adopt_item). */
    item **held;
    unsigned nheld, held_cap;
    uint64_t serial; /* names the connection in "stats conns" */
    char listen_addr[80];
    char peer[72]; /* the client's address, "host:port" ("" when unknown) */
};

struct rdma_worker {
    struct worker *w;
    struct mcr_rdma_ctx *ctx;
    unsigned mem_slot;     /* its protection domain in net_rdma_mem.c */
    struct event *ctx_ev;  /* the context's descriptor */
    struct event *poll_ev; /* spin / adaptive polling */
    struct event *reap_ev; /* comes back while endpoints close (watch_reaps) */
    uint64_t last_busy_us;
    unsigned empty_polls; /* polls in a row that found nothing, across passes */
    unsigned yield_polls; /* empty polls in a row before a yield */
    bool polling;         /* the context's completions raise no events */
    /* While the worker handles completions, connections they made ready
     * are listed here and served right after (dispatch_ready) instead of
     * through their events: one pass of the event loop less per request. */
    bool collecting;
    struct rdma_conn *ready;
    struct rdma_conn *conns;
    struct rdma_conn *serving; /* inside conn_on_ready; cleared if freed there */
    struct rdma_counters ctr;
    uint64_t doorbells_seen, work_requests_seen; /* context's, already in ctr */
};

/* Worker contexts on one device, shared by the listeners on it. */
struct rdma_group {
    struct rdma_group *next;
    char device[64];
    struct rdma_worker *workers;
    unsigned nworkers;
    unsigned next_worker;
};

struct rdma_listen {
    struct rdma_listen *next;
    struct mcr_rdma_ctx *ctx; /* the listener's own context */
    struct event *ev;
    struct mcr_rdma_listener *listener;
    struct rdma_group *group;
    char addr[64];
};

static struct rdma_group *groups;
static struct rdma_listen *listens;
static unsigned mem_slots; /* worker contexts created */

#define CTR_ADD(rw, field, n)                                                                      \
    __atomic_store_n(&(rw)->ctr.field, __atomic_load_n(&(rw)->ctr.field, __ATOMIC_RELAXED) + (n),  \
                     __ATOMIC_RELAXED)
#define CTR_SUB(rw, field, n)                                                                      \
    __atomic_store_n(&(rw)->ctr.field, __atomic_load_n(&(rw)->ctr.field, __ATOMIC_RELAXED) - (n),  \
                     __ATOMIC_RELAXED)

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- connection bookkeeping ------------------------------------------------------- */
static void rconn_unlink_free(struct rdma_conn *rc)
{
    struct rdma_worker *rw = rc->rw;
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
    free(rc->in);
    free(rc);
}

/* Gives back the items kept for transfers once none is in flight. */
static void release_held(struct rdma_conn *rc)
{
    if (rc->zr.inflight || rc->zw.pieces > 0)
        return;
    for (unsigned i = 0; i < rc->nheld; i++)
        item_release(rc->held[i]);
    rc->nheld = 0;
}

/* Region bytes not yet asked for. */
static bool rsrc_unread(const struct rdma_conn *rc)
{
    return rc->rsrc_active && rc->rsrc_off < rc->rsrc.len;
}

/* A recv now would return bytes or start pulling some. */
static bool input_ready(const struct rdma_conn *rc)
{
    return rc->in_len > 0 || rc->zr.ready ||
           (rsrc_unread(rc) && !rc->read_inflight && !rc->zr.inflight);
}

/* An endpoint closing or waiting for a deadline (a lingering close, a
 * departed client's messages not read yet) ends at a later reap: make sure
 * one comes soon, also to a worker that would sleep with nothing else to
 * wake it. */
static void watch_reaps(struct rdma_worker *rw)
{
    static const struct timeval soon = {0, RDMA_REAP_CHECK_MS * 1000};
    if (rw->reap_ev && mcr_rdma_ctx_wants_reap(rw->ctx) && !evtimer_pending(rw->reap_ev, NULL))
        event_add(rw->reap_ev, &soon);
}

/* The client disconnected, and its endpoint delivers what it held or is
 * gone: output has no reader any more and is dropped, as a socket takes
 * writes after the peer's FIN, while the input it sent is still served
 * (a noreply store after a reply is not lost behind that reply). */
static bool client_gone(const struct rdma_conn *rc)
{
    return rc->client_left || (rc->ep && mcr_rdma_ep_peer_left(rc->ep));
}

/* The endpoint holds the client's later messages while the input is full,
 * while a region is pulled, and until the pulled region's READ_DONE has
 * gone (so the next region cannot end before it, and one READ_DONE is
 * owed at a time). */
static bool messages_held(const struct rdma_conn *rc)
{
    return rc->paused || rc->rsrc_active || rc->rdone_owed;
}

/* Delivers the held messages once none of those reasons is left. */
static void resume_if_free(struct rdma_conn *rc)
{
    if (!messages_held(rc) && rc->ep && !rc->peer_gone)
        mcr_rdma_ep_resume(rc->ep); /* held messages land in rc->in */
}

/* Reports readiness later: right after the completions being handled
 * (the worker's ready list), or else from the connection's own event. */
static void rconn_poke(struct rdma_conn *rc)
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
static void rconn_fail(struct rdma_conn *rc, const char *why)
{
    log_msg(client_gone(rc) ? LOG_CMDS : LOG_WARN, "<rdma %s: %s, closing",
            rc->conn ? rc->conn->peer_addr : "?", why);
    rc->peer_gone = true;
    if (rc->ep)
        mcr_rdma_ep_abort(rc->ep);
    rconn_poke(rc);
}

static void send_read_done(struct rdma_conn *rc);
static void input_held(struct rdma_conn *rc);
static void ctx_event_cb(evutil_socket_t fd, short what, void *arg);

static void rconn_ready_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rdma_conn *rc = arg;
    if (!rc->conn)
        return;
    bool readable = rc->peer_gone || (rc->want_read && input_ready(rc));
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
        send_read_done(rc); /* no output carried it */
}

static void count_stalls(struct rdma_conn *rc)
{
    if (!rc->ep)
        return;
    struct mcr_rdma_ep_stats st;
    mcr_rdma_ep_stats(rc->ep, &st);
    if (st.credit_stalls > rc->stalls_seen) {
        CTR_ADD(rc->rw, credit_stalls, st.credit_stalls - rc->stalls_seen);
        rc->stalls_seen = st.credit_stalls;
    }
}

/* ---- substrate callbacks (worker thread) ------------------------------------------ */
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

static void append_input(struct rdma_conn *rc, const void *data, uint32_t len);
static void start_read(struct rdma_conn *rc, const struct mcr_rdma_msg *msg);

static void on_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user)
{
    struct rdma_conn *rc = user;
    if (!rc->conn)
        return; /* closing: input no longer read */
    if (msg->type == MCR_RDMA_MSG_RNDV_WRITE && msg->flags == MCR_RDMA_F_VALUE) {
        /* a caller's buffer for the value of the reply to request_id */
        struct rdma_vbuf vb = {.opaque = msg->request_id,
                               .addr = msg->rndv.addr,
                               .rkey = msg->rndv.rkey,
                               .len = msg->rndv.len};
        rdma_vbufs_add(&rc->vbufs, &vb);
    } else if (msg->flags != 0) {
        rconn_fail(rc, "unexpected RNDV_DONE or READ_DONE");
        return;
    } else if (msg->type == MCR_RDMA_MSG_RNDV_WRITE) {
        /* a landing buffer for our output; the substrate checked the
         * descriptor's shape, the bounds are ours */
        if (rc->land_valid || msg->rndv.len < 4096 || msg->rndv.len > RDMA_LAND_MAX) {
            rconn_fail(rc, "bad rendezvous landing buffer");
            return;
        }
        rc->land = msg->rndv;
        rc->land_id = msg->request_id;
        rc->land_valid = rc->land_ever = true;
        if (rc->want_write) {
            rc->send_blocked = false;
            rconn_poke(rc);
        }
    }
    CTR_ADD(rc->rw, eager_msgs, 1);
    if (msg->type == MCR_RDMA_MSG_RNDV_READ) {
        start_read(rc, msg);
        return;
    }
    if (msg->payload_len == 0)
        return;
    append_input(rc, msg->payload, msg->payload_len);
}

/* Appends received stream bytes to the connection's input. */
static void append_input(struct rdma_conn *rc, const void *data, uint32_t len)
{
    struct mcr_rdma_ep *ep = rc->ep;
    struct mcr_rdma_msg m = {.payload = data, .payload_len = len};
    const struct mcr_rdma_msg *msg = &m;
    if (rc->in_off > 0 && rc->in_off + rc->in_len + msg->payload_len > rc->in_cap) {
        memmove(rc->in, rc->in + rc->in_off, rc->in_len);
        rc->in_off = 0;
    }
    size_t need = rc->in_len + msg->payload_len;
    if (need > rc->in_cap) {
        size_t cap = rc->in_cap ? rc->in_cap : 16384;
        while (cap < need)
            cap *= 2;
        char *grown = realloc(rc->in, cap);
        if (!grown) {
            log_msg(LOG_WARN, "<rdma %s: out of memory for input, closing", rc->conn->peer_addr);
            rc->peer_gone = true;
            mcr_rdma_ep_abort(ep);
            rconn_poke(rc);
            return;
        }
        rc->in = grown;
        rc->in_cap = cap;
    }
    memcpy(rc->in + rc->in_off + rc->in_len, msg->payload, msg->payload_len);
    rc->in_len += msg->payload_len;
    CTR_ADD(rc->rw, bytes_read, msg->payload_len);
    if (rc->in_len >= RDMA_INPUT_HIGH && !rc->paused) {
        if (!messages_held(rc))
            mcr_rdma_ep_pause(ep);
        rc->paused = true;
        input_held(rc);
    }
    if (rc->want_read)
        rconn_poke(rc);
}

/* Large input: the client advertises the next bytes of its stream with
 * RNDV_READ (payload, if any, first). The endpoint is paused (later
 * messages wait in their receive buffers) until the region has been pulled,
 * piece by piece as conn.c asks for bytes (pull_region); then READ_DONE
 * tells the client its region is free (region_check_done). */
static void start_read(struct rdma_conn *rc, const struct mcr_rdma_msg *msg)
{
    if (rc->rsrc_active || msg->rndv.len > RDMA_LAND_MAX) {
        rconn_fail(rc, "bad rendezvous read region");
        return;
    }
    if (msg->payload_len > 0)
        append_input(rc, msg->payload, msg->payload_len);
    if (!rc->ep || rc->peer_gone)
        return;
    if (!messages_held(rc))
        mcr_rdma_ep_pause(rc->ep);
    rc->rsrc = msg->rndv;
    rc->rsrc_id = msg->request_id;
    rc->rsrc_off = 0;
    rc->rsrc_active = true;
    rc->rsrc_peeked = false;
    input_held(rc);
    if (rc->want_read)
        rconn_poke(rc);
}

/* READ_DONE on a message of its own for the client's RNDV_READ region;
 * retried after completions while no send buffer is free. */
static void send_read_done(struct rdma_conn *rc)
{
    if (rc->rdone_owed && client_gone(rc)) {
        rc->rdone_owed = rc->rdone_pending = false; /* nobody to tell */
        resume_if_free(rc);
        return;
    }
    if (!rc->ep || rc->peer_gone)
        return;
    struct mcr_rdma_send s = {
        .type = MCR_RDMA_MSG_EAGER,
        .flags = MCR_RDMA_F_READ_DONE,
        .request_id = rc->rdone_id,
    };
    int r = mcr_rdma_ep_send(rc->ep, &s);
    rc->rdone_pending = r == -EAGAIN;
    if (r == 0) {
        rc->rdone_owed = false;
        CTR_ADD(rc->rw, eager_msgs, 1);
        resume_if_free(rc);
    } else if (r != -EAGAIN) {
        rconn_fail(rc, "cannot end a rendezvous read");
    }
}

/* Once the whole region is in: READ_DONE is owed (the connection is served
 * next, and its reply carries it); later messages flow again once it has
 * gone (messages_held). */
static void region_check_done(struct rdma_conn *rc)
{
    if (!rc->rsrc_active || rc->rsrc_off < rc->rsrc.len || rc->read_inflight || rc->zr.inflight)
        return;
    rc->rsrc_active = false;
    rc->rdone_owed = true;
    rc->rdone_id = rc->rsrc_id;
    rconn_poke(rc);
}

/* The local-only staging buffer for region bytes bound for the input. */
static bool rstage_ready(struct rdma_conn *rc)
{
    if (rc->rstage)
        return true;
    rc->rstage = malloc(RDMA_RSTAGE_SIZE);
    if (rc->rstage &&
        mcr_rdma_region_register(mcr_rdma_ctx_pd(rc->rw->ctx), rc->rstage, RDMA_RSTAGE_SIZE,
                                 MCR_RDMA_ACCESS_LOCAL, &rc->rstage_reg) == 0)
        return true;
    free(rc->rstage);
    rc->rstage = NULL;
    return false;
}

/* conn.c asks for len bytes into buf while the input is empty: pulls the
 * next bytes of the region with one RDMA READ, straight into buf when it
 * is registered slab memory (a value; recv returns them once in place),
 * else into the staging buffer (appended to the input once in). */
static void pull_region(struct rdma_conn *rc, char *buf, size_t len)
{
    uint32_t n = rc->rsrc.len - rc->rsrc_off;
    if (len < n)
        n = (uint32_t)len;
    struct ibv_mr *mr = rdma_mem_lookup(rc->rw->mem_slot, buf, n);
    int r;
    if (mr) {
        rc->zr.buf = buf;
        rc->zr.len = n;
        rc->zr.inflight = true;
        r = mcr_rdma_ep_rdma_read(rc->ep, &rc->rsrc, rc->rsrc_off, buf, mr, n, &rc->zr);
        if (r != 0)
            rc->zr.inflight = false;
        else
            CTR_ADD(rc->rw, zero_copy_reads, 1);
    } else {
        if (!rc->rsrc_peeked && n > RDMA_RPEEK)
            n = RDMA_RPEEK;
        if (n > RDMA_RSTAGE_SIZE)
            n = RDMA_RSTAGE_SIZE;
        if (!rstage_ready(rc)) {
            rconn_fail(rc, "out of memory for a rendezvous read");
            return;
        }
        rc->rsrc_peeked = true;
        rc->rstage_len = n;
        rc->read_inflight = true;
        r = mcr_rdma_ep_rdma_read(rc->ep, &rc->rsrc, rc->rsrc_off, rc->rstage, rc->rstage_reg.mr, n,
                                  &rc->rstage_reg);
        if (r != 0)
            rc->read_inflight = false;
    }
    if (r != 0) {
        rconn_fail(rc, "rendezvous read refused");
        return;
    }
    rc->rsrc_off += n;
    CTR_ADD(rc->rw, rendezvous_reads, 1);
}

/* A staged READ (into rstage) or a direct one (into conn.c's buffer)
 * ended. A failed one closes the connection: a value it was filling is
 * never stored (conn.c reads end of stream and drops it). */
static void read_done(struct rdma_conn *rc, bool direct, int status)
{
    if (direct) {
        rc->zr.inflight = false;
        release_held(rc);
    } else {
        rc->read_inflight = false;
    }
    if (status != 0) {
        if (rc->conn && !rc->peer_gone)
            rconn_fail(rc, "rendezvous read failed");
        return;
    }
    if (!rc->conn || rc->peer_gone)
        return;
    if (direct) {
        rc->zr.ready = true;
        CTR_ADD(rc->rw, bytes_read, rc->zr.len);
    } else {
        append_input(rc, rc->rstage, rc->rstage_len);
    }
    region_check_done(rc);
    if (rc->want_read)
        rconn_poke(rc);
}

/* One WRITE of a zero-copy output ended; with the last one the output
 * counts as sent (or the connection closes). */
static void zero_copy_write_done(struct rdma_conn *rc, int status)
{
    rc->zw.pieces--;
    if (status != 0)
        rc->zw.failed = true;
    if (rc->zw.pieces > 0)
        return;
    release_held(rc);
    if (rc->zw.failed && !client_gone(rc)) { /* flushed as the client left: dropped output */
        if (rc->conn && !rc->peer_gone)
            rconn_fail(rc, "rendezvous write failed");
        return;
    }
    rc->zw.ready = true;
    rc->send_blocked = false;
    if (rc->want_write)
        rconn_poke(rc);
}

static void on_rdma_done(struct mcr_rdma_ep *ep, void *cookie, int status, void *user)
{
    (void)ep;
    struct rdma_conn *rc = user;
    if (cookie == &rc->rstage_reg || cookie == &rc->zr) {
        read_done(rc, cookie == &rc->zr, status);
        return;
    }
    if (cookie == &rc->zw) {
        zero_copy_write_done(rc, status);
        return;
    }
    rc->write_inflight = false; /* the staging buffer is ours again */
    if (status != 0 && !client_gone(rc)) {
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
    (void)ep;
    struct rdma_conn *rc = user;
    rc->ep = NULL;
    if (rc->conn) {
        log_msg(LOG_CMDS, "<rdma %s: %s (%d)", rc->conn->peer_addr, why ? why : "closed", reason);
        rc->peer_gone = true;
        rc->client_left = reason == -ECONNRESET;
        rconn_poke(rc); /* conn.c reads end of stream and closes */
        return;
    }
    rconn_unlink_free(rc);
}

static const struct mcr_rdma_ep_callbacks rconn_callbacks = {
    .on_connected = on_connected,
    .on_message = on_message,
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
static int on_accept(struct mcr_rdma_listener *listener, struct mcr_rdma_ep *ep, void *user)
{
    (void)listener;
    struct rdma_listen *l = user;
    struct rdma_worker *rw = worker_of_ctx(l->group, ep->ctx);
    if (!rw)
        return -1;
    if (stats_curr_conns() >= (uint64_t)settings.maxconns) {
        stats_conn_rejected();
        log_msg(LOG_WARN, "Too many open connections (RDMA connection refused)");
        return -1;
    }
    struct rdma_conn *rc = calloc(1, sizeof(*rc));
    if (!rc)
        return -1;
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

/* On the listener's thread. */
static struct mcr_rdma_ctx *place(struct mcr_rdma_listener *listener, void *user)
{
    (void)listener;
    struct rdma_listen *l = user;
    struct rdma_group *g = l->group;
    unsigned i = __atomic_fetch_add(&g->next_worker, 1, __ATOMIC_RELAXED) % g->nworkers;
    return g->workers[i].ctx;
}

/* ---- transport table ------------------------------------------------------------------ */
static int rdma_attach(struct conn *c, struct event_base *base)
{
    (void)base;
    struct rdma_conn *rc = c->tp_data;
    rc->conn = c;
    return 0;
}

static ssize_t rdma_recv(struct conn *c, void *buf, size_t len)
{
    struct rdma_conn *rc = c->tp_data;
    if (rc->zr.ready) {
        /* a direct READ put them in place: conn.c asks again for the same
         * buffer (it consumed nothing meanwhile) */
        rc->zr.ready = false;
        if (buf != rc->zr.buf || len < rc->zr.len) {
            rconn_fail(rc, "input asked for out of order");
            return 0;
        }
        return (ssize_t)rc->zr.len;
    }
    if (rc->in_len == 0) {
        if (rc->peer_gone || !rc->ep)
            return 0;
        if (rsrc_unread(rc) && !rc->read_inflight && !rc->zr.inflight)
            pull_region(rc, buf, len);
        if (rc->peer_gone)
            return 0;
        errno = EAGAIN;
        return -1;
    }
    size_t n = len < rc->in_len ? len : rc->in_len;
    memcpy(buf, rc->in + rc->in_off, n);
    rc->in_off += n;
    rc->in_len -= n;
    if (rc->in_len == 0)
        rc->in_off = 0;
    if (rc->paused && rc->in_len < RDMA_INPUT_HIGH / 2 && rc->ep && !rc->peer_gone) {
        rc->paused = false;
        resume_if_free(rc);
    }
    return (ssize_t)n;
}

/* The RNDV_DONE that tells the client how many bytes of the stream the
 * last RDMA WRITE put in its buffer, followed by the output bytes that
 * come before those (done_head). 0, -EAGAIN or an error. */
static int send_done(struct rdma_conn *rc)
{
    unsigned char len_le[4];
    uint32_t v = htole32(rc->done_len);
    memcpy(len_le, &v, 4);
    struct iovec iov[2] = {{len_le, 4}, {rc->done_head, rc->done_head_len}};
    struct mcr_rdma_send s = {
        .type = MCR_RDMA_MSG_EAGER,
        .flags = rc->done_flags,
        .request_id = rc->done_id,
        .iov = iov,
        .iovcnt = rc->done_head_len > 0 ? 2 : 1,
    };
    int r = mcr_rdma_ep_send(rc->ep, &s);
    rc->done_pending = r == -EAGAIN;
    if (r == 0)
        CTR_ADD(rc->rw, eager_msgs, 1);
    return r;
}

/* Output waits until the transport reports "writable" again. */
static ssize_t output_blocked(struct rdma_conn *rc)
{
    rc->send_blocked = true;
    errno = EAGAIN;
    return -1;
}

/* Output larger than one message, to a client that advertises landing
 * buffers: copy up to one landing buffer of it into the local staging
 * buffer, RDMA WRITE that into the landing buffer, then send RNDV_DONE
 * with the byte count (RC ordering puts the data in place first). Returns
 * bytes taken, or -1 with errno (EAGAIN: wait for the next landing
 * buffer or the previous WRITE). */
static ssize_t sendv_rendezvous(struct rdma_conn *rc, const struct iovec *iov, int iovcnt,
                                size_t total)
{
    if (!rc->land_valid || rc->write_inflight)
        return output_blocked(rc);
    uint32_t n = total < rc->land.len ? (uint32_t)total : rc->land.len;
    if (rc->stage_reg.len < rc->land.len) {
        mcr_rdma_region_deregister(&rc->stage_reg);
        free(rc->stage);
        rc->stage = malloc(rc->land.len);
        if (!rc->stage ||
            mcr_rdma_region_register(mcr_rdma_ctx_pd(rc->rw->ctx), rc->stage, rc->land.len,
                                     MCR_RDMA_ACCESS_LOCAL, &rc->stage_reg) != 0) {
            free(rc->stage);
            rc->stage = NULL;
            errno = ENOMEM;
            return -1;
        }
    }
    size_t at = 0;
    for (int i = 0; i < iovcnt && at < n; i++) {
        size_t take = iov[i].iov_len < n - at ? iov[i].iov_len : n - at;
        if (take > 0)
            memcpy(rc->stage + at, iov[i].iov_base, take);
        at += take;
    }
    int r = mcr_rdma_ep_rdma_write(rc->ep, &rc->land, 0, rc->stage, rc->stage_reg.mr, n, rc);
    if (r != 0) {
        errno = EPIPE;
        return -1;
    }
    rc->write_inflight = true;
    rc->land_valid = false;
    rc->done_len = n;
    rc->done_head_len = 0;
    rc->done_id = rc->land_id;
    rc->done_flags = MCR_RDMA_F_RNDV_DONE;
    CTR_ADD(rc->rw, rendezvous_writes, 1);
    CTR_ADD(rc->rw, bytes_written, n);
    r = send_done(rc);
    if (r != 0 && r != -EAGAIN) {
        errno = EPIPE;
        return -1;
    }
    return (ssize_t)n;
}

/* Finds the first run of consecutive iovecs in registered slab memory
 * that is worth a zero-copy WRITE (at least min bytes): its first index
 * and byte count. False when there is none. */
static bool find_slab_run(const struct rdma_conn *rc, const struct iovec *iov, int iovcnt,
                          size_t min, int *first, size_t *bytes)
{
    int i = 0;
    while (i < iovcnt) {
        size_t run = 0;
        int j = i;
        while (j < iovcnt && iov[j].iov_len > 0 &&
               rdma_mem_lookup(rc->rw->mem_slot, iov[j].iov_base, iov[j].iov_len))
            run += iov[j++].iov_len;
        if (run >= min) {
            *first = i;
            *bytes = run;
            return true;
        }
        i = j > i ? j : i + 1;
    }
    return false;
}

/* A value in slab memory at iov[head] (after head short iovecs: the
 * reply's header and flags): RDMA WRITE it straight from the item (one
 * WRITE per segment, at consecutive offsets) into the buffer its client
 * advertised for it (vb) or, without one, up to one landing buffer of it
 * into the landing buffer; then RNDV_DONE with the count and the head's
 * bytes. Reports EAGAIN until the WRITEs completed; conn.c then offers
 * the same output again and learns the count (rdma_sendv), so it releases
 * the item only after the memory was read. */
static ssize_t sendv_zero_copy(struct rdma_conn *rc, const struct iovec *iov, int iovcnt, int head,
                               size_t run, const struct rdma_vbuf *vb)
{
    struct mcr_rdma_rndv value_region;
    const struct mcr_rdma_rndv *dst = &rc->land;
    if (vb) {
        value_region = (struct mcr_rdma_rndv){.addr = vb->addr, .rkey = vb->rkey, .len = vb->len};
        dst = &value_region;
    } else if (!rc->land_valid || rc->write_inflight) {
        return output_blocked(rc);
    }
    uint32_t n = run < dst->len ? (uint32_t)run : dst->len;
    uint32_t at = 0;
    size_t head_len = 0;
    for (int i = 0; i < head; i++) {
        memcpy(rc->done_head + head_len, iov[i].iov_base, iov[i].iov_len);
        head_len += iov[i].iov_len;
    }
    rc->done_head_len = (uint16_t)head_len;
    rc->zw.failed = false;
    for (int i = head; i < iovcnt && at < n; i++) {
        uint32_t take = iov[i].iov_len < n - at ? (uint32_t)iov[i].iov_len : n - at;
        struct ibv_mr *mr = rdma_mem_lookup(rc->rw->mem_slot, iov[i].iov_base, take);
        rc->zw.pieces++;
        if (!mr ||
            mcr_rdma_ep_rdma_write(rc->ep, dst, at, iov[i].iov_base, mr, take, &rc->zw) != 0) {
            rc->zw.pieces--;
            rconn_fail(rc, "rendezvous write refused");
            errno = EPIPE;
            return -1;
        }
        at += take;
    }
    rc->zw.base = iov[0].iov_base;
    rc->zw.len = head_len + at;
    rc->done_len = at;
    if (vb) {
        rc->done_id = vb->opaque;
        rc->done_flags = MCR_RDMA_F_RNDV_DONE | MCR_RDMA_F_VALUE;
        CTR_ADD(rc->rw, value_buffer_writes, 1);
    } else {
        rc->land_valid = false;
        rc->done_id = rc->land_id;
        rc->done_flags = MCR_RDMA_F_RNDV_DONE;
    }
    CTR_ADD(rc->rw, rendezvous_writes, 1);
    CTR_ADD(rc->rw, zero_copy_writes, 1);
    CTR_ADD(rc->rw, bytes_written, head_len + at); /* the head rides on RNDV_DONE */
    int r = send_done(rc);
    if ((r != 0 && r != -EAGAIN) || rc->peer_gone) {
        errno = EPIPE;
        return -1;
    }
    return output_blocked(rc);
}

/* Posts one eager message of msg_iov's bytes (at most the endpoint's
 * eager payload); it carries the READ_DONE owed, if any. 0, -EAGAIN (no
 * send buffer or credit: offered again once completions came) or another
 * error. */
static int send_eager(struct rdma_conn *rc, const struct iovec *msg_iov, int n, bool post_now)
{
    struct mcr_rdma_send s = {
        .type = MCR_RDMA_MSG_EAGER, .iov = msg_iov, .iovcnt = n, .post_now = post_now};
    bool carries_done = rc->rdone_owed && !rc->rdone_pending;
    if (carries_done) {
        s.flags = MCR_RDMA_F_READ_DONE;
        s.request_id = rc->rdone_id;
    }
    int r = mcr_rdma_ep_send(rc->ep, &s);
    if (r == -EAGAIN)
        rc->send_blocked = true;
    if (r != 0)
        return r;
    CTR_ADD(rc->rw, eager_msgs, 1);
    if (carries_done) {
        rc->rdone_owed = false;
        resume_if_free(rc);
    }
    return 0;
}

/* Output may go through the landing buffer: the client advertised one,
 * and if it is not advertised right now, its next advertisement can be
 * seen. Not while the endpoint holds the client's messages
 * (messages_held): conn.c reads no input while output blocks, so an
 * advertisement held there would never arrive; such output goes in eager
 * messages instead. */
static bool land_usable(const struct rdma_conn *rc)
{
    return rc->land_ever && (rc->land_valid || rc->write_inflight || !messages_held(rc));
}

/* The endpoint began to hold the client's messages: output that waits for
 * the landing buffer may go eagerly now (land_usable). */
static void input_held(struct rdma_conn *rc)
{
    if (rc->want_write && !land_usable(rc)) {
        rc->send_blocked = false;
        rconn_poke(rc);
    }
}

static ssize_t rdma_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
    struct rdma_conn *rc = c->tp_data;
    if (rc->zw.pieces > 0) /* a zero-copy WRITE still reads the item */
        return output_blocked(rc);
    if (client_gone(rc)) {
        rc->zw.ready = false; /* a zero-copy output that ended is dropped too */
        size_t dropped = 0;
        for (int i = 0; i < iovcnt; i++)
            dropped += iov[i].iov_len;
        return (ssize_t)dropped;
    }
    if (!rc->ep || rc->peer_gone) {
        errno = EPIPE;
        return -1;
    }
    size_t max_payload = mcr_rdma_ep_max_eager_payload(rc->ep);
    if (rc->done_pending) {
        int r = send_done(rc);
        if (r == -EAGAIN) {
            rc->send_blocked = true;
            errno = EAGAIN;
            return -1;
        }
        if (r != 0) {
            errno = EPIPE;
            return -1;
        }
    }
    if (rc->zw.ready) {
        rc->zw.ready = false;
        if (iovcnt < 1 || iov[0].iov_base != rc->zw.base) {
            rconn_fail(rc, "output offered out of order");
            errno = EPIPE;
            return -1;
        }
        return (ssize_t)rc->zw.len;
    }
    size_t all = 0;
    for (int k = 0; k < iovcnt; k++)
        all += iov[k].iov_len;
    if (all > max_payload && (land_usable(rc) || rc->vbufs.count > 0)) {
        int first;
        size_t run;
        if (find_slab_run(rc, iov, iovcnt, max_payload / 2, &first, &run)) {
            struct rdma_vbuf vb;
            if (first == 0 && rdma_vbufs_take(&rc->vbufs, iov[0].iov_base, run, &vb))
                return sendv_zero_copy(rc, iov, iovcnt, 0, run, &vb);
            if (first == 0 && land_usable(rc))
                return sendv_zero_copy(rc, iov, iovcnt, 0, run, NULL);
            if (first > 0) {
                /* what comes before the value names the reply, and so the
                 * buffer the value may go to; when short (a reply's header
                 * and flags) it rides on the value's RNDV_DONE, else it
                 * goes first, the usual way */
                if (rc->vbufs.count > 0)
                    rdma_vbufs_note_reply(&rc->vbufs, iov, first, iov[first].iov_base, run);
                size_t head_len = 0;
                for (int k = 0; k < first; k++)
                    head_len += iov[k].iov_len;
                bool rides = head_len <= RDMA_DONE_HEAD_MAX && head_len + 4 <= max_payload;
                if (rides && rdma_vbufs_take(&rc->vbufs, iov[first].iov_base, run, &vb))
                    return sendv_zero_copy(rc, iov, iovcnt, first, run, &vb);
                if (rides && land_usable(rc))
                    return sendv_zero_copy(rc, iov, iovcnt, first, run, NULL);
                iovcnt = first;
                all = head_len;
            }
        }
        if (all > max_payload && land_usable(rc))
            return sendv_rendezvous(rc, iov, iovcnt, all);
    }
    if (all > 0 && all <= max_payload && iovcnt <= MCR_RDMA_MSG_IOV_MAX) {
        /* the usual reply: one message, from the iovecs as they are, and
         * to the device at once (the rest of the pass need not wait for it) */
        int r = send_eager(rc, iov, iovcnt, true);
        if (r != 0 && r != -EAGAIN) {
            errno = EPIPE;
            return -1;
        }
        count_stalls(rc);
        if (r == -EAGAIN) {
            errno = EAGAIN;
            return -1;
        }
        CTR_ADD(rc->rw, bytes_written, all);
        return (ssize_t)all;
    }
    size_t total = 0;
    struct mcr_rdma_iov_pos pos = {0, 0};
    for (;;) {
        struct iovec msg_iov[MCR_RDMA_MSG_IOV_MAX];
        int n;
        struct mcr_rdma_iov_pos next = pos;
        size_t msg_len = mcr_rdma_iov_cut(iov, iovcnt, &next, max_payload, msg_iov, &n);
        if (msg_len == 0)
            break;
        int r = send_eager(rc, msg_iov, n, false);
        if (r == -EAGAIN)
            break;
        if (r != 0) {
            errno = EPIPE;
            return total > 0 ? (ssize_t)total : -1;
        }
        total += msg_len;
        pos = next;
    }
    CTR_ADD(rc->rw, bytes_written, total);
    count_stalls(rc);
    if (total == 0) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)total;
}

static void rdma_want(struct conn *c, bool readable, bool writable)
{
    struct rdma_conn *rc = c->tp_data;
    rc->want_read = readable;
    rc->want_write = writable;
    if ((readable && (input_ready(rc) || rc->peer_gone)) || (writable && !rc->send_blocked))
        rconn_poke(rc);
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
        count_stalls(rc);
        struct rdma_worker *rw = rc->rw;
        mcr_rdma_ep_close(rc->ep); /* on_closed frees rc */
        watch_reaps(rw);
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
    .recv = rdma_recv,
    .sendv = rdma_sendv,
    .want = rdma_want,
    .close = rdma_close,
    .adopt_item = rdma_adopt_item,
    .describe = rdma_describe,
};

/* ---- driving the worker contexts --------------------------------------------------- */
/* Connections whose sends waited for a free send buffer may write again. */
static void unblock_writers(struct rdma_worker *rw)
{
    for (struct rdma_conn *rc = rw->conns; rc; rc = rc->next) {
        if (rc->rdone_pending)
            send_read_done(rc);
        if (rc->done_pending && client_gone(rc))
            rc->done_pending = false; /* nobody to tell */
        if (rc->done_pending && rc->ep && !rc->peer_gone)
            send_done(rc); /* a staged WRITE's RNDV_DONE may end the output: no flush sends it */
        if (rc->send_blocked) {
            rc->send_blocked = false;
            if (rc->want_write)
                rconn_poke(rc);
        }
    }
}

/* Spin and adaptive polling: keep polling the completion queue from the
 * event loop (other events still run between two polls) while the worker
 * has RDMA connections; adaptive stops RDMA_ADAPTIVE_US after the last
 * completion. While polling, completions raise no events (no system call
 * per completion); when polling stops the queue is armed again and the
 * worker sleeps on the descriptor. */
static void keep_polling(struct rdma_worker *rw, int handled)
{
    if (settings.rdma_poll == 0)
        return;
    uint64_t now = settings.rdma_poll == 1 ? 0 : now_us(); /* spin needs no clock */
    if (handled > 0)
        rw->last_busy_us = now;
    bool go =
        rw->conns != NULL && (settings.rdma_poll == 1 || now - rw->last_busy_us < RDMA_ADAPTIVE_US);
    if (!go && rw->polling) {
        rw->polling = false;
        int n = mcr_rdma_ctx_set_polling(rw->ctx, false);
        if (n > 0) { /* completions came before the queue was armed */
            unblock_writers(rw);
            rw->last_busy_us = now;
            go = true;
        }
    }
    if (!go)
        return;
    if (!rw->polling) {
        rw->polling = true;
        mcr_rdma_ctx_set_polling(rw->ctx, true);
    }
    /* a zero timeout, not event_active(): libevent runs events activated
     * from a callback in the same pass, which would never poll descriptors */
    static const struct timeval next_pass = {0, 0};
    event_add(rw->poll_ev, &next_pass);
}

/* Stops collecting and serves the connections that the completions just
 * handled made ready (rconn_poke while collecting). One may close another:
 * rconn_unlink_free takes a freed connection off the list. What the pass
 * posted (sends, READs, WRITEs) goes to the device at the end, one
 * doorbell per connection: a large get's WRITE and its RNDV_DONE go
 * together. A connection's output of one eager message (the usual reply)
 * goes as soon as it is written (post_now in rdma_sendv), still one
 * doorbell for the connection. */
static void dispatch_ready(struct rdma_worker *rw)
{
    rw->collecting = false;
    while (rw->ready) {
        struct rdma_conn *rc = rw->ready;
        rw->ready = rc->ready_next;
        rc->ready_next = NULL;
        rc->ready_listed = false;
        rconn_ready_cb(-1, EV_READ, rc);
    }
    mcr_rdma_ctx_batch_end(rw->ctx);
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(rw->ctx, &st);
    if (st.doorbells != rw->doorbells_seen) { /* idle spinning passes post nothing */
        CTR_ADD(rw, doorbells, st.doorbells - rw->doorbells_seen);
        CTR_ADD(rw, work_requests, st.work_requests - rw->work_requests_seen);
        rw->doorbells_seen = st.doorbells;
        rw->work_requests_seen = st.work_requests;
    }
}

/* Starts a pass over the completions: connections they make ready are
 * listed, and what they post is batched, until dispatch_ready. */
static void start_collecting(struct rdma_worker *rw)
{
    rw->collecting = true;
    mcr_rdma_ctx_batch_begin(rw->ctx);
}

static void ctx_event_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rdma_worker *rw = arg;
    start_collecting(rw);
    int n = mcr_rdma_ctx_handle_events(rw->ctx);
    if (n < 0)
        log_msg(LOG_WARN, "rdma: %s: event handling failed: %s", mcr_rdma_ctx_device_name(rw->ctx),
                strerror(-n));
    if (n > 0)
        unblock_writers(rw);
    dispatch_ready(rw);
    keep_polling(rw, n);
    watch_reaps(rw);
}

/* One polling pass: polls the completion queue and serves what completes
 * as it goes, until RDMA_SPIN_PASS_POLLS polls or RDMA_SPIN_PASS_COMPLETIONS
 * completions, so a spinning worker enters the event loop (a system call)
 * only that often. Requests that follow each other closely are served in
 * one pass: every system call between two doorbells makes the next one
 * slower on an emulated device (see doc/rdma.md). */
static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rdma_worker *rw = arg;
    int handled = 0;
    start_collecting(rw);
    for (unsigned polls = 1;; polls++) {
        int n = mcr_rdma_ctx_poll(rw->ctx);
        if (n < 0)
            break;
        if (n > 0) {
            unblock_writers(rw);
            handled += n;
            rw->empty_polls = 0;
            if (polls >= RDMA_SPIN_PASS_POLLS || handled >= RDMA_SPIN_PASS_COMPLETIONS)
                break;
            dispatch_ready(rw); /* its replies go out now, not at the end of the pass */
            start_collecting(rw);
            continue;
        }
        if (polls >= RDMA_SPIN_PASS_POLLS)
            break;
        /* software RDMA devices (rxe) do part of their work in kernel
         * threads that a spinning thread would starve */
        if (++rw->empty_polls >= rw->yield_polls) {
            rw->empty_polls = 0;
            sched_yield();
        }
    }
    dispatch_ready(rw);
    keep_polling(rw, handled);
    watch_reaps(rw);
}

/* True when the calling thread may run on one processor only. */
static bool on_one_cpu(void)
{
    cpu_set_t allowed;
    return sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) == 1;
}

/* On the worker's thread. */
static void worker_attach(struct worker *w, void *arg)
{
    struct rdma_worker *rw = arg;
    rw->yield_polls = on_one_cpu() ? RDMA_SPIN_YIELD_POLLS_ONE_CPU : RDMA_SPIN_YIELD_POLLS;
    rw->ctx_ev =
        event_new(w->base, mcr_rdma_ctx_fd(rw->ctx), EV_READ | EV_PERSIST, ctx_event_cb, rw);
    rw->poll_ev = event_new(w->base, -1, 0, poll_cb, rw);
    rw->reap_ev = event_new(w->base, -1, 0, ctx_event_cb, rw);
    if (!rw->ctx_ev || !rw->poll_ev || !rw->reap_ev || event_add(rw->ctx_ev, NULL) != 0)
        log_msg(LOG_ALWAYS, "rdma: worker %u cannot watch its RDMA context", w->id);
    else if (settings.rdma_poll == 1)
        keep_polling(rw, 0); /* spin from the start */
}

static void worker_detach(struct worker *w, void *arg)
{
    (void)w;
    struct rdma_worker *rw = arg;
    if (rw->reap_ev) {
        event_free(rw->reap_ev);
        rw->reap_ev = NULL;
    }
    if (rw->poll_ev) {
        event_free(rw->poll_ev);
        rw->poll_ev = NULL;
    }
    if (rw->ctx_ev) {
        event_free(rw->ctx_ev);
        rw->ctx_ev = NULL;
    }
}

static void listen_event_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rdma_listen *l = arg;
    int n = mcr_rdma_ctx_handle_events(l->ctx);
    if (n < 0)
        log_msg(LOG_WARN, "rdma: listener %s: %s", l->addr, strerror(-n));
}

/* ---- stats -------------------------------------------------------------------------- */
static void emit_u64(stat_emit_fn emit, void *ctx, const char *name, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    emit(ctx, name, buf);
}

static void rdma_stats(stat_emit_fn emit, void *ctx)
{
    struct rdma_counters sum;
    memset(&sum, 0, sizeof(sum));
    for (struct rdma_group *g = groups; g; g = g->next) {
        for (unsigned i = 0; i < g->nworkers; i++) {
            const struct rdma_counters *c = &g->workers[i].ctr;
#define S(f) sum.f += __atomic_load_n(&c->f, __ATOMIC_RELAXED)
            S(curr_connections);
            S(total_connections);
            S(bytes_read);
            S(bytes_written);
            S(eager_msgs);
            S(rendezvous_reads);
            S(rendezvous_writes);
            S(zero_copy_reads);
            S(zero_copy_writes);
            S(value_buffer_writes);
            S(credit_stalls);
            S(doorbells);
            S(work_requests);
#undef S
        }
    }
    emit_u64(emit, ctx, "rdma_curr_connections", sum.curr_connections);
    emit_u64(emit, ctx, "rdma_total_connections", sum.total_connections);
    emit_u64(emit, ctx, "rdma_bytes_read", sum.bytes_read);
    emit_u64(emit, ctx, "rdma_bytes_written", sum.bytes_written);
    emit_u64(emit, ctx, "rdma_eager_msgs", sum.eager_msgs);
    emit_u64(emit, ctx, "rdma_rendezvous_reads", sum.rendezvous_reads);
    emit_u64(emit, ctx, "rdma_rendezvous_writes", sum.rendezvous_writes);
    emit_u64(emit, ctx, "rdma_zero_copy_reads", sum.zero_copy_reads);
    emit_u64(emit, ctx, "rdma_zero_copy_writes", sum.zero_copy_writes);
    emit_u64(emit, ctx, "rdma_value_buffer_writes", sum.value_buffer_writes);
    emit_u64(emit, ctx, "rdma_credit_stalls", sum.credit_stalls);
    emit_u64(emit, ctx, "rdma_doorbells", sum.doorbells);
    emit_u64(emit, ctx, "rdma_work_requests", sum.work_requests);
}

/* ---- opening ------------------------------------------------------------------------- */
static const char *poll_mode_name(void)
{
    return settings.rdma_poll == 1 ? "spin" : settings.rdma_poll == 2 ? "adaptive" : "event";
}

static void ctx_opts_for(struct mcr_rdma_ctx_opts *o, const char *addr)
{
    mcr_rdma_ctx_opts_default(o);
    o->addr = addr;
    o->buf_size = settings.rdma_eager_max;
    /* a client that returns no credits holds at most this many send
     * buffers waiting, an even share of the worker's: it cannot take
     * those every other connection of the worker needs for its replies */
    o->ep_sends_waiting_max = o->send_bufs / (o->recv_bufs / o->credits);
}

static struct rdma_group *group_for(const char *device, const char *addr)
{
    for (struct rdma_group *g = groups; g; g = g->next)
        if (strcmp(g->device, device) == 0)
            return g;
    struct rdma_group *g = calloc(1, sizeof(*g));
    unsigned n = workers_count();
    if (!g)
        return NULL;
    g->workers = calloc(n, sizeof(*g->workers));
    if (!g->workers) {
        free(g);
        return NULL;
    }
    snprintf(g->device, sizeof(g->device), "%s", device);
    for (unsigned i = 0; i < n; i++) {
        struct mcr_rdma_ctx_opts o;
        char err[256] = "";
        ctx_opts_for(&o, addr);
        struct rdma_worker *rw = &g->workers[i];
        rw->w = worker_at(i);
        rw->mem_slot = mem_slots + i;
        rw->ctx = mcr_rdma_ctx_create(&o, err, sizeof(err));
        if (!rw->ctx) {
            log_msg(LOG_ALWAYS, "rdma: worker context on %s: %s", device, err);
            while (i-- > 0)
                mcr_rdma_ctx_destroy(g->workers[i].ctx);
            free(g->workers);
            free(g);
            return NULL;
        }
        g->nworkers++;
    }
    mem_slots += n;
    for (unsigned i = 0; i < n; i++)
        if (worker_call(g->workers[i].w, worker_attach, &g->workers[i]) != 0)
            log_msg(LOG_ALWAYS, "rdma: cannot reach worker %u", i);
    g->next = groups;
    groups = g;
    return g;
}

/* "ADDR:PORT" or "[V6]:PORT" */
static int split_addr(const char *spec, char *host, size_t hostlen, uint16_t *port)
{
    const char *colon;
    const char *h = spec;
    size_t hl;
    if (spec[0] == '[') {
        const char *br = strchr(spec, ']');
        if (!br || br[1] != ':')
            return -1;
        h = spec + 1;
        hl = (size_t)(br - h);
        colon = br + 1;
    } else {
        colon = strrchr(spec, ':');
        if (!colon)
            return -1;
        hl = (size_t)(colon - spec);
    }
    char *end;
    errno = 0;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (hl == 0 || hl >= hostlen || errno || end == colon + 1 || *end || p > 65535)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (uint16_t)p;
    return 0;
}

/* 1 listening, 0 RDMA unavailable here (logged), -1 bad address. */
static int open_one(struct event_base *base, const char *spec)
{
    char host[48];
    uint16_t port;
    if (split_addr(spec, host, sizeof(host), &port) != 0) {
        log_msg(LOG_ALWAYS, "bad -o rdma_listen address \"%s\" (want ADDR:PORT)", spec);
        return -1;
    }
    struct mcr_rdma_ctx_opts o;
    char err[256] = "";
    mcr_rdma_ctx_opts_default(&o);
    o.addr = host;
    o.buf_size = settings.rdma_eager_max;
    o.recv_bufs = 64; /* connections are placed on worker contexts */
    o.send_bufs = 16;
    struct mcr_rdma_ctx *ctx = mcr_rdma_ctx_create(&o, err, sizeof(err));
    if (!ctx) {
        log_msg(LOG_ALWAYS, "RDMA unavailable for %s: %s; serving TCP only", spec, err);
        return 0;
    }
    struct rdma_listen *l = calloc(1, sizeof(*l));
    if (!l) {
        mcr_rdma_ctx_destroy(ctx);
        return 0;
    }
    l->ctx = ctx;
    snprintf(l->addr, sizeof(l->addr), "%s", spec);
    l->group = group_for(mcr_rdma_ctx_device_name(ctx), host);
    if (!l->group) {
        free(l);
        mcr_rdma_ctx_destroy(ctx);
        return 0;
    }
    int rc = mcr_rdma_rc_listen(ctx, host, port, settings.backlog, on_accept, l, &l->listener);
    if (rc != 0) {
        log_msg(LOG_ALWAYS, "RDMA: failed to listen on %s: %s; serving TCP only", spec,
                strerror(rc < 0 ? -rc : rc));
        free(l);
        mcr_rdma_ctx_destroy(ctx);
        return 0;
    }
    mcr_rdma_listener_set_placement(l->listener, place, l);
    l->ev = event_new(base, mcr_rdma_ctx_fd(ctx), EV_READ | EV_PERSIST, listen_event_cb, l);
    if (!l->ev || event_add(l->ev, NULL) != 0) {
        log_msg(LOG_ALWAYS, "RDMA: cannot watch the listener on %s", spec);
        if (l->ev)
            event_free(l->ev);
        mcr_rdma_listener_destroy(l->listener);
        free(l);
        mcr_rdma_ctx_destroy(ctx);
        return 0;
    }
    snprintf(l->addr, sizeof(l->addr), "%s:%u", host, mcr_rdma_listener_port(l->listener));
    const struct mcr_rdma_ctx_opts *eff = mcr_rdma_ctx_options(l->group->workers[0].ctx);
    log_msg(LOG_WARN,
            "listening on rdma:%s (device %s, RC; %u worker contexts; %u-byte messages, %u "
            "credits per connection, %u receive and %u send buffers per worker: up to %u "
            "connections per worker; large values by RDMA READ/WRITE; polling %s)",
            l->addr, mcr_rdma_ctx_device_name(ctx), l->group->nworkers, eff->buf_size, eff->credits,
            eff->recv_bufs, eff->send_bufs, eff->recv_bufs / eff->credits, poll_mode_name());
    l->next = listens;
    listens = l;
    return 1;
}

/* Slab memory registered with every worker context (net_rdma_mem.c):
 * values go by RDMA straight from and into items. */
static int register_slab_memory(void)
{
    if (!groups)
        return 0;
    struct ibv_pd **pds = calloc(mem_slots, sizeof(*pds));
    if (!pds)
        return -1;
    for (struct rdma_group *g = groups; g; g = g->next)
        for (unsigned i = 0; i < g->nworkers; i++)
            pds[g->workers[i].mem_slot] = mcr_rdma_ctx_pd(g->workers[i].ctx);
    int rc = rdma_mem_start(pds, mem_slots);
    free(pds);
    return rc;
}

int net_rdma_open(struct event_base *base)
{
    if (!settings.rdma_listen)
        return 0;
    char *copy = strdup(settings.rdma_listen);
    if (!copy)
        return -1;
    int rc = 0;
    char *save = NULL;
    for (char *spec = strtok_r(copy, " ", &save); spec && rc >= 0;
         spec = strtok_r(NULL, " ", &save))
        rc = open_one(base, spec);
    free(copy);
    if (rc < 0)
        return -1;
    stats_general_extra = rdma_stats;
    return register_slab_memory();
}

/* The listeners go in net_rdma_shutdown, once the workers stopped: a
 * connection a listener handed to a worker is accepted on the worker's
 * thread through the listener's callback, which must still exist then. */
void net_rdma_close(void)
{
    for (struct rdma_group *g = groups; g; g = g->next)
        for (unsigned i = 0; i < g->nworkers; i++)
            if (worker_call(g->workers[i].w, worker_detach, &g->workers[i]) != 0)
                log_msg(LOG_ALWAYS, "rdma: cannot reach worker %u", i);
}

void net_rdma_shutdown(void)
{
    while (listens) {
        struct rdma_listen *l = listens;
        listens = l->next;
        event_free(l->ev);
        mcr_rdma_listener_destroy(l->listener);
        mcr_rdma_ctx_destroy(l->ctx);
        free(l);
    }
    stats_general_extra = NULL;
    rdma_mem_stop(); /* slab registrations go before their protection domains */
    while (groups) {
        struct rdma_group *g = groups;
        groups = g->next;
        for (unsigned i = g->nworkers; i-- > 0;) {
            struct rdma_worker *rw = &g->workers[i];
            /* registrations go before their protection domain */
            for (struct rdma_conn *rc = rw->conns; rc; rc = rc->next) {
                mcr_rdma_region_deregister(&rc->stage_reg);
                mcr_rdma_region_deregister(&rc->rstage_reg);
            }
            mcr_rdma_ctx_destroy(rw->ctx);
            /* the context freed its endpoints without callbacks */
            while (rw->conns)
                rconn_unlink_free(rw->conns);
        }
        free(g->workers);
        free(g);
    }
}

#endif
