/* benchmarks/ohb_memthr.c: OHB memcached throughput benchmark. For each
 * client count in --threads it starts that many threads, each with its own
 * connection (its own memcached_st), runs a get/set mix on --keys keys of
 * --size bytes for --time seconds and prints the aggregate operations per
 * second and the p50 / p99 / p99.9 latency of all operations as an
 * OSU-style table (with --requests=N each thread makes exactly N operations
 * instead, for counts that do not depend on timing, as under valgrind).
 * The CSV also has the client threads' processor time and run-queue wait
 * over the row (/proc/thread-self/schedstat).
 * Blocking calls by default (public libmemcached API, so
 * the same source builds against Debian's libmemcached and
 * libmemcached-rdma); with --window=W above 1 each thread keeps W requests
 * in flight with memcached_iget / memcached_iset (libmemcached-rdma only),
 * and a request's latency runs from its issue to the moment the thread
 * sees it complete. */
#include "ohb_common.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef OHB_HAVE_NONBLOCKING
#define OHB_WINDOW_HELP "requests in flight per thread (memcached_iget/iset)"
#else
#define OHB_WINDOW_HELP "this build has blocking calls only (Debian's libmemcached)"
#endif

struct thr_options {
    const char *servers;
    unsigned threads[32];
    unsigned thread_rows;
    size_t size;
    double get_ratio;
    unsigned keys;
    double seconds;
    uint64_t requests; /* per thread; 0: run for seconds */
    unsigned window;
    const char *csv;
};

/* A thread's processor time and the time it waited on a run queue for a
 * processor, from /proc/thread-self/schedstat (ns; zeros where it cannot be
 * read). */
struct thread_sched {
    uint64_t run_ns, wait_ns;
};

static struct thread_sched thread_sched_now(void)
{
    struct thread_sched t = {0, 0};
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f) {
        unsigned long long run, wait;
        if (fscanf(f, "%llu %llu", &run, &wait) == 2)
            t = (struct thread_sched){run, wait};
        fclose(f);
    }
    return t;
}

struct client {
    pthread_t thread;
    const struct thr_options *opts;
    const char *value;
    pthread_barrier_t *start;
    const double *deadline; /* set by main between the two barrier waits */
    uint64_t rng;
    uint64_t ops;
    struct thread_sched sched; /* over the timed loop */
    struct ohb_samples latency;
    memcached_st *memc;
};

/* --threads=1,2,4: one table row per client count. */
static bool parse_thread_counts(void *target, const char *text)
{
    struct thr_options *o = target;
    o->thread_rows = 0;
    for (char *end; *text; text = *end ? end + 1 : end) {
        unsigned long n = strtoul(text, &end, 10);
        if (end == text || (*end != ',' && *end) || n == 0 || n > 1024 || o->thread_rows == 32)
            ohb_usage_error();
        o->threads[o->thread_rows++] = (unsigned)n;
    }
    return true;
}

static void parse(int argc, char **argv, struct thr_options *o)
{
    *o = (struct thr_options){.servers = "127.0.0.1:11211",
                              .threads = {1, 2, 4},
                              .thread_rows = 3,
                              .size = 32,
                              .get_ratio = 0.9,
                              .keys = 1000,
                              .seconds = 5,
                              .window = 1};
    const struct ohb_option table[] = {
        OHB_OPTION_SERVERS(&o->servers),
        {"threads", OHB_OPT_CALL, o, "LIST", "client counts, one table row each (default: 1,2,4)",
         parse_thread_counts},
        {"size", OHB_OPT_SIZE, &o->size, "N", "value size", NULL},
        {"get-ratio", OHB_OPT_DOUBLE, &o->get_ratio, "F", "the share of gets (the rest are sets)",
         NULL},
        {"keys", OHB_OPT_UNSIGNED, &o->keys, "N", "keys the operations choose from", NULL},
        {"time", OHB_OPT_DOUBLE, &o->seconds, "SECONDS", "run time per row", NULL},
        {"requests", OHB_OPT_U64, &o->requests, "N",
         "operations per thread and row instead of --time", NULL},
        {"window", OHB_OPT_UNSIGNED, &o->window, "W", OHB_WINDOW_HELP, NULL},
        OHB_OPTION_CSV(&o->csv),
    };
    const struct ohb_command cmd = {"ohb_memthr", table, sizeof(table) / sizeof(table[0]), NULL};
    ohb_command_parse(&cmd, argc, argv);
    if (o->thread_rows == 0 || o->keys == 0 || o->seconds <= 0 || o->window == 0 ||
        o->get_ratio < 0 || o->get_ratio > 1)
        ohb_usage_error();
#ifndef OHB_HAVE_NONBLOCKING
    if (o->window != 1) {
        fputs("ohb_memthr: --window needs libmemcached-rdma's non-blocking API; this build has "
              "blocking calls only\n",
              stderr);
        exit(2);
    }
#endif
    ohb_clock_calibrate();
}

