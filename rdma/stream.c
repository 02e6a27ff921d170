/* rdma/stream.c: the byte stream over messages shared by the RDMA server
 * and client (see stream.h): the byte queue, the sorting of received
 * messages, the cutting of output into messages. */
#include "rdma/stream.h"

#include <stdlib.h>
#include <string.h>

/* A byte queue's first allocation. */
#define BYTES_FIRST_CAP 16384u

bool mcr_rdma_bytes_reserve(struct mcr_rdma_bytes *b, size_t n)
{
    if (b->off > 0 && b->off + b->len + n > b->cap) {
        memmove(b->buf, b->buf + b->off, b->len);
        b->off = 0;
    }
    if (b->len + n <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : BYTES_FIRST_CAP;
    while (cap < b->len + n)
        cap *= 2;
    char *grown = realloc(b->buf, cap);
    if (grown == NULL)
        return false;
    b->buf = grown;
    b->cap = cap;
    return true;
}

bool mcr_rdma_bytes_append(struct mcr_rdma_bytes *b, const void *data, size_t n)
{
    if (n == 0)
        return true;
    if (!mcr_rdma_bytes_reserve(b, n))
        return false;
    memcpy(b->buf + b->off + b->len, data, n);
    b->len += n;
    return true;
}

size_t mcr_rdma_bytes_take(struct mcr_rdma_bytes *b, void *out, size_t len)
{
    size_t n = len < b->len ? len : b->len;
    if (out != NULL)
        memcpy(out, b->buf + b->off, n);
    b->off += n;
    b->len -= n;
    if (b->len == 0)
        b->off = 0;
    return n;
}

void mcr_rdma_bytes_free(struct mcr_rdma_bytes *b)
{
    free(b->buf);
    *b = (struct mcr_rdma_bytes){0};
}

enum mcr_rdma_stream_kind mcr_rdma_stream_classify(const struct mcr_rdma_msg *msg,
                                                   struct mcr_rdma_stream_in *out)
{
    *out = (struct mcr_rdma_stream_in){
        .kind = MCR_RDMA_IN_BAD, .bytes = msg->payload, .len = msg->payload_len};
    switch (msg->type) {
    case MCR_RDMA_MSG_EAGER:
        if (msg->flags == 0)
            out->kind = MCR_RDMA_IN_BYTES;
        else if (msg->flags == MCR_RDMA_F_READ_DONE)
            out->kind = MCR_RDMA_IN_READ_DONE;
        else if (msg->flags == MCR_RDMA_F_CONTROL && msg->payload_len > 0)
            out->kind = MCR_RDMA_IN_CONTROL;
        else if ((msg->flags == MCR_RDMA_F_RNDV_DONE ||
                  msg->flags == (MCR_RDMA_F_RNDV_DONE | MCR_RDMA_F_VALUE)) &&
                 mcr_rdma_done_decode(msg->payload, msg->payload_len, &out->done) == 0) {
            out->kind =
                msg->flags & MCR_RDMA_F_VALUE ? MCR_RDMA_IN_VALUE_DONE : MCR_RDMA_IN_WRITE_DONE;
            out->bytes = out->done.head;
            out->len = out->done.head_len;
        }
        break;
    case MCR_RDMA_MSG_RNDV_WRITE:
        if (msg->flags == 0)
            out->kind = MCR_RDMA_IN_LANDING;
        else if (msg->flags == MCR_RDMA_F_VALUE)
            out->kind = MCR_RDMA_IN_VALUE_REGION;
        break;
    case MCR_RDMA_MSG_RNDV_READ:
        if (msg->flags == 0)
            out->kind = MCR_RDMA_IN_READ_REGION;
        break;
    default:
        break;
    }
    return out->kind;
}

size_t mcr_rdma_stream_push(const struct iovec *iov, int iovcnt, size_t max_payload,
                            mcr_rdma_stream_sink sink, void *owner, bool *failed)
{
    struct mcr_rdma_stream_out out = {
        .iov = iov, .iovcnt = iovcnt, .at = {0, 0}, .max_payload = max_payload};
    *failed = false;
    if (iovcnt <= MCR_RDMA_MSG_IOV_MAX) { /* the usual case: one message, from iov as it is */
        size_t all = 0;
        for (int k = 0; k < iovcnt; k++)
            all += iov[k].iov_len;
        if (all > 0 && all <= max_payload) {
            ssize_t took = sink(owner, &out, iov, iovcnt, all, true);
            *failed = took < 0;
            return took > 0 ? (size_t)took : 0;
        }
    }
    size_t taken = 0;
    for (;;) {
        struct iovec msg_iov[MCR_RDMA_MSG_IOV_MAX];
        int n;
        struct mcr_rdma_iov_pos next = out.at;
        size_t msg_len = mcr_rdma_iov_cut(iov, iovcnt, &next, max_payload, msg_iov, &n);
        if (msg_len == 0)
            return taken;
        ssize_t took = sink(owner, &out, msg_iov, n, msg_len, false);
        if (took <= 0) {
            *failed = took < 0;
            return taken;
        }
        taken += (size_t)took;
        if ((size_t)took == msg_len)
            out.at = next;
        else
            mcr_rdma_iov_skip(iov, iovcnt, &out.at, (size_t)took);
    }
}
