/* rdma/ctx.h: the per-worker RDMA context.
 *
 * One context per worker thread: the RDMA device (found through the RDMA CM
 * from an address), a protection domain, one completion queue with its
 * completion channel, a shared receive queue fed from a registered receive
 * pool (so memory stays flat however many RC peers connect; both pools
 * register their buffers a connection's credits at a time, as they are
 * first needed), a send pool,
 * the RDMA CM event channel, and every endpoint and listener created on it.
 *
 * Driving it: either call mcr_rdma_ctx_progress() in a loop, or watch the one
 * descriptor mcr_rdma_ctx_fd() in an event loop such as libevent and call
 * mcr_rdma_ctx_handle_events() when it is readable. Optional busy polling
 * (opts.busy_poll_us) spins on the completion queue before sleeping.
 * A context is used by one thread only; the only cross-thread path is a
 * listener placing new connections on other contexts (rc.h), which wakes the
 * target context through its descriptor.
 */
#ifndef MCR_RDMA_CTX_H
#define MCR_RDMA_CTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mcr_rdma_ctx;
struct ibv_pd;

struct mcr_rdma_ctx_opts {
    /* An address that selects the device: a local address of the RDMA
     * interface (servers) or the server's address (clients). Required;
     * read by mcr_rdma_ctx_create only (the string need not outlive it). */
    const char *addr;
    /* addr is the peer's (a client's context): the device is the one the
     * route to addr leaves through, as rdma_resolve_addr picks it without a
     * source address, even when addr is local (on a host with two RDMA
     * devices, the server's own device is the wrong one to send from).
     * false (default): addr is bound when it is a local address (servers,
     * and contexts that both listen and connect), else resolved. */
    bool addr_is_peer;
    uint32_t buf_size;     /* eager buffer size, header included; default 8192 */
    uint32_t recv_bufs;    /* receive buffers in the shared receive queue, at most; 1024 */
    uint32_t send_bufs;    /* send buffers shared by all endpoints, at most; 512 */
    uint16_t credits;      /* receive credits granted to each peer; 32 (>= 4) */
    uint32_t max_rndv_len; /* largest rendezvous region accepted; 64 MiB */
    uint8_t rnr_retry;     /* 0..7 (7: retry forever); default 7. Credits make
                              receiver-not-ready impossible; tests use 0 to
                              prove it. */
    unsigned busy_poll_us; /* spin this long on the CQ before sleeping; 0 */
    /* Messages one endpoint may keep waiting for credit (each holds a send
     * buffer) before its sends return -EAGAIN; 0 (default): no limit but
     * the shared send buffers. A limit keeps a peer that returns no
     * credits from taking every send buffer of the context. */
    uint32_t ep_sends_waiting_max;
    int resolve_timeout_ms; /* address/route resolution; default 2000 */
    /* 0 (default): the shared receive queue holds one receive per credit
     * granted, so a peer never meets receiver-not-ready. N: it holds at
     * most N at first and N more each time a receive completes with fewer
     * than N / 2 left in it or the device reports fewer
     * (IBV_EVENT_SRQ_LIMIT_REACHED), up to one per credit granted: the registered
     * receive buffers follow the messages in flight, not the connections
     * times their credits. A burst beyond the queue meets receiver-not-
     * ready, which the sender's device retries (rnr_retry 7) until the
     * owner posted more (mcr_rdma_ctx_rnr_timer: how soon). */
    uint32_t recv_window;
    /* 0 (default): receive buffers an endpoint is done with go back to the
     * shared receive queue after each pass over completions (and before a
     * sleep). N (up to 16): while the owner busy-polls (set_polling true),
     * they may wait until N of them are due, and go back in one post (one
     * doorbell instead of N); an endpoint whose peer has used half its
     * credits has its buffers (and so its credits) go back at the end of
     * the pass, and all of them go before the owner stops polling. Credits
     * are returned for buffers once they are posted again, so a peer
     * never sends into a missing receive; keep N below a quarter of the
     * credits, so that one post returns fewer credits than make an
     * explicit credit message. */
    uint32_t repost_hold;
    /* 0 (default): RC connections keep the ACK timeout the RDMA CM sets
     * (from the fabric's packet lifetime: 2.1 s on RoCE here). N (1..31):
     * set on each RC connection's CM id before it connects or accepts:
     * a requester sends an unacknowledged packet again after 4.096 us
     * times 2^N (16: 268 ms), and gives up after 7 of those. Lower
     * recovers a lossy fabric's losses sooner, but retransmits where the
     * peer is merely slow to acknowledge. */
    uint8_t ack_timeout;
    /* 0 or 1 (default): every send work request of an RC endpoint asks for
     * a completion. N > 1: an eager message short enough to go inline
     * (the device copies it as it is posted) goes without one, all but
     * every Nth (and at least every half send queue): its send buffer goes
     * back to the pool as it is posted, and the next completion frees its
     * place in the send queue, so a reply costs no completion to poll and
     * dispatch. A failed or flushed one still completes (with an error).
     * The sends an endpoint counts unfinished (stats) include those since
     * its last completion until a later one; a lingering close sends a
     * credit message with a completion to learn they went. */
    uint32_t send_signal_every;
};

/* Defaults for every field except addr. */
void mcr_rdma_ctx_opts_default(struct mcr_rdma_ctx_opts *opts);

/* Returns NULL and a one-line reason in err when no usable RDMA device is
 * behind opts->addr (or resources cannot be created). */
struct mcr_rdma_ctx *mcr_rdma_ctx_create(const struct mcr_rdma_ctx_opts *opts, char *err,
                                         size_t errlen);
