/* rdma/rc_cm.c: RC connection management over the RDMA CM: client connect,
 * server listen/accept, connection events, closing and freeing. The data path
 * (messages, credits, rendezvous) is in rc_data.c; this file must not post
 * sends or interpret received messages.
 *
 * Lifecycle of an endpoint: RESOLVING (client) -> CONNECTING -> ESTABLISHED
 * -> CLOSING. Any failure, a peer disconnect (or a peer process dying: its
 * kernel sends the disconnect), a malformed message or a local close moves it
 * to CLOSING: the QP is put into the error state so every posted work request
 * completes (flushed), and once none is outstanding the endpoint reports
 * on_closed and is freed (QP, then CM id, then memory).
 *
 * A listener may place a new connection on another context (another worker
 * thread): it creates the endpoint and QP for that context, migrates the CM
 * id to the context's event channel once the request is acknowledged, and
 * hands the endpoint over; the owning thread attaches it, runs on_accept and
 * accepts (rc_adopt). Only rc_new and the QP creation run on the listener's
 * thread; everything else of an endpoint runs on its own context's thread.
 */
#include "rdma/rc_internal.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RC_RETRY_COUNT 7
/* Inline data asked for per send: small messages (a get request and its
 * short reply) are copied into the work request, sparing the device a
 * lookup of the send buffer's memory. */
#define RC_MAX_INLINE 256
/* Receiver-not-ready wait asked of the peer where the shared receive queue
 * may run short (opts.recv_window): 8 is 0.16 ms in the verbs' encoding. */
#define RC_MIN_RNR_TIMER 8

static struct rdma_cm_id *rc_cm_event(struct mcr_rdma_cm_owner *owner, struct rdma_cm_event *ev);
static bool rc_try_reap(struct mcr_rdma_ep *ep, bool check_deadlines);
static void rc_destroy_now(struct mcr_rdma_ep *ep);
static void rc_adopt(struct mcr_rdma_ep *ep);

const struct mcr_rdma_ep_impl mcr_rdma_rc_impl = {
    .on_recv = rc_on_recv,
    .on_send_wc = rc_on_send_wc,
    .try_reap = rc_try_reap,
    .destroy_now = rc_destroy_now,
    .adopt = rc_adopt,
    .post_batch = rc_post_batch,
    .recv_reposted = rc_recv_reposted,
    .on_unsignaled_wc = rc_on_unsignaled_wc,
};

#define NO_CREDIT_BUF UINT32_MAX

/* Send-queue depth for an endpoint of a context that grants `credits`
 * (the QP exists before the peer's credits are known): about as many sends,
 * a CREDIT message and RC_SQ_RDMA_OPS RDMA operations, rounded up to what
 * the device allocates
 * anyway: rxe (and most providers) make a ring of a power of two slots, one
 * kept empty, each slot as large as a work request with the inline bytes,
 * and map it into the process, so every slot is resident memory (512 bytes
 * each with 256 inline bytes). Operations beyond it wait in the endpoint's
 * queue, in order. */
#define RC_SQ_RDMA_OPS 4
static uint32_t rc_sq_depth(uint32_t credits)
{
    uint32_t want = credits + 2 + RC_SQ_RDMA_OPS, slots = 1;
    while (slots < want + 1)
        slots <<= 1;
    return slots - 1;
}

/* Creates an endpoint for ctx and reserves its credits there. Callable from
 * any thread: ctx does not know the endpoint until rc_attach(). NULL with
 * *err -ENOBUFS (no credits left) or -ENOMEM. */
