/* spare_pool.h: a few freed blocks of memory kept, each with its size,
 * for the next user that needs one of at least some size (the client
 * keeps its children's value buffers and its groups' blocks this way: a
 * get then allocates nothing). Blocks are plain malloc memory; the pool
 * frees those it still holds when released. */
#ifndef LMR_SPARE_POOL_H
#define LMR_SPARE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LMR_SPARE_POOL_MAX 64 /* blocks a pool can hold at most */

struct lmr_spare_pool {
    void *blocks[LMR_SPARE_POOL_MAX];
    size_t sizes[LMR_SPARE_POOL_MAX];
    uint32_t count;
    uint32_t limit;  /* blocks it keeps, at most LMR_SPARE_POOL_MAX */
    size_t max_size; /* larger blocks are not kept */
};

/* An empty pool keeping up to `limit` blocks (at most LMR_SPARE_POOL_MAX)
 * of at most max_size bytes each. */
void lmr_spare_pool_init(struct lmr_spare_pool *p, uint32_t limit, size_t max_size);
/* The block put last among those of at least `need` bytes, its size in
 * *size; NULL (the pool unchanged) when none is that large. */
void *lmr_spare_pool_take(struct lmr_spare_pool *p, size_t need, size_t *size);
/* Keeps block (of `size` bytes) if the pool has room and it is not too
 * large; false when the caller keeps it (to free it). */
bool lmr_spare_pool_put(struct lmr_spare_pool *p, void *block, size_t size);
/* Frees the blocks the pool holds, last first; it is empty after. */
void lmr_spare_pool_release(struct lmr_spare_pool *p);

#endif
