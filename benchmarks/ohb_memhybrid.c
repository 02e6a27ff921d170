/* benchmarks/ohb_memhybrid.c: the OSU HiBD hybrid-memory benchmark: a data
 * set larger than the server's RAM (--keys values of --size bytes, or
 * --spill times --ram MiB of values), loaded once, then read with uniform
 * and zipfian key choices (YCSB's scrambled zipfian, 0.99) mixed with
 * --set-ratio sets, from --threads client threads for --time seconds (or
 * --ops operations) per pattern. Per pattern it prints the hit ratio,
 * ops/s and hit ops/s, get
 * latency percentiles and the average latency per operation, also with a
 * miss penalty (--miss-penalty-us per get miss, the cost of fetching the
 * value from a back-end database, added arithmetically; misses are not
 * refilled, so the hit ratio shows what the server kept). Every value
 * carries its key number, so a value returned for the wrong key stops the
 * program. --ram-probe times gets of a few small (RAM-resident) items
 * alone, while the other threads read the data set (flash reads on a
 * server with flash) and while they read RAM-resident items only, paced,
 * in short interleaved slices, so the tail of RAM hits with and without
 * flash reads can be compared in one run.
 * Public libmemcached API only. */
#include "ohb_common.h"
#include "ohb_zipfian.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char notes[] = "  The data set: --keys values, or --spill times --ram MiB of values.\n"
                            "  The default miss penalty is OSU HiBD's estimate for MySQL.\n";

#define STAMP_LEN 16         /* "%015llu:" at the start of every value */
#define PROBE_KEYS 64        /* RAM-resident items the probe reads */
#define PROBE_VALUE_SIZE 100 /* below any flash tier's minimum item size */
#define MAX_THREADS 256

enum pattern { PATTERN_UNIFORM, PATTERN_ZIPFIAN, PATTERN_COUNT };
static const char *const pattern_names[PATTERN_COUNT] = {"uniform", "zipfian"};

struct hybrid_options {
    const char *servers;
    size_t size;
    uint64_t keys;
    double ram_mb, spill;
    double load_mb_per_s; /* 0: as fast as the clients go */
    bool patterns[PATTERN_COUNT];
    double seconds, set_ratio, miss_penalty_us;
    uint64_t ops; /* per pattern, over all threads; 0: --time alone */
    unsigned threads;
    bool load, run;
    double probe_seconds, probe_interval_us;
    unsigned probe_slices;
    const char *csv, *probe_csv;
};

/* One pattern's run, shared by its client threads. */
struct run {
    const struct hybrid_options *o;
    enum pattern pattern;
    struct ohb_zipfian zipfian;
    pthread_barrier_t start;
    double deadline_us; /* set by main between the two barrier waits */
};

struct client {
    pthread_t thread;
    struct run *run;
    unsigned index;
    uint64_t rng;
    char *value;
    memcached_st *memc;
    struct ohb_samples get_latency;
    uint64_t gets, hits, sets, set_failures;
    double op_us; /* all operations' time */
};

static size_t key_of(char *key, size_t cap, const char *kind, uint64_t n)
{
    return (size_t)snprintf(key, cap, "ohb:hyb:%s%llu", kind, (unsigned long long)n);
}

/* Stamps key number n into the first STAMP_LEN bytes of value. */
static void stamp(char *value, uint64_t n)
{
    char text[32]; /* key numbers stay below 10^15: 15 digits and ':' */
    snprintf(text, sizeof(text), "%015llu:", (unsigned long long)(n % 1000000000000000ULL));
    memcpy(value, text, STAMP_LEN);
}

/* A set; false when the server answered that it is out of memory (counted
 * by the callers: a server that cannot make room is a result, not a
 * benchmark failure); any other error stops the program. */
static bool store(memcached_st *memc, const char *key, size_t key_len, const char *value,
                  size_t size)
{
    memcached_return_t rc = memcached_set(memc, key, key_len, value, size, 0, 0);
    if (rc == MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE)
        return false;
    if (rc != MEMCACHED_SUCCESS)
        ohb_fail(memc, "memcached_set", rc);
    return true;
}

