/* benchmarks/ohb_clock.c: the benchmarks' clock (ohb_clock.h).
 *
 * Operations are timed with the processor's cycle counter, calibrated once
 * against CLOCK_MONOTONIC, as perftest times its verbs: where the system
 * clock is slow to read (a virtual machine whose clock source is an
 * emulated HPET makes every clock_gettime a system call of several
 * microseconds), timing each operation with it would add that cost to
 * every figure. Without a steady counter (two calibrations that disagree
 * by more than 1%), or with OHB_CLOCK=monotonic, the system clock is used. */
#include "ohb_clock.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define OHB_HAVE_TSC 1
#endif

static double mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double tsc_us_per_tick; /* 0: the system clock is used */
static uint64_t tsc_base;
static double tsc_base_us;

void ohb_clock_calibrate(void)
{
    tsc_us_per_tick = 0;
#ifdef OHB_HAVE_TSC
    const char *choice = getenv("OHB_CLOCK");
    if (choice != NULL && strcmp(choice, "monotonic") == 0)
        return;
    double rate[2];
    for (int i = 0; i < 2; i++) {
        double t0 = mono_us(), t1;
        uint64_t c0 = __rdtsc();
        while ((t1 = mono_us()) - t0 < 10000) /* 10 ms */
            ;
        uint64_t c1 = __rdtsc();
        if (c1 <= c0)
            return;
        rate[i] = (t1 - t0) / (double)(c1 - c0);
    }
    double diff = rate[0] > rate[1] ? rate[0] - rate[1] : rate[1] - rate[0];
    if (diff > 0.01 * rate[0])
        return;
    tsc_us_per_tick = (rate[0] + rate[1]) / 2;
    tsc_base_us = mono_us();
    tsc_base = __rdtsc();
#endif
}

double ohb_now_us(void)
{
#ifdef OHB_HAVE_TSC
    if (tsc_us_per_tick > 0)
        return tsc_base_us + (double)(__rdtsc() - tsc_base) * tsc_us_per_tick;
#endif
    return mono_us();
}
