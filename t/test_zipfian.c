/*
 * test_zipfian.c: unit test of the request distributions ohb_ycsb draws keys
 * with (benchmarks/ohb_zipfian.c): the FNV-1a hash against values computed
 * by hand from its definition, the zipfian's exact probabilities of ranks 0
 * and 1 (1/zeta(n) and 0.5^0.99/zeta(n)) and its range, the zeta sum
 * extended for a growing item count equal to one computed afresh, and the
 * scrambled zipfian's range and hottest record (the hash of rank 0, drawn
 * with probability 1/zeta(10^10)). TAP.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ohb_zipfian.h"
#include "t/rdma/tap.h"

/* A fixed stream of uniform numbers in [0, 1). */
static uint64_t lcg = 12345;
static double uniform(void)
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg >> 11) * 0x1p-53;
}

static double zeta(uint64_t n)
{
    double sum = 0;
    for (uint64_t i = 1; i <= n; i++)
        sum += 1.0 / pow((double)i, 0.99);
    return sum;
}

static int near(double got, double want, double relative)
{
    return fabs(got - want) <= relative * want;
}

enum { DRAWS = 400000, ITEMS = 1000 };
static unsigned counts[ITEMS + 1];

int main(void)
{
    tap_ok(ohb_fnv64(0) == 6284781860667377211ULL && ohb_fnv64(1) == 8517097267634966620ULL &&
               ohb_fnv64(999) == 2071219101098386137ULL &&
               ohb_fnv64(10000000000ULL) == 1201321332300452516ULL,
           "FNV-1a over the value's 8 bytes, made non-negative");

    struct ohb_zipfian z;
    ohb_zipfian_init(&z, ITEMS);
    int in_range = 1;
    for (int i = 0; i < DRAWS; i++) {
        uint64_t v = ohb_zipfian_next(&z, ITEMS, uniform());
        if (v >= ITEMS)
            in_range = 0;
        else
            counts[v]++;
    }
    double zn = zeta(ITEMS);
    tap_ok(in_range, "zipfian values are in 0 .. items-1");
    tap_ok(near(counts[0] / (double)DRAWS, 1 / zn, 0.03),
           "rank 0 is drawn with probability 1/zeta(n)");
    tap_ok(near(counts[1] / (double)DRAWS, pow(0.5, 0.99) / zn, 0.04),
           "rank 1 is drawn with probability 0.5^0.99/zeta(n)");
    tap_ok(counts[10] > counts[100] && counts[100] > counts[900], "popularity falls with rank");

    struct ohb_zipfian grown, fresh;
    ohb_zipfian_init(&grown, ITEMS);
    ohb_zipfian_next(&grown, ITEMS + 500, 0.5);
    ohb_zipfian_init(&fresh, ITEMS + 500);
    tap_ok(fabs(grown.zetan - fresh.zetan) < 1e-9 && fabs(grown.eta - fresh.eta) < 1e-9,
           "zeta extended for a grown item count equals zeta computed afresh");
    ohb_zipfian_next(&grown, 10, 0.5);
    ohb_zipfian_init(&fresh, 10);
    tap_ok(fabs(grown.zetan - fresh.zetan) < 1e-9, "a smaller item count recomputes zeta");

    struct ohb_zipfian s;
    ohb_zipfian_init_scrambled(&s, 100, 100 + ITEMS - 1);
    memset(counts, 0, sizeof(counts));
    in_range = 1;
    for (int i = 0; i < DRAWS; i++) {
        uint64_t v = ohb_zipfian_next_scrambled(&s, uniform());
        if (v < 100 || v >= 100 + ITEMS)
            in_range = 0;
        else
            counts[v - 100]++;
    }
    unsigned hottest = 0;
    for (unsigned i = 1; i < ITEMS; i++)
        if (counts[i] > counts[hottest])
            hottest = i;
    tap_ok(in_range, "scrambled values are in min .. max");
    tap_ok(hottest == ohb_fnv64(0) % ITEMS, "the hottest record is the hash of rank 0");
    tap_ok(near(counts[hottest] / (double)DRAWS, 1 / 26.46902820178302, 0.05),
           "it is drawn with probability about 1/zeta(10^10, 0.99)");

    tap_no_plan_end();
    return tap_exit_status();
}
