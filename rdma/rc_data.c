/* rdma/rc_data.c: the RC data path: eager sends, credit-based flow control,
 * receive validation and dispatch, rendezvous RDMA READ/WRITE, and the RC
 * endpoint function table. Connection setup and teardown are in rc_cm.c.
 *
 * Credits: the peer granted us peer_credits receives. Every SEND uses one;
 * every received header returns some (piggy-backed, or in an explicit CREDIT
 * message once credit_threshold are owed). A data message needs two credits:
 * the last one is kept for a credit message, so two peers that both ran out
 * can always give credits back to each other and neither ever sends into a
 * missing receive (no receiver-not-ready). Work requests that cannot go out
 * yet wait in the endpoint's FIFO, in order.
 *
 * Validation: every received header passes mcr_rdma_wire_check() and the
 * credit accounting below before anything else looks at it; a peer that
 * breaks a rule is disconnected (only that endpoint).
 */
#include "rdma/mr.h"
#include "rdma/rc_internal.h"
#include "rdma/wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void enqueue(struct rc_ep *rc, struct mcr_rdma_op *op)
{
    if (op->kind == MCR_RDMA_OP_SEND)
        rc->sends_waiting++;
    op->next = NULL;
    if (rc->wait_tail != NULL)
        rc->wait_tail->next = op;
    else
        rc->wait_head = op;
    rc->wait_tail = op;
}

static struct mcr_rdma_op *dequeue(struct rc_ep *rc)
{
    struct mcr_rdma_op *op = rc->wait_head;
    if (op != NULL) {
        if (op->kind == MCR_RDMA_OP_SEND)
            rc->sends_waiting--;
        rc->wait_head = op->next;
        if (rc->wait_head == NULL)
            rc->wait_tail = NULL;
        op->next = NULL;
    }
    return op;
}

static void finish_rdma_op(struct rc_ep *rc, struct mcr_rdma_op *op, int status)
{
    rc->rdma_outstanding--;
    if (!rc->silent && !rc->base.ctx->destroying && rc->base.cb.on_rdma_done != NULL)
        rc->base.cb.on_rdma_done(&rc->base, op->cookie, status, rc->base.user);
    free(op);
}

/* Gives back what an operation that never reached the device holds: a
 * send buffer (the credit message's is the endpoint's own), or an RDMA
 * operation, reported failed. */
static void release_op(struct rc_ep *rc, struct mcr_rdma_op *op, int status)
{
    if (op->is_credit_msg)
        rc->credit_busy = false;
    else if (op->kind == MCR_RDMA_OP_SEND)
        mcr_rdma_pool_put(&rc->base.ctx->send_pool, op->buf_index);
    else
        finish_rdma_op(rc, op, status);
}

void rc_drop_waiting(struct rc_ep *rc, int status)
{
    struct mcr_rdma_op *op;
    while ((op = dequeue(rc)) != NULL)
        release_op(rc, op, status);
}

/* Gives back an operation whose work request was built (build_wr counted
 * an RDMA operation as posted) but never posted. */
static void unpost_op(struct rc_ep *rc, struct mcr_rdma_op *op, int status)
{
    if (op->kind != MCR_RDMA_OP_SEND)
        rc->rdma_posted--;
    release_op(rc, op, status);
}

/* Fills the work request for op and numbers it (sq_seq). An eager
 * message that goes inline may go without a completion (unsignaled_max;
 * not while lingering, whose end waits for the last completion). */
