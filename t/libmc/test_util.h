/* t/libmc/test_util.h: small helpers the client-library test programs
 * share: milliseconds of CLOCK_MONOTONIC since a moment they took (for
 * their time bounds), a seeded byte pattern for values they read back, and
 * OURS, which tells a program's own build from its _ref build. Header-only. */
#ifndef LMR_TEST_UTIL_H
#define LMR_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* 1 when built against libmemcached-rdma, 0 in a _ref build against
 * Debian's libmemcached (REFERENCE_LIBMEMCACHED defined): checks of our
 * deliberate differences and additions run only where it is 1. */
#ifdef REFERENCE_LIBMEMCACHED
#define OURS 0
#else
#define OURS 1
#endif

static inline int64_t elapsed_ms(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)(now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

/* length bytes that differ by seed and position (a linear congruential
 * sequence), so a value read back proves it is the one written */
static inline void fill_bytes(char *buf, size_t length, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < length; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (char)(x >> 16);
    }
}

#endif