/* Closes every endpoint and listener at once (no callbacks are called) and
 * frees everything in reverse order of creation. */
void mcr_rdma_ctx_destroy(struct mcr_rdma_ctx *ctx);

/* Readable when there is work: RDMA CM events, completions, or connections
 * handed over by another thread. Level-triggered. */
int mcr_rdma_ctx_fd(const struct mcr_rdma_ctx *ctx);
/* Non-blocking: handles handed-over connections, RDMA CM events and
 * completions, and frees endpoints whose close has completed (after their
 * on_closed callback), so an event loop needs nothing else. Returns the
 * number of events handled or a negative errno. Callbacks must not destroy
 * the context. */
int mcr_rdma_ctx_handle_events(struct mcr_rdma_ctx *ctx);
/* Busy polling: empties the completion queue once and handles what it
 * finds, without waiting and, on providers whose queues live in user space
 * (rxe, most hardware), without a system call; frees endpoints whose close
 * completed. RDMA CM events still need mcr_rdma_ctx_handle_events() when the
 * descriptor is readable.
 * Returns completions handled or a negative errno. */
int mcr_rdma_ctx_poll(struct mcr_rdma_ctx *ctx);
/* Busy-polling owners (spin and adaptive modes) turn completion events off
 * while they poll, so completions cost no system call: polling true stops
 * re-arming the completion queue (the descriptor then signals RDMA CM
 * events and hand-overs only); polling false arms it again at once, taking
 * the completions that came before (returned, or a negative errno). Callers
 * that set polling must call mcr_rdma_ctx_poll() themselves until they set
 * it back to false. */
int mcr_rdma_ctx_set_polling(struct mcr_rdma_ctx *ctx, bool polling);
/* Waits up to timeout_ms (-1: forever) for CM or completion events, handles
 * them, and frees endpoints whose close finished. Returns events handled (0 on
 * timeout) or a negative errno. */
int mcr_rdma_ctx_progress(struct mcr_rdma_ctx *ctx, int timeout_ms);
/* Some endpoint is closing or waits for a deadline (a lingering close, a
 * departed peer's messages the owner has not read): a closing one ends at
 * a later handle_events, poll or progress, a deadline only at a
 * handle_events or a progress that waits (busy polling reads no clock),
 * so an owner that polls or may sleep with no event to wake it calls
 * handle_events within a short time while this is true. */
bool mcr_rdma_ctx_wants_reap(const struct mcr_rdma_ctx *ctx);

/* Batching: between begin and end, the work requests endpoints post (sends,
 * credit messages, RDMA READs and WRITEs) are collected per endpoint, and
 * end hands each endpoint's collection to the device with one post: one
 * doorbell (a system call on software devices such as rxe) for what one
 * pass over the completions produced, e.g. the RNDV_DONE of a rendezvous
 * and the reply behind it. Order per endpoint is kept. Call end before
 * waiting for anything those work requests would bring; an endpoint that
 * closes locally meanwhile posts its collection first (a reply sent just
 * before closing still goes), one that fails drops it. */
void mcr_rdma_ctx_batch_begin(struct mcr_rdma_ctx *ctx);
void mcr_rdma_ctx_batch_end(struct mcr_rdma_ctx *ctx);

struct ibv_pd *mcr_rdma_ctx_pd(const struct mcr_rdma_ctx *ctx);
/* The device binds type 2 memory windows (IBV_DEVICE_MEM_WINDOW_TYPE_2B):
 * the endpoints' bind_window and invalidate_window work. */
bool mcr_rdma_ctx_has_windows(const struct mcr_rdma_ctx *ctx);
const char *mcr_rdma_ctx_device_name(const struct mcr_rdma_ctx *ctx);
const struct mcr_rdma_ctx_opts *mcr_rdma_ctx_options(const struct mcr_rdma_ctx *ctx);
/* Receive credits the context can still grant (recv_bufs less those
 * reserved by its endpoints, closing ones included); any thread may ask,
 * e.g. a listener's placement. A connection takes opts.credits. */
uint32_t mcr_rdma_ctx_credits_left(struct mcr_rdma_ctx *ctx);

struct mcr_rdma_ctx_stats {
    unsigned endpoints; /* alive, including closing ones */
    unsigned listeners;
    uint32_t granted_credits; /* sum over endpoints, <= recv_bufs */
    uint32_t recv_posted;     /* receive buffers in the shared receive queue */
    uint32_t recv_deferred;   /* receive buffers waiting to go back to it */
    uint32_t recv_bufs_free;  /* receive buffers in neither: the queue holds one
                                 per granted credit */
    uint32_t send_bufs_free;  /* send buffers not in use */
    /* message buffers registered so far: the pools grow a connection's
     * credits at a time as they are needed, up to recv_bufs + send_bufs */
    uint64_t registered_bytes;
    uint64_t malformed;  /* connections closed for a malformed message */
    uint64_t rejected;   /* connection requests refused */
    uint64_t wc_errors;  /* completions with an error status (not flushes) */
    uint64_t rnr_errors; /* receiver-not-ready retries exhausted */
    /* opts.recv_window: receives the queue may hold now (recv_bufs without
     * it), times it grew, and receive completions after which none was
     * counted posted (the count lags the device: a queue may run empty
     * unseen, which the SRQ limit event reports) */
    uint32_t recv_window;
    uint64_t recv_window_grown;
    uint64_t recv_queue_emptied;
    uint64_t doorbells;     /* posts to the send queues (ibv_post_send calls) */
    uint64_t work_requests; /* work requests they carried */
};
void mcr_rdma_ctx_stats(const struct mcr_rdma_ctx *ctx, struct mcr_rdma_ctx_stats *out);

#endif