static void build_wr(struct rc_ep *rc, struct mcr_rdma_op *op, struct ibv_send_wr *wr,
                     struct ibv_sge *sge)
{
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    op->seq = ++rc->sq_seq;
    if (op->kind == MCR_RDMA_OP_SEND) {
        /* field by field: the provider reads no other field of a SEND
         * (clearing the whole request was a fifth of this function) */
        wr->wr_id = (uintptr_t)op;
        wr->next = NULL;
        wr->sg_list = sge;
        wr->num_sge = 1;
        wr->send_flags = IBV_SEND_SIGNALED;
        wr->imm_data = 0;
    } else {
        *wr = (struct ibv_send_wr){
            .wr_id = (uintptr_t)op, .sg_list = sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED};
    }
    if (op->kind == MCR_RDMA_OP_SEND) {
        bool own = op == &rc->credit_op; /* inline, from the endpoint */
        unsigned char *buf =
            own ? rc->credit_hdr : mcr_rdma_pool_buf(&ctx->send_pool, op->buf_index);
        if (!op->raw) {
            uint16_t credits = htole16(rc->to_return);
            memcpy(buf + 4, &credits, 2); /* header field "credits" */
            rc->peer_unreturned -= rc->to_return;
            rc->to_return = 0;
        }
        rc->send_credits--;
        uint32_t in_flight = (uint32_t)rc->peer_credits - rc->send_credits;
        if (in_flight > rc->stats.max_in_flight)
            rc->stats.max_in_flight = in_flight;
        *sge =
            (struct ibv_sge){.addr = (uintptr_t)buf,
                             .length = op->len,
                             .lkey = own ? 0 : mcr_rdma_pool_lkey(&ctx->send_pool, op->buf_index)};
        wr->opcode = IBV_WR_SEND;
        if (op->len <= rc->max_inline) {
            wr->send_flags |= IBV_SEND_INLINE; /* the device copies it now: no memory lookup */
            if (rc->unsignaled_run < rc->unsignaled_max && !op->is_credit_msg && !rc->lingering) {
                rc->unsignaled_run++;
                wr->send_flags = IBV_SEND_INLINE;
                wr->wr_id = mcr_rdma_wr_unsignaled(rc->link.serial, op->seq);
                return;
            }
        }
    } else if (op->kind == MCR_RDMA_OP_BIND) {
        wr->num_sge = 0;
        wr->opcode = IBV_WR_BIND_MW;
        wr->bind_mw.mw = op->mw;
        wr->bind_mw.rkey = op->rkey;
        wr->bind_mw.bind_info = (struct ibv_mw_bind_info){.mr = op->mr,
                                                          .addr = (uintptr_t)op->local,
                                                          .length = op->len,
                                                          .mw_access_flags = op->mw_access};
        rc->rdma_posted++;
    } else if (op->kind == MCR_RDMA_OP_INVALIDATE) {
        wr->num_sge = 0;
        wr->opcode = IBV_WR_LOCAL_INV;
        wr->invalidate_rkey = op->rkey;
        rc->rdma_posted++;
    } else {
        *sge = (struct ibv_sge){.addr = (uintptr_t)op->local, .length = op->len, .lkey = op->lkey};
        wr->opcode = op->kind == MCR_RDMA_OP_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
        wr->wr.rdma.remote_addr = op->remote_addr;
        wr->wr.rdma.rkey = op->rkey;
        rc->rdma_posted++;
    }
    rc->unsignaled_run = 0; /* this one asks for a completion */
}

/* Work request wr of op reached the device. One without a completion went
 * inline: the device holds its bytes, so its buffer goes back now (and op
 * with it). A posted bind: the window's key is the new one from now on
 * (the device took the old one from the window when the bind was posted). */
static void op_posted(struct rc_ep *rc, struct mcr_rdma_op *op, const struct ibv_send_wr *wr)
{
    if (!(wr->send_flags & IBV_SEND_SIGNALED)) {
        rc->stats.msgs_sent++;
        mcr_rdma_pool_put(&rc->base.ctx->send_pool, op->buf_index);
        return;
    }
    rc->sq_signaled++;
    if (op->kind == MCR_RDMA_OP_BIND)
        op->mw->rkey = op->rkey;
}

void rc_post_batch(struct mcr_rdma_ep *ep)
{
    struct rc_ep *rc = rc_from_ep(ep);
    uint32_t n = rc->batch_len;
    if (n == 0)
        return;
    rc->batch_len = 0;
    for (uint32_t i = 0; i + 1 < n; i++)
        rc->batch_wr[i].next = &rc->batch_wr[i + 1];
    rc->batch_wr[n - 1].next = NULL;
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(rc->qp, rc->batch_wr, &bad);
    uint32_t posted = n;
    if (err != 0) { /* the ones before the first refused went */
        posted = 0;
        while (posted < n && bad != &rc->batch_wr[posted])
            posted++;
        if (posted == n)
            posted = 0; /* the provider named none of ours: take none as posted */
    }
    struct mcr_rdma_ctx *ctx = ep->ctx;
    ctx->stats.doorbells++;
    ctx->stats.work_requests += posted;
    for (uint32_t i = 0; i < posted; i++)
        op_posted(rc, rc->batch_op[i], &rc->batch_wr[i]);
    if (err == 0)
        return;
    /* the endpoint closes before the refused operations are given back: their
     * callbacks may try to send, which would collect into batch_wr again.
     * They were the last numbered: their numbers are taken back. */
    struct mcr_rdma_op *refused[RC_BATCH_MAX];
    uint32_t nrefused = 0;
    for (uint32_t i = posted; i < n; i++)
        refused[nrefused++] = rc->batch_op[i];
    rc->sq_seq -= nrefused;
    rc_fail(rc, -err, "ibv_post_send failed");
    for (uint32_t i = 0; i < nrefused; i++)
        unpost_op(rc, refused[i], -err);
}

