/* rdma/endpoint.h: the endpoint interface: what the server's RDMA transport
 * and the client library see of one RDMA peer, whatever the transport.
 *
 * An endpoint is a function table (struct mcr_rdma_ep_ops) plus callbacks the
 * owner installs. The RC implementation is in rc_*.c; a UD implementation
 * provides the same table. Messages are delivered only after their header
 * passed validation; payload pointers are valid only during the callback.
 * Everything runs on the thread that drives the endpoint's context
 * (mcr_rdma_ctx_progress or the fd handlers); nothing here is thread-safe.
 * This header must not expose verbs objects other than ibv_mr for buffers
 * and ibv_mw for memory windows.
 */
#ifndef MCR_RDMA_ENDPOINT_H
#define MCR_RDMA_ENDPOINT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <infiniband/verbs.h>

#include "mcr/rdma_wire.h"

struct mcr_rdma_ctx;
struct mcr_rdma_ep;

/* A rendezvous region: advertised by the initiator, used by the peer. */
struct mcr_rdma_rndv {
    uint64_t addr;
    uint32_t rkey;
    uint32_t len;
};

/* A received, validated message. */
struct mcr_rdma_msg {
    uint8_t type;   /* MCR_RDMA_MSG_EAGER, _RNDV_READ or _RNDV_WRITE */
    uint16_t flags; /* MCR_RDMA_F_* */
    uint32_t request_id;
    const void *payload; /* valid during the callback only */
    uint32_t payload_len;
    struct mcr_rdma_rndv rndv; /* for _RNDV_READ / _RNDV_WRITE */
};

struct mcr_rdma_ep_callbacks {
    /* Connection established; sends are possible from now on. */
    void (*on_connected)(struct mcr_rdma_ep *ep, void *user);
    void (*on_message)(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user);
    /* An RDMA READ or WRITE started by this side finished (status 0) or
     * failed (negative errno). Always called once per started operation, also
     * when the connection goes away, and before on_closed. */
    void (*on_rdma_done)(struct mcr_rdma_ep *ep, void *cookie, int status, void *user);
    /* The endpoint is gone (reason: 0 after a local close, else negative
     * errno) and will be freed when this returns. */
    void (*on_closed)(struct mcr_rdma_ep *ep, int reason, const char *why, void *user);
};

/* What to send. iov may be NULL when iovcnt is 0. For a rendezvous message
 * set `advertise` (type MCR_RDMA_MSG_RNDV_READ or _RNDV_WRITE) to a region
 * registered with the matching remote access. `post_now` matters while the
 * context batches (mcr_rdma_ctx_batch_begin): the message, and what the
 * endpoint collected before it, goes to the device at once instead of at
 * the batch's end (the caller has nothing more to say to this peer now). */
struct mcr_rdma_send {
    uint8_t type;
    uint16_t flags;
    uint32_t request_id;
    const struct iovec *iov;
    int iovcnt;
    const struct mcr_rdma_rndv *advertise;
    bool post_now;
};

struct mcr_rdma_ep_stats {
    uint64_t msgs_sent, msgs_received;
    uint64_t credit_msgs_sent;
    uint64_t credit_stalls;    /* sends queued because no credit was left */
    uint32_t max_in_flight;    /* highest number of our messages the peer had not
                                  yet returned credit for */
    uint16_t peer_credits;     /* credits the peer granted us */
    uint16_t credits_left;     /* of those, usable now (not spent on messages
                                  the peer has not returned credit for) */
    uint16_t granted_credits;  /* credits we granted the peer */
    uint32_t sends_unfinished; /* messages accepted by send (and credit messages)
                                  not yet completed: waiting for credit, or
                                  posted and not yet acknowledged by the peer */
    uint32_t sends_waiting;    /* messages accepted by send and not yet posted
                                  (no credit or no send queue room): they go
                                  out only when the owner polls again */
};

/* The longest a close lingers for what was sent before it (ops.close), and
 * the longest a departed peer's held messages wait for the owner to resume
 * (ops.pause). The deadline is checked when the context reaps, that is when
 * its owner handles events or polls: an owner that may sleep with nothing
 * to wake it handles events every little while as long as
 * mcr_rdma_ctx_wants_reap() says so. */