/* A get of key number n of the data set (or of the probe items when size is
 * PROBE_VALUE_SIZE): true on a hit, checked; false on a miss (or an
 * out-of-memory answer). */
static bool fetch(memcached_st *memc, const char *key, size_t key_len, uint64_t n, size_t size)
{
    size_t len = 0;
    uint32_t flags = 0;
    memcached_return_t rc;
    char *got = memcached_get(memc, key, key_len, &len, &flags, &rc);
    /* a server that has no memory to read a flash value into did not serve it */
    if (rc == MEMCACHED_NOTFOUND || rc == MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE) {
        free(got);
        return false;
    }
    if (got == NULL || rc != MEMCACHED_SUCCESS)
        ohb_fail(memc, "memcached_get", rc);
    char expect[STAMP_LEN];
    stamp(expect, n);
    if (len != size || memcmp(got, expect, STAMP_LEN) != 0) {
        fprintf(stderr, "get %.*s: %zu bytes starting \"%.*s\", expected %zu starting \"%.*s\"\n",
                (int)key_len, key, len, (int)(len < STAMP_LEN ? len : STAMP_LEN), got, size,
                STAMP_LEN, expect);
        exit(1);
    }
    free(got);
    return true;
}

static uint64_t choose_key(struct client *c)
{
    const struct run *r = c->run;
    if (r->pattern == PATTERN_ZIPFIAN)
        return ohb_zipfian_next_scrambled(&c->run->zipfian, ohb_uniform(&c->rng));
    return ohb_random(&c->rng) % r->o->keys;
}

static void client_connect(struct client *c)
{
    char key[64];
    size_t key_len = key_of(key, sizeof(key), "connect:", 0); /* never stored */
    fetch(c->memc, key, key_len, 0, c->run->o->size);         /* connects: a miss */
}

/* Load: thread i stores keys i, i + threads, ... in order. */
static void *load_main(void *arg)
{
    struct client *c = arg;
    const struct hybrid_options *o = c->run->o;
    client_connect(c);
    pthread_barrier_wait(&c->run->start);
    char key[64];
    /* with --load-rate, this thread's share of it: one set every us_per_set */
    double us_per_set = o->load_mb_per_s > 0
                            ? (double)o->size * o->threads / (o->load_mb_per_s * 1048576.0 / 1e6)
                            : 0;
    double next = ohb_now_us();
    for (uint64_t n = c->index; n < o->keys; n += o->threads) {
        size_t key_len = key_of(key, sizeof(key), "", n);
        stamp(c->value, n);
        c->set_failures += !store(c->memc, key, key_len, c->value, o->size);
        c->sets++;
        next += us_per_set;
        double ahead_us = next - ohb_now_us();
        if (ahead_us > 0) {
            struct timespec pause = {(time_t)(ahead_us / 1e6),
                                     (long)(ahead_us * 1000) % 1000000000L};
            nanosleep(&pause, NULL);
        }
    }
    return NULL;
}

static void *run_main(void *arg)
{
    struct client *c = arg;
    const struct hybrid_options *o = c->run->o;
    client_connect(c);
    pthread_barrier_wait(&c->run->start);
    pthread_barrier_wait(&c->run->start); /* main has set the deadline */
    char key[64];
    double now = ohb_now_us();
    /* this thread's share of --ops (none: until the deadline) */
    uint64_t left = o->ops ? o->ops / o->threads + (c->index < o->ops % o->threads) : UINT64_MAX;
    while (now < c->run->deadline_us && left > 0) {
        left -= o->ops ? 1 : 0;
        uint64_t n = choose_key(c);
        size_t key_len = key_of(key, sizeof(key), "", n);
        bool set = ohb_uniform(&c->rng) < o->set_ratio;
        if (set) {
            stamp(c->value, n);
            c->set_failures += !store(c->memc, key, key_len, c->value, o->size);
            c->sets++;
        } else {
            bool hit = fetch(c->memc, key, key_len, n, o->size);
            c->gets++;
            c->hits += hit;
        }
        double end = ohb_now_us();
        if (!set)
            ohb_samples_add(&c->get_latency, end - now);
        c->op_us += end - now;
        now = end;
    }
    return NULL;
}