void rc_drop_batch(struct rc_ep *rc, int status)
{
    uint32_t n = rc->batch_len;
    rc->batch_len = 0;
    rc->sq_seq -= n; /* the last numbered */
    for (uint32_t i = 0; i < n; i++)
        unpost_op(rc, rc->batch_op[i], status);
}

/* Posts one work request, or collects it while the context batches,
 * unless `now` (its doorbell at once; only with nothing collected for the
 * endpoint before it, which would go after it). On failure the endpoint
 * closes and the op is released here. */
static void post_op(struct rc_ep *rc, struct mcr_rdma_op *op, bool now)
{
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    if (ctx->batching && !now) {
        if (rc->batch_len == RC_BATCH_MAX) {
            rc_post_batch(&rc->base);
            if (rc->state == RC_CLOSING) { /* that post failed */
                release_op(rc, op, -ECONNABORTED);
                return;
            }
        }
        uint32_t i = rc->batch_len++;
        rc->batch_op[i] = op;
        build_wr(rc, op, &rc->batch_wr[i], &rc->batch_sge[i]);
        mcr_rdma_ctx_batch_add(ctx, &rc->link);
        return;
    }
    struct ibv_sge sge;
    struct ibv_send_wr wr;
    build_wr(rc, op, &wr, &sge);
    struct ibv_send_wr *bad;
    int err = ibv_post_send(rc->qp, &wr, &bad);
    ctx->stats.doorbells++;
    if (err != 0) {
        rc->sq_seq--;                              /* the last numbered */
        rc_fail(rc, -err, "ibv_post_send failed"); /* first: see rc_post_batch */
        unpost_op(rc, op, -err);
        return;
    }
    ctx->stats.work_requests++;
    op_posted(rc, op, &wr);
}

static void send_credit_msg(struct rc_ep *rc)
{
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    bool inline_hdr = rc->max_inline >= MCR_RDMA_HDR_BASE;
    if (rc->credit_busy || (!inline_hdr && rc->credit_buf == UINT32_MAX))
        return; /* retried when the one in flight completes */
    uint32_t idx = inline_hdr ? 0 : rc->credit_buf;
    rc->credit_busy = true;
    struct mcr_rdma_op *op = inline_hdr ? &rc->credit_op : &ctx->send_ops[idx];
    *op = (struct mcr_rdma_op){.kind = MCR_RDMA_OP_SEND,
                               .ep = &rc->base,
                               .impl = &mcr_rdma_rc_impl,
                               .buf_index = idx,
                               .len = MCR_RDMA_HDR_BASE,
                               .is_credit_msg = true};
    struct mcr_rdma_hdr h = {
        .magic = MCR_RDMA_MAGIC, .version = MCR_RDMA_VERSION, .type = MCR_RDMA_MSG_CREDIT};
    mcr_rdma_hdr_encode(&h, inline_hdr ? rc->credit_hdr : mcr_rdma_pool_buf(&ctx->send_pool, idx));
    rc->stats.credit_msgs_sent++;
    post_op(rc, op, false);
}

/* bind_after_completions: a memory window bind waits in the queue (and
 * everything after it) until every work request posted before it has
 * completed. Soft-RoCE (rxe, Linux 6.1) carries out a bind when the
 * requester reaches it, and again when a retransmission (ACK timeout,
 * NAK, RNR) walks the send queue back from its oldest unacknowledged
 * request: a bind behind an unacknowledged message is redone, and the
 * second bind of a type 2 window fails (the window is bound already,
 * under another key). The requester then stops in its error state without
 * resending the unacknowledged message, so no completion ever comes: the
 * connection hangs (a fresh rdma:// connection through a lossy link:
 * HELLO sent, its acknowledgement lost, the landing buffer's bind behind
 * it). With nothing unacknowledged before it, a bind is done and completed
 * before any retransmission can walk back over it. The wait costs a
 * round trip only where messages are in flight at a bind (a large
 * transfer behind pipelined requests). */

/* A send may be posted now: room on the send queue and two credits (the
 * last one stays for a credit message, so both sides can always return
 * credits). */
static bool send_may_post(const struct rc_ep *rc)
{
    return rc_sq_used(rc) < rc->sq_depth && rc->send_credits >= 2;
}

