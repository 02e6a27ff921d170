/* transport_rdma_send.c: the sending half of a connection of the RDMA
 * transport (transport_rdma.c): the request stream cut into eager
 * messages, a large request value sent by rendezvous (the server READs it
 * from the request buffer), and the landing buffer opened and advertised
 * for large replies, riding on a request's first message or on a message
 * of its own. */
#include "transport.h"

#include "config.h"

#ifdef HAVE_RDMA

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/ctx.h"
#include "rdma/iov_cut.h"
#include "rdma/mr.h"
#include "rdma/rc.h"
#include "transport_rdma_stream.h"

/* The most request bytes sent ahead of a large value on its RNDV_READ. */
#define RDMA_HEAD_MAX 1024

/* The landing buffer may be advertised again: its last transfer is over
 * and its rkey closed. */
static bool land_ready(const struct rdma_stream *s)
{
    return s->land_need && !s->land_grant.closing;
}

/* The RNDV_WRITE that advertises the landing buffer again, the buffer
 * opened for it (once: a message that could not go keeps its rkey for the
 * next try). 0 or a negative errno. */
/* Opens the landing buffer for the server's next WRITE (a window bound,
 * or a registration), unless it is open. 0 or a negative errno. */
int lmr_rdma_land_open(struct rdma_stream *s)
{
    if (s->land_grant.open)
        return 0;
    return lmr_grant_open(&s->land_grant, s->ep, mcr_rdma_ctx_pd(s->ctx),
                          s->windows ? s->land_reg.mr : NULL, s->land, RDMA_LAND_SIZE,
                          MCR_RDMA_ACCESS_REMOTE_WRITE);
}

static int land_ad(struct rdma_stream *s, struct mcr_rdma_rndv *r, struct mcr_rdma_send *m)
{
    int rc = lmr_rdma_land_open(s);
    if (rc != 0)
        return rc;
    *r = (struct mcr_rdma_rndv){
        .addr = (uintptr_t)s->land, .rkey = s->land_grant.rkey, .len = RDMA_LAND_SIZE};
    *m = (struct mcr_rdma_send){
        .type = MCR_RDMA_MSG_RNDV_WRITE, .request_id = s->land_id + 1, .advertise = r};
    return 0;
}

/* The landing buffer's advertisement went out. */
static void land_advertised(struct rdma_stream *s)
{
    s->land_id++;
    s->land_need = false;
    s->land_out = true;
}

/* The landing buffer cannot be opened (no registration possible): large
 * replies come in eager messages from now on. */
static void land_give_up(struct rdma_stream *s)
{
    s->land_need = false;
}

/* Sends one eager message of iov's bytes (at most the endpoint's eager
 * payload). A landing buffer to advertise again, or else the value buffer
 * `carried` (when not advertised yet), rides on it, its bind in the same
 * doorbell. 0, -EAGAIN (no send buffer or credit) or another error. */
static int send_eager(struct rdma_stream *s, const struct iovec *iov, int iovcnt,
                      struct value_buf *carried)
{
    struct mcr_rdma_send m = {.type = MCR_RDMA_MSG_EAGER};
    struct mcr_rdma_rndv region;
    bool with_land = land_ready(s);
    bool with_value = !with_land && carried != NULL && !carried->advertised;
    bool batch = with_land || with_value;
    if (batch)
        mcr_rdma_ctx_batch_begin(s->ctx);
    if (with_land && land_ad(s, &region, &m) != 0) {
        land_give_up(s);
        with_land = false;
        m = (struct mcr_rdma_send){.type = MCR_RDMA_MSG_EAGER};
    } else if (with_value && lmr_rdma_value_ad(s, carried, &region, &m) != 0) {
        carried->advertised = true; /* never told: the value comes in the stream */
        with_value = false;
        m = (struct mcr_rdma_send){.type = MCR_RDMA_MSG_EAGER};
    }
    m.iov = iov;
    m.iovcnt = iovcnt;
    int rc = mcr_rdma_ep_send(s->ep, &m);
    if (batch)
        mcr_rdma_ctx_batch_end(s->ctx);
    if (rc != 0)
        return rc;
    if (with_land)
        land_advertised(s);
    if (with_value)
        carried->advertised = true;
    return 0;
}