static size_t key_of(char *key, size_t cap, uint64_t n)
{
    return (size_t)snprintf(key, cap, "ohb:thr:%llu", (unsigned long long)n);
}

/* The next operation, from the thread's own random stream: true for a get;
 * *key_len set to its key. */
static bool choose(struct client *c, char *key, size_t cap, size_t *key_len)
{
    uint64_t r = ohb_random(&c->rng);
    *key_len = key_of(key, cap, (r >> 32) % c->opts->keys);
    return (double)(r & 0xffffffffu) < c->opts->get_ratio * 4294967296.0;
}

static void blocking_op(struct client *c, bool get, const char *key, size_t key_len)
{
    memcached_return_t rc;
    if (get) {
        size_t len = 0;
        uint32_t flags = 0;
        char *got = memcached_get(c->memc, key, key_len, &len, &flags, &rc);
        if (got == NULL || rc != MEMCACHED_SUCCESS)
            ohb_fail(c->memc, "memcached_get", rc);
        if (len != c->opts->size) {
            fprintf(stderr, "memcached_get returned %zu bytes, expected %zu\n", len, c->opts->size);
            exit(1);
        }
        free(got);
    } else {
        rc = memcached_set(c->memc, key, key_len, c->value, c->opts->size, 0, 0);
        if (rc != MEMCACHED_SUCCESS)
            ohb_fail(c->memc, "memcached_set", rc);
    }
}

/* Whether thread c goes on: before its deadline, or with --requests below
 * its count. */
static bool more(const struct client *c, double now)
{
    return c->opts->requests ? c->ops < c->opts->requests : now < *c->deadline;
}

static void run_blocking(struct client *c)
{
    char key[64];
    size_t key_len;
    double now = ohb_now_us();
    while (more(c, now)) {
        bool get = choose(c, key, sizeof(key), &key_len);
        blocking_op(c, get, key, key_len);
        double end = ohb_now_us();
        ohb_samples_add(&c->latency, end - now);
        c->ops++;
        now = end;
    }
}

#ifdef OHB_HAVE_NONBLOCKING
struct slot {
    memcached_request_st *req;
    char *buffer; /* iget destination */
    char key[64];
    bool busy, get;
    double issued_us;
};

static void slot_complete(struct client *c, struct slot *s)
{
    if (!s->busy)
        return;
    memcached_return_t rc = memcached_wait(c->memc, s->req);
    if (rc != MEMCACHED_SUCCESS)
        ohb_fail(c->memc, s->get ? "memcached_iget" : "memcached_iset", rc);
    if (s->get) {
        size_t len = 0;
        memcached_request_value(s->req, &len);
        if (len != c->opts->size) {
            fprintf(stderr, "memcached_iget returned %zu bytes, expected %zu\n", len,
                    c->opts->size);
            exit(1);
        }
    }
    ohb_samples_add(&c->latency, ohb_now_us() - s->issued_us);
    c->ops++;
    s->busy = false;
}

static void slot_issue(struct client *c, struct slot *s)
{
    size_t key_len;
    s->get = choose(c, s->key, sizeof(s->key), &key_len);
    s->issued_us = ohb_now_us();
    memcached_return_t rc =
        s->get ? memcached_iget(c->memc, s->key, key_len, s->buffer, c->opts->size, s->req)
               : memcached_iset(c->memc, s->key, key_len, c->value, c->opts->size, 0, 0, s->req);
    if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_IN_PROGRESS)
        ohb_fail(c->memc, s->get ? "memcached_iget" : "memcached_iset", rc);
    s->busy = true;
}

static void run_window(struct client *c)
{
    unsigned n = c->opts->window;
    struct slot *slots = calloc(n, sizeof(*slots));
    if (slots == NULL) {
        fprintf(stderr, "out of memory for a window of %u\n", n);
        exit(1);
    }
    for (unsigned i = 0; i < n; i++) {
        slots[i].req = memcached_request_create(c->memc);
        if (slots[i].req == NULL)
            ohb_fail(c->memc, "memcached_request_create", MEMCACHED_MEMORY_ALLOCATION_FAILURE);
        slots[i].buffer = ohb_value_new(c->opts->size);
    }
    uint64_t issued = 0;
    for (unsigned i = 0;
         c->opts->requests ? issued < c->opts->requests : ohb_now_us() < *c->deadline;
         i = (i + 1) % n, issued++) {
        slot_complete(c, &slots[i]);
        slot_issue(c, &slots[i]);
    }
    for (unsigned i = 0; i < n; i++)
        slot_complete(c, &slots[i]);
    for (unsigned i = n; i-- > 0;) {
        free(slots[i].buffer);
        memcached_request_free(slots[i].req);
    }
    free(slots);
}
#endif