void rc_pump(struct rc_ep *rc)
{
    /* the usual case, after each receive: nothing waits, no credit
     * message is due and no close waits for a completion */
    if (rc->wait_head == NULL && !rc->lingering && rc->to_return < rc->credit_threshold)
        return;
    if (rc->base.ctx->destroying || rc->peer_left)
        return;
    while (rc->state == RC_ESTABLISHED && rc->wait_head != NULL && rc_sq_used(rc) < rc->sq_depth) {
        struct mcr_rdma_op *op = rc->wait_head;
        if (op->kind == MCR_RDMA_OP_SEND && !send_may_post(rc)) {
            if (!op->counted_stall) {
                op->counted_stall = true;
                rc->base.credit_stalls++;
            }
            break;
        }
        if (op->kind != MCR_RDMA_OP_SEND && rc->rdma_posted >= MCR_RDMA_OPS_PER_EP)
            break;
        if (op->kind == MCR_RDMA_OP_BIND && rc_sq_used(rc) > 0)
            break; /* behind nothing unacknowledged (bind_after_completions) */
        post_op(rc, dequeue(rc), false);
    }
    /* a lingering close, and a bind (bind_after_completions), wait for the
     * last work request's completion: after sends without one, a credit
     * message asks for one (the last credit is always left for it) */
    bool waits_for_completion =
        rc->wait_head == NULL ? rc->lingering : rc->wait_head->kind == MCR_RDMA_OP_BIND;
    bool unsignaled_last =
        waits_for_completion && rc->batch_len == 0 && rc->sq_signaled == 0 && rc_sq_used(rc) > 0;
    if (rc->state == RC_ESTABLISHED && (rc->to_return >= rc->credit_threshold || unsignaled_last) &&
        rc->send_credits >= 1 && rc_sq_used(rc) < rc->sq_depth)
        send_credit_msg(rc);
}

/* ---- receive side --------------------------------------------------------- */

static void reject_msg(struct rc_ep *rc, uint32_t buf_index, const char *reason)
{
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    char why[96];
    snprintf(why, sizeof(why), "malformed message: %s", reason);
    ctx->stats.malformed++;
    if (mcr_rdma_ctx_repost_recv(ctx, buf_index) != 0)
        mcr_rdma_pool_put(&ctx->recv_pool, buf_index);
    rc_fail(rc, -EPROTO, why);
}

void rc_on_recv(struct mcr_rdma_ep *ep, uint32_t buf_index, const struct ibv_wc *wc)
{
    struct rc_ep *rc = rc_from_ep(ep);
    struct mcr_rdma_ctx *ctx = ep->ctx;
    if (wc->status != IBV_WC_SUCCESS) {
        /* e.g. a message longer than our buffers: the QP is in error now */
        char why[96];
        snprintf(why, sizeof(why), "work completion failed: %s (status %d) on receive",
                 ibv_wc_status_str(wc->status), (int)wc->status);
        if (mcr_rdma_ctx_repost_recv(ctx, buf_index) != 0)
            mcr_rdma_pool_put(&ctx->recv_pool, buf_index);
        rc_fail(rc, -EIO, why);
        return;
    }
    if (rc->state == RC_CONNECTING)
        rc_establish_on_first_message(rc);
    if (rc->state != RC_ESTABLISHED) {
        if (mcr_rdma_ctx_repost_recv(ctx, buf_index) != 0)
            mcr_rdma_pool_put(&ctx->recv_pool, buf_index);
        return;
    }
    const unsigned char *buf = mcr_rdma_pool_buf(&ctx->recv_pool, buf_index);
    struct mcr_rdma_wire_limits limits = {
        .max_payload = ctx->max_payload,
        .max_credits = rc->peer_credits,
        .max_rndv_len = ctx->opts.max_rndv_len,
    };
    struct mcr_rdma_hdr h;
    const char *bad = mcr_rdma_wire_check(buf, wc->byte_len, &limits, &h);
    if (bad != NULL) {
        reject_msg(rc, buf_index, bad);
        return;
    }
    if (++rc->peer_unreturned > rc->granted) {
        reject_msg(rc, buf_index, "peer sent without credit");
        return;
    }
    if ((uint32_t)rc->send_credits + h.credits > rc->peer_credits) {
        reject_msg(rc, buf_index, "more credits returned than were used");
        return;
    }
    rc->send_credits += h.credits;
    if (h.type != MCR_RDMA_MSG_CREDIT && (rc->paused || rc->held_count > 0)) {
        /* keep it, in order, until resume; its credit waits too */
        uint32_t slot = (rc->held_head + rc->held_count) % rc->granted;
        rc->held_index[slot] = buf_index;
        rc->held_len[slot] = wc->byte_len;
        rc->held_count++;
        if (h.credits > 0 && rc->state == RC_ESTABLISHED)
            rc_pump(rc); /* the credits it carried are ours now: waiting sends may go */
        return;
    }
    if (h.type != MCR_RDMA_MSG_CREDIT) {
        struct mcr_rdma_msg msg = {
            .type = h.type,
            .flags = h.flags,
            .request_id = h.request_id,
            .payload = buf + mcr_rdma_hdr_len(h.type),
            .payload_len = h.payload_len,
            .rndv = {.addr = h.rndv_addr, .rkey = h.rndv_rkey, .len = h.rndv_len},
        };
        rc->stats.msgs_received++;
        if (ep->cb.on_message != NULL)
            ep->cb.on_message(ep, &msg, ep->user);
    }
    /* its credit goes back once the buffer is in the queue again; not
     * held back (opts.repost_hold) once the peer has used half its credits */
    mcr_rdma_ctx_defer_repost(ctx, &rc->link, buf_index);
    if (rc->peer_unreturned >= rc->granted / 2)
        mcr_rdma_ctx_repost_due(ctx);
    if (rc->state == RC_ESTABLISHED)
        rc_pump(rc); /* the credits the header returned may let waiting sends go */
}

