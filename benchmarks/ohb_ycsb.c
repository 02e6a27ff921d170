/* benchmarks/ohb_ycsb.c: the YCSB core workloads A (50% read, 50% update),
 * B (95/5), C (read only), D (95% read of the latest records, 5% insert),
 * E (95% short scan, 5% insert) and F (50% read, 50% read-modify-write)
 * against any libmemcached
 * configuration. Each workload has a load phase (every record inserted) and
 * a run phase (--operations operations from --threads client threads, each
 * with its own connection); it prints throughput and per-operation latency
 * percentiles as an OSU-style table. Defaults are YCSB's: 1000 records of 10
 * fields of 100 bytes, 1000 operations, keys "user" followed by the FNV-1a
 * hash of the record number, and the scrambled zipfian request
 * distribution (constant 0.99; D: the latest-biased zipfian). A record is
 * stored as one value holding all its fields; an update writes the whole
 * record again with fresh field contents (memcached has no field update).
 * memcached has no ordered scan either: E's scan of 1 to 100 records
 * (uniform) from a zipfian-chosen record is one multi-get of the keys of
 * that many consecutive record numbers (records not inserted yet are left
 * out), so it reads the same number of records YCSB's scan would.
 * Public libmemcached API only, built against both libraries. */
#include "ohb_common.h"
#include "ohb_zipfian.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char notes[] = "  The defaults are YCSB's.\n";

enum op { OP_READ, OP_UPDATE, OP_INSERT, OP_SCAN, OP_RMW, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"READ", "UPDATE", "INSERT", "SCAN",
                                               "READ-MODIFY-WRITE"};
#define MAX_SCAN_LENGTH 100 /* YCSB's maxscanlength; lengths are uniform 1..100 */

struct workload {
    char name;
    double read, update, insert, scan, rmw; /* proportions, summing to 1 */
    bool latest;                            /* D: reads favour the newest records */
    const char *description;
};

static const struct workload workloads[] = {
    {'a', 0.5, 0.5, 0, 0, 0, false, "50% read, 50% update, scrambled zipfian (0.99)"},
    {'b', 0.95, 0.05, 0, 0, 0, false, "95% read, 5% update, scrambled zipfian (0.99)"},
    {'c', 1, 0, 0, 0, 0, false, "100% read, scrambled zipfian (0.99)"},
    {'d', 0.95, 0, 0.05, 0, 0, true, "95% read, 5% insert, latest (zipfian 0.99)"},
    {'e', 0, 0, 0.05, 0.95, 0, false,
     "95% scan (a multi-get of 1-100 consecutive records), 5% insert, scrambled zipfian (0.99)"},
    {'f', 0.5, 0, 0, 0, 0.5, false, "50% read, 50% read-modify-write, scrambled zipfian (0.99)"},
};

struct ycsb_options {
    const char *servers;
    const char *workloads;
    uint64_t records, operations;
    unsigned fields, field_length, threads;
    const char *csv;
};

/* What all client threads of one phase share. */
struct phase {
    const struct ycsb_options *o;
    const struct workload *w;
    size_t record_size;
    atomic_uint_fast64_t next_insert; /* record numbers handed to inserts */
    atomic_uint_fast64_t present;     /* records 0 .. present-1 are all stored */
    atomic_uchar *acked;              /* run-phase inserts done, by record - records */
    pthread_barrier_t start;
};

struct client {
    pthread_t thread;
    struct phase *phase;
    unsigned index;
    uint64_t operations;
    bool load;
    uint64_t rng;
    struct ohb_samples latency[OP_COUNT];
    uint64_t misses[OP_COUNT];
    char *record;
    memcached_st *memc;
};

static size_t key_of(char *key, size_t cap, uint64_t record)
{
    return (size_t)snprintf(key, cap, "user%llu", (unsigned long long)ohb_fnv64(record));
}

/* Fills c->record with fields "fieldN=" and field_length bytes each. */
static void fill_record(struct client *c)
{
    const struct ycsb_options *o = c->phase->o;
    char *p = c->record;
    for (unsigned f = 0; f < o->fields; f++) {
        p += sprintf(p, "field%u=", f);
        for (unsigned i = 0; i < o->field_length; i++)
            *p++ = (char)(' ' + ohb_random(&c->rng) % 95);
    }
}

static bool do_read(struct client *c, const char *key, size_t key_len)
{
    size_t len = 0;
    uint32_t flags = 0;
    memcached_return_t rc;
    char *got = memcached_get(c->memc, key, key_len, &len, &flags, &rc);
    if (rc == MEMCACHED_NOTFOUND)
        return false;
    if (got == NULL || rc != MEMCACHED_SUCCESS)
        ohb_fail(c->memc, "memcached_get", rc);
    if (len != c->phase->record_size) {
        fprintf(stderr, "read %.*s: %zu bytes, expected %zu\n", (int)key_len, key, len,
                c->phase->record_size);
        exit(1);
    }
    free(got);
    return true;
}

