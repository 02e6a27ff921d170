/* rdma/pool.h: a registered buffer pool: `count` fixed-size buffers in one
 * page-aligned allocation under one memory region, handed out by index.
 *
 * Used for eager receive buffers (posted to a shared receive queue) and eager
 * send buffers; shared by all connections of a context. A pool is registered
 * with local access only: SEND/RECV never needs remote access, so nothing in a
 * pool is remotely readable or writable. Not thread-safe (one worker owns it).
 */
#ifndef MCR_RDMA_POOL_H
#define MCR_RDMA_POOL_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

struct mcr_rdma_pool {
    char *base;
    size_t buf_size;
    uint32_t count;
    struct ibv_mr *mr;
    uint32_t *free_stack; /* indices of free buffers */
    uint32_t free_count;
};

/* Returns 0 or a negative errno. */
int mcr_rdma_pool_init(struct mcr_rdma_pool *pool, struct ibv_pd *pd, uint32_t count,
                       size_t buf_size);
void mcr_rdma_pool_destroy(struct mcr_rdma_pool *pool);

/* Index of a free buffer, or -1 when all are in use. */
int64_t mcr_rdma_pool_get(struct mcr_rdma_pool *pool);
void mcr_rdma_pool_put(struct mcr_rdma_pool *pool, uint32_t index);

static inline void *mcr_rdma_pool_buf(const struct mcr_rdma_pool *pool, uint32_t index)
{
    return pool->base + (size_t)index * pool->buf_size;
}

#endif