void rc_recv_reposted(struct mcr_rdma_ep *ep, bool ok)
{
    struct rc_ep *rc = rc_from_ep(ep);
    if (!ok) {
        rc_fail(rc, -EIO, "reposting a receive failed");
        return;
    }
    if (rc->state == RC_ESTABLISHED) {
        rc->to_return++;
        rc_pump(rc);
    }
}

void rc_release_held(struct rc_ep *rc)
{
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    while (rc->held_count > 0) {
        uint32_t idx = rc->held_index[rc->held_head];
        rc->held_head = (rc->held_head + 1) % rc->granted;
        rc->held_count--;
        if (ctx->destroying || mcr_rdma_ctx_repost_recv(ctx, idx) != 0)
            mcr_rdma_pool_put(&ctx->recv_pool, idx);
    }
}

void rc_pause(struct mcr_rdma_ep *ep)
{
    rc_from_ep(ep)->paused = true;
}

void rc_resume(struct mcr_rdma_ep *ep)
{
    struct rc_ep *rc = rc_from_ep(ep);
    struct mcr_rdma_ctx *ctx = ep->ctx;
    rc->paused = false;
    if (rc->delivering)
        return; /* resumed from a callback: the running loop goes on */
    rc->delivering = true;
    uint32_t held_before = rc->held_count;
    while (!rc->paused && rc->held_count > 0 && rc->state == RC_ESTABLISHED) {
        uint32_t idx = rc->held_index[rc->held_head];
        uint32_t len = rc->held_len[rc->held_head];
        rc->held_head = (rc->held_head + 1) % rc->granted;
        rc->held_count--;
        const unsigned char *buf = mcr_rdma_pool_buf(&ctx->recv_pool, idx);
        struct mcr_rdma_hdr h; /* validated when it arrived */
        mcr_rdma_hdr_decode(buf, len, &h);
        struct mcr_rdma_msg msg = {
            .type = h.type,
            .flags = h.flags,
            .request_id = h.request_id,
            .payload = buf + mcr_rdma_hdr_len(h.type),
            .payload_len = h.payload_len,
            .rndv = {.addr = h.rndv_addr, .rkey = h.rndv_rkey, .len = h.rndv_len},
        };
        rc->stats.msgs_received++;
        if (ep->cb.on_message != NULL)
            ep->cb.on_message(ep, &msg, ep->user);
        if (mcr_rdma_ctx_repost_recv(ctx, idx) != 0) {
            mcr_rdma_pool_put(&ctx->recv_pool, idx);
            rc_fail(rc, -EIO, "reposting a receive failed");
            break;
        }
        if (rc->state == RC_ESTABLISHED)
            rc->to_return++;
    }
    rc->delivering = false;
    if (rc->peer_left && rc->held_count == 0 && rc->state == RC_ESTABLISHED)
        rc_fail(rc, -ECONNRESET, "peer disconnected"); /* all it sent was delivered */
    else if (rc->peer_left && rc->held_count < held_before)
        rc->linger_until_ms = rc_now_ms() + MCR_RDMA_LINGER_MS; /* the owner is reading them */
    else if (rc->state == RC_ESTABLISHED)
        rc_pump(rc);
}

