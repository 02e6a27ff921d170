/*
 * net_rdma_send.c: the send path of the daemon's RDMA connections.
 *
 * Bytes in, messages out (rdma/stream.h): replies are cut into eager
 * messages of at most the endpoint's eager payload.
 *
 * Rendezvous for output: a client may advertise a landing buffer with an
 * RNDV_WRITE message (one at a time, 4 KiB .. 16 MiB). Output larger than
 * one message then goes by RDMA WRITE, followed by an eager RNDV_DONE
 * message whose payload (include/mcr/rdma_wire.h) is the count of bytes
 * written; RC ordering puts the data in place before that message. A value
 * in slab memory (registered once, local access only: net_rdma_mem.c) is
 * written straight from the item; the bytes before it (reply header,
 * extras, key) ride on the RNDV_DONE after the count when they are few
 * (RDMA_DONE_HEAD_MAX), else go first as eager messages; its bytes count
 * as sent, and conn.c releases the item, only once the WRITE completed.
 * Other output is copied into a per-connection staging buffer (local
 * access only: nothing of the server is ever remotely accessible) and
 * written from there. Until the client advertises again, large output
 * waits. A landing buffer out of bounds, a second one while one is held, a
 * failed WRITE (a bad rkey) or an RNDV_DONE or READ_DONE from the client
 * close that connection only.
 *
 * Value buffers: a client may also advertise a region for the value of
 * one GET reply (RNDV_WRITE with MCR_RDMA_F_VALUE, request_id = the
 * request's opaque: a caller's iget buffer). When that reply's value is in
 * slab memory and fits, it is written straight from the item into that
 * region instead of the landing buffer, and the RNDV_DONE carries
 * MCR_RDMA_F_VALUE and the opaque (net_rdma_vbuf.c matches values to
 * replies); the value is then copied on neither side.
 */
#include "net_rdma_conn.h"

#ifdef HAVE_RDMA

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net_rdma_mem.h"

/* One WRITE of a zero-copy output ended; with the last one the output
 * counts as sent (or the connection closes). */
void rconn_zero_copy_write_done(struct rdma_conn *rc, int status)
{
    rc->zw.pieces--;
    if (status != 0)
        rc->zw.failed = true;
    if (rc->zw.pieces > 0)
        return;
    rconn_release_held(rc);
    if (rc->zw.failed && !rconn_client_gone(rc)) { /* flushed as the client left: dropped output */
        if (rc->conn && !rc->peer_gone)
            rconn_fail(rc, "rendezvous write failed");
        return;
    }
    rc->zw.ready = true;
    rc->send_blocked = false;
    if (rc->want_write)
        rconn_poke(rc);
}

/* The RNDV_DONE that tells the client how many bytes of the stream the
 * last RDMA WRITE put in its buffer, followed by the output bytes that
 * come before those (done_head). 0, -EAGAIN or an error. */
int rconn_send_done(struct rdma_conn *rc)
{
    unsigned char count[MCR_RDMA_DONE_COUNT_LEN];
    mcr_rdma_done_encode_count(rc->done_len, count);
    struct iovec iov[2] = {{count, sizeof(count)}, {rc->done_head, rc->done_head_len}};
    struct mcr_rdma_send s = {
        .type = MCR_RDMA_MSG_EAGER,
        .flags = rc->done_flags,
        .request_id = rc->done_id,
        .iov = iov,
        .iovcnt = rc->done_head_len > 0 ? 2 : 1,
    };
    int r = mcr_rdma_ep_send(rc->ep, &s);
    rc->done_pending = r == -EAGAIN;
    if (rc->done_pending)
        rconn_writer_waits(rc);
    if (r == 0)
        CTR_ADD(rc->rw, eager_msgs, 1);
    return r;
}

