/* net_rdma_vbuf.c: the value buffers of one RDMA connection (see
 * net_rdma_vbuf.h): keeping what clients advertised, and recognising the
 * GET reply a value belongs to from the header sent ahead of it.
 *
 * Matching is by the reply's opaque, which the client chose for the
 * request and advertised with the buffer. Replies go in request order and
 * a client's opaques count up, so once the reply of one request is seen,
 * buffers of requests before it can no longer be used (their replies went
 * without them: a miss, a small value, one that did not fit) and are
 * dropped; that also keeps a stale buffer from matching a reply after the
 * opaque counter wraps. */
#include "net_rdma_vbuf.h"

#include <string.h>

#include "mcr/binary_wire.h"

/* Header and flags of a GET reply without key, sent right before its value. */
#define GET_REPLY_PREFIX (MCR_BIN_HEADER_LEN + MCR_BIN_EXTRAS_GET_REPLY_LEN)

static void remove_at(struct rdma_vbufs *v, unsigned i)
{
    memmove(&v->bufs[i], &v->bufs[i + 1], (v->count - i - 1) * sizeof(v->bufs[0]));
    v->count--;
}

/* Drops the buffers of requests issued before `opaque` (serial order). */
static void drop_older(struct rdma_vbufs *v, uint32_t opaque)
{
    unsigned kept = 0;
    for (unsigned i = 0; i < v->count; i++)
        if ((int32_t)(v->bufs[i].opaque - opaque) >= 0)
            v->bufs[kept++] = v->bufs[i];
    v->count = kept;
}

void rdma_vbufs_add(struct rdma_vbufs *v, const struct rdma_vbuf *buf)
{
    for (unsigned i = 0; i < v->count; i++) {
        if (v->bufs[i].opaque == buf->opaque) {
            remove_at(v, i);
            break;
        }
    }
    if (v->count == RDMA_VBUFS_MAX)
        remove_at(v, 0);
    v->bufs[v->count++] = *buf;
}

void rdma_vbufs_note_reply(struct rdma_vbufs *v, const struct iovec *iov, int first,
                           const void *value_base, size_t value_len)
{
    /* the last GET_REPLY_PREFIX bytes of iov[0..first), gathered backwards */
    unsigned char prefix[GET_REPLY_PREFIX];
    size_t need = sizeof(prefix);
    for (int i = first - 1; i >= 0 && need > 0; i--) {
        size_t take = iov[i].iov_len < need ? iov[i].iov_len : need;
        memcpy(prefix + need - take, (const char *)iov[i].iov_base + iov[i].iov_len - take, take);
        need -= take;
    }
    if (need > 0) {
        /* the header went out (in part) in an earlier call, which noted
         * it; a note of some other value is no use for this one */
        if (!(v->next_valid && v->next_base == value_base && v->next_len == value_len))
            v->next_valid = false;
        return;
    }
    /* a whole header is read even when the same value was noted before: a
     * note that was not used (the value went another way) names an
     * earlier reply of the same item, not this one */
    v->next_valid = false;
    struct mcr_bin_header h;
    mcr_bin_header_decode(prefix, &h);
    if (h.magic != MCR_BIN_MAGIC_RESPONSE ||
        (h.opcode != MCR_BIN_OP_GET && h.opcode != MCR_BIN_OP_GETQ) || h.keylen != 0 ||
        h.extlen != MCR_BIN_EXTRAS_GET_REPLY_LEN || h.vbucket_or_status != 0 ||
        (uint64_t)h.bodylen != (uint64_t)MCR_BIN_EXTRAS_GET_REPLY_LEN + value_len)
        return;
    drop_older(v, h.opaque);
    v->next_base = value_base;
    v->next_len = value_len;
    v->next_opaque = h.opaque;
    v->next_valid = true;
}

bool rdma_vbufs_take(struct rdma_vbufs *v, const void *base, size_t len, struct rdma_vbuf *out)
{
    bool noted = v->next_valid && v->next_base == base && v->next_len == len;
    v->next_valid = false; /* the output has moved on either way */
    if (!noted)
        return false;
    for (unsigned i = 0; i < v->count; i++) {
        if (v->bufs[i].opaque != v->next_opaque)
            continue;
        if (v->bufs[i].len < len)
            return false; /* the value goes the usual way; the client reports E2BIG */
        *out = v->bufs[i];
        remove_at(v, i);
        return true;
    }
    return false;
}
