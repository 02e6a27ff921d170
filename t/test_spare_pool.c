/* t/test_spare_pool.c: unit tests (TAP) for libmemcached-rdma's spare
 * pool (libmemcached-rdma/src/spare_pool.h): which block a take returns,
 * the pool's limits, and that release frees what it holds (the sanitizer
 * build's leak check and valgrind see a block left behind). */
#include <stdio.h>
#include <stdlib.h>

#include "libmemcached-rdma/src/spare_pool.h"
#include "t/rdma/tap.h"

static void *block(size_t size)
{
    void *b = malloc(size);
    if (b == NULL) {
        printf("Bail out! malloc\n");
        exit(1);
    }
    return b;
}

static void test_take(void)
{
    struct lmr_spare_pool p;
    lmr_spare_pool_init(&p, 16, 1 << 20);
    size_t size = 12345;
    tap_ok(lmr_spare_pool_take(&p, 0, &size) == NULL && size == 12345,
           "empty pool: nothing to take");
    void *small = block(10), *large = block(100), *middle = block(50);
    tap_ok(lmr_spare_pool_put(&p, small, 10) && lmr_spare_pool_put(&p, large, 100) &&
               lmr_spare_pool_put(&p, middle, 50) && p.count == 3,
           "three blocks kept");
    tap_ok(lmr_spare_pool_take(&p, 200, &size) == NULL && p.count == 3,
           "none large enough: NULL, the pool unchanged");
    void *got = lmr_spare_pool_take(&p, 60, &size);
    tap_ok(got == large && size == 100 && p.count == 2,
           "the block large enough is taken, with its size");
    got = lmr_spare_pool_take(&p, 0, &size);
    tap_ok(got == middle && size == 50 && p.count == 1, "any size: the block put last");
    tap_ok(lmr_spare_pool_put(&p, got, size) && lmr_spare_pool_take(&p, 10, &size) == middle,
           "a block put back is the next taken");
    free(middle);
    free(large);
    lmr_spare_pool_release(&p); /* frees `small` */
    tap_ok(p.count == 0 && lmr_spare_pool_take(&p, 0, &size) == NULL, "released: empty");
}

static void test_limits(void)
{
    struct lmr_spare_pool p;
    lmr_spare_pool_init(&p, 2, 64);
    void *a = block(8), *b = block(8), *c = block(8), *big = block(65);
    tap_ok(lmr_spare_pool_put(&p, a, 8) && lmr_spare_pool_put(&p, b, 8), "up to the limit: kept");
    tap_ok(!lmr_spare_pool_put(&p, c, 8) && p.count == 2, "past the limit: the caller keeps it");
    lmr_spare_pool_release(&p);
    tap_ok(!lmr_spare_pool_put(&p, big, 65) && p.count == 0,
           "larger than the maximum size: the caller keeps it");
    tap_ok(lmr_spare_pool_put(&p, c, 8) && p.count == 1, "a pool released takes blocks again");
    lmr_spare_pool_release(&p);
    free(big);
    lmr_spare_pool_init(&p, LMR_SPARE_POOL_MAX + 10, 64);
    tap_ok(p.limit == LMR_SPARE_POOL_MAX, "a limit past the pool's room is cut to it");
    uint32_t kept = 0;
    for (uint32_t i = 0; i < LMR_SPARE_POOL_MAX + 1; i++) {
        void *x = block(1);
        if (lmr_spare_pool_put(&p, x, 1))
            kept++;
        else
            free(x);
    }
    tap_ok(kept == LMR_SPARE_POOL_MAX, "a full pool keeps %u blocks", (unsigned)kept);
    lmr_spare_pool_release(&p);
}

int main(void)
{
    test_take();
    test_limits();
    tap_no_plan_end();
    return tap_failed ? 1 : 0;
}