static struct rc_ep *rc_new(struct mcr_rdma_ctx *ctx, int *err)
{
    *err = -ENOBUFS; /* the shared receive queue cannot back more credits */
    if (!mcr_rdma_ctx_reserve_credits(ctx, ctx->opts.credits))
        return NULL;
    *err = -ENOMEM;
    struct rc_ep *rc = calloc(1, sizeof(*rc));
    if (rc == NULL) {
        mcr_rdma_ctx_release_credits(ctx, ctx->opts.credits);
        return NULL;
    }
    rc->base.ops = &mcr_rdma_rc_ops;
    rc->base.ctx = ctx;
    rc->link.impl = &mcr_rdma_rc_impl;
    rc->link.ep = &rc->base;
    rc->cm_owner.on_cm_event = rc_cm_event;
    rc->granted = ctx->opts.credits;
    rc->credit_threshold = rc->granted / 4 > 1 ? rc->granted / 4 : 2;
    rc->sq_depth = rc_sq_depth(ctx->opts.credits);
    /* a completion at least every half send queue: the places of those
     * before it come free only then */
    uint32_t every = ctx->opts.send_signal_every;
    if (every > 1)
        rc->unsignaled_max = every - 1 < rc->sq_depth / 2 ? every - 1 : rc->sq_depth / 2;
    rc->stats.granted_credits = rc->granted;
    rc->credit_buf = NO_CREDIT_BUF;
    rc->held_index = calloc(rc->granted, sizeof(uint32_t));
    rc->held_len = calloc(rc->granted, sizeof(uint32_t));
    if (rc->held_index == NULL || rc->held_len == NULL) {
        free(rc->held_len);
        free(rc->held_index);
        free(rc);
        mcr_rdma_ctx_release_credits(ctx, ctx->opts.credits);
        return NULL;
    }
    *err = 0;
    return rc;
}

/* The credit message's buffer, once the QP tells whether the device takes
 * it inline: a send-pool buffer only where it does not. */
static int rc_take_credit_buf(struct rc_ep *rc)
{
    if (rc->max_inline >= MCR_RDMA_HDR_BASE)
        return 0;
    int64_t credit_buf = mcr_rdma_pool_get(&rc->base.ctx->send_pool);
    if (credit_buf < 0)
        return -ENOBUFS;
    rc->credit_buf = (uint32_t)credit_buf;
    return 0;
}

/* Makes the endpoint known to its context (on the context's thread): the
 * endpoint list, the QP lookup, receives for its credits and, once its QP
 * exists, its credit-message buffer (rc_take_credit_buf). Returns false
 * when no send buffer is left for credit messages or the receives cannot
 * be posted. */
static bool rc_attach(struct rc_ep *rc)
{
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    ctx->stats.granted_credits += rc->granted;
    mcr_rdma_ctx_link_ep(ctx, &rc->link);
    rc->attached = true;
    if (rc->qp != NULL) /* a server's, created on the listener's thread */
        mcr_rdma_ctx_set_qp(ctx, &rc->link, rc->qp->qp_num);
    if (rc->qp != NULL && rc_take_credit_buf(rc) != 0)
        return false;
    return mcr_rdma_ctx_fill_recvs(ctx) == 0; /* before the peer may send */
}

/* Frees what rc_new, rc_attach and later steps created, newest first,
 * but the endpoint's own memory. */
static void rc_release(struct rc_ep *rc, bool destroy_id)
{
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    if (rc->attached) {
        rc_release_held(rc);
        mcr_rdma_ctx_unlink_ep(ctx, &rc->link);
        ctx->stats.granted_credits -= rc->granted;
    }
    if (rc->qp != NULL)
        rdma_destroy_qp(rc->cm_id);
    if (destroy_id && rc->cm_id != NULL)
        rdma_destroy_id(rc->cm_id);
    if (rc->credit_buf != NO_CREDIT_BUF)
        mcr_rdma_pool_put(&ctx->send_pool, rc->credit_buf);
    free(rc->held_len);
    rc->held_len = NULL;
    free(rc->held_index);
    rc->held_index = NULL;
    mcr_rdma_ctx_release_credits(ctx, rc->granted);
}

static void rc_free(struct rc_ep *rc, bool destroy_id)
{
    rc_release(rc, destroy_id);
    free(rc);
}

