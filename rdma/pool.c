/* rdma/pool.c: registered buffer pools (see pool.h). Owns the reservation
 * and registration of pool memory; it never posts work requests. */
#include "rdma/pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Registers the next chunk and puts its buffers on the free stack, the
 * lowest index on top. */
static int pool_grow(struct mcr_rdma_pool *pool)
{
    if (pool->grown == pool->count)
        return -ENOSPC;
    uint32_t chunk = (uint32_t)1 << pool->chunk_shift;
    uint32_t n = pool->count - pool->grown < chunk ? pool->count - pool->grown : chunk;
    struct ibv_mr *mr = ibv_reg_mr(pool->pd, mcr_rdma_pool_buf(pool, pool->grown),
                                   (size_t)n * pool->buf_size, IBV_ACCESS_LOCAL_WRITE);
    if (mr == NULL)
        return errno ? -errno : -ENOMEM;
    pool->chunks[pool->grown >> pool->chunk_shift] = mr;
    for (uint32_t i = n; i-- > 0;)
        pool->free_stack[pool->free_count++] = pool->grown + i;
    pool->grown += n;
    return 0;
}

static uint32_t shift_for(uint32_t bufs)
{
    uint32_t shift = 0;
    while (shift < 31 && ((uint32_t)1 << shift) < bufs)
        shift++;
    return shift;
}

int mcr_rdma_pool_init_growing(struct mcr_rdma_pool *pool, struct ibv_pd *pd, uint32_t count,
                               size_t buf_size, uint32_t chunk_bufs)
{
    memset(pool, 0, sizeof(*pool));
    if (count == 0 || buf_size == 0 || chunk_bufs == 0)
        return -EINVAL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t bytes = ((size_t)count * buf_size + page - 1) / page * page;
    /* address space only: pages become resident when a chunk is registered */
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return -ENOMEM;
    /* small pages: a registered chunk pins what it covers, no more (with
     * transparent huge pages the first touch of a chunk made a whole 2 MiB
     * page resident, most of it never used) */
    (void)madvise(mem, bytes, MADV_NOHUGEPAGE);
    pool->chunk_shift = shift_for(chunk_bufs);
    uint32_t nchunks =
        (uint32_t)(((uint64_t)count + (1u << pool->chunk_shift) - 1) >> pool->chunk_shift);
    pool->free_stack = malloc(sizeof(uint32_t) * count);
    pool->chunks = calloc(nchunks, sizeof(*pool->chunks));
    if (pool->free_stack == NULL || pool->chunks == NULL) {
        free(pool->chunks);
        free(pool->free_stack);
        munmap(mem, bytes);
        memset(pool, 0, sizeof(*pool));
        return -ENOMEM;
    }
    pool->base = mem;
    pool->reserved = bytes;
    pool->buf_size = buf_size;
    pool->count = count;
    pool->pd = pd;
    return 0;
}

int mcr_rdma_pool_init(struct mcr_rdma_pool *pool, struct ibv_pd *pd, uint32_t count,
                       size_t buf_size)
{
    int rc = mcr_rdma_pool_init_growing(pool, pd, count, buf_size, count);
    if (rc == 0 && (rc = pool_grow(pool)) != 0)
        mcr_rdma_pool_destroy(pool);
    return rc;
}

void mcr_rdma_pool_destroy(struct mcr_rdma_pool *pool)
{
    for (uint32_t i = 0; i < pool->grown; i += (uint32_t)1 << pool->chunk_shift)
        ibv_dereg_mr(pool->chunks[i >> pool->chunk_shift]);
    free(pool->chunks);
    free(pool->free_stack);
    if (pool->base != NULL)
        munmap(pool->base, pool->reserved);
    memset(pool, 0, sizeof(*pool));
}

int64_t mcr_rdma_pool_get(struct mcr_rdma_pool *pool)
{
    if (pool->free_count == 0 && pool_grow(pool) != 0)
        return -1;
    return pool->free_stack[--pool->free_count];
}

void mcr_rdma_pool_put(struct mcr_rdma_pool *pool, uint32_t index)
{
    pool->free_stack[pool->free_count++] = index;
}
