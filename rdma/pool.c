/* rdma/pool.c: registered buffer pools (see pool.h). Owns the allocation and
 * registration of pool memory; it never posts work requests. */
#include "rdma/pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mcr_rdma_pool_init(struct mcr_rdma_pool *pool, struct ibv_pd *pd, uint32_t count,
                       size_t buf_size)
{
    memset(pool, 0, sizeof(*pool));
    if (count == 0 || buf_size == 0)
        return -EINVAL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t bytes = (size_t)count * buf_size;
    void *mem = NULL;
    int rc = posix_memalign(&mem, page, bytes);
    if (rc != 0)
        return -rc;
    memset(mem, 0, bytes);
    pool->free_stack = malloc(sizeof(uint32_t) * count);
    if (pool->free_stack == NULL) {
        free(mem);
        return -ENOMEM;
    }
    pool->mr = ibv_reg_mr(pd, mem, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (pool->mr == NULL) {
        rc = errno ? -errno : -ENOMEM;
        free(pool->free_stack);
        free(mem);
        pool->free_stack = NULL;
        return rc;
    }
    pool->base = mem;
    pool->buf_size = buf_size;
    pool->count = count;
    for (uint32_t i = 0; i < count; i++)
        pool->free_stack[i] = count - 1 - i;
    pool->free_count = count;
    return 0;
}

void mcr_rdma_pool_destroy(struct mcr_rdma_pool *pool)
{
    if (pool->mr != NULL)
        ibv_dereg_mr(pool->mr);
    free(pool->free_stack);
    free(pool->base);
    memset(pool, 0, sizeof(*pool));
}

int64_t mcr_rdma_pool_get(struct mcr_rdma_pool *pool)
{
    if (pool->free_count == 0)
        return -1;
    return pool->free_stack[--pool->free_count];
}

void mcr_rdma_pool_put(struct mcr_rdma_pool *pool, uint32_t index)
{
    pool->free_stack[pool->free_count++] = index;
}