static struct rc_ep *rc_alloc(struct mcr_rdma_ctx *ctx)
{
    int err;
    struct rc_ep *rc = rc_new(ctx, &err);
    if (rc != NULL && !rc_attach(rc)) {
        rc_free(rc, false);
        rc = NULL;
    }
    return rc;
}

static int rc_create_qp(struct rc_ep *rc)
{
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    if (rc->cm_id->verbs != ctx->dev.verbs)
        return -EXDEV; /* reached through another device than the context's */
    struct ibv_qp_init_attr attr = {
        .send_cq = ctx->dev.cq,
        .recv_cq = ctx->dev.cq,
        .srq = ctx->srq,
        .cap = {.max_send_wr = rc->sq_depth,
                .max_send_sge = 1,
                .max_recv_sge = 1,
                .max_inline_data = RC_MAX_INLINE},
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0, /* completions only where build_wr asks (send_signal_every) */
    };
    if (rdma_create_qp(rc->cm_id, ctx->dev.pd, &attr) != 0) {
        /* a device without inline sends: every send from its buffer */
        attr.cap.max_inline_data = 0;
        if (rdma_create_qp(rc->cm_id, ctx->dev.pd, &attr) != 0)
            return -errno;
    }
    rc->qp = rc->cm_id->qp;
    rc->max_inline = attr.cap.max_inline_data; /* what the device granted */
    /* before rdma_connect or rdma_accept: the QP takes it as it moves to
     * ready-to-send (ctx.h, ack_timeout) */
    uint8_t ack_timeout = ctx->opts.ack_timeout;
    if (ack_timeout != 0 && rdma_set_option(rc->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
                                            &ack_timeout, sizeof(ack_timeout)) != 0)
        return -errno;
    if (rc->attached) { /* a client's: else rc_attach takes it, on the context's thread */
        int err = rc_take_credit_buf(rc);
        if (err != 0)
            return err;
    }
    if (rc->attached)
        mcr_rdma_ctx_set_qp(ctx, &rc->link, rc->qp->qp_num);
    return 0;
}

static void rc_conn_param(struct rc_ep *rc, struct rdma_conn_param *param, unsigned char *pdata)
{
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    struct mcr_rdma_conn_data cd = {.credits = rc->granted, .recv_buf_size = ctx->opts.buf_size};
    mcr_rdma_conn_data_encode(&cd, pdata);
    memset(param, 0, sizeof(*param));
    param->private_data = pdata;
    param->private_data_len = MCR_RDMA_CONN_DATA_SIZE;
    param->responder_resources = ctx->rd_atomic;
    param->initiator_depth = ctx->rd_atomic;
    param->retry_count = RC_RETRY_COUNT;
    param->rnr_retry_count = ctx->opts.rnr_retry;
}

bool rc_set_peer_params(struct rc_ep *rc, const void *private_data, unsigned len)
{
    struct mcr_rdma_conn_data cd;
    if (mcr_rdma_conn_data_decode(private_data, len, &cd) != 0 || cd.credits < 4 ||
        cd.recv_buf_size < MCR_RDMA_HDR_MAX + 64)
        return false;
    rc->peer_credits = cd.credits;
    rc->peer_max_payload = cd.recv_buf_size - MCR_RDMA_HDR_MAX;
    return true;
}

void rc_fail(struct rc_ep *rc, int reason, const char *why)
{
    if (rc->state == RC_CLOSING)
        return;
    if (rc->batch_len > 0 && reason == 0 && rc->state == RC_ESTABLISHED) {
        rc_post_batch(&rc->base); /* what was sent before a local close goes */
        if (rc->state == RC_CLOSING)
            return; /* that post failed and closed the endpoint */
    }
    bool was_connected = rc->state == RC_ESTABLISHED || rc->state == RC_CONNECTING;
    /* before any operation is given back: the callbacks that report them
     * failed may try to send, which a closing endpoint refuses */
    rc->state = RC_CLOSING;
    mcr_rdma_ctx_schedule_reap(rc->base.ctx);
    rc->close_reason = reason;
    snprintf(rc->close_why, sizeof(rc->close_why), "%s", why);
    rc_drop_batch(rc, -ECONNABORTED);
    if (rc->qp != NULL) {
        struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
        ibv_modify_qp(rc->qp, &attr, IBV_QP_STATE); /* flush everything posted */
    }
    if (was_connected)
        rdma_disconnect(rc->cm_id); /* fails harmlessly when already gone */
    rc_drop_waiting(rc, -ECONNABORTED);
}

