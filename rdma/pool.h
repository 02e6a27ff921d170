/* rdma/pool.h: a registered buffer pool: `count` fixed-size buffers in one
 * page-aligned reservation, handed out by index.
 *
 * Used for eager receive buffers (posted to a shared receive queue) and eager
 * send buffers; shared by all connections of a context. A pool is registered
 * with local access only: SEND/RECV never needs remote access, so nothing in a
 * pool is remotely readable or writable. Not thread-safe (one worker owns it).
 *
 * An eager pool (mcr_rdma_pool_init) registers all its buffers at once, under
 * one memory region. A growing pool (mcr_rdma_pool_init_growing)
 * reserves address space for `count` buffers but registers them a chunk at a
 * time, when a get finds none free: its registered (pinned, resident) memory
 * follows the most buffers it has had in use at once, not `count`. Chunks
 * are kept until the pool is destroyed. Each chunk has its memory region;
 * mcr_rdma_pool_lkey() names the one of a buffer.
 */
#ifndef MCR_RDMA_POOL_H
#define MCR_RDMA_POOL_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

struct mcr_rdma_pool {
    char *base;      /* reserved for count buffers */
    size_t reserved; /* bytes reserved at base */
    size_t buf_size;
    uint32_t count;       /* buffers at most */
    uint32_t grown;       /* buffers registered so far (the first `grown`) */
    uint32_t chunk_shift; /* a chunk is 1 << chunk_shift buffers */
    struct ibv_pd *pd;
    struct ibv_mr **chunks; /* one region per chunk */
    uint32_t *free_stack;   /* indices of free registered buffers */
    uint32_t free_count;
};

/* All `count` buffers registered now. Returns 0 or a negative errno. */
int mcr_rdma_pool_init(struct mcr_rdma_pool *pool, struct ibv_pd *pd, uint32_t count,
                       size_t buf_size);
/* Buffers registered chunk_bufs (rounded up to a power of two) at a time as
 * gets need them; none at first. Returns 0 or a negative errno. */
int mcr_rdma_pool_init_growing(struct mcr_rdma_pool *pool, struct ibv_pd *pd, uint32_t count,
                               size_t buf_size, uint32_t chunk_bufs);
void mcr_rdma_pool_destroy(struct mcr_rdma_pool *pool);

/* Index of a free buffer, or -1 when all are in use (or a growing pool's
 * next chunk cannot be registered). */
int64_t mcr_rdma_pool_get(struct mcr_rdma_pool *pool);
void mcr_rdma_pool_put(struct mcr_rdma_pool *pool, uint32_t index);

/* Buffers not in use, those not registered yet included. */
static inline uint32_t mcr_rdma_pool_unused(const struct mcr_rdma_pool *pool)
{
    return pool->free_count + (pool->count - pool->grown);
}

/* Bytes of the pool registered (pinned) so far. */
static inline size_t mcr_rdma_pool_registered_bytes(const struct mcr_rdma_pool *pool)
{
    return (size_t)pool->grown * pool->buf_size;
}

static inline void *mcr_rdma_pool_buf(const struct mcr_rdma_pool *pool, uint32_t index)
{
    return pool->base + (size_t)index * pool->buf_size;
}

static inline uint32_t mcr_rdma_pool_lkey(const struct mcr_rdma_pool *pool, uint32_t index)
{
    return pool->chunks[index >> pool->chunk_shift]->lkey;
}

#endif
