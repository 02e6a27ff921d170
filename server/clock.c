/*
 * clock.c: the coarse server clock behind clock.h.
 *
 * Owns the process start time and the current rel_time_t, refreshed by
 * clock_tick() from a monotonic clock (so wall-clock jumps do not expire or
 * revive items), and the conversion of protocol exptimes. It does not run a
 * timer itself: the thread code calls clock_tick() once a second.
 */
#include "clock.h"

#include <stdatomic.h>

/* The clock starts at this many seconds so that "1" can mean "already
 * expired" and "now - 1" never underflows. */
#define CLOCK_START_OFFSET 2

static time_t process_started;       /* unix time that rel_time 0 stands for */
static struct timespec mono_start;   /* monotonic time at clock_init() */
static _Atomic rel_time_t now_rel;   /* what clock_now() returns */
static _Atomic rel_time_t test_skew; /* added by clock_advance_for_tests() */

static rel_time_t elapsed_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    time_t secs = ts.tv_sec - mono_start.tv_sec;
    if (ts.tv_nsec < mono_start.tv_nsec)
        secs--;
    return (rel_time_t)(secs < 0 ? 0 : secs);
}

void clock_init(void)
{
    clock_gettime(CLOCK_MONOTONIC, &mono_start);
    process_started = time(NULL) - CLOCK_START_OFFSET;
    atomic_store(&test_skew, 0);
    atomic_store(&now_rel, CLOCK_START_OFFSET);
}

void clock_tick(void)
{
    rel_time_t t = elapsed_seconds() + CLOCK_START_OFFSET + atomic_load(&test_skew);
    atomic_store_explicit(&now_rel, t, memory_order_relaxed);
}

rel_time_t clock_now(void)
{
    return atomic_load_explicit(&now_rel, memory_order_relaxed);
}

time_t clock_process_started(void)
{
    return process_started;
}

time_t clock_unix_now(void)
{
    return process_started + (time_t)clock_now();
}

rel_time_t clock_exptime(int64_t exptime)
{
    if (exptime == 0)
        return 0;
    if (exptime < 0)
        return 1; /* earlier than any clock_now(): already expired */
    if (exptime > REALTIME_MAXDELTA) {
        if (exptime <= (int64_t)process_started)
            return 1;
        int64_t rel = exptime - (int64_t)process_started;
        return rel > (int64_t)UINT32_MAX ? UINT32_MAX : (rel_time_t)rel;
    }
    return (rel_time_t)exptime + clock_now();
}

void clock_advance_for_tests(rel_time_t seconds)
{
    atomic_fetch_add(&test_skew, seconds);
    clock_tick();
}