uint64_t rc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Nothing the owner handed over is left: none waits, none is collected,
 * none is in flight. */
static bool rc_work_done(const struct rc_ep *rc)
{
    return rc->wait_head == NULL && rc->batch_len == 0 && rc_sq_used(rc) == 0;
}

/* A local close lets what was sent before it go first, as a socket's close
 * does: messages waiting for credit and work requests the device has not
 * carried out yet (moving the QP to the error state would flush them).
 * The endpoint takes nothing new meanwhile; it closes once they completed,
 * or after MCR_RDMA_LINGER_MS (checked when the context reaps). */
void rc_close(struct mcr_rdma_ep *ep)
{
    struct rc_ep *rc = rc_from_ep(ep);
    if (rc->state == RC_ESTABLISHED && !rc->lingering && !rc->peer_left &&
        !rc->base.ctx->destroying) {
        if (rc->batch_len > 0)
            rc_post_batch(ep);
        if (rc->state == RC_ESTABLISHED && !rc_work_done(rc)) {
            rc->lingering = true;
            rc->linger_until_ms = rc_now_ms() + MCR_RDMA_LINGER_MS;
            mcr_rdma_ctx_schedule_reap(ep->ctx);
            rc_pump(rc); /* sends without a completion last: one that has one */
            return;
        }
    }
    rc_fail(rc, 0, "closed locally");
}

void rc_peer_disconnected(struct rc_ep *rc)
{
    if (rc->state != RC_ESTABLISHED || rc->held_count == 0 || rc->lingering) {
        if (rc->state == RC_ESTABLISHED)
            rc->peer_left = true; /* the owner may ask until on_closed */
        rc_fail(rc, -ECONNRESET, "peer disconnected");
        return;
    }
    /* nothing goes to a peer that left: what waits for it is dropped (an
     * RDMA operation among them is reported failed) */
    rc->peer_left = true;
    rc->linger_until_ms = rc_now_ms() + MCR_RDMA_LINGER_MS;
    mcr_rdma_ctx_schedule_reap(rc->base.ctx);
    rc_drop_batch(rc, -ECONNRESET);
    rc_drop_waiting(rc, -ECONNRESET);
    rdma_disconnect(rc->cm_id);
}

void rc_abort(struct mcr_rdma_ep *ep)
{
    rc_fail(rc_from_ep(ep), -ECONNABORTED, "aborted locally");
}

static void rc_mark_established(struct rc_ep *rc)
{
    rc->state = RC_ESTABLISHED;
    rc->send_credits = rc->peer_credits;
    rc->stats.peer_credits = rc->peer_credits;
    rc->connected_once = true;
    if (rc->base.cb.on_connected != NULL)
        rc->base.cb.on_connected(&rc->base, rc->base.user);
    if (rc->state == RC_ESTABLISHED)
        rc_pump(rc);
}

/* Endpoint op peer_name: the peer's address as RDMA CM resolved it. */
int rc_peer_name(const struct mcr_rdma_ep *ep, char *buf, size_t len)
{
    const struct rc_ep *rc = (const struct rc_ep *)ep;
    if (rc->cm_id == NULL)
        return -ENOTCONN;
    return mcr_rdma_addr_name(rdma_get_peer_addr(rc->cm_id), buf, len);
}

/* A message can complete before this side saw ESTABLISHED (the peer may
 * send as soon as it is established). The server knows the peer's credits
 * from the request; the client learns them from ESTABLISHED, so drain the CM
 * events first. Returns true when the endpoint is established now. */