/* Starts o->threads clients on fn, waits for them; returns the seconds from
 * the start barrier to the last one's end. With timed set, the clients run
 * until o->seconds after the start. */
static double run_clients(struct run *r, struct client *clients, void *(*fn)(void *), bool timed)
{
    const struct hybrid_options *o = r->o;
    if (pthread_barrier_init(&r->start, NULL, o->threads + 1) != 0) {
        fprintf(stderr, "cannot set up %u clients\n", o->threads);
        exit(1);
    }
    for (unsigned i = 0; i < o->threads; i++) {
        struct client *c = &clients[i];
        *c = (struct client){.run = r,
                             .index = i,
                             .rng = 0x9E3779B97F4A7C15ULL * (i + 1) + (uint64_t)r->pattern * 7919,
                             .value = ohb_value_new(o->size),
                             .memc = ohb_connect(o->servers)};
        if (pthread_create(&c->thread, NULL, fn, c) != 0) {
            fprintf(stderr, "cannot start client thread %u\n", i);
            exit(1);
        }
    }
    pthread_barrier_wait(&r->start);
    double begin = ohb_now_us();
    if (timed) {
        r->deadline_us = begin + o->seconds * 1e6;
        pthread_barrier_wait(&r->start);
    }
    for (unsigned i = 0; i < o->threads; i++)
        pthread_join(clients[i].thread, NULL);
    double seconds = (ohb_now_us() - begin) / 1e6;
    pthread_barrier_destroy(&r->start);
    return seconds;
}

static void free_clients(struct client *clients, unsigned n)
{
    for (unsigned i = n; i-- > 0;) {
        ohb_samples_free(&clients[i].get_latency);
        memcached_free(clients[i].memc);
        free(clients[i].value);
    }
}

static void load(const struct hybrid_options *o, struct client *clients)
{
    struct run r = {.o = o};
    double seconds = run_clients(&r, clients, load_main, false);
    uint64_t failures = 0;
    for (unsigned i = 0; i < o->threads; i++)
        failures += clients[i].set_failures;
    free_clients(clients, o->threads);
    printf("# Loaded %llu keys of %zu bytes in %.1f s (%.0f sets/s); server out of memory: "
           "%llu sets\n",
           (unsigned long long)o->keys, o->size, seconds, (double)o->keys / seconds,
           (unsigned long long)failures);
    fflush(stdout);
}

static void run_pattern(const struct hybrid_options *o, enum pattern p, struct client *clients,
                        FILE *csv)
{
    struct run r = {.o = o, .pattern = p};
    ohb_zipfian_init_scrambled(&r.zipfian, 0, o->keys - 1);
    double seconds = run_clients(&r, clients, run_main, true);
    struct ohb_samples gets = {0};
    uint64_t n_gets = 0, hits = 0, sets = 0, set_failures = 0;
    double op_us = 0;
    for (unsigned i = 0; i < o->threads; i++) {
        ohb_samples_merge(&gets, &clients[i].get_latency);
        n_gets += clients[i].gets;
        hits += clients[i].hits;
        sets += clients[i].sets;
        set_failures += clients[i].set_failures;
        op_us += clients[i].op_us;
    }
    free_clients(clients, o->threads);
    ohb_samples_sort(&gets);
    uint64_t ops = n_gets + sets;
    double hit_ratio = n_gets ? (double)hits / (double)n_gets : 0;
    double avg = ops ? op_us / (double)ops : 0;
    double avg_penalty =
        ops ? (op_us + (double)(n_gets - hits) * o->miss_penalty_us) / (double)ops : 0;
    double p50 = ohb_samples_percentile(&gets, 50), p99 = ohb_samples_percentile(&gets, 99);
    printf("%-8s %9llu %9llu %7llu %8.4f %10.0f %10.0f %9.2f %9.2f %10.2f %14.2f\n",
           pattern_names[p], (unsigned long long)ops, (unsigned long long)n_gets,
           (unsigned long long)set_failures, hit_ratio, (double)ops / seconds,
           (double)hits / seconds, p50, p99, avg, avg_penalty);
    fflush(stdout);
    if (csv)
        fprintf(csv, "%s,%zu,%llu,%llu,%llu,%llu,%llu,%.4f,%.0f,%.0f,%.3f,%.3f,%.3f,%.3f\n",
                pattern_names[p], o->size, (unsigned long long)o->keys, (unsigned long long)ops,
                (unsigned long long)n_gets, (unsigned long long)hits,
                (unsigned long long)set_failures, hit_ratio, (double)ops / seconds,
                (double)hits / seconds, p50, p99, avg, avg_penalty);
    ohb_samples_free(&gets);
}