/* A scan: one multi-get of the records first .. first+length-1 that are
 * stored (below present); true when every one of them came back. */
static bool do_scan(struct client *c, uint64_t first, uint64_t present)
{
    char keys[MAX_SCAN_LENGTH][64];
    const char *key_ptrs[MAX_SCAN_LENGTH];
    size_t key_lens[MAX_SCAN_LENGTH];
    size_t wanted = 1 + ohb_random(&c->rng) % MAX_SCAN_LENGTH, n = 0;
    for (uint64_t r = first; n < wanted && r < present; r++, n++) {
        key_lens[n] = key_of(keys[n], sizeof(keys[n]), r);
        key_ptrs[n] = keys[n];
    }
    memcached_return_t rc = memcached_mget(c->memc, key_ptrs, key_lens, n);
    if (rc != MEMCACHED_SUCCESS)
        ohb_fail(c->memc, "memcached_mget", rc);
    size_t got = 0;
    memcached_result_st *result; /* a new one per record: the library frees a
                                    result of its own making at the end */
    while ((result = memcached_fetch_result(c->memc, NULL, &rc)) != NULL) {
        size_t len = memcached_result_length(result);
        memcached_result_free(result);
        if (len != c->phase->record_size) {
            fprintf(stderr, "scan: a record of %zu bytes, expected %zu\n", len,
                    c->phase->record_size);
            exit(1);
        }
        got++;
    }
    if (rc != MEMCACHED_END && rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND)
        ohb_fail(c->memc, "memcached_fetch_result", rc);
    return got == n;
}

static void do_write(struct client *c, const char *key, size_t key_len)
{
    fill_record(c);
    memcached_return_t rc =
        memcached_set(c->memc, key, key_len, c->record, c->phase->record_size, 0, 0);
    if (rc != MEMCACHED_SUCCESS)
        ohb_fail(c->memc, "memcached_set", rc);
}

static void record_op(struct client *c, enum op op, double start_us, bool hit)
{
    ohb_samples_add(&c->latency[op], ohb_now_us() - start_us);
    if (!hit)
        c->misses[op]++;
}

static void run_load(struct client *c)
{
    const struct ycsb_options *o = c->phase->o;
    char key[64];
    for (uint64_t r = c->index; r < o->records; r += o->threads) {
        size_t key_len = key_of(key, sizeof(key), r);
        double t0 = ohb_now_us();
        do_write(c, key, key_len);
        record_op(c, OP_INSERT, t0, true);
    }
}

/* Marks an insert done and moves `present` past every record stored without
 * a gap, so reads never pick a record whose insert is still in flight. */
static void acknowledge(struct phase *ph, uint64_t record)
{
    atomic_store(&ph->acked[record - ph->o->records], 1);
    uint_fast64_t p = atomic_load(&ph->present);
    while (p - ph->o->records < ph->o->operations && atomic_load(&ph->acked[p - ph->o->records]))
        if (atomic_compare_exchange_weak(&ph->present, &p, p + 1))
            p++;
}

static void run_transactions(struct client *c)
{
    struct phase *ph = c->phase;
    const struct workload *w = ph->w;
    uint64_t expected_new = (uint64_t)((double)ph->o->operations * w->insert * 2.0);
    struct ohb_zipfian chooser, latest;
    ohb_zipfian_init_scrambled(&chooser, 0, ph->o->records + expected_new);
    ohb_zipfian_init(&latest, ph->o->records);
    char key[64];
    for (uint64_t i = 0; i < c->operations; i++) {
        uint64_t present = atomic_load(&ph->present), record;
        if (w->latest) { /* YCSB's skewed-latest: the newest minus a zipfian distance */
            uint64_t newest = present - 1;
            uint64_t back = newest ? ohb_zipfian_next(&latest, newest, ohb_uniform(&c->rng)) : 0;
            record = back > newest ? 0 : newest - back;
        } else {
            do /* keys not inserted yet are drawn again, as YCSB does */
                record = ohb_zipfian_next_scrambled(&chooser, ohb_uniform(&c->rng));
            while (record >= present);
        }
        double pick = ohb_uniform(&c->rng), t0 = ohb_now_us();
        if (pick < w->read) {
            size_t key_len = key_of(key, sizeof(key), record);
            record_op(c, OP_READ, t0, do_read(c, key, key_len));
        } else if (pick < w->read + w->update) {
            size_t key_len = key_of(key, sizeof(key), record);
            do_write(c, key, key_len);
            record_op(c, OP_UPDATE, t0, true);
        } else if (pick < w->read + w->update + w->insert) {
            uint64_t inserted = atomic_fetch_add(&ph->next_insert, 1);
            size_t key_len = key_of(key, sizeof(key), inserted);
            do_write(c, key, key_len);
            acknowledge(ph, inserted);
            record_op(c, OP_INSERT, t0, true);
        } else if (pick < w->read + w->update + w->insert + w->scan) {
            record_op(c, OP_SCAN, t0, do_scan(c, record, present));
        } else {
            size_t key_len = key_of(key, sizeof(key), record);
            bool hit = do_read(c, key, key_len);
            record_op(c, OP_READ, t0, hit);
            double t1 = ohb_now_us();
            do_write(c, key, key_len);
            record_op(c, OP_UPDATE, t1, true);
            record_op(c, OP_RMW, t0, hit);
        }
    }
}

