/*
 * net_rdma.c: clients over RDMA reliable connections (rdma/ substrate):
 * listeners, worker contexts, driving them, stats.
 *
 * Listeners (-o rdma_listen=ADDR:PORT, repeatable) live on a small context
 * of their own, driven by the main event base; each one spreads connection
 * requests over one context per worker thread (for the listener's device),
 * whose single descriptor is watched by that worker's event base (or
 * polled: rdma_poll=spin|adaptive). An accepted endpoint becomes a conn
 * (net_rdma_conn.c); its receive and send paths are net_rdma_recv.c and
 * net_rdma_send.c.
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
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net_rdma_conn.h"
#include "net_rdma_mem.h"
#include "net_rdma_move.h"
#include "net_rdma_ud.h"
#include "stats.h"
#include "thread.h"

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

static struct rdma_group *groups;

static struct rdma_listen *listens;

static unsigned mem_slots; /* worker contexts created */

/* ---- driving the worker contexts --------------------------------------------------- */
static uint64_t rdma_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Connections whose sends waited for a free send buffer may write again.
 * Only when one waits (rconn_writer_waits): not a walk over every
 * connection at every pass. */
static void unblock_writers(struct rdma_worker *rw)
{
    if (!rw->writers_waiting)
        return;
    rw->writers_waiting = false;
    bool still_waiting = false;
    for (struct rdma_conn *rc = rw->conns; rc; rc = rc->next) {
        if (rc->rdone_pending)
            rconn_send_read_done(rc);
        if (rc->done_pending && rconn_client_gone(rc))
            rc->done_pending = false; /* nobody to tell */
        if (rc->done_pending && rc->ep && !rc->peer_gone)
            rconn_send_done(
                rc); /* a staged WRITE's RNDV_DONE may end the output: no flush sends it */
        if (rc->send_blocked) {
            rc->send_blocked = false;
            if (rc->want_write)
                rconn_poke(rc);
        }
        if (rc->end_pending)
            rconn_try_end(rc);
        still_waiting = still_waiting || rc->rdone_pending || rc->done_pending ||
                        rc->send_blocked || rc->end_pending;
    }
    if (still_waiting)
        rw->writers_waiting = true;
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
    uint64_t now = settings.rdma_poll == 1 ? 0 : rdma_now_us(); /* spin needs no clock */
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
 * goes as soon as it is written (post_now in rconn_sendv), still one
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
    /* the pools grow as connections come (a connection's credits at a time) */
    __atomic_store_n(&rw->ctr.buffer_bytes, st.registered_bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&rw->ctr.recv_window, st.recv_window, __ATOMIC_RELAXED);
    __atomic_store_n(&rw->ctr.recv_window_grown, st.recv_window_grown, __ATOMIC_RELAXED);
    __atomic_store_n(&rw->ctr.recv_queue_emptied, st.recv_queue_emptied, __ATOMIC_RELAXED);
    __atomic_store_n(&rw->ctr.rejected, st.rejected, __ATOMIC_RELAXED);
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
    rdma_watch_reaps(rw);
}

/* After a poll of a polling pass that found completions: serves the
 * connections they made ready; their replies go out now, not at the end
 * of the pass. Never inlined: with the completions' dispatch, the work of
 * a poll that found something (benchmarks/rdma-instructions counts it by
 * this name, apart from the idle polls). */
__attribute__((noinline)) static void rdma_serve_completions(struct rdma_worker *rw)
{
    unblock_writers(rw);
    dispatch_ready(rw);
}

/* One polling pass: polls the completion queue and serves what completes
 * as it goes, until RDMA_SPIN_PASS_POLLS polls or RDMA_SPIN_PASS_COMPLETIONS
 * completions, so a spinning worker enters the event loop (a system call)
 * only that often. Requests that follow each other closely are served in
 * one pass: every system call between two doorbells makes the next one
 * slower on an emulated device (see doc/rdma-measurements.md). */
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
            rdma_serve_completions(rw);
            handled += n;
            rw->empty_polls = 0;
            if (polls >= RDMA_SPIN_PASS_POLLS || handled >= RDMA_SPIN_PASS_COMPLETIONS)
                break;
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
    if (rw->collecting)
        dispatch_ready(rw);
    keep_polling(rw, handled);
    rdma_watch_reaps(rw);
}

