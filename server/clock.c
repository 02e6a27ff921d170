/*
 * clock.c: the coarse server clock behind clock.h.
 *
 * Owns the process start time and the current rel_time_t. clock_now() reads
 * a monotonic clock (so wall-clock jumps do not expire or revive items) on
 * every call, counted from the monotonic instant at which the wall-clock
 * second of start-up began: so the server's current second turns over with
 * the wall clock's, and an absolute exptime fires on its second, not up to
 * two seconds late (as a once-a-second tick at an arbitrary phase would).
 */
#include "clock.h"

#include <stdatomic.h>

/* The clock starts at this many seconds so that "1" can mean "already
 * expired" and "now - 1" never underflows. */
#define CLOCK_START_OFFSET 2

/* A coarse monotonic clock is enough for whole seconds and costs a few
 * nanoseconds (no system call); plain CLOCK_MONOTONIC where it is missing. */
#ifdef CLOCK_MONOTONIC_COARSE
#define CLOCK_SECONDS CLOCK_MONOTONIC_COARSE
#else
#define CLOCK_SECONDS CLOCK_MONOTONIC
#endif

static time_t process_started;       /* unix time that rel_time 0 stands for */
static rel_time_t start_offset;      /* clock_now() at mono_start */
static struct timespec mono_start;   /* monotonic time of that second's start */
static _Atomic rel_time_t test_skew; /* added by clock_advance_for_tests() */

static rel_time_t elapsed_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_SECONDS, &ts);
    time_t secs = ts.tv_sec - mono_start.tv_sec;
    if (ts.tv_nsec < mono_start.tv_nsec)
        secs--;
    return (rel_time_t)(secs < 0 ? 0 : secs);
}

void clock_init(void)
{
    struct timespec wall, mono;
    clock_gettime(CLOCK_SECONDS, &mono);
    clock_gettime(CLOCK_REALTIME, &wall);
    /* mono_start = mono - wall.tv_nsec: the monotonic instant at which the
     * current wall-clock second began. */
    mono_start = mono;
    if (mono_start.tv_nsec >= wall.tv_nsec) {
        mono_start.tv_nsec -= wall.tv_nsec;
    } else {
        mono_start.tv_sec--;
        mono_start.tv_nsec += 1000000000L - wall.tv_nsec;
    }
    process_started = wall.tv_sec - CLOCK_START_OFFSET;
    start_offset = CLOCK_START_OFFSET;
    atomic_store(&test_skew, 0);
}

rel_time_t clock_now(void)
{
    return elapsed_seconds() + start_offset +
           atomic_load_explicit(&test_skew, memory_order_relaxed);
}

uint64_t clock_monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

time_t clock_process_started(void)
{
    return process_started;
}

time_t clock_unix_now(void)
{
    return process_started + (time_t)clock_now();
}

int clock_resume(time_t started)
{
    if (started <= 0 || started > process_started ||
        process_started - started > (time_t)(UINT32_MAX / 2))
        return -1;
    start_offset += (rel_time_t)(process_started - started);
    process_started = started;
    return 0;
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
}
