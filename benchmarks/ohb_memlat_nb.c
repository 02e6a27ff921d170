/* benchmarks/ohb_memlat_nb.c: OHB non-blocking latency benchmark for
 * libmemcached-rdma. For value sizes doubling from --min-size to --max-size
 * it keeps --window requests in flight with memcached_iset / iget / bset /
 * bget (waiting for the oldest before reusing its slot) and prints the mean
 * time per operation and the operation rate as an OSU-style table. With
 * --window=1 --median it times each request from issue to completion and
 * prints the median instead of the mean (the latency of, e.g., an iget
 * that receives its value straight into the caller's buffer). Builds
 * only against libmemcached-rdma (the non-blocking calls are ours). */
#include "ohb_common.h"

#include <stdlib.h>
#include <string.h>

static const char notes[] =
    "  --median (with --window=1): the median request instead of the mean.\n";

enum api_kind { API_ISET, API_IGET, API_BSET, API_BGET };

struct window {
    unsigned slots;
    memcached_request_st **reqs;
    char **buffers; /* iget destinations, one per slot */
    bool *busy;
};

static void window_init(struct window *w, memcached_st *memc, unsigned slots, size_t max_size,
                        bool with_buffers)
{
    w->slots = slots;
    w->reqs = calloc(slots, sizeof(*w->reqs));
    w->buffers = calloc(slots, sizeof(*w->buffers));
    w->busy = calloc(slots, sizeof(*w->busy));
    if (w->reqs == NULL || w->buffers == NULL || w->busy == NULL) {
        fprintf(stderr, "out of memory for a window of %u\n", slots);
        exit(1);
    }
    for (unsigned i = 0; i < slots; i++) {
        w->reqs[i] = memcached_request_create(memc);
        if (w->reqs[i] == NULL)
            ohb_fail(memc, "memcached_request_create", MEMCACHED_MEMORY_ALLOCATION_FAILURE);
        if (with_buffers)
            w->buffers[i] = ohb_value_new(max_size);
    }
}

static void window_free(struct window *w)
{
    for (unsigned i = w->slots; i-- > 0;) {
        free(w->buffers[i]);
        memcached_request_free(w->reqs[i]);
    }
    free(w->busy);
    free(w->buffers);
    free(w->reqs);
}

/* Waits for slot i's request and checks its result. */
static void complete(memcached_st *memc, struct window *w, unsigned i, enum api_kind api,
                     size_t size)
{
    if (!w->busy[i])
        return;
    memcached_return_t rc = memcached_wait(memc, w->reqs[i]);
    if (rc != MEMCACHED_SUCCESS)
        ohb_fail(memc, "memcached_wait", rc);
    if (api == API_IGET || api == API_BGET) {
        size_t len = 0;
        memcached_request_value(w->reqs[i], &len);
        if (len != size) {
            fprintf(stderr, "get returned %zu bytes, expected %zu\n", len, size);
            exit(1);
        }
    }
    w->busy[i] = false;
}

static void issue(memcached_st *memc, struct window *w, unsigned i, enum api_kind api,
                  const char *key, size_t key_len, const char *value, size_t size)
{
    memcached_return_t rc;
    switch (api) {
    case API_ISET:
        rc = memcached_iset(memc, key, key_len, value, size, 0, 0, w->reqs[i]);
        break;
    case API_BSET:
        rc = memcached_bset(memc, key, key_len, value, size, 0, 0, w->reqs[i]);
        break;
    case API_IGET:
        rc = memcached_iget(memc, key, key_len, w->buffers[i], size, w->reqs[i]);
        break;
    default:
        rc = memcached_bget(memc, key, key_len, w->reqs[i]);
        break;
    }
    if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_IN_PROGRESS)
        ohb_fail(memc, "issuing a request", rc);
    w->busy[i] = true;
}

/* n operations with the window full; returns how many ran before the
 * deadline. With per_op (window of one), per_op[i] gets the time of
 * request i from issue to completion. */