/* Hybrid: every -o rdma_move_interval_ms, the rates of the worker's RC
 * clients and their demotions (rconn_move_tick); what it sends goes out
 * at the end, as in a pass over completions. */
static void move_tick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rdma_worker *rw = arg;
    start_collecting(rw);
    for (struct rdma_conn *rc = rw->conns; rc; rc = rc->next)
        rconn_move_tick(rc, settings.rdma_move_interval_ms);
    dispatch_ready(rw);
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
    if (rdma_move_enabled()) {
        unsigned ms = settings.rdma_move_interval_ms;
        struct timeval every = {ms / 1000, (ms % 1000) * 1000};
        rw->move_ev = event_new(w->base, -1, EV_PERSIST, move_tick_cb, rw);
        if (!rw->move_ev || event_add(rw->move_ev, &every) != 0)
            log_msg(LOG_ALWAYS, "rdma: worker %u has no timer for moves to UD", w->id);
    }
}

static void worker_detach(struct worker *w, void *arg)
{
    (void)w;
    struct rdma_worker *rw = arg;
    if (rw->move_ev) {
        event_free(rw->move_ev);
        rw->move_ev = NULL;
    }
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
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(l->ctx, &st);
    __atomic_store_n(&l->rejected, st.rejected, __ATOMIC_RELAXED);
}

/* ---- stats -------------------------------------------------------------------------- */
static void emit_u64(stat_emit_fn emit, void *ctx, const char *name, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    emit(ctx, name, buf);
}

uint64_t rdma_rc_conns(void)
{
    uint64_t n = 0;
    for (struct rdma_group *g = groups; g; g = g->next)
        for (unsigned i = 0; i < g->nworkers; i++)
            n += __atomic_load_n(&g->workers[i].ctr.curr_connections, __ATOMIC_RELAXED);
    return n;
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
            S(buffer_bytes);
            S(recv_window);
            S(recv_window_grown);
            S(recv_queue_emptied);
            S(rejected);
#undef S
        }
    }
    /* requests refused before a worker context had them: no credits left
     * on the chosen one, or the move to it failed */
    for (struct rdma_listen *l = listens; l; l = l->next)
        sum.rejected += __atomic_load_n(&l->rejected, __ATOMIC_RELAXED);
    /* UD's peers: their stream bytes, and those refused */
    struct net_rdma_ud_totals ud;
    net_rdma_ud_totals(&ud);
    sum.bytes_read += ud.bytes_read;
    sum.bytes_written += ud.bytes_written;
    sum.rejected += ud.rejected;
    emit_u64(emit, ctx, "rdma_curr_connections", sum.curr_connections);
    emit_u64(emit, ctx, "rdma_total_connections", sum.total_connections);
    emit_u64(emit, ctx, "rdma_rejected_connections", sum.rejected);
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
    emit_u64(emit, ctx, "rdma_rc_conns", sum.curr_connections);
    emit_u64(emit, ctx, "rdma_rc_buffer_bytes", sum.buffer_bytes);
    emit_u64(emit, ctx, "rdma_rc_recv_window", sum.recv_window);
    emit_u64(emit, ctx, "rdma_rc_recv_window_grown", sum.recv_window_grown);
    emit_u64(emit, ctx, "rdma_rc_recv_queue_emptied", sum.recv_queue_emptied);
    net_rdma_ud_stats(emit, ctx);
    rdma_move_stats(emit, ctx);
}

/* ---- opening ------------------------------------------------------------------------- */
static const char *poll_mode_name(void)
{
    return settings.rdma_poll == 1 ? "spin" : settings.rdma_poll == 2 ? "adaptive" : "event";
}

/* Receive credits each RC connection gets: -o rdma_rc_credits, else 32
 * where every client is on RC and 8 in hybrid, where RC is for the busiest
 * few clients and each credit is a registered message buffer. */
unsigned rdma_rc_credits(void)
{
    if (settings.rdma_rc_credits)
        return settings.rdma_rc_credits;
    return settings.rdma_transport == RDMA_SERVE_HYBRID ? 8 : 32;
}