bool rc_establish_on_first_message(struct rc_ep *rc)
{
    if (rc->state == RC_CONNECTING && rc->peer_credits == 0)
        mcr_rdma_ctx_dispatch_cm(rc->base.ctx);
    if (rc->state == RC_CONNECTING && rc->peer_credits != 0)
        rc_mark_established(rc);
    return rc->state == RC_ESTABLISHED;
}

static struct rdma_cm_id *rc_cm_event(struct mcr_rdma_cm_owner *owner, struct rdma_cm_event *ev)
{
    struct rc_ep *rc = (struct rc_ep *)((char *)owner - offsetof(struct rc_ep, cm_owner));
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    int rc_err;
    switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (rc->state == RC_RESOLVING &&
            rdma_resolve_route(rc->cm_id, ctx->opts.resolve_timeout_ms) != 0)
            rc_fail(rc, -errno, "rdma_resolve_route failed");
        break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        if (rc->state != RC_RESOLVING)
            break;
        if ((rc_err = rc_create_qp(rc)) != 0) {
            rc_fail(rc, rc_err,
                    rc_err == -EXDEV ? "peer reached through another device"
                                     : "creating the QP failed");
            break;
        }
        struct rdma_conn_param param;
        unsigned char pdata[MCR_RDMA_CONN_DATA_SIZE];
        rc_conn_param(rc, &param, pdata);
        rc->state = RC_CONNECTING;
        if (rdma_connect(rc->cm_id, &param) != 0)
            rc_fail(rc, -errno, "rdma_connect failed");
        break;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
        if (rc->state != RC_CONNECTING)
            break;
        if (rc->peer_credits == 0 && /* client: parameters come with the accept */
            !rc_set_peer_params(rc, ev->param.conn.private_data, ev->param.conn.private_data_len)) {
            ctx->stats.malformed++;
            rc_fail(rc, -EPROTO, "peer is not a memcached-rdma server");
            break;
        }
        rc_mark_established(rc);
        break;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
        rc_fail(rc, -EHOSTUNREACH, rdma_event_str(ev->event));
        break;
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_REJECTED:
        rc_fail(rc, -ECONNREFUSED, rdma_event_str(ev->event));
        break;
    case RDMA_CM_EVENT_DISCONNECTED:
        /* what the peer sent before it left is delivered first, as a
         * socket's reader gets the data before the end of stream: its
         * receive completions may still wait in the queue */
        if (rc->state == RC_ESTABLISHED)
            mcr_rdma_ctx_poll_cq(ctx);
        rc_peer_disconnected(rc);
        break;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        rc_fail(rc, -ENODEV, "RDMA device removed");
        break;
    default:
        break;
    }
    return NULL;
}

int mcr_rdma_rc_connect(struct mcr_rdma_ctx *ctx, const char *host, uint16_t port,
                        const struct mcr_rdma_ep_callbacks *cb, void *user,
                        struct mcr_rdma_ep **out)
{
    *out = NULL;
    char port_str[8];
    snprintf(port_str, sizeof(port_str), "%u", (unsigned)port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, port_str, &hints, &ai) != 0)
        return -EHOSTUNREACH;
    struct rc_ep *rc = rc_alloc(ctx);
    if (rc == NULL) {
        freeaddrinfo(ai);
        return -EBUSY;
    }
    mcr_rdma_ep_set_callbacks(&rc->base, cb, user);
    rc->state = RC_RESOLVING;
    int err = 0;
    if (rdma_create_id(ctx->cm_channel, &rc->cm_id, &rc->cm_owner, RDMA_PS_TCP) != 0)
        err = -errno;
    else if (rdma_resolve_addr(rc->cm_id, NULL, ai->ai_addr, ctx->opts.resolve_timeout_ms) != 0)
        err = -errno;
    freeaddrinfo(ai);
    if (err != 0) {
        rc_free(rc, true);
        return err;
    }
    *out = &rc->base;
    return 0;
}

