/* t/rdma/tap.h: a minimal TAP producer for the RDMA test programs: plan,
 * ok/is checks with diagnostics, bail out. Header-only; owns nothing else. */
#ifndef MCR_T_RDMA_TAP_H
#define MCR_T_RDMA_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_count, tap_failed;

static inline void tap_plan(int n)
{
    printf("1..%d\n", n);
    fflush(stdout);
}

static inline void tap_no_plan_end(void)
{
    printf("1..%d\n", tap_count);
    fflush(stdout);
}

__attribute__((format(printf, 2, 3))) static inline int tap_ok(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s %d - ", cond ? "ok" : "not ok", ++tap_count);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (!cond)
        tap_failed++;
    return cond;
}

/* A check that does not apply to this run, and why. */
__attribute__((format(printf, 1, 2))) static inline void tap_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("ok %d # skip ", ++tap_count);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

__attribute__((format(printf, 1, 2))) static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

__attribute__((format(printf, 1, 2), noreturn)) static inline void tap_bail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("Bail out! ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    exit(255);
}

static inline int tap_exit_status(void)
{
    return tap_failed ? 1 : 0;
}

#endif