/* RC connections one worker context takes: 32, or with -o rdma_rc_max an
 * even share of that limit and two more (a closing connection keeps its
 * credits until its endpoint is freed), at most 64 and 16,384 receives.
 * The placement skips workers that are full (rdma_place). The buffers
 * behind them are registered as connections come (rdma/pool.h), so this
 * sizes the queues, not the registered memory. */
static unsigned rc_conns_per_worker(unsigned nworkers, unsigned credits)
{
    unsigned conns = 32;
    if (settings.rdma_rc_max > 0)
        conns = (unsigned)(((uint64_t)settings.rdma_rc_max + nworkers - 1) / nworkers + 2);
    if (conns > 64)
        conns = 64;
    if (conns * credits > 16384)
        conns = 16384 / credits;
    return conns;
}

static void ctx_opts_for(struct mcr_rdma_ctx_opts *o, const char *addr, unsigned nworkers)
{
    mcr_rdma_ctx_opts_default(o);
    o->addr = addr;
    o->buf_size = settings.rdma_eager_max;
    o->ack_timeout = (uint8_t)settings.rdma_ack_timeout;
    o->credits = (uint16_t)rdma_rc_credits();
    unsigned conns = rc_conns_per_worker(nworkers, o->credits);
    o->recv_bufs = conns * o->credits;
    o->send_bufs = conns * 16;
    /* a client that returns no credits holds at most this many send
     * buffers waiting, an even share of the worker's: it cannot take
     * those every other connection of the worker needs for its replies */
    o->ep_sends_waiting_max = o->send_bufs / (o->recv_bufs / o->credits);
    /* hybrid: the worker's receive queue holds a connection's credits at
     * first and grows a connection's credits at a time when it runs low
     * (rdma/ctx.h), so its RC clients' receive buffers follow their
     * messages in flight, not their number */
    if (settings.rdma_transport == RDMA_SERVE_HYBRID)
        o->recv_window = o->credits;
    /* spinning: receive buffers go back a few at a time, below the count
     * that makes an explicit credit message (a quarter of the credits) */
    if (settings.rdma_poll != 0)
        o->repost_hold = o->credits / 4 - 1 < 16 ? o->credits / 4 - 1 : 16;
    /* small replies go inline without a completion, one in 32 (or every
     * half send queue) with one: most replies cost no completion to poll
     * and dispatch, and their buffers go back as they are posted */
    o->send_signal_every = 32;
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
        ctx_opts_for(&o, addr, n);
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
    if (settings.rdma_transport == RDMA_SERVE_UD)
        return net_rdma_ud_open(host, port);
    struct mcr_rdma_ctx_opts o;
    char err[256] = "";
    mcr_rdma_ctx_opts_default(&o);
    o.addr = host;
    o.buf_size = settings.rdma_eager_max;
    o.ack_timeout = (uint8_t)settings.rdma_ack_timeout;
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
    int rc = mcr_rdma_rc_listen(ctx, host, port, settings.backlog, rdma_on_accept, l, &l->listener);
    if (rc != 0) {
        log_msg(LOG_ALWAYS, "RDMA: failed to listen on %s: %s; serving TCP only", spec,
                strerror(rc < 0 ? -rc : rc));
        free(l);
        mcr_rdma_ctx_destroy(ctx);
        return 0;
    }
    mcr_rdma_listener_set_placement(l->listener, rdma_place, l);
    mcr_rdma_listener_set_refused(l->listener, rdma_refused, l);
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
            "credits per connection, up to %u receive and %u send buffers per worker, "
            "registered as connections come: up to %u connections per worker; large values "
            "by RDMA READ/WRITE; polling %s)",
            l->addr, mcr_rdma_ctx_device_name(ctx), l->group->nworkers, eff->buf_size, eff->credits,
            eff->recv_bufs, eff->send_bufs, eff->recv_bufs / eff->credits, poll_mode_name());
    l->next = listens;
    listens = l;
    if (settings.rdma_transport & RDMA_SERVE_UD) /* the same port number, UDP port space */
        net_rdma_ud_open(host, mcr_rdma_listener_port(l->listener));
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
    net_rdma_ud_close();
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
    net_rdma_ud_shutdown();
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