static bool rc_peer_left(const struct mcr_rdma_ep *ep)
{
    const struct rc_ep *rc = (const struct rc_ep *)ep;
    return rc->peer_left;
}

/* A completion for work request seq: it and every one before it finished. */
static void sq_done(struct rc_ep *rc, uint32_t seq)
{
    if ((int32_t)(seq - rc->sq_done_seq) > 0)
        rc->sq_done_seq = seq;
}

void rc_on_send_wc(struct mcr_rdma_ep *ep, struct mcr_rdma_op *op, const struct ibv_wc *wc)
{
    struct rc_ep *rc = rc_from_ep(ep);
    rc->sq_signaled--;
    sq_done(rc, op->seq);
    bool ok = wc->status == IBV_WC_SUCCESS;
    enum mcr_rdma_op_kind kind = op->kind; /* finish_rdma_op frees op */
    if (kind == MCR_RDMA_OP_SEND) {
        if (op->is_credit_msg) {
            rc->credit_busy = false;
        } else {
            if (ok)
                rc->stats.msgs_sent++;
            mcr_rdma_pool_put(&ep->ctx->send_pool, op->buf_index);
        }
    } else {
        rc->rdma_posted--;
        finish_rdma_op(rc, op, ok ? 0 : -EIO);
    }
    if (!ok && rc->state != RC_CLOSING && !rc->peer_left) { /* a peer that left flushes them */
        char why[96];
        snprintf(why, sizeof(why), "work completion failed: %s (status %d) on %s",
                 ibv_wc_status_str(wc->status), (int)wc->status, mcr_rdma_op_kind_name(kind));
        rc_fail(rc, wc->status == IBV_WC_REM_ACCESS_ERR ? -EACCES : -EIO, why);
    }
    if (rc->state == RC_ESTABLISHED)
        rc_pump(rc);
}

void rc_on_unsignaled_wc(struct mcr_rdma_ep *ep, const struct ibv_wc *wc)
{
    struct rc_ep *rc = rc_from_ep(ep);
    if ((uint32_t)(wc->wr_id >> 32 & MCR_RDMA_WR_SERIAL_MASK) !=
        (rc->link.serial & MCR_RDMA_WR_SERIAL_MASK))
        return; /* an endpoint gone before it left its QP number to this one */
    sq_done(rc, (uint32_t)wc->wr_id);
    if (wc->status != IBV_WC_SUCCESS && rc->state != RC_CLOSING && !rc->peer_left) {
        char why[96];
        snprintf(why, sizeof(why), "work completion failed: %s (status %d) on send",
                 ibv_wc_status_str(wc->status), (int)wc->status);
        rc_fail(rc, -EIO, why);
    }
    if (rc->state == RC_ESTABLISHED)
        rc_pump(rc);
}

/* ---- endpoint table ------------------------------------------------------ */

/* The smaller of our send buffers and the peer's receive buffers. */
static size_t rc_max_eager_payload(const struct mcr_rdma_ep *ep)
{
    const struct rc_ep *rc = (const struct rc_ep *)ep;
    uint32_t ours = ep->ctx->max_payload;
    return rc->peer_max_payload != 0 && rc->peer_max_payload < ours ? rc->peer_max_payload : ours;
}

static int new_send_op(struct rc_ep *rc, struct mcr_rdma_op **out)
{
    struct mcr_rdma_ctx *ctx = rc->base.ctx;
    if (rc->state != RC_ESTABLISHED || rc->lingering || rc->peer_left)
        return -ENOTCONN;
    uint32_t waiting_max = ctx->opts.ep_sends_waiting_max;
    if (waiting_max > 0 && rc->sends_waiting >= waiting_max)
        return -EAGAIN; /* this endpoint's share of the send buffers is spent */
    int64_t idx = mcr_rdma_pool_get(&ctx->send_pool);
    if (idx < 0)
        return -EAGAIN;
    struct mcr_rdma_op *op = &ctx->send_ops[idx];
    /* the fields a SEND reads (clearing all of it cost more than the rest
     * of this function) */
    op->kind = MCR_RDMA_OP_SEND;
    op->ep = &rc->base;
    op->impl = &mcr_rdma_rc_impl;
    op->next = NULL;
    op->buf_index = (uint32_t)idx;
    op->len = 0;
    op->is_credit_msg = op->raw = op->counted_stall = false;
    *out = op;
    return 0;
}

