/* benchmarks/ohb_common.h: what the OHB benchmark programs share: option
 * parsing, connecting through the public libmemcached API, the clock, value
 * buffers and OSU-style table/CSV output. Only the public libmemcached API is
 * used, so the same code builds against Debian's libmemcached and against
 * libmemcached-rdma. Nothing here measures anything by itself. */
#ifndef OHB_COMMON_H
#define OHB_COMMON_H

#include <libmemcached/memcached.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ohb_clock.h"
#include "ohb_stats.h"

struct ohb_options {
    const char *servers; /* libmemcached config string or host:port list */
    const char *op;      /* set | get | mix (ohb_memlat) */
    const char *api;     /* iset | iget | bset | bget (ohb_memlat_nb) */
    size_t min_size;     /* first value size, bytes */
    size_t max_size;     /* last value size; sizes double from min_size */
    unsigned iterations; /* timed operations per size */
    unsigned warmup;     /* untimed operations per size first */
    unsigned window;     /* requests in flight (ohb_memlat_nb) */
    double max_seconds;  /* per-size time cap; the loop stops early */
    const char *csv;     /* also write the table here */
    bool median;         /* report the median operation, not the mean */
};

/* Which options a program accepts besides the common ones. */
enum ohb_extra { OHB_EXTRA_OP = 1, OHB_EXTRA_API = 2 };

/* Parses argv into opts (with defaults); prints usage and exits on error. */
void ohb_parse_options(int argc, char **argv, int extras, const char *usage,
                       struct ohb_options *opts);

/* A memcached_st for opts->servers; exits with a message on failure. */
memcached_st *ohb_connect(const char *servers);

/* A count or size with an optional k or m suffix (binary); exits with status 2
 * naming --name when text is not one. */
size_t ohb_parse_size(const char *name, const char *text);

/* A buffer of size bytes (at least 1) with a recognisable pattern; free() it. */
char *ohb_value_new(size_t size);

/* Opens opts->csv (or returns NULL when not asked); exits on failure. */
FILE *ohb_csv_open(const struct ohb_options *opts, const char *header);

/* xorshift64*: a fast random stream for one thread (state must not be 0). */
uint64_t ohb_random(uint64_t *state);
/* A uniform double in [0, 1) from the stream. */
double ohb_uniform(uint64_t *state);

/* Exits with a message naming what failed. */
void ohb_fail(memcached_st *memc, const char *what, memcached_return_t rc);

#endif