static void *client_main(void *arg)
{
    struct client *c = arg;
    /* connect before the clock starts: any answer will do (a miss, or a
     * record another run left with another layout or resilience scheme,
     * which the load overwrites; an unreachable server fails the load) */
    char key[64];
    size_t key_len = key_of(key, sizeof(key), 0), len;
    uint32_t flags;
    memcached_return_t rc;
    free(memcached_get(c->memc, key, key_len, &len, &flags, &rc));
    pthread_barrier_wait(&c->phase->start);
    if (c->load)
        run_load(c);
    else
        run_transactions(c);
    return NULL;
}

static void print_row(const char *phase, const char *name, struct ohb_samples *s, uint64_t count,
                      uint64_t misses, double seconds, char workload, FILE *csv)
{
    ohb_samples_sort(s);
    double rate = (double)count / seconds, avg = ohb_samples_mean(s),
           p50 = ohb_samples_percentile(s, 50), p95 = ohb_samples_percentile(s, 95),
           p99 = ohb_samples_percentile(s, 99), p999 = ohb_samples_percentile(s, 99.9);
    printf("%-6s %-18s %9llu %7llu %11.0f %9.2f %9.2f %9.2f %9.2f %10.2f\n", phase, name,
           (unsigned long long)count, (unsigned long long)misses, rate, avg, p50, p95, p99, p999);
    if (csv)
        fprintf(csv, "%c,%s,%s,%llu,%llu,%.0f,%.3f,%.3f,%.3f,%.3f,%.3f\n", workload, phase, name,
                (unsigned long long)count, (unsigned long long)misses, rate, avg, p50, p95, p99,
                p999);
}

/* Runs one phase with o->threads clients and prints its rows. */
static void run_phase(struct phase *ph, bool load, FILE *csv)
{
    const struct ycsb_options *o = ph->o;
    struct client *clients = calloc(o->threads, sizeof(*clients));
    if (clients == NULL || pthread_barrier_init(&ph->start, NULL, o->threads + 1) != 0) {
        fprintf(stderr, "cannot set up %u clients\n", o->threads);
        exit(1);
    }
    for (unsigned i = 0; i < o->threads; i++) {
        struct client *c = &clients[i];
        *c = (struct client){.phase = ph,
                             .index = i,
                             .load = load,
                             .operations =
                                 o->operations / o->threads + (i < o->operations % o->threads),
                             .rng = 0x9E3779B97F4A7C15ULL * (i + 1) + (uint64_t)ph->w->name,
                             .record = malloc(ph->record_size + 32),
                             .memc = ohb_connect(o->servers)};
        if (c->record == NULL || pthread_create(&c->thread, NULL, client_main, c) != 0) {
            fprintf(stderr, "cannot start client thread %u\n", i);
            exit(1);
        }
    }
    pthread_barrier_wait(&ph->start);
    double begin = ohb_now_us();
    struct ohb_samples merged[OP_COUNT] = {{0}};
    uint64_t misses[OP_COUNT] = {0};
    for (unsigned i = 0; i < o->threads; i++) {
        pthread_join(clients[i].thread, NULL);
        for (int op = 0; op < OP_COUNT; op++) {
            ohb_samples_merge(&merged[op], &clients[i].latency[op]);
            misses[op] += clients[i].misses[op];
        }
    }
    double seconds = (ohb_now_us() - begin) / 1e6;
    const char *phase = load ? "load" : "run";
    uint64_t total = 0, total_misses = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        if (merged[op].count == 0)
            continue;
        print_row(phase, op_names[op], &merged[op], merged[op].count, misses[op], seconds,
                  ph->w->name, csv);
        total += merged[op].count;
        total_misses += misses[op];
    }
    /* a read-modify-write is one operation, but its read and update have rows too */
    total -= 2 * merged[OP_RMW].count;
    total_misses -= misses[OP_RMW];
    printf("%-6s %-18s %9llu %7llu %11.0f\n", phase, "TOTAL", (unsigned long long)total,
           (unsigned long long)total_misses, (double)total / seconds);
    if (csv)
        fprintf(csv, "%c,%s,TOTAL,%llu,%llu,%.0f,,,,,\n", ph->w->name, phase,
                (unsigned long long)total, (unsigned long long)total_misses,
                (double)total / seconds);
    fflush(stdout);
    for (int op = OP_COUNT; op-- > 0;)
        ohb_samples_free(&merged[op]);
    for (unsigned i = o->threads; i-- > 0;) {
        for (int op = OP_COUNT; op-- > 0;)
            ohb_samples_free(&clients[i].latency[op]);
        memcached_free(clients[i].memc);
        free(clients[i].record);
    }
    pthread_barrier_destroy(&ph->start);
    free(clients);
}