/* A request larger than one message whose large value goes by
 * rendezvous: its head (header, extras, key: the pieces before the large
 * value) rides on an RNDV_READ as its payload, so the server has it at
 * once and can READ the value straight into the item (without a head it
 * would first READ the region's start to find out what it is); up to one
 * request buffer of what follows is copied into the request buffer,
 * opened for the server to read exactly those bytes. *took: the bytes
 * taken. 1 done (or nothing to do now: *took 0), 0 the message goes eager
 * after all, -1 the connection failed. */
static int push_rendezvous(struct rdma_stream *s, struct value_buf *carried,
                           const struct mcr_rdma_stream_out *out, size_t *took)
{
    const struct iovec *iov = out->iov;
    int iovcnt = out->iovcnt;
    size_t max_payload = out->max_payload;
    *took = 0;
    size_t rest = 0;
    for (int k = out->at.index; k < iovcnt; k++)
        rest += iov[k].iov_len - (k == out->at.index ? out->at.offset : 0);
    if (rest <= max_payload)
        return 0;
    if (s->src_busy || !lmr_grant_idle(&s->src_grant))
        return 1; /* kept until the server pulled the last one */
    if (carried != NULL && !carried->advertised) {
        int ads = lmr_rdma_send_value_ads(s, NULL); /* an RNDV_READ cannot carry it */
        if (ads <= 0)
            return ads < 0 ? -1 : 1;
    }
    struct iovec head_iov[MCR_RDMA_MSG_IOV_MAX];
    int nhead = 0;
    size_t head = 0;
    int k = out->at.index;
    size_t koff = out->at.offset;
    while (k < iovcnt && iov[k].iov_len - koff <= max_payload && nhead < MCR_RDMA_MSG_IOV_MAX &&
           head + iov[k].iov_len - koff <= RDMA_HEAD_MAX) {
        head_iov[nhead].iov_base = (char *)iov[k].iov_base + koff;
        head_iov[nhead++].iov_len = iov[k].iov_len - koff;
        head += iov[k].iov_len - koff;
        k++;
        koff = 0;
    }
    if (k == iovcnt || iov[k].iov_len - koff <= max_payload) {
        nhead = 0; /* no large piece close enough: all in the region */
        head = 0;
        k = out->at.index;
        koff = out->at.offset;
    }
    rest -= head;
    size_t want = rest < RDMA_LAND_SIZE ? rest : RDMA_LAND_SIZE;
    size_t got = 0;
    while (got < want) {
        size_t avail = iov[k].iov_len - koff;
        size_t take = avail < want - got ? avail : want - got;
        memcpy(s->src + got, (const char *)iov[k].iov_base + koff, take);
        got += take;
        koff += take;
        if (koff == iov[k].iov_len) {
            k++;
            koff = 0;
        }
    }
    /* exactly these bytes open for the server to read, the bind and the
     * RNDV_READ in one doorbell */
    mcr_rdma_ctx_batch_begin(s->ctx);
    int rc = lmr_grant_open(&s->src_grant, s->ep, mcr_rdma_ctx_pd(s->ctx),
                            s->windows ? s->src_reg.mr : NULL, s->src, (uint32_t)got,
                            MCR_RDMA_ACCESS_REMOTE_READ);
    if (rc != 0) {
        mcr_rdma_ctx_batch_end(s->ctx);
        if (s->windows)
            return -1; /* the bind failed: the connection fails */
        free(s->src);  /* no registration possible: eager from now on */
        s->src = NULL;
        return 0;
    }
    struct mcr_rdma_rndv r = {
        .addr = (uintptr_t)s->src, .rkey = s->src_grant.rkey, .len = (uint32_t)got};
    struct mcr_rdma_send m = {.type = MCR_RDMA_MSG_RNDV_READ,
                              .request_id = s->src_id + 1,
                              .iov = head_iov,
                              .iovcnt = nhead,
                              .advertise = &r};
    rc = mcr_rdma_ep_send(s->ep, &m);
    if (rc != 0)
        lmr_grant_close(&s->src_grant, s->ep); /* not advertised after all */
    mcr_rdma_ctx_batch_end(s->ctx);
    if (rc == -EAGAIN)
        return 1;
    if (rc != 0)
        return -1;
    s->src_id++;
    s->src_busy = true;
    *took = head + got;
    return 1;
}

