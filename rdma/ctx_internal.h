/* rdma/ctx_internal.h: context internals shared with endpoint implementations
 * (rc_*.c, later ud_*.c). Not for the server or the client library: they use
 * ctx.h, endpoint.h and rc.h.
 *
 * Completion routing: a receive work request's wr_id is MCR_RDMA_WR_RECV |
 * buffer index (the shared receive queue does not know the connection; the
 * completion's qp_num finds the endpoint). A send-queue work request's wr_id
 * is a struct mcr_rdma_op pointer, which names its endpoint.
 */
#ifndef MCR_RDMA_CTX_INTERNAL_H
#define MCR_RDMA_CTX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rdma/ctx.h"
#include "rdma/device.h"
#include "rdma/endpoint.h"
#include "rdma/pool.h"

#define MCR_RDMA_WR_RECV (UINT64_C(1) << 63)
/* A send-queue work request posted without a completion (ctx opts
 * send_signal_every): its memory may be reused at once, so its wr_id is no
 * pointer but this bit, the endpoint link's serial (bits 32-61, which tell
 * a later endpoint on a reused QP number from the one that posted it) and
 * the work request's sequence number in its send queue (bits 0-31). Only
 * an error or a flush completes it; the completion's qp_num finds the
 * endpoint (impl->on_unsignaled_wc). */
#define MCR_RDMA_WR_UNSIGNALED (UINT64_C(1) << 62)
#define MCR_RDMA_WR_SERIAL_MASK UINT32_C(0x3fffffff)
static inline uint64_t mcr_rdma_wr_unsignaled(uint32_t serial, uint32_t seq)
{
    return MCR_RDMA_WR_UNSIGNALED | (uint64_t)(serial & MCR_RDMA_WR_SERIAL_MASK) << 32 | seq;
}
/* RDMA READ/WRITE work requests posted at once per endpoint (the CQ is sized
 * for this many per admissible endpoint). */
#define MCR_RDMA_OPS_PER_EP 16
/* Receive buffers an endpoint has finished with wait to be posted again
 * (mcr_rdma_ctx_defer_repost), at most this many, and go back to the shared
 * receive queue in one post: after a pass's sends (batch_end), or when the
 * owner polls and finds nothing, or before it sleeps (opts.repost_hold: a
 * busy-polling owner may keep some waiting longer). So reposting is off
 * the path from a request to its reply, on both sides. */
#define MCR_RDMA_REPOST_MAX 16

/* BIND and INVALIDATE open and close a memory window (endpoint.h); they
 * count among an endpoint's RDMA operations. */
enum mcr_rdma_op_kind {
    MCR_RDMA_OP_SEND,
    MCR_RDMA_OP_READ,
    MCR_RDMA_OP_WRITE,
    MCR_RDMA_OP_BIND,
    MCR_RDMA_OP_INVALIDATE
};

/* The kind in words, for the reason a failed work request gives. */
static inline const char *mcr_rdma_op_kind_name(enum mcr_rdma_op_kind kind)
{
    switch (kind) {
    case MCR_RDMA_OP_SEND:
        return "send";
    case MCR_RDMA_OP_READ:
        return "RDMA read";
    case MCR_RDMA_OP_WRITE:
        return "RDMA write";
    case MCR_RDMA_OP_BIND:
        return "memory window bind";
    case MCR_RDMA_OP_INVALIDATE:
        return "memory window invalidation";
    }
    return "work request";
}

/* One send-queue work request, posted or waiting in an endpoint's queue. */
struct mcr_rdma_ep_impl;
struct mcr_rdma_op {
    enum mcr_rdma_op_kind kind;
    struct mcr_rdma_ep *ep;
    const struct mcr_rdma_ep_impl *impl;
    struct mcr_rdma_op *next; /* endpoint's waiting queue */
    /* SEND: send pool buffer holding header + payload */
    uint32_t buf_index;
    uint32_t len;
    bool is_credit_msg;
    bool raw;           /* bytes sent as given: credits not patched in */
    bool counted_stall; /* already counted in credit_stalls */
    uint32_t seq;       /* its work request's sequence number in the send queue */
    /* READ / WRITE (BIND: local and len are the window's range, rkey its
     * new key; INVALIDATE: rkey the key to end) */
    uint64_t remote_addr;
    uint32_t rkey;
    void *local;
    uint32_t lkey;
    void *cookie;
    struct ibv_mw *mw; /* BIND */
    struct ibv_mr *mr; /* BIND: the registration the window lies in */
    int mw_access;     /* BIND: IBV_ACCESS_REMOTE_* */
};