#define MCR_RDMA_LINGER_MS 2000

struct mcr_rdma_ep_ops {
    const char *name;
    /* Copies the payload; returns 0, -EMSGSIZE (does not fit one eager
     * buffer: use rendezvous), -EAGAIN (no send buffer free right now),
     * -ENOTCONN or -EINVAL. A message without credit waits in the endpoint
     * and goes out when the peer returns credits. */
    int (*send)(struct mcr_rdma_ep *ep, const struct mcr_rdma_send *msg);
    /* Pull [remote->addr + offset, +len) into local (registered in local_mr)
     * or push local into it. The range is checked against the advertised
     * region and the local buffer against its registration. Completion:
     * on_rdma_done(cookie). */
    int (*rdma_read)(struct mcr_rdma_ep *ep, const struct mcr_rdma_rndv *remote, uint32_t offset,
                     void *local, struct ibv_mr *local_mr, uint32_t len, void *cookie);
    int (*rdma_write)(struct mcr_rdma_ep *ep, const struct mcr_rdma_rndv *remote, uint32_t offset,
                      const void *local, struct ibv_mr *local_mr, uint32_t len, void *cookie);
    /* Memory windows (type 2, where mcr_rdma_ctx_has_windows): bind_window
     * opens `mw` over [addr, addr+len) of `mr` (registered with
     * MCR_RDMA_ACCESS_WINDOW, which gives no remote access of its own) to
     * this endpoint's peer only, with `access` (MCR_RDMA_ACCESS_REMOTE_*),
     * under a new rkey (*rkey). It reaches the device in order with the
     * sends, so a message sent after it may advertise the rkey.
     * invalidate_window ends the rkey: once its on_rdma_done(cookie) came,
     * the peer reaches nothing through it (with an error status the
     * connection failed, and its QP takes no remote access any more either).
     * A window is bound again only after its invalidation completed. Both
     * report through on_rdma_done like READ and WRITE. A window still bound
     * holds the endpoint's QP: rxe (Linux 6.1) keeps a reference to the QP
     * per bound type 2 window, and destroying the QP waits 50 s for them.
     * The owner invalidates or frees (mcr_rdma_window_free) its windows by
     * on_closed at the latest (the QP goes when on_closed returns) and
     * before mcr_rdma_ctx_destroy. */
    int (*bind_window)(struct mcr_rdma_ep *ep, struct ibv_mw *mw, struct ibv_mr *mr, void *addr,
                       uint32_t len, unsigned access, uint32_t *rkey, void *cookie);
    int (*invalidate_window)(struct mcr_rdma_ep *ep, uint32_t rkey, void *cookie);
    /* Starts closing; on_closed follows from the context's progress. What
     * was sent before goes first (the endpoint lingers, taking no new
     * sends, for a bounded time). */
    void (*close)(struct mcr_rdma_ep *ep);
    /* Closes at once, dropping what has not gone yet: for a connection
     * that failed (a peer breaking the protocol, a timeout). */
    void (*abort)(struct mcr_rdma_ep *ep);
    /* Stop / restart delivering received messages to on_message. While
     * paused, arriving messages are held in their receive buffers and no
     * credit goes back for them, so the peer stops after its credits: a
     * paused endpoint costs no memory beyond what its credits already
     * reserve. Resume delivers the held messages in order (until a callback
     * pauses again). A peer that disconnects while messages of its are held
     * is not reported at once: resume still delivers them (sends are
     * refused, -ENOTCONN), then on_closed follows (-ECONNRESET), as a
     * socket's reader gets the data before the end of stream; if the owner
     * delivers none of them for MCR_RDMA_LINGER_MS, the rest are dropped
     * and on_closed follows. */
    void (*pause)(struct mcr_rdma_ep *ep);
    void (*resume)(struct mcr_rdma_ep *ep);
    size_t (*max_eager_payload)(const struct mcr_rdma_ep *ep);
    void (*stats)(const struct mcr_rdma_ep *ep, struct mcr_rdma_ep_stats *out);
    /* The peer disconnected: nothing sent now reaches anyone. The endpoint
     * is closing, or stays open only to deliver the messages it held (see
     * pause); on_closed follows either way. */
    bool (*peer_left)(const struct mcr_rdma_ep *ep);
    /* The peer's address as "host:port" ("[host]:port" for IPv6) in buf;
     * 0, or -ENOTCONN / -EAFNOSUPPORT when there is none to give. */
    int (*peer_name)(const struct mcr_rdma_ep *ep, char *buf, size_t len);
};

