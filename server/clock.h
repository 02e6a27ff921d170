/*
 * clock.h: the server's coarse clock. rel_time_t counts seconds since the
 * process started, turning over with the wall clock's seconds; reading it
 * costs no system call (a coarse monotonic clock through the vDSO).
 * Also converts protocol expiry times with memcached's rules.
 */
#ifndef MCR_CLOCK_H
#define MCR_CLOCK_H

#include <stdint.h>
#include <time.h>

typedef uint32_t rel_time_t;

/* Largest relative expiry: beyond it an exptime is a unix timestamp. */
#define REALTIME_MAXDELTA (60 * 60 * 24 * 30)

void clock_init(void);      /* records the process start time */
rel_time_t clock_now(void); /* seconds since start */
/* Warm restart (before any other thread reads the clock): counts from the
 * start time of the process that saved the items, so that their relative
 * times (expiry, last access) keep meaning the same wall-clock seconds and
 * the time spent stopped has passed for them. -1 (clock unchanged) when
 * `started` is not before this process's start or is absurdly old. */
int clock_resume(time_t started);
time_t clock_process_started(void);
time_t clock_unix_now(void); /* process start + clock_now() */
/* Microseconds of a monotonic clock, for short waits and intervals. */
uint64_t clock_monotonic_us(void);

/* Converts a protocol exptime to rel_time_t: 0 means never; negative means
 * already expired; up to 30 days is relative; beyond is absolute unix time
 * (in the past: already expired). Never returns 0 for an expiring time. */
rel_time_t clock_exptime(int64_t exptime);

/* Test hook: moves the clock forward by `seconds` (on top of real time), so
 * unit tests can expire items without sleeping. Not for production paths. */
void clock_advance_for_tests(rel_time_t seconds);

#endif