/* ---- the RAM-hit probe ---------------------------------------------------- */

/* What the reader threads do during a probe slice. */
enum probe_phase { PHASE_QUIET, PHASE_BUSY, PHASE_RAM_BUSY, PHASE_COUNT };
static const char *const phase_names[PHASE_COUNT] = {"quiet", "busy", "ram-busy"};

struct probe {
    const struct hybrid_options *o;
    atomic_int phase; /* quiet: readers idle; busy: the data set; ram-busy: the probe items */
    atomic_bool stop;
    atomic_uint_fast64_t reader_gets[PHASE_COUNT][MAX_THREADS]; /* by the phase a get began in */
};

struct reader {
    pthread_t thread;
    struct probe *probe;
    unsigned index;
};

/* Reads the data set uniformly (busy) or the probe items (ram-busy). */
static void *reader_main(void *arg)
{
    struct reader *rd = arg;
    struct probe *pr = rd->probe;
    const struct hybrid_options *o = pr->o;
    memcached_st *memc = ohb_connect(o->servers);
    uint64_t rng = 0xD1B54A32D192ED03ULL * (rd->index + 1);
    char key[64];
    struct timespec idle = {0, 1000000};
    while (!atomic_load(&pr->stop)) {
        int phase = atomic_load(&pr->phase);
        if (phase == PHASE_QUIET) {
            nanosleep(&idle, NULL);
            continue;
        }
        if (phase == PHASE_BUSY) {
            uint64_t n = ohb_random(&rng) % o->keys;
            size_t key_len = key_of(key, sizeof(key), "", n);
            fetch(memc, key, key_len, n, o->size);
        } else {
            uint64_t n = ohb_random(&rng) % PROBE_KEYS;
            size_t key_len = key_of(key, sizeof(key), "probe:", n);
            fetch(memc, key, key_len, n, PROBE_VALUE_SIZE);
        }
        atomic_fetch_add_explicit(&pr->reader_gets[phase][rd->index], 1, memory_order_relaxed);
    }
    memcached_free(memc);
    return NULL;
}

static uint64_t reader_total(struct probe *pr, int phase)
{
    uint64_t total = 0;
    for (unsigned i = 0; i < pr->o->threads; i++)
        total += atomic_load_explicit(&pr->reader_gets[phase][i], memory_order_relaxed);
    return total;
}

/* Paced gets of the probe items for seconds; samples into s. */
static void probe_gets(memcached_st *memc, const struct hybrid_options *o, double seconds,
                       struct ohb_samples *s, uint64_t *misses)
{
    char key[64];
    double next = ohb_now_us(), end = next + seconds * 1e6;
    for (uint64_t i = 0; next < end; i++) {
        while (ohb_now_us() < next)
            ;
        uint64_t n = i % PROBE_KEYS;
        size_t key_len = key_of(key, sizeof(key), "probe:", n);
        double t0 = ohb_now_us();
        if (!fetch(memc, key, key_len, n, PROBE_VALUE_SIZE))
            (*misses)++;
        ohb_samples_add(s, ohb_now_us() - t0);
        next += o->probe_interval_us;
        double now = ohb_now_us();
        if (next < now) /* fell behind: no burst to catch up */
            next = now;
    }
}

