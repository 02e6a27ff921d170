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

/* How an option's text becomes the value at its target. */
enum ohb_option_kind {
    OHB_OPT_STRING,   /* const char *: the text itself */
    OHB_OPT_SIZE,     /* size_t: a count with an optional k or m suffix */
    OHB_OPT_UNSIGNED, /* unsigned: the same, at most UINT_MAX */
    OHB_OPT_U64,      /* uint64_t: the same */
    OHB_OPT_DOUBLE,   /* double: a decimal number */
    OHB_OPT_SET,      /* bool, no value: set to true */
    OHB_OPT_CLEAR,    /* bool, no value: set to false */
    OHB_OPT_CALL,     /* call(target, text); text is NULL when arg is NULL */
};

/* One command-line option, --name or --name=ARG (also --name ARG). */
struct ohb_option {
    const char *name; /* without the leading "--" */
    enum ohb_option_kind kind;
    void *target;
    const char *arg;  /* what the value is called in --help; NULL: no value */
    const char *help; /* one line; " (default: X)" is added from the target's
                         value before parsing unless it says "default" */
    /* OHB_OPT_CALL: stores what text means at target; false rejects it
     * after printing why, and the program exits with status 2. */
    bool (*call)(void *target, const char *text);
};

/* The --servers and --csv options every program has. */
#define OHB_OPTION_SERVERS(target)                                                                 \
    {                                                                                              \
        "servers", OHB_OPT_STRING, (target), "CONFIG",                                             \
            "a libmemcached configuration string or a host:port list", NULL                        \
    }
#define OHB_OPTION_CSV(target)                                                                     \
    {                                                                                              \
        "csv", OHB_OPT_STRING, (target), "FILE", "also write the table here", NULL                 \
    }

/* A program's options: --help prints "usage: NAME [OPTION]...", a line per
 * option and notes (text ending in a newline, or NULL). */
struct ohb_command {
    const char *name;
    const struct ohb_option *options;
    size_t count;
    const char *notes;
};

/* Parses argv by cmd's table (the targets hold the defaults): --help prints
 * the usage to stdout and exits 0; an unknown option, a missing value, an
 * argument that is not an option or a value its kind rejects exits 2. */
void ohb_command_parse(const struct ohb_command *cmd, int argc, char **argv);

/* Prints the usage of the command parsed last (defaults as they were before
 * parsing) to stderr and exits 2: for values that do not fit together. */
_Noreturn void ohb_usage_error(void);

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

/* Which options ohb_parse_options accepts besides the common ones. */
enum ohb_extra { OHB_EXTRA_OP = 1, OHB_EXTRA_API = 2 };

/* The latency programs' options: parses argv into opts (with defaults);
 * prints the usage (name, then notes) and exits on error. */
void ohb_parse_options(int argc, char **argv, int extras, const char *name, const char *notes,
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