static bool rc_try_reap(struct mcr_rdma_ep *ep, bool check_deadlines)
{
    struct rc_ep *rc = rc_from_ep(ep);
    if (rc->lingering && rc->state == RC_ESTABLISHED) {
        if (!rc_work_done(rc) && (!check_deadlines || rc_now_ms() < rc->linger_until_ms)) {
            mcr_rdma_ctx_schedule_reap(ep->ctx); /* look again after more progress */
            return false;
        }
        rc_fail(rc, 0, "closed locally");
    }
    if (rc->peer_left && rc->state == RC_ESTABLISHED) {
        if (rc->held_count > 0 && (!check_deadlines || rc_now_ms() < rc->linger_until_ms)) {
            mcr_rdma_ctx_schedule_reap(ep->ctx); /* the owner has not read them yet */
            return false;
        }
        rc_fail(rc, -ECONNRESET, "peer disconnected");
    }
    if (rc->state != RC_CLOSING)
        return false;
    /* those posted without a completion need none: their buffers are back
     * in the pool, and a flush of theirs that comes after the endpoint is
     * gone finds no endpoint (or one of another serial) */
    if (rc->sq_signaled > 0) {
        mcr_rdma_ctx_schedule_reap(ep->ctx); /* look again after more completions */
        return false;
    }
    if (!rc->closed_notified) {
        rc->closed_notified = true;
        if (rc->base.cb.on_closed != NULL && !rc->silent)
            rc->base.cb.on_closed(ep, rc->close_reason, rc->close_why, rc->base.user);
    }
    rc_free(rc, true);
    return true;
}