static void probe_row(const char *phase, struct ohb_samples *s, uint64_t misses, double reader_rate,
                      FILE *csv)
{
    ohb_samples_sort(s);
    double p50 = ohb_samples_percentile(s, 50), p99 = ohb_samples_percentile(s, 99),
           p999 = ohb_samples_percentile(s, 99.9);
    printf("%-8s %9zu %7llu %9.2f %9.2f %10.2f %14.0f\n", phase, s->count,
           (unsigned long long)misses, p50, p99, p999, reader_rate);
    if (csv)
        fprintf(csv, "%s,%zu,%llu,%.3f,%.3f,%.3f,%.0f\n", phase, s->count,
                (unsigned long long)misses, p50, p99, p999, reader_rate);
}

/* Quiet and busy phases alternate (quiet, busy, quiet, busy), a quarter of
 * --ram-probe each; the rows pool each kind's samples. */
static void ram_probe(const struct hybrid_options *o)
{
    memcached_st *memc = ohb_connect(o->servers);
    char *value = ohb_value_new(PROBE_VALUE_SIZE);
    char key[64];
    for (uint64_t n = 0; n < PROBE_KEYS; n++) {
        size_t key_len = key_of(key, sizeof(key), "probe:", n);
        stamp(value, n);
        bool stored = store(memc, key, key_len, value, PROBE_VALUE_SIZE);
        for (int twice = 0; twice < 2; twice++) /* read twice: active, kept in RAM */
            if (!stored || !fetch(memc, key, key_len, n, PROBE_VALUE_SIZE)) {
                fprintf(stderr, "probe item %s missing right after it was stored\n", key);
                exit(1);
            }
    }
    struct probe pr = {.o = o};
    struct reader *readers = calloc(o->threads, sizeof(*readers));
    if (readers == NULL)
        exit(1);
    for (unsigned i = 0; i < o->threads; i++) {
        readers[i] = (struct reader){.probe = &pr, .index = i};
        if (pthread_create(&readers[i].thread, NULL, reader_main, &readers[i]) != 0) {
            fprintf(stderr, "cannot start reader thread %u\n", i);
            exit(1);
        }
    }
    /* slices of the three phases, their order turning each round, so
     * the machine's other load falls on all three alike */
    struct ohb_samples samples[PHASE_COUNT] = {{0}};
    uint64_t misses[PHASE_COUNT] = {0};
    double seconds[PHASE_COUNT] = {0};
    double part = o->probe_seconds / (PHASE_COUNT * o->probe_slices);
    for (unsigned slice = 0; slice < o->probe_slices; slice++) {
        for (unsigned k = 0; k < PHASE_COUNT; k++) {
            int phase = (int)((slice + k) % PHASE_COUNT);
            double t0 = ohb_now_us();
            atomic_store(&pr.phase, phase);
            probe_gets(memc, o, part, &samples[phase], &misses[phase]);
            atomic_store(&pr.phase, PHASE_QUIET);
            seconds[phase] += (ohb_now_us() - t0) / 1e6;
        }
    }
    atomic_store(&pr.stop, true);
    for (unsigned i = 0; i < o->threads; i++)
        pthread_join(readers[i].thread, NULL);
    FILE *csv = NULL;
    if (o->probe_csv && (csv = fopen(o->probe_csv, "w")) == NULL) {
        perror(o->probe_csv);
        exit(1);
    }
    if (csv)
        fprintf(csv, "phase,gets,misses,p50_us,p99_us,p999_us,reader_gets_per_sec\n");
    printf("\n# OHB RAM Hits Under Data-Set Reads\n");
    printf("# %u probe items of %d bytes, one get every %.0f us, %u slices of each phase; busy: "
           "%u threads read the data set uniformly; ram-busy: they read the probe items\n",
           PROBE_KEYS, PROBE_VALUE_SIZE, o->probe_interval_us, o->probe_slices, o->threads);
    printf("# %-8s %9s %7s %9s %9s %10s %14s\n", "Phase", "Gets", "Misses", "p50(us)", "p99(us)",
           "p99.9(us)", "ReaderGets/s");
    for (int p = 0; p < PHASE_COUNT; p++)
        probe_row(phase_names[p], &samples[p], misses[p],
                  seconds[p] > 0 ? (double)reader_total(&pr, p) / seconds[p] : 0, csv);
    double quiet = ohb_samples_percentile(&samples[PHASE_QUIET], 99),
           busy = ohb_samples_percentile(&samples[PHASE_BUSY], 99),
           ram_busy = ohb_samples_percentile(&samples[PHASE_RAM_BUSY], 99);
    printf("# p99 busy/quiet: %.2f, busy/ram-busy: %.2f\n", quiet > 0 ? busy / quiet : 0,
           ram_busy > 0 ? busy / ram_busy : 0);
    if (csv)
        fclose(csv);
    for (int p = PHASE_COUNT; p-- > 0;)
        ohb_samples_free(&samples[p]);
    free(readers);
    free(value);
    memcached_free(memc);
}