/* push_iov's sink (rdma/stream.h): one eager message of the request
 * stream, or a rendezvous for a large value. */
struct push_state {
    struct rdma_stream *s;
    struct value_buf *carried; /* a value buffer's advertisement that may ride along */
};

static ssize_t push_message(void *owner, const struct mcr_rdma_stream_out *out,
                            const struct iovec *msg_iov, int n, size_t msg_len, bool whole)
{
    struct push_state *ps = owner;
    struct rdma_stream *s = ps->s;
    if (!whole && msg_len == out->max_payload && s->src != NULL) {
        size_t took;
        int r = push_rendezvous(s, ps->carried, out, &took);
        if (r != 0)
            return r < 0 ? -1 : (ssize_t)took;
    }
    int rc = send_eager(s, msg_iov, n, ps->carried);
    if (rc == -EAGAIN)
        return 0;
    return rc == 0 ? (ssize_t)msg_len : -1;
}

/* Hands the bytes of iov to the endpoint in eager messages (or, for a
 * large value, a rendezvous) until done or no send buffer is free; returns
 * bytes taken, or -1 when the connection failed. */
ssize_t lmr_rdma_push_iov(struct rdma_stream *s, const struct iovec *iov, int iovcnt)
{
    /* a buffer whose last transfer just ended is usually closed by now
     * (on rxe its invalidation completes within its post): one poll, no
     * system call, lets its next advertisement ride on these bytes, and a
     * large request use the request buffer now rather than at a later call */
    if (s->land_grant.closing || s->src_grant.closing)
        mcr_rdma_ctx_poll(s->ctx);
    if (s->ep == NULL || s->closed)
        return -1;
    /* value buffers first (they must reach the server before their
     * requests): one rides on the first message unless the landing
     * buffer does, the others go on their own */
    struct value_buf *carried = land_ready(s) ? NULL : lmr_rdma_value_ad_to_carry(s);
    int ads = lmr_rdma_send_value_ads(s, carried);
    if (ads <= 0)
        return ads;
    struct push_state ps = {.s = s, .carried = carried};
    bool failed;
    size_t taken = mcr_rdma_stream_push(iov, iovcnt, mcr_rdma_ep_max_eager_payload(s->ep),
                                        push_message, &ps, &failed);
    if (failed)
        return -1;
    if (carried != NULL && !carried->advertised) {
        size_t all = 0;
        for (int k = 0; k < iovcnt; k++)
            all += iov[k].iov_len;
        if (taken == all && lmr_rdma_send_value_ads(s, NULL) < 0)
            return -1; /* nothing carried it: on its own */
    }
    return (ssize_t)taken;
}

/* Sends what was kept for later. false when the connection failed. */
bool lmr_rdma_flush_out(struct rdma_stream *s)
{
    if (s->out.len == 0)
        return true;
    struct iovec iov = {s->out.buf + s->out.off, s->out.len};
    ssize_t n = lmr_rdma_push_iov(s, &iov, 1);
    if (n < 0)
        return false;
    mcr_rdma_bytes_take(&s->out, NULL, (size_t)n);
    return true;
}

/* (Re-)advertises the landing buffer in a message of its own. Used when
 * the client waits for input with nothing to send (the server may hold
 * more large output); otherwise the advertisement rides on the next
 * request's first message (push_iov), off the path of the reply that
 * freed the buffer. */
void lmr_rdma_advertise(struct rdma_stream *s)
{
    if (!land_ready(s) || s->ep == NULL || s->closed)
        return;
    struct mcr_rdma_rndv r;
    struct mcr_rdma_send m;
    mcr_rdma_ctx_batch_begin(s->ctx);
    int rc = land_ad(s, &r, &m);
    if (rc != 0) {
        mcr_rdma_ctx_batch_end(s->ctx);
        land_give_up(s);
        return;
    }
    rc = mcr_rdma_ep_send(s->ep, &m);
    mcr_rdma_ctx_batch_end(s->ctx);
    if (rc == 0) {
        land_advertised(s);
    } else if (rc != -EAGAIN) {
        char why[96];
        snprintf(why, sizeof(why), "advertising the landing buffer failed: %s", strerror(-rc));
        lmr_rdma_abort(s, why);
    }
}

#endif
