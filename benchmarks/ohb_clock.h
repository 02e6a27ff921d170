/* benchmarks/ohb_clock.h: the clock the benchmarks time operations with: the
 * processor's cycle counter calibrated against CLOCK_MONOTONIC, or the
 * system clock where there is no steady counter (ohb_clock.c says why). */
#ifndef OHB_CLOCK_H
#define OHB_CLOCK_H

/* Chooses and calibrates the clock (20 to 60 ms); call once before timing. */
void ohb_clock_calibrate(void);
/* "cycle counter" or "CLOCK_MONOTONIC": what ohb_now_us reads. */
const char *ohb_clock_name(void);
/* Monotonic time in microseconds. */
double ohb_now_us(void);

#endif
