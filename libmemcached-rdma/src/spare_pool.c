/* spare_pool.c: freed blocks kept for reuse (see spare_pool.h). */
#include "spare_pool.h"

#include <stdlib.h>

void lmr_spare_pool_init(struct lmr_spare_pool *p, uint32_t limit, size_t max_size)
{
    p->count = 0;
    p->limit = limit < LMR_SPARE_POOL_MAX ? limit : LMR_SPARE_POOL_MAX;
    p->max_size = max_size;
}

void *lmr_spare_pool_take(struct lmr_spare_pool *p, size_t need, size_t *size)
{
    for (uint32_t i = p->count; i > 0; i--) {
        if (p->sizes[i - 1] < need)
            continue;
        void *block = p->blocks[i - 1];
        *size = p->sizes[i - 1];
        p->count--;
        p->blocks[i - 1] = p->blocks[p->count];
        p->sizes[i - 1] = p->sizes[p->count];
        return block;
    }
    return NULL;
}

bool lmr_spare_pool_put(struct lmr_spare_pool *p, void *block, size_t size)
{
    if (p->count >= p->limit || size > p->max_size)
        return false;
    p->blocks[p->count] = block;
    p->sizes[p->count++] = size;
    return true;
}

void lmr_spare_pool_release(struct lmr_spare_pool *p)
{
    for (uint32_t i = p->count; i > 0; i--)
        free(p->blocks[i - 1]);
    p->count = 0;
}