static void rc_destroy_now(struct mcr_rdma_ep *ep)
{
    struct rc_ep *rc = rc_from_ep(ep);
    rc->silent = true;
    rc_fail(rc, 0, "context destroyed");
    /* Flushed completions come back quickly once the QP is in error. */
    for (int i = 0; i < 1000 && rc->sq_signaled > 0; i++)
        if (mcr_rdma_ctx_poll_cq(ep->ctx) == 0 && rc->sq_signaled > 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    bool drained = rc->sq_signaled == 0;
    rc_release(rc, true);
    if (drained)
        free(rc);
    else /* completions for work requests the device has not given back
          * may still come while the context polls for another endpoint */
        mcr_rdma_ctx_free_after_endpoints(ep->ctx, rc);
}

/* ---- listener ------------------------------------------------------------ */

/* Counts a connection request refused on ctx and, when the listener
 * refused it by itself (why not NULL), tells its owner (rc.h). */
static void listener_refused(struct mcr_rdma_listener *l, struct mcr_rdma_ctx *ctx,
                             struct rdma_cm_id *id, int err, const char *why)
{
    ctx->stats.rejected++;
    if (why == NULL || l->refused == NULL)
        return;
    char peer[64];
    if (mcr_rdma_addr_name(rdma_get_peer_addr(id), peer, sizeof(peer)) != 0)
        peer[0] = '\0';
    l->refused(l, peer, err, why, l->refused_user);
}

/* Asks the owner, then attaches a requested connection's endpoint to its
 * context (its receives posted before the peer may send) and accepts it,
 * or refuses it, on that context's thread. The owner decides first, so a
 * connection it refuses takes no buffers (the pools register theirs as
 * endpoints attach). Returns false when refused: the caller frees the
 * endpoint and destroys the CM id. */
static bool rc_attach_and_accept(struct rc_ep *rc)
{
    struct mcr_rdma_listener *l = rc->listener;
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    /* not CONNECTING: an event of its CM id closed it before it got here */
    if (rc->state != RC_CONNECTING) {
        rdma_reject(rc->cm_id, NULL, 0);
        listener_refused(l, ctx, rc->cm_id, -ECONNABORTED,
                         "the request ended before it was accepted");
        return false;
    }
    if (l->on_accept(l, &rc->base, l->user) != 0) {
        rdma_reject(rc->cm_id, NULL, 0);
        listener_refused(l, ctx, rc->cm_id, -ECONNREFUSED, NULL); /* the owner knows */
        return false;
    }
    /* the owner has the endpoint now: it learns of a failure through on_closed */
    if (!rc_attach(rc)) {
        rdma_reject(rc->cm_id, NULL, 0);
        listener_refused(l, ctx, rc->cm_id, -ENOBUFS, "no buffers for the connection");
        rc_fail(rc, -ENOBUFS, "no buffers for the connection");
    } else if (rdma_accept(rc->cm_id, &rc->accept_param) != 0) {
        int err = -errno;
        rdma_reject(rc->cm_id, NULL, 0);
        listener_refused(l, ctx, rc->cm_id, err, "rdma_accept failed");
        rc_fail(rc, err, "rdma_accept failed");
    } else if (rc->base.ctx->opts.recv_window != 0) {
        /* The shared receive queue may run short of the credits granted
         * (ctx.h, recv_window): the peer retries a message that met an
         * empty queue after this long, not the RDMA CM's 655 ms. Where the
         * device refuses, the longer wait stays: nothing fails. */
        struct ibv_qp_attr attr = {.min_rnr_timer = RC_MIN_RNR_TIMER};
        (void)ibv_modify_qp(rc->qp, &attr, IBV_QP_MIN_RNR_TIMER);
    }
    return true;
}

/* A connection placed on this context by a listener on another thread. */
static void rc_adopt(struct mcr_rdma_ep *ep)
{
    struct rc_ep *rc = rc_from_ep(ep);
    struct mcr_rdma_ctx *ctx = ep->ctx;
    if (ctx->destroying) {
        rdma_reject(rc->cm_id, NULL, 0);
        rc_free(rc, true);
        return;
    }
    if (!rc_attach_and_accept(rc))
        rc_free(rc, true);
}

static struct rdma_cm_id *listener_cm_event(struct mcr_rdma_cm_owner *owner,
                                            struct rdma_cm_event *ev)
{
    struct mcr_rdma_listener *l =
        (struct mcr_rdma_listener *)((char *)owner - offsetof(struct mcr_rdma_listener, cm_owner));
    struct mcr_rdma_ctx *ctx = l->ctx;
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
        return NULL;
    struct rdma_cm_id *id = ev->id;
    struct mcr_rdma_ctx *target = l->place != NULL ? l->place(l, l->place_user) : NULL;
    if (target == NULL)
        target = ctx;
    int err;
    const char *why = NULL;
    struct rc_ep *rc = rc_new(target, &err);
    if (rc == NULL) {
        why = err == -ENOBUFS ? "no receive credits left on the chosen context"
                              : "no memory for the endpoint";
    } else if (!rc_set_peer_params(rc, ev->param.conn.private_data,
                                   ev->param.conn.private_data_len)) {
        err = -EPROTO;
        why = "malformed connection parameters";
        rc_free(rc, false);
        rc = NULL;
    }
    if (rc != NULL) {
        rc->cm_id = id;
        id->context = &rc->cm_owner;
        rc->state = RC_CONNECTING;
        rc->listener = l;
        rc_conn_param(rc, &rc->accept_param, rc->accept_pdata);
        /* Never promise more outstanding READs than the initiator asked for. */
        if (ev->param.conn.initiator_depth < rc->accept_param.responder_resources)
            rc->accept_param.responder_resources = ev->param.conn.initiator_depth;
        if (ev->param.conn.responder_resources < rc->accept_param.initiator_depth)
            rc->accept_param.initiator_depth = ev->param.conn.responder_resources;
        if ((err = rc_create_qp(rc)) != 0) {
            why =
                err == -EXDEV ? "request reached through another device" : "creating the QP failed";
            rc_free(rc, false);
            rc = NULL;
        }
    }
    if (rc == NULL) {
        rdma_reject(id, NULL, 0);
        listener_refused(l, ctx, id, err, why);
        return id;
    }
    if (target != ctx) {
        /* Moved to the target once this event is acknowledged. */
        l->pending = rc;
        return NULL;
    }
    if (!rc_attach_and_accept(rc)) {
        rc_free(rc, false);
        return id;
    }
    return NULL;
}

/* The connection request is acknowledged: give the CM id to the target
 * context's event channel, then queue the endpoint there. The target
 * accepts it on its own thread, so it knows the endpoint before any event
 * or message of it can arrive. */
static void listener_after_ack(struct mcr_rdma_cm_owner *owner)
{
    struct mcr_rdma_listener *l =
        (struct mcr_rdma_listener *)((char *)owner - offsetof(struct mcr_rdma_listener, cm_owner));
    struct rc_ep *rc = l->pending;
    if (rc == NULL)
        return;
    l->pending = NULL;
    struct mcr_rdma_ctx *target = rc->base.ctx;
    if (rdma_migrate_id(rc->cm_id, target->cm_channel) != 0) {
        int err = -errno;
        rdma_reject(rc->cm_id, NULL, 0);
        listener_refused(l, l->ctx, rc->cm_id, err,
                         "moving the request to the chosen context failed");
        rc_free(rc, true);
        return;
    }
    mcr_rdma_ctx_hand_over(target, &rc->link);
}

void mcr_rdma_listener_set_placement(struct mcr_rdma_listener *listener, mcr_rdma_place_fn place,
                                     void *user)
{
    listener->place = place;
    listener->place_user = user;
}

void mcr_rdma_listener_set_refused(struct mcr_rdma_listener *listener, mcr_rdma_refused_fn refused,
                                   void *user)
{
    listener->refused = refused;
    listener->refused_user = user;
}

static void listener_destroy_now(struct mcr_rdma_listener_link *link)
{
    mcr_rdma_listener_destroy((struct mcr_rdma_listener *)link);
}

int mcr_rdma_rc_listen(struct mcr_rdma_ctx *ctx, const char *addr, uint16_t port, int backlog,
                       mcr_rdma_accept_fn on_accept, void *user, struct mcr_rdma_listener **out)
{
    *out = NULL;
    char port_str[8];
    snprintf(port_str, sizeof(port_str), "%u", (unsigned)port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(addr, port_str, &hints, &ai) != 0)
        return -EINVAL;
    struct mcr_rdma_listener *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        freeaddrinfo(ai);
        return -ENOMEM;
    }
    l->link.destroy_now = listener_destroy_now;
    l->cm_owner.on_cm_event = listener_cm_event;
    l->cm_owner.after_ack = listener_after_ack;
    l->ctx = ctx;
    l->on_accept = on_accept;
    l->user = user;
    int err = 0;
    if (rdma_create_id(ctx->cm_channel, &l->cm_id, &l->cm_owner, RDMA_PS_TCP) != 0) {
        err = -errno;
    } else if (rdma_bind_addr(l->cm_id, ai->ai_addr) != 0) {
        err = -errno;
    } else if (l->cm_id->verbs != NULL && l->cm_id->verbs != ctx->dev.verbs) {
        err = -EXDEV;
    } else if (rdma_listen(l->cm_id, backlog) != 0) {
        err = -errno;
    }
    freeaddrinfo(ai);
    if (err != 0) {
        if (l->cm_id != NULL)
            rdma_destroy_id(l->cm_id);
        free(l);
        return err;
    }
    mcr_rdma_ctx_link_listener(ctx, &l->link);
    *out = l;
    return 0;
}

uint16_t mcr_rdma_listener_port(const struct mcr_rdma_listener *listener)
{
    return ntohs(rdma_get_src_port(listener->cm_id));
}

void mcr_rdma_listener_destroy(struct mcr_rdma_listener *listener)
{
    if (listener == NULL)
        return;
    mcr_rdma_ctx_unlink_listener(listener->ctx, &listener->link);
    rdma_destroy_id(listener->cm_id);
    free(listener);
}
