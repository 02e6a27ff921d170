/* transport_rdma_value.c: callers' buffers advertised for the value of one
 * GET (iget) on the RDMA transport: offering a buffer, opening it for the
 * server (transport_rdma_grant.h) and advertising it with RNDV_WRITE and
 * MCR_RDMA_F_VALUE, and closing it when its request completes, before the
 * caller gets it back. The byte stream they join is transport_rdma.c's. */
#include "transport_rdma_stream.h"

#ifdef HAVE_RDMA

#include <errno.h>

/* The RNDV_WRITE that advertises a caller's buffer for one value, the
 * buffer opened for it (once, as the landing buffer's). 0 or a negative
 * errno. */
int lmr_rdma_value_ad(struct rdma_stream *s, struct value_buf *vb, struct mcr_rdma_rndv *r,
                      struct mcr_rdma_send *m)
{
    struct lmr_grant *g = &s->value_grants[vb->grant];
    if (!g->open) {
        int rc = lmr_grant_open(g, s->ep, mcr_rdma_ctx_pd(s->ctx), vb->mr, vb->buf, vb->len,
                                MCR_RDMA_ACCESS_REMOTE_WRITE);
        if (rc != 0)
            return rc;
    }
    *r = (struct mcr_rdma_rndv){.addr = (uintptr_t)vb->buf, .rkey = g->rkey, .len = vb->len};
    *m = (struct mcr_rdma_send){.type = MCR_RDMA_MSG_RNDV_WRITE,
                                .flags = MCR_RDMA_F_VALUE,
                                .request_id = vb->opaque,
                                .advertise = r};
    return 0;
}

/* The value buffer whose advertisement may ride on the next message:
 * the one not yet advertised, when it is the only one. */
struct value_buf *lmr_rdma_value_ad_to_carry(struct rdma_stream *s)
{
    struct value_buf *found = NULL;
    for (unsigned i = 0; i < s->nvbufs; i++) {
        if (s->vbufs[i].advertised)
            continue;
        if (found != NULL)
            return NULL;
        found = &s->vbufs[i];
    }
    return found;
}

/* Advertises, in messages of their own, the value buffers not yet
 * advertised, except `carried` (it rides on the next request message).
 * A buffer that cannot be opened is not advertised: its value comes in
 * the stream. 1: done; 0: no send buffer free (retried with the next
 * push); -1: the connection failed. Each window's bind and the message
 * that advertises it go to the device together (one doorbell). */
int lmr_rdma_send_value_ads(struct rdma_stream *s, const struct value_buf *carried)
{
    for (unsigned i = 0; i < s->nvbufs; i++) {
        struct value_buf *vb = &s->vbufs[i];
        if (vb->advertised || vb == carried)
            continue;
        struct mcr_rdma_rndv r;
        struct mcr_rdma_send m;
        mcr_rdma_ctx_batch_begin(s->ctx);
        int rc = lmr_rdma_value_ad(s, vb, &r, &m);
        if (rc == 0)
            rc = mcr_rdma_ep_send(s->ep, &m);
        else
            vb->advertised = true; /* never told: the value comes in the stream */
        mcr_rdma_ctx_batch_end(s->ctx);
        if (rc == -EAGAIN)
            return 0;
        if (rc != 0 && !vb->advertised)
            return -1;
        vb->advertised = true;
    }
    return 1;
}

bool lmr_rdma_offer_value_buffer(struct lmr_conn *conn, uint32_t opaque, char *buf, size_t len)
{
    struct rdma_stream *s = conn->transport_state;
    if (s->regcache == NULL || s->nvbufs == RDMA_VALUE_BUFS || s->ep == NULL || s->closed ||
        len < mcr_rdma_ep_max_eager_payload(s->ep))
        return false;
    uint32_t adv = len < RDMA_VALUE_MAX ? (uint32_t)len : RDMA_VALUE_MAX;
    /* a buffer that overlaps one still offered gets its value the usual
     * way: written in place, it could overwrite a value not read yet */
    for (unsigned i = 0; i < s->nvbufs; i++)
        if (buf < s->vbufs[i].buf + s->vbufs[i].len && s->vbufs[i].buf < buf + adv)
            return false;
    unsigned slot = 0;
    while (slot < RDMA_VALUE_BUFS &&
           (s->value_grant_taken[slot] || !lmr_grant_idle(&s->value_grants[slot])))
        slot++;
    if (slot == RDMA_VALUE_BUFS)
        return false;
    /* with windows, the registration its window will lie in (no remote
     * access: it may be cached); without, the grant registers it */
    struct ibv_mr *mr = NULL;
    if (s->windows &&
        (mr = mcr_rdma_regcache_get(s->regcache, buf, adv, MCR_RDMA_ACCESS_WINDOW)) == NULL)
        return false;
    /* opened and advertised with the request's bytes (push_iov) */
    s->value_grant_taken[slot] = true;
    s->vbufs[s->nvbufs++] =
        (struct value_buf){.opaque = opaque, .buf = buf, .len = adv, .mr = mr, .grant = slot};
    return true;
}

/* Closes a caller's buffer and returns once the server can no longer reach
 * it: a window's invalidation completed (polled for; on rxe it is there at
 * the first poll), or the connection is ended, whose QP then takes no
 * remote access. */
static void close_value_grant(struct rdma_stream *s, struct lmr_grant *g)
{
    lmr_grant_close(g, s->closed ? NULL : s->ep);
    int64_t deadline = 0;
    for (unsigned round = 0; g->closing && !s->closed; round++) {
        if (round < 4096) {
            mcr_rdma_ctx_poll(s->ctx);
            continue;
        }
        if (deadline == 0)
            deadline = lmr_rdma_now_ms() + RDMA_CLOSE_GRANT_MS;
        if (lmr_rdma_now_ms() >= deadline) {
            lmr_rdma_abort(s, "a value buffer's window was not invalidated in time");
            lmr_grant_drop(g); /* the window goes now, not with the connection */
            return;
        }
        mcr_rdma_ctx_progress(s->ctx, 1);
    }
    lmr_rdma_sync_signal(s); /* messages may have come meanwhile */
}

/* True when input not yet read was written for request `opaque`, whose
 * reply is complete: the server said it wrote more of that request's
 * buffer than the reply used. */
static bool unread_input_of(const struct rdma_stream *s, uint32_t opaque)
{
    for (unsigned k = 0; k < s->nsegs; k++) {
        const struct value_seg *seg = &s->segs[(s->seg_first + k) % RDMA_VALUE_BUFS];
        if (seg->len > 0 && seg->opaque == opaque)
            return true;
    }
    return false;
}

void lmr_rdma_release_value_buffer(struct lmr_conn *conn, uint32_t opaque)
{
    struct rdma_stream *s = conn->transport_state;
    for (unsigned i = 0; i < s->nvbufs; i++) {
        if (s->vbufs[i].opaque != opaque)
            continue;
        if (unread_input_of(s, opaque)) {
            /* the caller may free the buffer now: none of the stream may
             * be read from it any more, so the stream ends here */
            s->nsegs = 0;
            mcr_rdma_bytes_take(&s->in, NULL, s->in.len);
            lmr_rdma_abort(s, "a value buffer was released before its value was read");
        }
        close_value_grant(s, &s->value_grants[s->vbufs[i].grant]);
        s->value_grant_taken[s->vbufs[i].grant] = false;
        if (s->vbufs[i].mr != NULL)
            mcr_rdma_regcache_put(s->regcache, s->vbufs[i].mr);
        s->vbufs[i] = s->vbufs[--s->nvbufs];
        return;
    }
}

#endif