/* Common head of every endpoint implementation. */
struct mcr_rdma_ep {
    const struct mcr_rdma_ep_ops *ops;
    struct mcr_rdma_ctx *ctx;
    struct mcr_rdma_ep_callbacks cb;
    void *user;
    /* stats.credit_stalls, readable without a copy of the stats */
    uint64_t credit_stalls;
};

static inline void mcr_rdma_ep_set_callbacks(struct mcr_rdma_ep *ep,
                                             const struct mcr_rdma_ep_callbacks *cb, void *user)
{
    ep->cb = *cb;
    ep->user = user;
}
static inline int mcr_rdma_ep_send(struct mcr_rdma_ep *ep, const struct mcr_rdma_send *msg)
{
    return ep->ops->send(ep, msg);
}
static inline int mcr_rdma_ep_rdma_read(struct mcr_rdma_ep *ep, const struct mcr_rdma_rndv *remote,
                                        uint32_t offset, void *local, struct ibv_mr *local_mr,
                                        uint32_t len, void *cookie)
{
    return ep->ops->rdma_read(ep, remote, offset, local, local_mr, len, cookie);
}
static inline int mcr_rdma_ep_rdma_write(struct mcr_rdma_ep *ep, const struct mcr_rdma_rndv *remote,
                                         uint32_t offset, const void *local,
                                         struct ibv_mr *local_mr, uint32_t len, void *cookie)
{
    return ep->ops->rdma_write(ep, remote, offset, local, local_mr, len, cookie);
}
static inline int mcr_rdma_ep_bind_window(struct mcr_rdma_ep *ep, struct ibv_mw *mw,
                                          struct ibv_mr *mr, void *addr, uint32_t len,
                                          unsigned access, uint32_t *rkey, void *cookie)
{
    return ep->ops->bind_window(ep, mw, mr, addr, len, access, rkey, cookie);
}
static inline int mcr_rdma_ep_invalidate_window(struct mcr_rdma_ep *ep, uint32_t rkey, void *cookie)
{
    return ep->ops->invalidate_window(ep, rkey, cookie);
}
static inline void mcr_rdma_ep_close(struct mcr_rdma_ep *ep)
{
    ep->ops->close(ep);
}
static inline void mcr_rdma_ep_abort(struct mcr_rdma_ep *ep)
{
    ep->ops->abort(ep);
}
static inline void mcr_rdma_ep_pause(struct mcr_rdma_ep *ep)
{
    ep->ops->pause(ep);
}
static inline void mcr_rdma_ep_resume(struct mcr_rdma_ep *ep)
{
    ep->ops->resume(ep);
}
static inline size_t mcr_rdma_ep_max_eager_payload(const struct mcr_rdma_ep *ep)
{
    return ep->ops->max_eager_payload(ep);
}
static inline void mcr_rdma_ep_stats(const struct mcr_rdma_ep *ep, struct mcr_rdma_ep_stats *out)
{
    ep->ops->stats(ep, out);
}
/* Sends queued because no credit was left, so far (stats.credit_stalls). */
static inline uint64_t mcr_rdma_ep_credit_stalls(const struct mcr_rdma_ep *ep)
{
    return ep->credit_stalls;
}
static inline bool mcr_rdma_ep_peer_left(const struct mcr_rdma_ep *ep)
{
    return ep->ops->peer_left(ep);
}
static inline int mcr_rdma_ep_peer_name(const struct mcr_rdma_ep *ep, char *buf, size_t len)
{
    return ep->ops->peer_name ? ep->ops->peer_name(ep, buf, len) : -ENOTCONN;
}

#endif
