/* net_rdma_vbuf.h: the value buffers of one RDMA connection: regions a
 * client advertised (RNDV_WRITE with MCR_RDMA_F_VALUE) for the value of one
 * GET reply each, named by the request's binary-protocol opaque, and the
 * matching of a value about to be sent to its reply's opaque. Pure
 * bookkeeping (no verbs), so it is unit-tested on its own. */
#ifndef MCR_NET_RDMA_VBUF_H
#define MCR_NET_RDMA_VBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Buffers kept per connection; the oldest is dropped beyond this. */
#define RDMA_VBUFS_MAX 64

struct rdma_vbuf {
    uint32_t opaque; /* the GET request whose reply value it takes */
    uint64_t addr;   /* the client's region */
    uint32_t rkey;
    uint32_t len;
};

struct rdma_vbufs {
    struct rdma_vbuf bufs[RDMA_VBUFS_MAX]; /* oldest first */
    unsigned count;
    /* The value a reply header just sent announced: where it starts in
     * the output, its length and the reply's opaque. */
    const void *next_base;
    size_t next_len;
    uint32_t next_opaque;
    bool next_valid;
};

/* Records a buffer the client advertised. One with the opaque of a buffer
 * already held replaces it; beyond RDMA_VBUFS_MAX the oldest is dropped. */
void rdma_vbufs_add(struct rdma_vbufs *v, const struct rdma_vbuf *buf);

/* Output iov[0..first) is about to go ahead of a value of value_len bytes
 * that starts at iov[first].iov_base: if its last bytes are the header
 * and flags of a GET reply (no key) whose body is exactly that value,
 * remembers the value and the reply's opaque, and drops the buffers of
 * requests issued before that one (their replies have gone). When fewer
 * than those bytes lie ahead (the header went out in an earlier call),
 * keeps what that call noted if it was for this value. */
void rdma_vbufs_note_reply(struct rdma_vbufs *v, const struct iovec *iov, int first,
                           const void *value_base, size_t value_len);

/* The value about to be sent starts at base and is len bytes: true, with
 * its buffer in *out (removed from the table), when it is the value noted
 * last and its request advertised a buffer that holds it. */
bool rdma_vbufs_take(struct rdma_vbufs *v, const void *base, size_t len, struct rdma_vbuf *out);

#endif
