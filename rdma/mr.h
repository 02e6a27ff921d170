/* rdma/mr.h: memory registration helpers beyond the buffer pools.
 *
 *  - mcr_rdma_region_*: register a large region once (e.g. the server's slab
 *    pages) with exactly the access it needs. A server registers slab memory
 *    with MCR_RDMA_ACCESS_LOCAL only: it is the local target of RDMA READs
 *    and the local source of RDMA WRITEs, never exposed remotely.
 *  - mcr_rdma_regcache_*: a client-side cache of registrations of caller
 *    buffers that are advertised for rendezvous, so a buffer used again is
 *    not registered again. A cached registration with remote access stays
 *    remotely accessible (to peers of the same protection domain) until it is
 *    evicted or invalidated; callers that free or reuse such a buffer for
 *    other data call mcr_rdma_regcache_invalidate() first.
 * Not thread-safe: one worker owns each cache.
 */
#ifndef MCR_RDMA_MR_H
#define MCR_RDMA_MR_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

enum mcr_rdma_access {
    MCR_RDMA_ACCESS_LOCAL = 0,       /* local read/write only */
    MCR_RDMA_ACCESS_REMOTE_READ = 1, /* the peer may RDMA READ it */
    MCR_RDMA_ACCESS_REMOTE_WRITE = 2 /* the peer may RDMA WRITE it */
};

struct mcr_rdma_region {
    void *addr;
    size_t len;
    struct ibv_mr *mr;
};

int mcr_rdma_region_register(struct ibv_pd *pd, void *addr, size_t len, unsigned access,
                             struct mcr_rdma_region *out);
void mcr_rdma_region_deregister(struct mcr_rdma_region *region);

struct mcr_rdma_regcache;

/* max_entries registrations are kept; 0 disables caching (every get
 * registers and every put deregisters). */
struct mcr_rdma_regcache *mcr_rdma_regcache_create(struct ibv_pd *pd, unsigned max_entries);
/* All entries must have been put back. */
void mcr_rdma_regcache_destroy(struct mcr_rdma_regcache *cache);

/* A registration covering [addr, addr+len) with at least `access`; NULL with
 * errno set on failure (ENOSPC: every entry is in use). Balance with put. */
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
