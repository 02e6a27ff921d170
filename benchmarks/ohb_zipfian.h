/* benchmarks/ohb_zipfian.h: YCSB's request distributions for ohb_ycsb: the
 * zipfian generator of Gray et al. ("Quickly generating billion-record
 * synthetic databases", SIGMOD 1994), its scrambled form (a zipfian over a
 * huge item space, hashed with 64-bit FNV-1a onto the records, so popular
 * records are spread over the key space) and the FNV hash itself. The
 * zipfian constant is YCSB's 0.99. */
#ifndef OHB_ZIPFIAN_H
#define OHB_ZIPFIAN_H

#include <stdbool.h>
#include <stdint.h>

struct ohb_zipfian {
    uint64_t items;   /* items the zeta sum covers */
    double theta;     /* the zipfian constant */
    double zeta2;     /* zeta(2, theta) */
    double alpha;     /* 1 / (1 - theta) */
    double zetan;     /* zeta(items, theta) */
    double eta;       /* Gray et al.'s eta for items */
    uint64_t min;     /* scrambled: first record number */
    uint64_t records; /* scrambled: how many record numbers */
};

/* YCSB's FNV-1a over the 8 bytes of value (low byte first), made non-negative. */
uint64_t ohb_fnv64(uint64_t value);

/* A zipfian over 0 .. items-1 (rank 0 the most popular). */
void ohb_zipfian_init(struct ohb_zipfian *z, uint64_t items);
/* The next value in 0 .. items for uniform u in [0, 1); when items differs
 * from the last call the zeta sum is extended (or recomputed) first, as for
 * a growing record count. */
uint64_t ohb_zipfian_next(struct ohb_zipfian *z, uint64_t items, double u);

/* The scrambled zipfian over record numbers min .. max (inclusive). */
void ohb_zipfian_init_scrambled(struct ohb_zipfian *z, uint64_t min, uint64_t max);
uint64_t ohb_zipfian_next_scrambled(struct ohb_zipfian *z, double u);

#endif