static unsigned run_ops(memcached_st *memc, struct window *w, enum api_kind api, const char *key,
                        size_t key_len, const char *value, size_t size, unsigned n,
                        double deadline_us, double *per_op)
{
    unsigned done = 0;
    for (; done < n; done++) {
        unsigned slot = done % w->slots;
        complete(memc, w, slot, api, size);
        if (per_op) {
            double t0 = ohb_now_us();
            issue(memc, w, slot, api, key, key_len, value, size);
            complete(memc, w, slot, api, size);
            per_op[done] = ohb_now_us() - t0;
        } else {
            issue(memc, w, slot, api, key, key_len, value, size);
        }
        if (deadline_us > 0 && (done & 63) == 63 && ohb_now_us() > deadline_us) {
            done++;
            break;
        }
    }
    for (unsigned i = 0; i < w->slots; i++)
        complete(memc, w, i, api, size);
    return done;
}

int main(int argc, char **argv)
{
    struct ohb_options opts;
    ohb_parse_options(argc, argv, OHB_EXTRA_API, "ohb_memlat_nb", notes, &opts);
    enum api_kind api;
    if (strcmp(opts.api, "iset") == 0)
        api = API_ISET;
    else if (strcmp(opts.api, "iget") == 0)
        api = API_IGET;
    else if (strcmp(opts.api, "bset") == 0)
        api = API_BSET;
    else if (strcmp(opts.api, "bget") == 0)
        api = API_BGET;
    else
        ohb_usage_error();
    if (opts.median && opts.window != 1) {
        fputs("ohb_memlat_nb: --median needs --window=1\n", stderr);
        return 2;
    }

    memcached_st *memc = ohb_connect(opts.servers);
    FILE *csv = ohb_csv_open(&opts, "size,latency_us,ops_per_sec,iterations");
    char *value = ohb_value_new(opts.max_size);
    struct window w;
    window_init(&w, memc, opts.window, opts.max_size, api == API_IGET);
    double *per_op = NULL;
    if (opts.median && (per_op = malloc(opts.iterations * sizeof(*per_op))) == NULL) {
        fprintf(stderr, "out of memory for %u timings\n", opts.iterations);
        return 1;
    }

    printf("# OHB Memcached Non-Blocking Latency Test\n");
    printf("# Servers: %s  API: memcached_%s  Window: %u  Iterations: %u  Clock: %s\n",
           opts.servers, opts.api, opts.window, opts.iterations, ohb_clock_name());
    printf("# %-10s %14s %14s\n", "Size", opts.median ? "Median(us)" : "Latency(us)", "Ops/s");
    fflush(stdout);
    for (size_t size = opts.min_size; size <= opts.max_size; size *= 2) {
        char key[64];
        size_t key_len = (size_t)snprintf(key, sizeof(key), "ohb:memlat_nb:%zu", size);
        memcached_return_t rc = memcached_set(memc, key, key_len, value, size, 0, 0);
        if (rc != MEMCACHED_SUCCESS)
            ohb_fail(memc, "memcached_set", rc);
        run_ops(memc, &w, api, key, key_len, value, size, opts.warmup, 0, NULL);
        double start = ohb_now_us();
        unsigned done = run_ops(memc, &w, api, key, key_len, value, size, opts.iterations,
                                start + opts.max_seconds * 1e6, per_op);
        double elapsed = ohb_now_us() - start;
        double latency = elapsed / done, rate = done / (elapsed / 1e6);
        if (per_op)
            latency = ohb_median(per_op, done);
        printf("%-12zu %14.2f %14.0f\n", size, latency, rate);
        fflush(stdout);
        if (csv)
            fprintf(csv, "%zu,%.3f,%.0f,%u\n", size, latency, rate, done);
        if (size > opts.max_size / 2)
            break;
    }

    free(per_op);
    window_free(&w);
    free(value);
    if (csv)
        fclose(csv);
    memcached_free(memc);
    return 0;
}