static int rc_send(struct mcr_rdma_ep *ep, const struct mcr_rdma_send *msg)
{
    struct rc_ep *rc = rc_from_ep(ep);
    struct mcr_rdma_ctx *ctx = ep->ctx;
    bool rndv = msg->type == MCR_RDMA_MSG_RNDV_READ || msg->type == MCR_RDMA_MSG_RNDV_WRITE;
    if ((msg->type != MCR_RDMA_MSG_EAGER && !rndv) || (msg->flags & ~MCR_RDMA_F_ALL) ||
        (rndv != (msg->advertise != NULL)) || msg->iovcnt < 0 ||
        (msg->iovcnt > 0 && msg->iov == NULL))
        return -EINVAL;
    if (rndv && (msg->advertise->len == 0 || msg->advertise->addr == 0))
        return -EINVAL;
    size_t total = 0, limit = rc_max_eager_payload(ep);
    for (int i = 0; i < msg->iovcnt; i++) {
        total += msg->iov[i].iov_len;
        if (total > limit)
            return -EMSGSIZE;
    }
    struct mcr_rdma_op *op;
    int err = new_send_op(rc, &op);
    if (err != 0)
        return err;
    unsigned char *buf = mcr_rdma_pool_buf(&ctx->send_pool, op->buf_index);
    struct mcr_rdma_hdr h = {
        .magic = MCR_RDMA_MAGIC,
        .version = MCR_RDMA_VERSION,
        .type = msg->type,
        .flags = msg->flags,
        .request_id = msg->request_id,
    };
    if (rndv) {
        h.rndv_addr = msg->advertise->addr;
        h.rndv_rkey = msg->advertise->rkey;
        h.rndv_len = msg->advertise->len;
    }
    size_t at = mcr_rdma_hdr_encode(&h, buf);
    for (int i = 0; i < msg->iovcnt; i++) {
        if (msg->iov[i].iov_len > 0)
            memcpy(buf + at, msg->iov[i].iov_base, msg->iov[i].iov_len);
        at += msg->iov[i].iov_len;
    }
    op->len = (uint32_t)at;
    if (rc->wait_head == NULL && send_may_post(rc) && !ctx->destroying) {
        /* the usual case: nothing waits before it, and it may go; with
         * post_now its doorbell rings now, not after the rest of the pass
         * (straight to the device when the pass collected nothing for the
         * endpoint: no batch to build and walk) */
        bool alone = msg->post_now && rc->batch_len == 0;
        post_op(rc, op, alone);
        if (msg->post_now && !alone)
            rc_post_batch(ep);
        return 0;
    }
    enqueue(rc, op);
    rc_pump(rc);
    return 0;
}

int mcr_rdma_rc_send_raw(struct mcr_rdma_ep *ep, const void *bytes, uint32_t len)
{
    struct rc_ep *rc = rc_from_ep(ep);
    if (len > ep->ctx->opts.buf_size)
        return -EMSGSIZE;
    struct mcr_rdma_op *op;
    int err = new_send_op(rc, &op);
    if (err != 0)
        return err;
    memcpy(mcr_rdma_pool_buf(&ep->ctx->send_pool, op->buf_index), bytes, len);
    op->len = len;
    op->raw = true;
    enqueue(rc, op);
    rc_pump(rc);
    return 0;
}

static int rc_rdma(struct mcr_rdma_ep *ep, enum mcr_rdma_op_kind kind,
                   const struct mcr_rdma_rndv *remote, uint32_t offset, const void *local,
                   struct ibv_mr *local_mr, uint32_t len, void *cookie)
{
    struct rc_ep *rc = rc_from_ep(ep);
    if (rc->state != RC_ESTABLISHED || rc->lingering || rc->peer_left)
        return -ENOTCONN;
    if (remote == NULL || local == NULL || local_mr == NULL || len == 0)
        return -EINVAL;
    if ((uint64_t)offset + len > remote->len)
        return -ERANGE; /* outside what the peer advertised */
    uintptr_t lo = (uintptr_t)local, mr_lo = (uintptr_t)local_mr->addr;
    if (local_mr->pd != ep->ctx->dev.pd || lo < mr_lo || lo - mr_lo > local_mr->length ||
        len > local_mr->length - (lo - mr_lo))
        return -EINVAL; /* local buffer not inside its registration */
    if (len > ep->ctx->max_msg_size)
        return -EMSGSIZE;
    struct mcr_rdma_op *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return -ENOMEM;
    *op = (struct mcr_rdma_op){.kind = kind,
                               .ep = ep,
                               .impl = &mcr_rdma_rc_impl,
                               .len = len,
                               .remote_addr = remote->addr + offset,
                               .rkey = remote->rkey,
                               .local = (void *)local,
                               .lkey = local_mr->lkey,
                               .cookie = cookie};
    rc->rdma_outstanding++;
    enqueue(rc, op);
    rc_pump(rc);
    return 0;
}

