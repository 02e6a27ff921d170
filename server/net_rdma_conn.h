/* net_rdma_conn.h: the state of the daemon's RDMA connections and worker
 * contexts, shared by the files of the RDMA transport (private to them):
 * net_rdma.c (listeners, worker contexts, polling, stats), net_rdma_conn.c
 * (a connection's life: accept, readiness, failure, close, the transport
 * table), net_rdma_recv.c (the receive path: input stream, rendezvous
 * READs) and net_rdma_send.c (the send path: eager output, rendezvous
 * WRITEs, RNDV_DONE). The byte stream itself is rdma/stream.h's. */
#ifndef MCR_NET_RDMA_CONN_H
#define MCR_NET_RDMA_CONN_H

#include "config.h"

#ifdef HAVE_RDMA

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "conn.h"
#include "items.h"
#include "net_rdma.h"
#include "net_rdma_vbuf.h"
#include "rdma/ctx.h"
#include "rdma/mr.h"
#include "rdma/rc.h"
#include "rdma/stream.h"

/* Output bytes ahead of a value (a reply's header and flags, or its key)
 * that ride on the value's RNDV_DONE instead of a message of their own. */
#define RDMA_DONE_HEAD_MAX 512

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
    uint64_t buffer_bytes;  /* message buffers the worker context registered (a gauge) */
    /* the worker context's receive window (a gauge), times it grew, times
     * its receive queue ran empty (rdma/ctx.h, recv_window) */
    uint64_t recv_window;
    uint64_t recv_window_grown;
    uint64_t recv_queue_emptied;
    uint64_t rejected; /* connection requests the worker context refused (a copy) */
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
    struct mcr_rdma_bytes in; /* received, not yet read */
    uint64_t stalls_seen;     /* endpoint's credit_stalls already counted */
    bool peer_gone;
    bool client_left; /* the client disconnected (not a failure): see rconn_client_gone */
    bool want_read, want_write;
    bool send_blocked; /* no send buffer was free */
    bool paused;
    bool counted;   /* in curr_connections */
    bool accepting; /* accepted, not yet counted (rdma_rc_max holds them a slot) */
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
    /* Moves (net_rdma_move.h): the client sent HELLO (it follows the
     * server); MOVE to UD went; its END came; ours went, or waits for a
     * send buffer (end_pending); intervals since ours went; messages in
     * the current interval. */
    bool movable, move_sent, end_in, end_out, end_pending;
    unsigned end_ticks;
    uint64_t msgs;
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
    struct event *reap_ev; /* comes back while endpoints close (rdma_watch_reaps) */
    struct event *move_ev; /* hybrid: every -o rdma_move_interval_ms (rconn_move_tick) */
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
    /* Some connection has a send or an end waiting for a free send buffer
     * (rdone_pending, done_pending, send_blocked, end_pending): only then
     * does a pass walk the connections (unblock_writers). */
    bool writers_waiting;
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
    /* connection requests its own context refused (a copy of the
     * context's count, kept by the main thread for the stats) */
    uint64_t rejected;
};

#define CTR_ADD(rw, field, n)                                                                      \
    __atomic_store_n(&(rw)->ctr.field, __atomic_load_n(&(rw)->ctr.field, __ATOMIC_RELAXED) + (n),  \
                     __ATOMIC_RELAXED)
/* A connection's send or end waits for a free send buffer (see
 * rdma_worker.writers_waiting). */
static inline void rconn_writer_waits(struct rdma_conn *rc)
{
    rc->rw->writers_waiting = true;
}

#define CTR_SUB(rw, field, n)                                                                      \
    __atomic_store_n(&(rw)->ctr.field, __atomic_load_n(&(rw)->ctr.field, __ATOMIC_RELAXED) - (n),  \
                     __ATOMIC_RELAXED)

/* net_rdma.c */
uint64_t rdma_rc_conns(void);   /* RC connections open, all workers */
unsigned rdma_rc_credits(void); /* receive credits per RC connection */

/* net_rdma_conn.c */
void rconn_unlink_free(struct rdma_conn *rc);
void rconn_release_held(struct rdma_conn *rc);
void rdma_watch_reaps(struct rdma_worker *rw);
void rconn_move_tick(struct rdma_conn *rc, unsigned interval_ms);
bool rconn_client_gone(const struct rdma_conn *rc);
void rconn_poke(struct rdma_conn *rc);
void rconn_fail(struct rdma_conn *rc, const char *why);
void rconn_ready_cb(evutil_socket_t fd, short what, void *arg);
void rconn_count_stalls(struct rdma_conn *rc);
int rdma_on_accept(struct mcr_rdma_listener *listener, struct mcr_rdma_ep *ep, void *user);
struct mcr_rdma_ctx *rdma_place(struct mcr_rdma_listener *listener, void *user);
/* A connection request the substrate refused by itself (rdma/rc.h): one
 * log line at -v, as for those rdma_on_accept refuses. */
void rdma_refused(struct mcr_rdma_listener *listener, const char *peer, int err, const char *why,
                  void *user);

/* net_rdma_recv.c */
bool rconn_input_ready(const struct rdma_conn *rc);
bool rconn_messages_held(const struct rdma_conn *rc);
void rconn_resume_if_free(struct rdma_conn *rc);
void rconn_on_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user);
void rconn_send_read_done(struct rdma_conn *rc);
void rconn_read_done(struct rdma_conn *rc, bool direct, int status);
void rconn_try_end(struct rdma_conn *rc);
ssize_t rconn_recv(struct conn *c, void *buf, size_t len);

/* net_rdma_send.c */
void rconn_zero_copy_write_done(struct rdma_conn *rc, int status);
int rconn_send_done(struct rdma_conn *rc);
int rconn_send_control(struct rdma_conn *rc, const void *record, size_t len);
void rconn_input_held(struct rdma_conn *rc);
ssize_t rconn_sendv(struct conn *c, const struct iovec *iov, int iovcnt);

#endif
#endif
