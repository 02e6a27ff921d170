/* t/libmc/tap.h: minimal TAP output for the client-library test programs:
 * ok(), is_rc(), plan at the end (done_testing). Header-only. */
#ifndef LMR_TEST_TAP_H
#define LMR_TEST_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <libmemcached/memcached.h>

static int tap_count, tap_failed;

static inline int tap_ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int tap_ok(int cond, const char *fmt, ...)
{
    va_list ap;
    tap_count++;
    printf("%sok %d - ", cond ? "" : "not ", tap_count);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!cond)
        tap_failed++;
    fflush(stdout);
    return cond;
}

#define ok(cond, ...) tap_ok((cond) ? 1 : 0, __VA_ARGS__)

/* Compares return codes and names both on failure. */
#define is_rc(got, want, name)                                                                     \
    do {                                                                                           \
        memcached_return_t got_ = (got), want_ = (want);                                           \
        if (!ok(got_ == want_, "%s", name))                                                        \
            printf("#   got %d (%s), expected %d (%s)\n", got_, memcached_strerror(NULL, got_),    \
                   want_, memcached_strerror(NULL, want_));                                        \
    } while (0)

static inline void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static inline int done_testing(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}

#endif
