/* benchmarks/ohb_stats.h: latency samples and their percentiles for the OHB
 * programs: a growable array of per-operation times (one per thread, merged
 * at the end) and the median / percentile of a set of samples. */
#ifndef OHB_STATS_H
#define OHB_STATS_H

#include <stdbool.h>
#include <stddef.h>

struct ohb_samples {
    double *values; /* microseconds */
    size_t count;
    size_t capacity;
};

/* Appends one sample; exits with a message when memory runs out. */
void ohb_samples_add(struct ohb_samples *s, double value_us);
/* Appends every sample of from to into (from is left as it was). */
void ohb_samples_merge(struct ohb_samples *into, const struct ohb_samples *from);
/* Sorts the samples so ohb_samples_percentile can read them. */
void ohb_samples_sort(struct ohb_samples *s);
/* The p-th percentile (0 < p <= 100) of sorted samples; 0 when there are none. */
double ohb_samples_percentile(const struct ohb_samples *s, double p);
/* The mean of the samples; 0 when there are none. */
double ohb_samples_mean(const struct ohb_samples *s);
void ohb_samples_free(struct ohb_samples *s);

/* The median of n samples (sorts them in place). */
double ohb_median(double *samples, unsigned n);

#endif
