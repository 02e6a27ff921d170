/* transport_rdma_ctx.h: the substrate contexts (rdma/ctx.h: device,
 * protection domain, completion queue and channel, registered send and
 * receive pools) that one client (memcached_st) shares among its RDMA
 * connections, so a client talking to many servers opens its device and
 * registers its pools once. Owned by transport_rdma_ctx.c; used by
 * transport_rdma.c only. */
#ifndef LMR_TRANSPORT_RDMA_CTX_H
#define LMR_TRANSPORT_RDMA_CTX_H

#include "config.h"

#ifdef HAVE_RDMA

#include <stdbool.h>
#include <stddef.h>

#include "rdma/ctx.h"

struct rdma_stream;

/* Connections one context is sized for at most (its receive and send
 * pools hold LMR_RDMA_BUFS_PER_CONN buffers per connection, plus one
 * connection's worth); a client with more RDMA servers gets more contexts. */
#define LMR_RDMA_CTX_CONNS_MAX 16
#define LMR_RDMA_BUFS_PER_CONN 32

/* One shared context and the connections on it. */
struct lmr_rdma_shared_ctx {
    struct mcr_rdma_ctx *ctx;
    unsigned users, capacity;    /* connections on it, and how many it is sized for */
    struct rdma_stream *streams; /* the connections, through rdma_stream.ctx_next */
    struct lmr_rdma_shared_ctx *next;
    void **slot; /* the client's list head (lmr_endpoint.shared) */
};

/* A context of the client's list (*slot) with room for one more
 * connection, or a new one (appended) sized for `peers` connections (the
 * client's RDMA servers, at most LMR_RDMA_CTX_CONNS_MAX) on the device
 * that reaches `host`. fresh: always a new one (the server was reached
 * through another device than the contexts' ones). The stream is attached
 * to it. NULL with a one-line reason in err. */
struct lmr_rdma_shared_ctx *lmr_rdma_ctx_acquire(void **slot, const char *host, unsigned peers,
                                                 int timeout_ms, bool fresh, struct rdma_stream *s,
                                                 char *err, size_t errlen);
/* Detaches the stream; the last connection's release destroys the
 * context and takes it off the client's list (NULL once empty). */
void lmr_rdma_ctx_release(struct lmr_rdma_shared_ctx *sc, struct rdma_stream *s);

#endif
#endif