/* What the context calls in an endpoint implementation. */
struct mcr_rdma_ep_impl {
    /* A receive completed (successfully or not) for this endpoint's QP.
     * The implementation returns the buffer with mcr_rdma_ctx_repost_recv(). */
    void (*on_recv)(struct mcr_rdma_ep *ep, uint32_t buf_index, const struct ibv_wc *wc);
    /* A send-queue work request completed (success, error or flush). */
    void (*on_send_wc)(struct mcr_rdma_ep *ep, struct mcr_rdma_op *op, const struct ibv_wc *wc);
    /* Called after each progress round: free the endpoint when its close is
     * complete and return true. check_deadlines: the caller may read the
     * clock (not on the busy-polling path, where a clock read can cost a
     * system call: there deadlines wait for the next event handling). */
    bool (*try_reap)(struct mcr_rdma_ep *ep, bool check_deadlines);
    /* Context destruction: free at once, no callbacks. */
    void (*destroy_now)(struct mcr_rdma_ep *ep);
    /* Runs on the context's own thread for an endpoint another thread
     * created for it and queued with mcr_rdma_ctx_hand_over(). */
    void (*adopt)(struct mcr_rdma_ep *ep);
    /* Posts the work requests the endpoint collected while the context was
     * batching (mcr_rdma_ctx_batch_end). */
    void (*post_batch)(struct mcr_rdma_ep *ep);
    /* A receive buffer it handed to mcr_rdma_ctx_defer_repost() is in the
     * shared receive queue again (ok) or could not be posted: now its credit
     * may go back to the peer. */
    void (*recv_reposted)(struct mcr_rdma_ep *ep, bool ok);
    /* A work request posted without a completion failed or was flushed
     * (wr_id: mcr_rdma_wr_unsignaled); may be NULL where none is posted. */
    void (*on_unsignaled_wc)(struct mcr_rdma_ep *ep, const struct ibv_wc *wc);
};

/* Receiver of RDMA CM events: id->context of every CM id points to one. */
struct mcr_rdma_cm_owner {
    /* Must not destroy CM ids: returns an id to destroy once the event is
     * acknowledged, or NULL. */
    struct rdma_cm_id *(*on_cm_event)(struct mcr_rdma_cm_owner *owner, struct rdma_cm_event *ev);
    /* Optional: called once the event is acknowledged (e.g. to migrate the
     * CM id, which needs every event of the id acknowledged). */
    void (*after_ack)(struct mcr_rdma_cm_owner *owner);
};

/* Context bookkeeping embedded in every endpoint. */
struct mcr_rdma_ep_link {
    const struct mcr_rdma_ep_impl *impl;
    struct mcr_rdma_ep *ep;
    uint32_t qp_num;
    uint32_t serial; /* the context's count of linked endpoints when it was linked */
    bool has_qp;
    struct mcr_rdma_ep_link *hash_next;
    struct mcr_rdma_ep_link *prev, *next;
    struct mcr_rdma_ep_link *inbox_next; /* queued for adoption */
    struct mcr_rdma_ep_link *batch_next; /* holds collected work requests */
    bool batch_listed;
};

/* Context bookkeeping embedded in every listener. */
struct mcr_rdma_listener_link {
    void (*destroy_now)(struct mcr_rdma_listener_link *link);
    struct mcr_rdma_listener_link *prev, *next;
};

#define MCR_RDMA_QP_BUCKETS 256

struct mcr_rdma_ctx {
    struct mcr_rdma_ctx_opts opts;
    /* creation order: */
    struct rdma_event_channel *device_channel;
    struct mcr_rdma_device dev; /* device, protection domain, completion channel and queue */
    int cq_size;
    struct ibv_srq *srq;
    struct mcr_rdma_pool recv_pool;
    struct mcr_rdma_pool send_pool;
    struct mcr_rdma_op *send_ops; /* one per send pool buffer */
    struct rdma_event_channel *cm_channel;
    int wake_fd;  /* eventfd: another thread queued an endpoint */
    int epoll_fd; /* cm_channel, comp_channel, wake_fd and the async fd: mcr_rdma_ctx_fd() */

