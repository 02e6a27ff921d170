/* rdma/iov_cut.h: cutting a byte stream held in iovecs into eager messages.
 *
 * The server's output and the client's requests reach the endpoint as
 * iovecs; a message takes at most the endpoint's eager payload and at most
 * MCR_RDMA_MSG_IOV_MAX pieces. This header owns the position in such a
 * stream and the cut of the next message from it; the callers decide what
 * the message is (eager, rendezvous) and move the position once it went.
 */
#ifndef MCR_RDMA_IOV_CUT_H
#define MCR_RDMA_IOV_CUT_H

#include <stddef.h>
#include <string.h>
#include <stdint.h>
#include <sys/uio.h>

#include "mcr/iov_gather.h"

/* iovecs gathered into one message */
#define MCR_RDMA_MSG_IOV_MAX 64

/* The next byte of the stream: iov[index] + offset. */
struct mcr_rdma_iov_pos {
    int index;
    size_t offset;
};

/* The next message from *pos: up to max_bytes bytes in at most
 * MCR_RDMA_MSG_IOV_MAX pieces of out (empty iovecs skipped); *out_count
 * receives the pieces. *pos moves past the bytes taken; returns their count
 * (0: nothing left). */
static inline size_t mcr_rdma_iov_cut(const struct iovec *iov, int iovcnt,
                                      struct mcr_rdma_iov_pos *pos, size_t max_bytes,
                                      struct iovec out[MCR_RDMA_MSG_IOV_MAX], int *out_count)
{
    int n = 0;
    size_t len = 0;
    while (pos->index < iovcnt && n < MCR_RDMA_MSG_IOV_MAX && len < max_bytes) {
        const struct iovec *v = &iov[pos->index];
        size_t avail = v->iov_len - pos->offset;
        size_t take = avail < max_bytes - len ? avail : max_bytes - len;
        if (take > 0) {
            out[n].iov_base = (char *)v->iov_base + pos->offset;
            out[n++].iov_len = take;
            len += take;
            pos->offset += take;
        }
        if (pos->offset == v->iov_len) {
            pos->index++;
            pos->offset = 0;
        }
    }
    *out_count = n;
    return len;
}

/* Moves *pos n bytes further (at most to the end of the stream). */
static inline void mcr_rdma_iov_skip(const struct iovec *iov, int iovcnt,
                                     struct mcr_rdma_iov_pos *pos, size_t n)
{
    while (n > 0 && pos->index < iovcnt) {
        size_t avail = iov[pos->index].iov_len - pos->offset;
        size_t take = avail < n ? avail : n;
        pos->offset += take;
        n -= take;
        if (pos->offset == iov[pos->index].iov_len) {
            pos->index++;
            pos->offset = 0;
        }
    }
}

/* The bytes of iov[0..n) as one contiguous message: iov[0]'s own bytes when
 * n is 1, else copied into dst (room for all of them). */
static inline const void *mcr_rdma_iov_flat(void *dst, const struct iovec *iov, int n)
{
    if (n == 1)
        return iov[0].iov_base;
    mcr_iov_gather(iov, n, dst, SIZE_MAX);
    return dst;
}

#endif