static int rc_rdma_read(struct mcr_rdma_ep *ep, const struct mcr_rdma_rndv *remote, uint32_t offset,
                        void *local, struct ibv_mr *local_mr, uint32_t len, void *cookie)
{
    return rc_rdma(ep, MCR_RDMA_OP_READ, remote, offset, local, local_mr, len, cookie);
}

static int rc_rdma_write(struct mcr_rdma_ep *ep, const struct mcr_rdma_rndv *remote,
                         uint32_t offset, const void *local, struct ibv_mr *local_mr, uint32_t len,
                         void *cookie)
{
    return rc_rdma(ep, MCR_RDMA_OP_WRITE, remote, offset, local, local_mr, len, cookie);
}

/* Queues a window operation like an RDMA READ or WRITE (in order with the
 * sends, at most MCR_RDMA_OPS_PER_EP posted). */
static int queue_window_op(struct rc_ep *rc, const struct mcr_rdma_op *proto)
{
    if (rc->state != RC_ESTABLISHED || rc->lingering || rc->peer_left)
        return -ENOTCONN;
    struct mcr_rdma_op *op = malloc(sizeof(*op));
    if (op == NULL)
        return -ENOMEM;
    *op = *proto;
    rc->rdma_outstanding++;
    enqueue(rc, op);
    rc_pump(rc);
    return 0;
}

static int rc_bind_window(struct mcr_rdma_ep *ep, struct ibv_mw *mw, struct ibv_mr *mr, void *addr,
                          uint32_t len, unsigned access, uint32_t *rkey, void *cookie)
{
    uintptr_t lo = (uintptr_t)addr, mr_lo = (uintptr_t)(mr ? mr->addr : NULL);
    if (mw == NULL || mr == NULL || len == 0 || mr->pd != ep->ctx->dev.pd ||
        mw->pd != ep->ctx->dev.pd || lo < mr_lo || lo - mr_lo > mr->length ||
        len > mr->length - (lo - mr_lo) || mcr_rdma_window_access(access) == 0)
        return -EINVAL;
    uint32_t key = ibv_inc_rkey(mw->rkey);
    int err = queue_window_op(rc_from_ep(ep),
                              &(struct mcr_rdma_op){.kind = MCR_RDMA_OP_BIND,
                                                    .ep = ep,
                                                    .impl = &mcr_rdma_rc_impl,
                                                    .len = len,
                                                    .rkey = key,
                                                    .local = addr,
                                                    .cookie = cookie,
                                                    .mw = mw,
                                                    .mr = mr,
                                                    .mw_access = mcr_rdma_window_access(access)});
    if (err == 0)
        *rkey = key;
    return err;
}

static int rc_invalidate_window(struct mcr_rdma_ep *ep, uint32_t rkey, void *cookie)
{
    return queue_window_op(rc_from_ep(ep), &(struct mcr_rdma_op){.kind = MCR_RDMA_OP_INVALIDATE,
                                                                 .ep = ep,
                                                                 .impl = &mcr_rdma_rc_impl,
                                                                 .rkey = rkey,
                                                                 .cookie = cookie});
}

static void rc_stats(const struct mcr_rdma_ep *ep, struct mcr_rdma_ep_stats *out)
{
    const struct rc_ep *rc = (const struct rc_ep *)ep;
    *out = rc->stats;
    out->credit_stalls = ep->credit_stalls;
    /* posted work requests are sends, credit messages and RDMA operations */
    out->sends_unfinished = rc->sends_waiting + rc_sq_used(rc) - rc->rdma_posted;
    out->sends_waiting = rc->sends_waiting;
    out->credits_left = rc->send_credits;
}

const struct mcr_rdma_ep_ops mcr_rdma_rc_ops = {
    .name = "rc",
    .send = rc_send,
    .rdma_read = rc_rdma_read,
    .rdma_write = rc_rdma_write,
    .bind_window = rc_bind_window,
    .invalidate_window = rc_invalidate_window,
    .close = rc_close,
    .abort = rc_abort,
    .pause = rc_pause,
    .resume = rc_resume,
    .max_eager_payload = rc_max_eager_payload,
    .stats = rc_stats,
    .peer_left = rc_peer_left,
    .peer_name = rc_peer_name,
};