    struct mcr_rdma_ep_link *by_qp[MCR_RDMA_QP_BUCKETS];
    struct mcr_rdma_ep_link *endpoints; /* all, list head */
    uint32_t next_serial;               /* the next linked endpoint's serial */
    struct mcr_rdma_listener_link *listeners;
    uint32_t max_msg_size;
    bool windows;      /* the device binds type 2 memory windows */
    uint8_t rd_atomic; /* outstanding RDMA READs per QP, both directions */
    bool reap_pending; /* some endpoint is closing */
    bool destroying;   /* mcr_rdma_ctx_destroy runs: no callbacks, no new work */
    bool polling;      /* the owner busy-polls: completions raise no events */
    bool armed;        /* the CQ will raise an event for its next completion */
    bool batching;     /* between mcr_rdma_ctx_batch_begin and _end */
    /* memory of endpoints destroyed with work requests not given back:
     * freed once no completion can reach it (end of mcr_rdma_ctx_destroy) */
    void **kept;
    unsigned nkept;
    struct mcr_rdma_ep_link *batch_list; /* endpoints with collected work requests */
    struct {
        uint32_t buf_index;
        struct mcr_rdma_ep_link *owner; /* NULL once the endpoint is gone */
    } repost[MCR_RDMA_REPOST_MAX];      /* receive buffers waiting to be posted */
    uint32_t repost_count;
    bool repost_due;      /* an endpoint's peer runs low on credits: no holding back */
    uint32_t recv_window; /* receives the queue holds at most now (opts.recv_window) */
    bool srq_limit_armed; /* the device reports the queue falling below half a window */
    /* it did: set by whichever context's thread read the event (the device's
     * asynchronous events are shared by its contexts) */
    atomic_bool srq_low;
    /* Credits promised to peers, including endpoints still in the inbox:
     * other threads reserve here when they place a connection on this
     * context. Never above opts.recv_bufs. */
    atomic_uint admitted_credits;
    /* Endpoints created for this context by other threads. */
    pthread_mutex_t inbox_lock;
    bool inbox_lock_ready;
    atomic_bool inbox_nonempty;
    struct mcr_rdma_ep_link *inbox_head, *inbox_tail;
    uint32_t max_payload;
    struct mcr_rdma_ctx_stats stats;
};

void mcr_rdma_ctx_link_ep(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *link);
void mcr_rdma_ctx_set_qp(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *link, uint32_t qp_num);
void mcr_rdma_ctx_unlink_ep(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *link);
void mcr_rdma_ctx_link_listener(struct mcr_rdma_ctx *ctx, struct mcr_rdma_listener_link *link);
void mcr_rdma_ctx_unlink_listener(struct mcr_rdma_ctx *ctx, struct mcr_rdma_listener_link *link);
/* Handles pending CM events without freeing any endpoint (safe to call
 * from inside completion dispatch). */
int mcr_rdma_ctx_dispatch_cm(struct mcr_rdma_ctx *ctx);
/* Reserves / releases receive credits for one endpoint on ctx; callable
 * from any thread. Reserve fails when the shared receive queue cannot back
 * them. */
bool mcr_rdma_ctx_reserve_credits(struct mcr_rdma_ctx *ctx, uint32_t credits);
void mcr_rdma_ctx_release_credits(struct mcr_rdma_ctx *ctx, uint32_t credits);
/* Queues an endpoint created by another thread for ctx; ctx's thread adopts
 * it (impl->adopt) before it handles any further CM event or completion. */
void mcr_rdma_ctx_hand_over(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *link);
/* Adopts every queued endpoint (on ctx's own thread). */
void mcr_rdma_ctx_adopt_pending(struct mcr_rdma_ctx *ctx);
/* An endpoint started closing: check it after the current event batch. */
void mcr_rdma_ctx_schedule_reap(struct mcr_rdma_ctx *ctx);
/* During mcr_rdma_ctx_destroy: frees mem after the last endpoint is gone
 * (completions for its work requests may come until then). */
void mcr_rdma_ctx_free_after_endpoints(struct mcr_rdma_ctx *ctx, void *mem);
/* Polls the CQ once to empty, dispatching. Returns completions or -EIO. */
int mcr_rdma_ctx_poll_cq(struct mcr_rdma_ctx *ctx);
/* While batching: lists an endpoint that collected a work request, so
 * batch_end posts its collection. */
void mcr_rdma_ctx_batch_add(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *link);
/* Posts the receive buffer back to the shared receive queue. */
int mcr_rdma_ctx_repost_recv(struct mcr_rdma_ctx *ctx, uint32_t buf_index);
/* The endpoint is done with a receive buffer: it is posted again later,
 * with others (MCR_RDMA_REPOST_MAX), and then impl->recv_reposted tells the
 * endpoint, which returns its credit only then. */
void mcr_rdma_ctx_defer_repost(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *owner,
                               uint32_t buf_index);
/* Posts the deferred receive buffers now (those the queue needs; the rest
 * go back to the pool). */
void mcr_rdma_ctx_flush_reposts(struct mcr_rdma_ctx *ctx);
/* The buffers waiting now go back at the end of the pass even where
 * opts.repost_hold would let them wait: a peer runs low on credits. */
void mcr_rdma_ctx_repost_due(struct mcr_rdma_ctx *ctx);
/* Posts receives from the pool until the queue holds one per credit
 * granted to attached endpoints; on the context's thread, before a new
 * endpoint's peer can send. 0 or a negative errno. */
int mcr_rdma_ctx_fill_recvs(struct mcr_rdma_ctx *ctx);

#endif
