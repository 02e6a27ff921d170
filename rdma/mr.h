/* rdma/mr.h: memory registration helpers beyond the buffer pools.
 *
 *  - mcr_rdma_region_*: register a large region once (e.g. the server's slab
 *    pages) with exactly the access it needs. A server registers slab memory
 *    with MCR_RDMA_ACCESS_LOCAL only: it is the local target of RDMA READs
 *    and the local source of RDMA WRITEs, never exposed remotely.
 *  - mcr_rdma_window_*: type 2 memory windows, bound over a registration
 *    made with MCR_RDMA_ACCESS_WINDOW for one transfer at a time
 *    (endpoint.h's bind_window / invalidate_window).
 *  - mcr_rdma_regcache_*: a client-side cache of registrations of caller
 *    buffers, so a buffer used again is not registered again. Only
 *    registrations without remote access are kept (local, or for windows):
 *    one with remote access is made for each get and dropped at its put,
 *    so no cached registration leaves memory open to a peer. A cached
 *    registration keeps the pages it was made for: callers that free a
 *    buffer call mcr_rdma_regcache_invalidate() first.
 * Not thread-safe: one worker owns each cache.
 */
#ifndef MCR_RDMA_MR_H
#define MCR_RDMA_MR_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

enum mcr_rdma_access {
    MCR_RDMA_ACCESS_LOCAL = 0,        /* local read/write only */
    MCR_RDMA_ACCESS_REMOTE_READ = 1,  /* the peer may RDMA READ it */
    MCR_RDMA_ACCESS_REMOTE_WRITE = 2, /* the peer may RDMA WRITE it */
    MCR_RDMA_ACCESS_WINDOW = 4        /* memory windows may be bound to it (no remote
                                         access of its own) */
};

struct mcr_rdma_region {
    void *addr;
    size_t len;
    struct ibv_mr *mr;
};

int mcr_rdma_region_register(struct ibv_pd *pd, void *addr, size_t len, unsigned access,
                             struct mcr_rdma_region *out);
void mcr_rdma_region_deregister(struct mcr_rdma_region *region);

/* A type 2 memory window of the protection domain; NULL with errno set. */
struct ibv_mw *mcr_rdma_window_alloc(struct ibv_pd *pd);
void mcr_rdma_window_free(struct ibv_mw *mw);
/* The verbs access flags a window gets for MCR_RDMA_ACCESS_REMOTE_*. */
int mcr_rdma_window_access(unsigned access);

struct mcr_rdma_regcache;

/* max_entries registrations are kept; 0 disables caching (every get
 * registers and every put deregisters). */
struct mcr_rdma_regcache *mcr_rdma_regcache_create(struct ibv_pd *pd, unsigned max_entries);
/* All entries must have been put back. */
void mcr_rdma_regcache_destroy(struct mcr_rdma_regcache *cache);

/* A registration covering [addr, addr+len) with at least `access`; NULL with
 * errno set on failure (ENOSPC: every entry is in use). Balance with put.
 * With remote access it is never cached (registered now, dropped at put). */
struct ibv_mr *mcr_rdma_regcache_get(struct mcr_rdma_regcache *cache, void *addr, size_t len,
                                     unsigned access);
void mcr_rdma_regcache_put(struct mcr_rdma_regcache *cache, struct ibv_mr *mr);
/* Deregisters unused entries overlapping [addr, addr+len). Returns how many
 * overlapping entries are still in use (and so stay registered). */
unsigned mcr_rdma_regcache_invalidate(struct mcr_rdma_regcache *cache, void *addr, size_t len);

struct mcr_rdma_regcache_stats {
    uint64_t hits, misses, evictions;
    unsigned entries;
};
void mcr_rdma_regcache_stats(const struct mcr_rdma_regcache *cache,
                             struct mcr_rdma_regcache_stats *out);

#endif