/* ---- options ---------------------------------------------------------------- */

static bool parse_patterns(void *target, const char *text)
{
    struct hybrid_options *o = target;
    o->patterns[PATTERN_UNIFORM] = o->patterns[PATTERN_ZIPFIAN] = false;
    for (const char *v = text; *v;) {
        size_t len = strcspn(v, ",");
        int found = -1;
        for (int p = 0; p < PATTERN_COUNT; p++)
            if (strlen(pattern_names[p]) == len && strncmp(v, pattern_names[p], len) == 0)
                found = p;
        if (found < 0)
            goto unknown;
        o->patterns[found] = true;
        v += len + (v[len] == ',');
    }
    if (o->patterns[PATTERN_UNIFORM] || o->patterns[PATTERN_ZIPFIAN])
        return true;
unknown:
    fprintf(stderr, "ohb_memhybrid: unknown --pattern %s (uniform, zipfian)\n", text);
    return false;
}

/* --probe-only: no load and no pattern runs, the RAM probe alone. */
static bool probe_only(void *target, const char *text)
{
    struct hybrid_options *o = target;
    (void)text;
    o->load = false;
    o->patterns[PATTERN_UNIFORM] = o->patterns[PATTERN_ZIPFIAN] = false;
    return true;
}

static void parse(int argc, char **argv, struct hybrid_options *o)
{
    *o = (struct hybrid_options){.servers = "127.0.0.1:11211",
                                 .size = 1024,
                                 .ram_mb = 64,
                                 .spill = 8,
                                 .patterns = {true, true},
                                 .seconds = 10,
                                 .set_ratio = 0.1,
                                 .miss_penalty_us = 95000,
                                 .threads = 4,
                                 .load = true,
                                 .run = true,
                                 .probe_interval_us = 500,
                                 .probe_slices = 8};
    const struct ohb_option table[] = {
        OHB_OPTION_SERVERS(&o->servers),
        {"size", OHB_OPT_SIZE, &o->size, "N", "value size", NULL},
        {"keys", OHB_OPT_U64, &o->keys, "N",
         "keys in the data set (default: from --ram and --spill)", NULL},
        {"ram", OHB_OPT_DOUBLE, &o->ram_mb, "MB", "the server's RAM, MiB", NULL},
        {"spill", OHB_OPT_DOUBLE, &o->spill, "F", "the data set over the RAM", NULL},
        {"pattern", OHB_OPT_CALL, o, "uniform,zipfian", "key choices run (default: both)",
         parse_patterns},
        {"time", OHB_OPT_DOUBLE, &o->seconds, "SECONDS", "run time per pattern", NULL},
        {"ops", OHB_OPT_U64, &o->ops, "N",
         "operations per pattern, over all threads (stops at --time if sooner; default: 0, "
         "--time alone): servers compared after the same number of sets",
         NULL},
        {"set-ratio", OHB_OPT_DOUBLE, &o->set_ratio, "F", "the share of sets", NULL},
        {"miss-penalty-us", OHB_OPT_DOUBLE, &o->miss_penalty_us, "N", "time added per get miss, us",
         NULL},
        {"threads", OHB_OPT_UNSIGNED, &o->threads, "N", "client threads", NULL},
        {"no-load", OHB_OPT_CLEAR, &o->load, NULL, "use the data set already loaded", NULL},
        {"load-only", OHB_OPT_CLEAR, &o->run, NULL, "load the data set and stop", NULL},
        {"load-rate", OHB_OPT_DOUBLE, &o->load_mb_per_s, "MB_PER_S",
         "pace of the load, MiB/s (default: 0, as fast as the clients go)", NULL},
        {"ram-probe", OHB_OPT_DOUBLE, &o->probe_seconds, "SECONDS",
         "time gets of RAM-resident items: quiet, busy, ram-busy (default: 0, none)", NULL},
        {"probe-only", OHB_OPT_CALL, o, NULL, "the RAM probe alone (with --ram-probe)", probe_only},
        {"probe-interval-us", OHB_OPT_DOUBLE, &o->probe_interval_us, "N",
         "time between the probe's gets, us", NULL},
        {"probe-slices", OHB_OPT_UNSIGNED, &o->probe_slices, "N",
         "slices of each probe phase, interleaved", NULL},
        OHB_OPTION_CSV(&o->csv),
        {"probe-csv", OHB_OPT_STRING, &o->probe_csv, "FILE", "also write the probe's table here",
         NULL},
    };
    const struct ohb_command cmd = {"ohb_memhybrid", table, sizeof(table) / sizeof(table[0]),
                                    notes};
    ohb_command_parse(&cmd, argc, argv);
    if (o->keys == 0 && o->ram_mb > 0 && o->spill > 0)
        o->keys = (uint64_t)(o->ram_mb * o->spill * 1048576.0 / (double)o->size);
    if (o->size < STAMP_LEN || o->keys == 0 || o->seconds <= 0 || o->set_ratio < 0 ||
        o->set_ratio > 1 || o->miss_penalty_us < 0 || o->threads == 0 || o->threads > MAX_THREADS ||
        o->probe_seconds < 0 || o->probe_interval_us < 0 || o->probe_slices == 0 ||
        o->load_mb_per_s < 0 || (!o->load && !o->run) ||
        (!o->patterns[PATTERN_UNIFORM] && !o->patterns[PATTERN_ZIPFIAN] && o->probe_seconds <= 0))
        ohb_usage_error();
    ohb_clock_calibrate();
}