static void *client_main(void *arg)
{
    struct client *c = arg;
    /* connect outside the timed window: one untimed operation */
    char key[64];
    size_t key_len = key_of(key, sizeof(key), 0);
    blocking_op(c, true, key, key_len);
    pthread_barrier_wait(c->start);
    pthread_barrier_wait(c->start); /* main has set the deadline */
    struct thread_sched before = thread_sched_now();
#ifdef OHB_HAVE_NONBLOCKING
    if (c->opts->window > 1)
        run_window(c);
    else
#endif
        run_blocking(c);
    struct thread_sched after = thread_sched_now();
    c->sched = (struct thread_sched){after.run_ns - before.run_ns, after.wait_ns - before.wait_ns};
    return NULL;
}

static void preload(const struct thr_options *o, const char *value)
{
    memcached_st *memc = ohb_connect(o->servers);
    char key[64];
    for (unsigned k = 0; k < o->keys; k++) {
        size_t key_len = key_of(key, sizeof(key), k);
        memcached_return_t rc = memcached_set(memc, key, key_len, value, o->size, 0, 0);
        if (rc != MEMCACHED_SUCCESS)
            ohb_fail(memc, "memcached_set (preload)", rc);
    }
    memcached_free(memc);
}

/* One table row: n clients for o->seconds. */
static void run_row(const struct thr_options *o, unsigned n, const char *value, FILE *csv)
{
    struct client *clients = calloc(n, sizeof(*clients));
    pthread_barrier_t start;
    double deadline = 0;
    if (clients == NULL || pthread_barrier_init(&start, NULL, n + 1) != 0) {
        fprintf(stderr, "cannot set up %u clients\n", n);
        exit(1);
    }
    for (unsigned i = 0; i < n; i++) {
        struct client *c = &clients[i];
        *c = (struct client){.opts = o,
                             .value = value,
                             .start = &start,
                             .deadline = &deadline,
                             .rng = 0x9E3779B97F4A7C15ULL * (i + 1) + n,
                             .memc = ohb_connect(o->servers)};
        if (pthread_create(&c->thread, NULL, client_main, c) != 0) {
            fprintf(stderr, "cannot start client thread %u\n", i);
            exit(1);
        }
    }
    pthread_barrier_wait(&start);
    double begin = ohb_now_us();
    deadline = begin + o->seconds * 1e6;
    pthread_barrier_wait(&start);
    struct ohb_samples all = {0};
    uint64_t ops = 0, run_ns = 0, wait_ns = 0;
    for (unsigned i = 0; i < n; i++) {
        pthread_join(clients[i].thread, NULL);
        ops += clients[i].ops;
        run_ns += clients[i].sched.run_ns;
        wait_ns += clients[i].sched.wait_ns;
        ohb_samples_merge(&all, &clients[i].latency);
    }
    double elapsed_s = (ohb_now_us() - begin) / 1e6;
    ohb_samples_sort(&all);
    double rate = (double)ops / elapsed_s, p50 = ohb_samples_percentile(&all, 50),
           p99 = ohb_samples_percentile(&all, 99), p999 = ohb_samples_percentile(&all, 99.9);
    printf("%-10u %14.0f %12.2f %12.2f %12.2f\n", n, rate, p50, p99, p999);
    fflush(stdout);
    if (csv)
        fprintf(csv, "%u,%.0f,%.3f,%.3f,%.3f,%llu,%.0f,%.0f\n", n, rate, p50, p99, p999,
                (unsigned long long)ops, run_ns / 1e3, wait_ns / 1e3);
    ohb_samples_free(&all);
    for (unsigned i = n; i-- > 0;) {
        ohb_samples_free(&clients[i].latency);
        memcached_free(clients[i].memc);
    }
    pthread_barrier_destroy(&start);
    free(clients);
}

int main(int argc, char **argv)
{
    struct thr_options o;
    parse(argc, argv, &o);
    FILE *csv = NULL;
    if (o.csv && (csv = fopen(o.csv, "w")) == NULL) {
        perror(o.csv);
        return 1;
    }
    if (csv)
        fprintf(csv, "threads,ops_per_sec,p50_us,p99_us,p999_us,operations,client_cpu_us,"
                     "client_runq_us\n");
    char *value = ohb_value_new(o.size);
    preload(&o, value);

    printf("# OHB Memcached Throughput Test\n");
    char length[64];
    if (o.requests)
        snprintf(length, sizeof(length), "Requests: %llu a thread", (unsigned long long)o.requests);
    else
        snprintf(length, sizeof(length), "Time: %g s", o.seconds);
    printf("# Servers: %s  Size: %zu  Gets: %.0f%%  Keys: %u  %s  Mode: %s  Window: %u  "
           "Clock: %s\n",
           o.servers, o.size, o.get_ratio * 100, o.keys, length,
           o.window > 1 ? "non-blocking" : "blocking", o.window, ohb_clock_name());
    printf("# %-8s %14s %12s %12s %12s\n", "Threads", "Ops/s", "p50(us)", "p99(us)", "p99.9(us)");
    fflush(stdout);
    for (unsigned r = 0; r < o.thread_rows; r++)
        run_row(&o, o.threads[r], value, csv);

    free(value);
    if (csv)
        fclose(csv);
    return 0;
}
