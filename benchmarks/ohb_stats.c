/* benchmarks/ohb_stats.c: latency samples and percentiles (ohb_stats.h).
 * Percentiles are nearest-rank on the sorted samples. */
#include "ohb_stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(struct ohb_samples *s, size_t need)
{
    if (need <= s->capacity)
        return;
    size_t capacity = s->capacity ? s->capacity : 4096;
    while (capacity < need)
        capacity *= 2;
    double *values = realloc(s->values, capacity * sizeof(*values));
    if (values == NULL) {
        fprintf(stderr, "out of memory for %zu latency samples\n", capacity);
        exit(1);
    }
    s->values = values;
    s->capacity = capacity;
}

void ohb_samples_add(struct ohb_samples *s, double value_us)
{
    reserve(s, s->count + 1);
    s->values[s->count++] = value_us;
}

void ohb_samples_merge(struct ohb_samples *into, const struct ohb_samples *from)
{
    if (from->count == 0)
        return;
    reserve(into, into->count + from->count);
    memcpy(into->values + into->count, from->values, from->count * sizeof(*from->values));
    into->count += from->count;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void ohb_samples_sort(struct ohb_samples *s)
{
    if (s->count > 1)
        qsort(s->values, s->count, sizeof(*s->values), cmp_double);
}

double ohb_samples_percentile(const struct ohb_samples *s, double p)
{
    if (s->count == 0)
        return 0;
    double exact = p / 100.0 * (double)s->count;
    size_t rank = (size_t)exact;
    if ((double)rank < exact)
        rank++;
    if (rank < 1)
        rank = 1;
    if (rank > s->count)
        rank = s->count;
    return s->values[rank - 1];
}

double ohb_samples_mean(const struct ohb_samples *s)
{
    double sum = 0;
    for (size_t i = 0; i < s->count; i++)
        sum += s->values[i];
    return s->count ? sum / (double)s->count : 0;
}

void ohb_samples_free(struct ohb_samples *s)
{
    free(s->values);
    *s = (struct ohb_samples){0};
}

double ohb_median(double *samples, unsigned n)
{
    qsort(samples, n, sizeof(*samples), cmp_double);
    return samples[n / 2];
}