int main(int argc, char **argv)
{
    struct hybrid_options o;
    parse(argc, argv, &o);
    struct client *clients = calloc(o.threads, sizeof(*clients));
    if (clients == NULL)
        return 1;
    printf("# OHB Memcached Hybrid Memory Test\n");
    printf("# Servers: %s  Value: %zu B  Keys: %llu (%.0f MiB of values)  Sets: %.0f%%  "
           "Threads: %u  Time: %g s  Miss penalty: %.0f us  Clock: %s\n",
           o.servers, o.size, (unsigned long long)o.keys,
           (double)o.keys * (double)o.size / 1048576.0, o.set_ratio * 100, o.threads, o.seconds,
           o.miss_penalty_us, ohb_clock_name());
    fflush(stdout);
    if (o.load)
        load(&o, clients);
    if (o.run) {
        FILE *csv = NULL;
        if (o.csv && (csv = fopen(o.csv, "w")) == NULL) {
            perror(o.csv);
            return 1;
        }
        if (csv && (o.patterns[PATTERN_UNIFORM] || o.patterns[PATTERN_ZIPFIAN]))
            fprintf(csv,
                    "pattern,size,keys,operations,gets,hits,set_failures,hit_ratio,ops_per_sec,"
                    "hit_ops_per_sec,get_p50_us,get_p99_us,avg_us,avg_with_penalty_us\n");
        if (o.patterns[PATTERN_UNIFORM] || o.patterns[PATTERN_ZIPFIAN])
            printf("# %-6s %9s %9s %7s %8s %10s %10s %9s %9s %10s %14s\n", "Pattern", "Ops", "Gets",
                   "SetOOM", "HitRatio", "Ops/s", "HitOps/s", "p50(us)", "p99(us)", "Avg(us)",
                   "AvgPenalty(us)");
        for (int p = 0; p < PATTERN_COUNT; p++)
            if (o.patterns[p])
                run_pattern(&o, (enum pattern)p, clients, csv);
        if (csv)
            fclose(csv);
        if (o.probe_seconds > 0)
            ram_probe(&o);
    }
    free(clients);
    return 0;
}
