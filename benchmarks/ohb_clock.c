/* benchmarks/ohb_clock.c: the benchmarks' clock (ohb_clock.h).
 *
 * Operations are timed with the processor's cycle counter, calibrated once
 * against CLOCK_MONOTONIC, as perftest times its verbs: where the system
 * clock is slow to read (a virtual machine whose clock source is an
 * emulated HPET makes every clock_gettime a system call of several
 * microseconds), timing each operation with it would add that cost to
 * every figure. Without a steady counter (no two consecutive calibration
 * windows that agree within 1%), or with OHB_CLOCK=monotonic, the system
 * clock is used. */
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

#ifdef OHB_HAVE_TSC
/* Microseconds per counter tick over one 10 ms window; 0 if the counter
 * did not advance. */
static double tsc_rate(void)
{
    double t0 = mono_us(), t1;
    uint64_t c0 = __rdtsc();
    while ((t1 = mono_us()) - t0 < 10000)
        ;
    uint64_t c1 = __rdtsc();
    return c1 > c0 ? (t1 - t0) / (double)(c1 - c0) : 0;
}
#endif

void ohb_clock_calibrate(void)
{
    tsc_us_per_tick = 0;
#ifdef OHB_HAVE_TSC
    const char *choice = getenv("OHB_CLOCK");
    if (choice != NULL && strcmp(choice, "monotonic") == 0)
        return;
    /* A process's first window runs cold (in an emulated machine, code
     * being translated and clock pages first touched: measured 3.7% off
     * the later ones), so windows are taken until two in a row agree
     * within 1%, at most CALIBRATION_WINDOWS. */
    enum { CALIBRATION_WINDOWS = 6 };
    double prev = tsc_rate();
    for (int i = 1; i < CALIBRATION_WINDOWS && prev > 0; i++) {
        double rate = tsc_rate();
        if (rate <= 0)
            return;
        double diff = rate > prev ? rate - prev : prev - rate;
        if (diff <= 0.01 * prev) {
            tsc_us_per_tick = (rate + prev) / 2;
            tsc_base_us = mono_us();
            tsc_base = __rdtsc();
            return;
        }
        prev = rate;
    }
#endif
}

const char *ohb_clock_name(void)
{
    return tsc_us_per_tick > 0 ? "cycle counter" : "CLOCK_MONOTONIC";
}

double ohb_now_us(void)
{
#ifdef OHB_HAVE_TSC
    if (tsc_us_per_tick > 0)
        return tsc_base_us + (double)(__rdtsc() - tsc_base) * tsc_us_per_tick;
#endif
    return mono_us();
}
