/*
 * include/mcr/iov_gather.h: copying a stream held in iovecs into one
 * contiguous buffer, the one copy the server's and the client library's
 * transports share. A stream socket takes a short reply or request cheaper
 * as one piece (send: no iovec array to import, one copy in the kernel);
 * TLS needs its records' bytes in one buffer anyway.
 */
#ifndef MCR_IOV_GATHER_H
#define MCR_IOV_GATHER_H

#include <stddef.h>
#include <string.h>
#include <sys/uio.h>

/* Total bytes of the iovecs, or cap + 1 once it exceeds cap. */
static inline size_t mcr_iov_bytes_upto(const struct iovec *iov, int iovcnt, size_t cap)
{
    size_t len = 0;
    for (int i = 0; i < iovcnt && len <= cap; i++)
        len += iov[i].iov_len;
    return len <= cap ? len : cap + 1;
}

/* Copies the first bytes of the iovecs into buf, at most cap of them
 * (empty pieces, whatever their base, are skipped); returns the count
 * copied. */
static inline size_t mcr_iov_gather(const struct iovec *iov, int iovcnt, char *buf, size_t cap)
{
    size_t len = 0;
    for (int i = 0; i < iovcnt && len < cap; i++) {
        size_t n = iov[i].iov_len < cap - len ? iov[i].iov_len : cap - len;
        if (n == 0)
            continue; /* an empty piece may have no base: memcpy's is never NULL */
        memcpy(buf + len, iov[i].iov_base, n);
        len += n;
    }
    return len;
}

#endif
