/* t/libmc/elapsed.h: milliseconds of CLOCK_MONOTONIC since a moment the
 * client-library test programs took, for their time bounds. Header-only. */
#ifndef LMR_TEST_ELAPSED_H
#define LMR_TEST_ELAPSED_H

#include <stdint.h>
#include <time.h>

static inline int64_t elapsed_ms(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)(now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

#endif
