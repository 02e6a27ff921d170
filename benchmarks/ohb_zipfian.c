/* benchmarks/ohb_zipfian.c: the zipfian and scrambled zipfian generators and
 * the FNV hash YCSB draws keys with (ohb_zipfian.h). Written from the
 * published algorithm: for uniform u, with zeta(n) = sum of 1/i^theta for
 * i = 1..n, rank 0 when u * zeta(n) < 1, rank 1 when it is below
 * 1 + 0.5^theta, otherwise n * (eta * u - eta + 1)^(1 / (1 - theta)). */
#include "ohb_zipfian.h"

#include <math.h>

#define ZIPFIAN_CONSTANT 0.99
/* The scrambled form draws from 10^10 items; zeta(10^10, 0.99) is constant,
 * and the value YCSB uses is precomputed rather than summed at start. */
#define SCRAMBLED_ITEMS 10000000000ULL
#define SCRAMBLED_ZETAN 26.46902820178302

uint64_t ohb_fnv64(uint64_t value)
{
    uint64_t hash = 0xCBF29CE484222325ULL;
    for (int i = 0; i < 8; i++) {
        hash ^= value & 0xff;
        hash *= 1099511628211ULL;
        value >>= 8;
    }
    int64_t signed_hash = (int64_t)hash;
    return signed_hash < 0 ? (uint64_t)0 - hash : hash;
}

/* zeta(to) given zeta(from) = sum */
static double zeta_extend(uint64_t from, uint64_t to, double theta, double sum)
{
    for (uint64_t i = from; i < to; i++)
        sum += 1.0 / pow((double)(i + 1), theta);
    return sum;
}

static void set_items(struct ohb_zipfian *z, uint64_t items, double zetan)
{
    z->items = items;
    z->zetan = zetan;
    z->eta = (1 - pow(2.0 / (double)items, 1 - z->theta)) / (1 - z->zeta2 / zetan);
}

static void init_common(struct ohb_zipfian *z)
{
    z->theta = ZIPFIAN_CONSTANT;
    z->zeta2 = zeta_extend(0, 2, z->theta, 0);
    z->alpha = 1.0 / (1.0 - z->theta);
}

void ohb_zipfian_init(struct ohb_zipfian *z, uint64_t items)
{
    init_common(z);
    set_items(z, items, zeta_extend(0, items, z->theta, 0));
}

uint64_t ohb_zipfian_next(struct ohb_zipfian *z, uint64_t items, double u)
{
    if (items != z->items) {
        if (items > z->items)
            set_items(z, items, zeta_extend(z->items, items, z->theta, z->zetan));
        else
            set_items(z, items, zeta_extend(0, items, z->theta, 0));
    }
    double uz = u * z->zetan;
    if (uz < 1.0)
        return 0;
    if (uz < 1.0 + pow(0.5, z->theta))
        return 1;
    return (uint64_t)((double)items * pow(z->eta * u - z->eta + 1, z->alpha));
}

void ohb_zipfian_init_scrambled(struct ohb_zipfian *z, uint64_t min, uint64_t max)
{
    init_common(z);
    set_items(z, SCRAMBLED_ITEMS + 1, SCRAMBLED_ZETAN);
    z->min = min;
    z->records = max - min + 1;
}

uint64_t ohb_zipfian_next_scrambled(struct ohb_zipfian *z, double u)
{
    return z->min + ohb_fnv64(ohb_zipfian_next(z, z->items, u)) % z->records;
}