static void parse(int argc, char **argv, struct ycsb_options *o)
{
    *o = (struct ycsb_options){.servers = "127.0.0.1:11211",
                               .workloads = "a,b,c,d,e,f",
                               .records = 1000,
                               .operations = 1000,
                               .fields = 10,
                               .field_length = 100,
                               .threads = 1};
    const struct ohb_option table[] = {
        OHB_OPTION_SERVERS(&o->servers),
        {"workload", OHB_OPT_STRING, &o->workloads, "a,b,c,d,e,f", "the workloads run", NULL},
        {"records", OHB_OPT_U64, &o->records, "N", "records loaded", NULL},
        {"operations", OHB_OPT_U64, &o->operations, "N", "operations per run phase", NULL},
        {"fields", OHB_OPT_UNSIGNED, &o->fields, "N", "fields per record", NULL},
        {"field-length", OHB_OPT_UNSIGNED, &o->field_length, "N", "bytes per field", NULL},
        {"threads", OHB_OPT_UNSIGNED, &o->threads, "N", "client threads", NULL},
        OHB_OPTION_CSV(&o->csv),
    };
    const struct ohb_command cmd = {"ohb_ycsb", table, sizeof(table) / sizeof(table[0]), notes};
    ohb_command_parse(&cmd, argc, argv);
    if (o->records == 0 || o->operations == 0 || o->fields == 0 || o->fields > 1000 ||
        o->threads == 0 || o->threads > 1024 || o->field_length > 1 << 20)
        ohb_usage_error();
    for (const char *p = o->workloads; *p; p++)
        if (*p != ',' && strchr("abcdef", *p) == NULL) {
            fprintf(stderr, "ohb_ycsb: unknown workload '%c' (a, b, c, d, e, f)\n", *p);
            exit(2);
        }
    ohb_clock_calibrate();
}

int main(int argc, char **argv)
{
    struct ycsb_options o;
    parse(argc, argv, &o);
    FILE *csv = NULL;
    if (o.csv && (csv = fopen(o.csv, "w")) == NULL) {
        perror(o.csv);
        return 1;
    }
    if (csv)
        fprintf(csv, "workload,phase,operation,count,misses,ops_per_sec,avg_us,p50_us,p95_us,"
                     "p99_us,p999_us\n");
    size_t record_size = 0;
    for (unsigned f = 0; f < o.fields; f++)
        record_size += (size_t)snprintf(NULL, 0, "field%u=", f) + o.field_length;

    for (const char *p = o.workloads; *p; p++) {
        if (*p == ',')
            continue;
        const struct workload *w = &workloads[0];
        while (w->name != *p)
            w++;
        struct phase ph = {.o = &o,
                           .w = w,
                           .record_size = record_size,
                           .acked = calloc(o.operations, sizeof(*ph.acked))};
        if (ph.acked == NULL) {
            fprintf(stderr, "out of memory for %llu operations\n",
                    (unsigned long long)o.operations);
            return 1;
        }
        atomic_init(&ph.next_insert, o.records);
        atomic_init(&ph.present, o.records);
        printf("# OHB YCSB Workload %c\n", w->name - 'a' + 'A');
        printf("# %s; servers: %s\n", w->description, o.servers);
        printf("# Records: %llu  Fields: %u x %u B (%zu B a record)  Operations: %llu  Threads: "
               "%u  Clock: %s\n",
               (unsigned long long)o.records, o.fields, o.field_length, record_size,
               (unsigned long long)o.operations, o.threads, ohb_clock_name());
        printf("# %-4s %-18s %9s %7s %11s %9s %9s %9s %9s %10s\n", "Phase", "Operation", "Count",
               "Misses", "Ops/s", "Avg(us)", "p50(us)", "p95(us)", "p99(us)", "p99.9(us)");
        run_phase(&ph, true, csv);
        run_phase(&ph, false, csv);
        printf("\n");
        free(ph.acked);
    }
    if (csv)
        fclose(csv);
    return 0;
}
