/* t/libmc/tap.h: the client-library test programs' TAP words on top of
 * t/rdma/tap.h: ok(), is_rc() for return codes, plan at the end
 * (done_testing). Header-only. */
#ifndef LMR_TEST_TAP_H
#define LMR_TEST_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <libmemcached/memcached.h>

#include "../rdma/tap.h"

#define ok(cond, ...) tap_ok((cond) ? 1 : 0, __VA_ARGS__)

/* Compares return codes and names both on failure. */
#define is_rc(got, want, name)                                                                     \
    do {                                                                                           \
        memcached_return_t got_ = (got), want_ = (want);                                           \
        if (!ok(got_ == want_, "%s", name))                                                        \
            printf("#   got %d (%s), expected %d (%s)\n", got_, memcached_strerror(NULL, got_),    \
                   want_, memcached_strerror(NULL, want_));                                        \
    } while (0)

static inline int done_testing(void)
{
    tap_no_plan_end();
    return tap_exit_status();
}

#endif