/* Output waits until the transport reports "writable" again. */
static ssize_t output_blocked(struct rdma_conn *rc)
{
    rc->send_blocked = true;
    rconn_writer_waits(rc);
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
    r = rconn_send_done(rc);
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
 * the same output again and learns the count (rconn_sendv), so it releases
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
    int r = rconn_send_done(rc);
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
    if (r == -EAGAIN) {
        rc->send_blocked = true;
        rconn_writer_waits(rc);
    }
    if (r != 0)
        return r;
    CTR_ADD(rc->rw, eager_msgs, 1);
    if (carries_done) {
        rc->rdone_owed = false;
        rconn_resume_if_free(rc);
    }
    return 0;
}

/* rconn_sendv's sink (rdma/stream.h): one eager message of the output;
 * the whole output of one message goes to the device at once. */
static ssize_t send_message(void *owner, const struct mcr_rdma_stream_out *out,
                            const struct iovec *msg_iov, int n, size_t msg_len, bool whole)
{
    (void)out;
    int r = send_eager(owner, msg_iov, n, whole);
    if (r == -EAGAIN)
        return 0;
    return r == 0 ? (ssize_t)msg_len : -1;
}

/* Output may go through the landing buffer: the client advertised one,
 * and if it is not advertised right now, its next advertisement can be
 * seen. Not while the endpoint holds the client's messages
 * (rconn_messages_held): conn.c reads no input while output blocks, so an
 * advertisement held there would never arrive; such output goes in eager
 * messages instead. */
static bool land_usable(const struct rdma_conn *rc)
{
    return rc->land_ever && (rc->land_valid || rc->write_inflight || !rconn_messages_held(rc));
}

/* The endpoint began to hold the client's messages: output that waits for
 * the landing buffer may go eagerly now (land_usable). */
void rconn_input_held(struct rdma_conn *rc)
{
    if (rc->want_write && !land_usable(rc)) {
        rc->send_blocked = false;
        rconn_poke(rc);
    }
}

/* One control record (include/mcr/rdma_wire.h: moves) on a message of its
 * own, after the output accepted before it: 0, -EAGAIN (no send buffer),
 * or another -errno. */
int rconn_send_control(struct rdma_conn *rc, const void *record, size_t len)
{
    if (!rc->ep || rc->peer_gone)
        return -EPIPE;
    struct iovec iov = {.iov_base = (void *)record, .iov_len = len};
    struct mcr_rdma_send s = {
        .type = MCR_RDMA_MSG_EAGER, .flags = MCR_RDMA_F_CONTROL, .iov = &iov, .iovcnt = 1};
    int r = mcr_rdma_ep_send(rc->ep, &s);
    if (r == 0)
        CTR_ADD(rc->rw, eager_msgs, 1);
    return r;
}

ssize_t rconn_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
    struct rdma_conn *rc = c->tp_data;
    if (rc->zw.pieces > 0) /* a zero-copy WRITE still reads the item */
        return output_blocked(rc);
    if (rconn_client_gone(rc)) {
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
        int r = rconn_send_done(rc);
        if (r == -EAGAIN)
            return output_blocked(rc);
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
                bool rides = head_len <= RDMA_DONE_HEAD_MAX &&
                             head_len + MCR_RDMA_DONE_COUNT_LEN <= max_payload;
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
    /* the usual reply is one message, from the iovecs as they are, and
     * to the device at once (the rest of the pass need not wait for it) */
    bool failed;
    size_t total;
    if (all > 0 && all <= max_payload && iovcnt <= MCR_RDMA_MSG_IOV_MAX) {
        /* straight to the one message: the stream's cut has nothing to do */
        int r = send_eager(rc, iov, iovcnt, true);
        total = r == 0 ? all : 0;
        failed = r != 0 && r != -EAGAIN;
    } else {
        total = mcr_rdma_stream_push(iov, iovcnt, max_payload, send_message, rc, &failed);
    }
    CTR_ADD(rc->rw, bytes_written, total);
    rconn_count_stalls(rc);
    if (total == 0) {
        errno = failed ? EPIPE : EAGAIN;
        return -1;
    }
    return (ssize_t)total;
}

#endif
