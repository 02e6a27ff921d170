/* benchmarks/ohb_memlat.c: OHB memcached latency benchmark. For value sizes
 * doubling from --min-size to --max-size it times --iterations blocking
 * operations (set, get, or a 9:1 get/set mix) on one key and prints the mean
 * latency per operation (or, with --median, the median operation: steadier
 * where rare stalls dominate the mean) as an OSU-style table. Public libmemcached API only:
 * built once against Debian's libmemcached and once against
 * libmemcached-rdma from this same source. */
#include "ohb_common.h"

#include <stdlib.h>
#include <string.h>

static const char notes[] =
    "  CONFIG: a libmemcached configuration string (\"--SERVER=host:port ...\")\n"
    "          or a host:port[,host:port...] list. Sizes accept k and m suffixes.\n"
    "  mix: one set for every nine gets.\n";

enum op_kind { OP_SET, OP_GET, OP_MIX };

static void do_set(memcached_st *memc, const char *key, size_t key_len, const char *value,
                   size_t size)
{
    memcached_return_t rc = memcached_set(memc, key, key_len, value, size, 0, 0);
    if (rc != MEMCACHED_SUCCESS)
        ohb_fail(memc, "memcached_set", rc);
}

static void do_get(memcached_st *memc, const char *key, size_t key_len, size_t size)
{
    size_t len = 0;
    uint32_t flags = 0;
    memcached_return_t rc;
    char *got = memcached_get(memc, key, key_len, &len, &flags, &rc);
    if (got == NULL || rc != MEMCACHED_SUCCESS)
        ohb_fail(memc, "memcached_get", rc);
    if (len != size) {
        fprintf(stderr, "memcached_get returned %zu bytes, expected %zu\n", len, size);
        exit(1);
    }
    free(got);
}

/* Runs n operations; returns how many ran before the deadline (0: no cap).
 * With per_op, per_op[i] gets the time of operation i. */
static unsigned run_ops(memcached_st *memc, enum op_kind kind, const char *key, size_t key_len,
                        const char *value, size_t size, unsigned n, double deadline_us,
                        double *per_op)
{
    unsigned done = 0;
    for (; done < n; done++) {
        bool set = kind == OP_SET || (kind == OP_MIX && done % 10 == 0);
        double t0 = per_op ? ohb_now_us() : 0;
        if (set)
            do_set(memc, key, key_len, value, size);
        else
            do_get(memc, key, key_len, size);
        if (per_op)
            per_op[done] = ohb_now_us() - t0;
        if (deadline_us > 0 && (done & 15) == 15 && ohb_now_us() > deadline_us) {
            done++;
            break;
        }
    }
    return done;
}

int main(int argc, char **argv)
{
    struct ohb_options opts;
    ohb_parse_options(argc, argv, OHB_EXTRA_OP, "ohb_memlat", notes, &opts);
    enum op_kind kind;
    if (strcmp(opts.op, "set") == 0)
        kind = OP_SET;
    else if (strcmp(opts.op, "get") == 0)
        kind = OP_GET;
    else if (strcmp(opts.op, "mix") == 0)
        kind = OP_MIX;
    else
        ohb_usage_error();

    memcached_st *memc = ohb_connect(opts.servers);
    FILE *csv = ohb_csv_open(&opts, "size,latency_us,iterations");
    char *value = ohb_value_new(opts.max_size);
    double *per_op = NULL;
    if (opts.median && (per_op = malloc(opts.iterations * sizeof(*per_op))) == NULL) {
        fprintf(stderr, "out of memory for %u timings\n", opts.iterations);
        return 1;
    }

    printf("# OHB Memcached Latency Test\n");
    printf("# Servers: %s  Operation: %s  Iterations: %u  Clock: %s\n", opts.servers, opts.op,
           opts.iterations, ohb_clock_name());
    printf("# %-10s %14s\n", "Size", opts.median ? "Median(us)" : "Latency(us)");
    fflush(stdout);
    for (size_t size = opts.min_size; size <= opts.max_size; size *= 2) {
        char key[64];
        size_t key_len = (size_t)snprintf(key, sizeof(key), "ohb:memlat:%zu", size);
        do_set(memc, key, key_len, value, size); /* gets need the value present */
        run_ops(memc, kind, key, key_len, value, size, opts.warmup, 0, NULL);
        double start = ohb_now_us();
        unsigned done = run_ops(memc, kind, key, key_len, value, size, opts.iterations,
                                start + opts.max_seconds * 1e6, per_op);
        double latency = (ohb_now_us() - start) / done;
        if (per_op)
            latency = ohb_median(per_op, done);
        printf("%-12zu %14.2f\n", size, latency);
        fflush(stdout);
        if (csv)
            fprintf(csv, "%zu,%.3f,%u\n", size, latency, done);
        if (size > opts.max_size / 2)
            break; /* no overflow past max_size */
    }

    free(per_op);
    free(value);
    if (csv)
        fclose(csv);
    memcached_free(memc);
    return 0;
}
