/* benchmarks/ohb_memlat_resilience_measure.c: ohb_memlat_resilience's
 * measurements: blocking and windowed latencies in paired rounds, --pairs,
 * --count-gets, the fan-out floor, memory efficiency, coding time and the
 * degraded gets. */
#include "ohb_memlat_resilience.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../libmemcached-rdma/src/erasure.h"

static unsigned timed_count; /* operations of the last timed() */
static double window_cpu_us; /* the client's processor time per operation, last windowed() */

static bool stored(memcached_return_t rc)
{
    return rc == MEMCACHED_SUCCESS || rc == MEMCACHED_SOME_ERRORS;
}

/* The median microseconds of blocking sets (get: false) of size bytes on
 * key, over up to `count` operations or max_seconds (the median: the
 * machine is shared, and a stall of someone else's should not count). */
static double timed_count_of(memcached_st *memc, const char *key, size_t key_length, bool set,
                             const char *value, size_t size, unsigned count)
{
    static double *samples;
    static unsigned capacity;
    if (capacity < count) {
        free(samples);
        if ((samples = malloc(count * sizeof(*samples))) == NULL) {
            fprintf(stderr, "out of memory for %u timings\n", count);
            exit(1);
        }
        capacity = count;
    }
    double deadline = ohb_now_us() + max_seconds * 1e6;
    unsigned done = 0;
    while (done < count && (done < 3 || ohb_now_us() < deadline)) {
        double start = ohb_now_us();
        memcached_return_t rc;
        if (set) {
            rc = memcached_set(memc, key, key_length, value, size, 0, 0);
            if (!stored(rc))
                ohb_fail(memc, "memcached_set", rc);
        } else {
            size_t length;
            char *got = memcached_get(memc, key, key_length, &length, NULL, &rc);
            if (got == NULL || length != size)
                ohb_fail(memc, "memcached_get", rc);
            free(got);
        }
        samples[done++] = ohb_now_us() - start;
    }
    timed_count = done;
    return ohb_median(samples, done);
}

/* timed_count_of with `iterations` operations. */
static double timed(memcached_st *memc, const char *key, size_t key_length, bool set,
                    const char *value, size_t size)
{
    return timed_count_of(memc, key, key_length, set, value, size, iterations);
}

/* Blocking sets (get: false) of size bytes on a key named by tag and size,
 * which is stored first. */
static double blocking(memcached_st *memc, const char *tag, bool set, const char *value,
                       size_t size)
{
    char key[64];
    size_t key_length = (size_t)snprintf(key, sizeof(key), "res:%s:%zu", tag, size);
    memcached_return_t rc = memcached_set(memc, key, key_length, value, size, 0, 0);
    if (!stored(rc))
        ohb_fail(memc, "memcached_set", rc);
    memcached_wait_all(memc);
    double median = timed(memc, key, key_length, set, value, size);
    memcached_wait_all(memc); /* async copies settle outside the timing of gets */
    return median;
}

/* This process's processor time (user and system) in microseconds: the
 * client's alone, the servers are other processes. */
static double process_cpu_us(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 +
           (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

/* The keys of a window (tag and size name them), stored with value. */
struct window_keys {
    char keys[WINDOW][64];
    size_t lengths[WINDOW];
};

static void window_store(memcached_st *memc, const char *tag, const char *value, size_t size,
                         struct window_keys *w)
{
    for (int i = 0; i < WINDOW; i++) {
        w->lengths[i] =
            (size_t)snprintf(w->keys[i], sizeof(w->keys[i]), "resnb:%s:%zu:%d", tag, size, i);
        memcached_return_t rc = memcached_set(memc, w->keys[i], w->lengths[i], value, size, 0, 0);
        if (!stored(rc))
            ohb_fail(memc, "memcached_set", rc);
    }
    memcached_wait_all(memc);
}

/* Mean microseconds per operation with WINDOW isets (or igets) of w's
 * keys in flight, for at least min_windows windows and then up to
 * `iterations` operations or max_seconds; window_cpu_us: the client's
 * processor time per operation. */
static double window_pass(memcached_st *memc, const char *tag, bool set, const char *value,
                          size_t size, char *into, memcached_request_st **reqs,
                          const struct window_keys *w, unsigned min_windows)
{
    const char(*keys)[64] = w->keys;
    const size_t *lengths = w->lengths;
    double start = ohb_now_us(), deadline = start + max_seconds * 1e6;
    double cpu_start = process_cpu_us();
    unsigned rounds = 0;
    while (rounds < min_windows || (rounds * WINDOW < iterations && ohb_now_us() < deadline)) {
        for (int i = 0; i < WINDOW; i++) {
            memcached_return_t rc =
                set ? memcached_iset(memc, keys[i], lengths[i], value, size, 0, 0, reqs[i])
                    : memcached_iget(memc, keys[i], lengths[i], into + (size_t)i * size, size,
                                     reqs[i]);
            if (rc != MEMCACHED_SUCCESS)
                ohb_fail(memc, set ? "memcached_iset" : "memcached_iget", rc);
        }
        for (int i = 0; i < WINDOW; i++) {
            memcached_return_t rc = memcached_wait(memc, reqs[i]);
            if (!stored(rc)) {
                char what[96];
                snprintf(what, sizeof(what), "memcached_wait (%s, %s of %zu bytes)", tag,
                         set ? "iset" : "iget", size);
                ohb_fail(memc, what, rc);
            }
        }
        rounds++;
    }
    double per = (ohb_now_us() - start) / (rounds * WINDOW);
    window_cpu_us = (process_cpu_us() - cpu_start) / (rounds * WINDOW);
    memcached_wait_all(memc);
    return per;
}

/* Mean microseconds per operation with WINDOW isets (or igets) in flight,
 * on keys stored first; window_cpu_us: the client's processor time per
 * operation. */
static double windowed(memcached_st *memc, const char *tag, bool set, const char *value,
                       size_t size, char *into, memcached_request_st **reqs)
{
    struct window_keys w;
    window_store(memc, tag, value, size, &w);
    return window_pass(memc, tag, set, value, size, into, reqs, &w, 2);
}

/* what RS is compared with in each measurement */
const enum scheme ratio_to[MEASURES] = {SYNC_REP, ASYNC_REP, SYNC_REP, ASYNC_REP, ASYNC_REP};

/* A client per scheme (schemes[0..count)), each with a window of requests. */
static void clients_open(const enum scheme *schemes, int count, memcached_st **clients,
                         memcached_request_st *(*reqs)[WINDOW])
{
    for (int s = 0; s < count; s++) {
        clients[s] = res_client(schemes[s]);
        for (int i = 0; i < WINDOW; i++)
            reqs[s][i] = memcached_request_create(clients[s]);
    }
}

static void clients_close(int count, memcached_st **clients, memcached_request_st *(*reqs)[WINDOW])
{
    for (int s = count; s > 0; s--) {
        for (int i = WINDOW; i > 0; i--)
            memcached_request_free(reqs[s - 1][i - 1]);
        memcached_free(clients[s - 1]);
    }
}

/* The four latency measurements of every scheme, in `rounds` rounds: in
 * each round every size is measured under every scheme in turn (the order
 * reversed every other round), so the schemes compared share the
 * machine's moments. latency[m][s][z] is the median of the rounds' values;
 * ratio[m][z] the median of the rounds' RS / ratio_to[m] ratios. */
void res_measure_rounds(double latency[MEASURES][SCHEMES][MAX_SIZES],
                        double ratio[MEASURES][MAX_SIZES])
{
    double(*by_round)[MEASURES][SCHEMES][MAX_SIZES] = calloc(paired_rounds, sizeof(*by_round));
    double *column = malloc(paired_rounds * sizeof(*column));
    char *value = ohb_value_new(max_size);
    char *into = malloc((size_t)WINDOW * max_size);
    if (by_round == NULL || column == NULL || into == NULL) {
        fprintf(stderr, "out of memory for %u rounds\n", paired_rounds);
        exit(1);
    }
    memcached_st *clients[SCHEMES];
    memcached_request_st *reqs[SCHEMES][WINDOW];
    const enum scheme schemes[SCHEMES] = {NONE, SYNC_REP, ASYNC_REP, RS};
    clients_open(schemes, SCHEMES, clients, reqs);
    for (unsigned r = 0; r < paired_rounds; r++)
        for (unsigned z = 0; z < size_count; z++) {
            for (int turn = 0; turn < SCHEMES; turn++) {
                int s = r % 2 == 0 ? turn : SCHEMES - 1 - turn;
                memcached_st *memc = clients[s];
                const char *tag = csv_names[s];
                double *at[MEASURES];
                for (int m = 0; m < MEASURES; m++)
                    at[m] = &by_round[r][m][s][z];
                *at[SET_BLOCK] = blocking(memc, tag, true, value, sizes[z]);
                *at[GET_BLOCK] = blocking(memc, tag, false, value, sizes[z]);
                if (blocking_only)
                    continue;
                *at[SET_WINDOW] = windowed(memc, tag, true, value, sizes[z], into, reqs[s]);
                *at[GET_WINDOW] = windowed(memc, tag, false, value, sizes[z], into, reqs[s]);
                *at[GET_WINDOW_CPU] = window_cpu_us;
            }
            res_flush_all(); /* one size's values at a time on the servers */
            res_progress("round %u of %u: %zu bytes measured under the 4 schemes", r + 1,
                         paired_rounds, sizes[z]);
        }
    for (int m = 0; m < MEASURES; m++)
        for (unsigned z = 0; z < size_count; z++) {
            for (int s = 0; s < SCHEMES; s++) {
                for (unsigned r = 0; r < paired_rounds; r++)
                    column[r] = by_round[r][m][s][z];
                latency[m][s][z] = ohb_median(column, paired_rounds);
            }
            for (unsigned r = 0; r < paired_rounds; r++)
                column[r] = by_round[r][m][RS][z] / by_round[r][m][ratio_to[m]][z];
            if (m < SET_WINDOW || !blocking_only)
                res_print_round_ratios(m, sizes[z], column);
            ratio[m][z] = ohb_median(column, paired_rounds);
        }
    clients_close(SCHEMES, clients, reqs);
    free(into);
    free(value);
    free(column);
    free(by_round);
}

enum pair_measure { PAIR_BLOCK, PAIR_WINDOW, PAIR_WINDOW_CPU, PAIR_MEASURES };
static const char *pair_titles[PAIR_MEASURES] = {
    "Get, blocking (median us of the round's gets)", "Get, window of 64 (us per get)",
    "Get, window of 64: the client's processor time (us per get)"};
static const char *pair_sections[PAIR_MEASURES] = {"pair_get", "pair_get_window64",
                                                   "pair_get_window64_cpu"};

/* --pairs: gets of Async-Rep=3 and RS(3,2) alone, in pair_rounds short
 * paired rounds per size: in each round both schemes in turn (the order
 * swapped every other round) do pair_gets blocking gets (their median)
 * and one window of 64 igets (wall and processor time per get), so the
 * two measurements of a round share the machine's moment. Prints every
 * round's RS/Async ratio, their quartiles (the median is the judgement)
 * and the quartiles of each scheme's own values. */
void res_paired_get_rounds(void)
{
    const enum scheme pair[2] = {ASYNC_REP, RS};
    double(*values)[2][PAIR_MEASURES] = calloc(pair_rounds, sizeof(*values));
    double *column = malloc(pair_rounds * sizeof(*column));
    char *value = ohb_value_new(max_size);
    char *into = malloc((size_t)WINDOW * max_size);
    struct window_keys *keys = malloc(2 * sizeof(*keys));
    if (values == NULL || column == NULL || into == NULL || keys == NULL) {
        fprintf(stderr, "out of memory for %u rounds\n", pair_rounds);
        exit(1);
    }
    memcached_st *clients[2];
    memcached_request_st *reqs[2][WINDOW];
    clients_open(pair, 2, clients, reqs);
    printf("# Paired get rounds: %u rounds per size, each: %u blocking gets and a window of %d\n"
           "# igets per scheme, Async-Rep=3 and RS(3,2) in turn (swapped every other round)\n",
           pair_rounds, pair_gets, WINDOW);
    for (unsigned z = 0; z < size_count; z++) {
        char key[2][64];
        size_t key_length[2];
        for (int p = 0; p < 2; p++) {
            const char *tag = csv_names[pair[p]];
            key_length[p] = (size_t)snprintf(key[p], sizeof(key[p]), "res:%s:%zu", tag, sizes[z]);
            memcached_return_t rc =
                memcached_set(clients[p], key[p], key_length[p], value, sizes[z], 0, 0);
            if (!stored(rc))
                ohb_fail(clients[p], "memcached_set", rc);
            window_store(clients[p], tag, value, sizes[z], &keys[p]);
        }
        for (unsigned r = 0; r < pair_rounds; r++)
            for (int turn = 0; turn < 2; turn++) {
                int p = r % 2 == 0 ? turn : 1 - turn;
                double *at = values[r][p];
                at[PAIR_BLOCK] = timed_count_of(clients[p], key[p], key_length[p], false, value,
                                                sizes[z], pair_gets);
                at[PAIR_WINDOW] = window_pass(clients[p], csv_names[pair[p]], false, value,
                                              sizes[z], into, reqs[p], &keys[p], 1);
                at[PAIR_WINDOW_CPU] = window_cpu_us;
            }
        for (int m = 0; m < PAIR_MEASURES; m++) {
            printf("\n# %zu bytes, %s\n# RS/Async per round:", sizes[z], pair_titles[m]);
            for (unsigned r = 0; r < pair_rounds; r++) {
                column[r] = values[r][1][m] / values[r][0][m];
                printf("%s%.2f", r % 16 == 0 ? "\n" : " ", column[r]);
                if (csv != NULL)
                    fprintf(csv, "%s_round%u,rs_over_async,%zu,%.4f\n", pair_sections[m], r,
                            sizes[z], column[r]);
            }
            double q[3];
            res_quartiles(column, pair_rounds, q);
            printf("\n# RS/Async: median %.2f (quartiles %.2f, %.2f)", q[1], q[0], q[2]);
            res_csv_row(pair_sections[m], RS, sizes[z], q[1]);
            for (int p = 0; p < 2; p++) {
                for (unsigned r = 0; r < pair_rounds; r++)
                    column[r] = values[r][p][m];
                res_quartiles(column, pair_rounds, q);
                printf("; %s median %.2f (%.2f, %.2f)", scheme_names[pair[p]], q[1], q[0], q[2]);
            }
            printf("\n");
        }
        fflush(stdout);
        res_flush_all();
        res_progress("--pairs: %zu bytes measured in %u rounds", sizes[z], pair_rounds);
    }
    clients_close(2, clients, reqs);
    free(keys);
    free(into);
    free(value);
    free(column);
    free(values);
}

/* `count` gets of key (blocking), or igets of w's keys in windows of 64
 * (count_window). */
static void gets_of(memcached_st *memc, const char *key, size_t key_length, size_t size,
                    const struct window_keys *w, char *into, memcached_request_st **reqs,
                    unsigned count)
{
    for (unsigned done = 0; done < count;) {
        if (!count_window) {
            memcached_return_t rc;
            size_t length;
            char *got = memcached_get(memc, key, key_length, &length, NULL, &rc);
            if (got == NULL || length != size)
                ohb_fail(memc, "memcached_get", rc);
            free(got);
            done++;
            continue;
        }
        unsigned window = count - done < WINDOW ? count - done : WINDOW;
        for (unsigned i = 0; i < window; i++) {
            memcached_return_t rc = memcached_iget(memc, w->keys[i], w->lengths[i],
                                                   into + (size_t)i * size, size, reqs[i]);
            if (rc != MEMCACHED_SUCCESS)
                ohb_fail(memc, "memcached_iget", rc);
        }
        for (unsigned i = 0; i < window; i++) {
            memcached_return_t rc = memcached_wait(memc, reqs[i]);
            if (rc != MEMCACHED_SUCCESS)
                ohb_fail(memc, "memcached_wait", rc);
        }
        done += window;
    }
}

/* --count-gets: count_gets gets, with no time cap: callgrind
 * --toggle-collect=counted_gets counts these alone (not the warm-up). */
__attribute__((noinline)) static void counted_gets(memcached_st *memc, const char *key,
                                                   size_t key_length, size_t size,
                                                   const struct window_keys *w, char *into,
                                                   memcached_request_st **reqs)
{
    gets_of(memc, key, key_length, size, w, into, reqs, count_gets);
}

/* --count-gets: per size, count_gets gets of count_scheme after one
 * untimed get of each key (connections made, buffers grown); prints the
 * wall and processor time and minor page faults per get. */
void res_count_only(void)
{
    memcached_st *clients[1];
    memcached_request_st *reqs[1][WINDOW];
    clients_open(&count_scheme, 1, clients, reqs);
    memcached_st *memc = clients[0];
    char *value = ohb_value_new(max_size);
    char *into = malloc((size_t)WINDOW * max_size);
    struct window_keys w;
    if (into == NULL) {
        fprintf(stderr, "out of memory for a window\n");
        exit(1);
    }
    printf("# %u %s of %s per size\n# %-10s %13s %13s %13s\n", count_gets,
           count_window ? "igets in windows of 64" : "blocking gets", scheme_names[count_scheme],
           "Size", "wall us/get", "cpu us/get", "faults/get");
    for (unsigned z = 0; z < size_count; z++) {
        const char *tag = csv_names[count_scheme];
        char key[64];
        size_t key_length = (size_t)snprintf(key, sizeof(key), "res:%s:%zu", tag, sizes[z]);
        memcached_return_t rc = memcached_set(memc, key, key_length, value, sizes[z], 0, 0);
        if (!stored(rc))
            ohb_fail(memc, "memcached_set", rc);
        window_store(memc, tag, value, sizes[z], &w);
        /* the warm-up: connections made, buffers grown */
        gets_of(memc, key, key_length, sizes[z], &w, into, reqs[0], count_window ? WINDOW : 1);
        struct rusage before, after;
        /* marks for a system call tracer (strace): the calls between
         * them are the counted gets' */
        (void)access("ohb-counted-gets-start", F_OK);
        getrusage(RUSAGE_SELF, &before);
        double start = ohb_now_us(), cpu_start = process_cpu_us();
        counted_gets(memc, key, key_length, sizes[z], &w, into, reqs[0]);
        double wall = ohb_now_us() - start, cpu = process_cpu_us() - cpu_start;
        getrusage(RUSAGE_SELF, &after);
        (void)access("ohb-counted-gets-end", F_OK);
        printf("%-12zu %13.2f %13.2f %13.2f\n", sizes[z], wall / count_gets, cpu / count_gets,
               (double)(after.ru_minflt - before.ru_minflt) / count_gets);
        memcached_wait_all(memc);
        res_flush_all();
        res_progress("--count-gets: %zu bytes counted", sizes[z]);
    }
    free(into);
    free(value);
    clients_close(1, clients, reqs);
}

/* The servers' bytes over the bytes stored, for 16 values of each size. */
void res_memory_efficiency(void)
{
    enum { VALUES = 16 };
    const enum scheme measured[] = {NONE, SYNC_REP, RS};
    printf("\n# Memory efficiency: sum of `bytes` over the servers / bytes stored (%d values)\n",
           VALUES);
    printf("# %-10s %13s %13s %13s %9s\n", "Size", "none", "Rep=3", "RS(3,2)", "RS coded");
    char *value = ohb_value_new(max_size);
    static double ratio[3][MAX_SIZES];
    for (int s = 0; s < 3; s++) {
        res_restart_all(); /* empty servers: nothing flushed still counts */
        memcached_st *memc = res_client(measured[s]);
        for (unsigned z = 0; z < size_count; z++) {
            uint64_t before = res_servers_stat(false);
            for (int v = 0; v < VALUES; v++) {
                char key[64];
                size_t key_length = (size_t)snprintf(key, sizeof(key), "mem:%zu:%d", sizes[z], v);
                memcached_return_t rc = memcached_set(memc, key, key_length, value, sizes[z], 0, 0);
                if (!stored(rc))
                    ohb_fail(memc, "memcached_set", rc);
            }
            ratio[s][z] = (double)(res_servers_stat(false) - before) / ((double)sizes[z] * VALUES);
            res_csv_row("memory", measured[s], sizes[z], ratio[s][z]);
        }
        memcached_free(memc);
        res_progress("memory efficiency of %s measured", scheme_names[measured[s]]);
    }
    memcached_st *probe = res_client(RS);
    uint64_t threshold = memcached_behavior_get(probe, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD);
    memcached_free(probe);
    for (unsigned z = 0; z < size_count; z++)
        printf("%-12zu %13.2f %13.2f %13.2f %9s\n", sizes[z], ratio[0][z], ratio[1][z], ratio[2][z],
               sizes[z] >= threshold ? "yes" : "no (3 copies)");
    free(value);
    res_restart_all();
}

/* Encoding and decoding (two data chunks lost) alone, per size. */
void res_coding_time(double set_latency[][MAX_SIZES])
{
    printf("\n# Coding time, RS(3,2): encode, decode with 2 data chunks lost, and the set\n");
    printf("# %-10s %13s %13s %13s %9s\n", "Size", "Encode(us)", "Decode(us)", "RS set(us)",
           "Enc/Set");
    int *matrix = lmr_ec_matrix(3, 2);
    char *value = ohb_value_new(max_size);
    for (unsigned z = 0; z < size_count; z++) {
        size_t chunk = lmr_ec_chunk_size(sizes[z], 3);
        char *work = aligned_alloc(16, 5 * chunk);
        char *slots[5];
        for (int i = 0; i < 5; i++)
            slots[i] = work + (size_t)i * chunk;
        memset(work, 0, 3 * chunk);
        memcpy(work, value, sizes[z]);
        unsigned rounds = 0;
        double start = ohb_now_us();
        while (rounds < 3 || (rounds < iterations && ohb_now_us() - start < max_seconds * 1e6)) {
            lmr_ec_encode(3, 2, matrix, slots, slots + 3, chunk);
            rounds++;
        }
        double encode = (ohb_now_us() - start) / rounds;
        rounds = 0;
        start = ohb_now_us();
        while (rounds < 3 || (rounds < iterations && ohb_now_us() - start < max_seconds * 1e6)) {
            int erasures[] = {0, 1, -1};
            if (!lmr_ec_decode(3, 2, matrix, erasures, slots, slots + 3, chunk)) {
                fprintf(stderr, "decode failed\n");
                exit(1);
            }
            rounds++;
        }
        double decode = (ohb_now_us() - start) / rounds;
        if (memcmp(work, value, sizes[z]) != 0) {
            fprintf(stderr, "decode gave other bytes at size %zu\n", sizes[z]);
            exit(1);
        }
        printf("%-12zu %13.2f %13.2f %13.2f %9.2f\n", sizes[z], encode, decode, set_latency[RS][z],
               encode / set_latency[RS][z]);
        res_csv_row("encode", RS, sizes[z], encode);
        res_csv_row("decode", RS, sizes[z], decode);
        free(work);
        res_progress("coding time of %zu bytes measured", sizes[z]);
    }
    free(value);
    free(matrix);
}

/* The floor of a coded get on this machine: K = 3 plain gets (no scheme)
 * of a data chunk's size, issued together to three distinct servers and
 * waited for (median us per size). A coded get cannot beat it: it is the
 * same three round trips. */
void res_fanout_floor(double floor[MAX_SIZES])
{
    enum { FANOUT = 3 };
    memcached_st *memc = res_client(NONE);
    char keys[FANOUT][32];
    size_t key_lengths[FANOUT];
    uint32_t seen = 0;
    for (int found = 0, i = 0; found < FANOUT && i < 100000; i++) {
        char key[32];
        size_t key_length = (size_t)snprintf(key, sizeof(key), "fan:%d", i);
        memcached_return_t rc;
        const memcached_instance_st *owner = memcached_server_by_key(memc, key, key_length, &rc);
        unsigned port = memcached_server_port(owner);
        const char *name = memcached_server_name(owner);
        for (int j = 0; j < SERVERS; j++) {
            bool same = over_unix
                            ? strcmp(name, servers[j].path) == 0
                            : port == (rdma_addr != NULL ? servers[j].rdma_port : servers[j].port);
            if (same && !(seen & (1u << j))) {
                seen |= 1u << j;
                memcpy(keys[found], key, key_length + 1);
                key_lengths[found++] = key_length;
            }
        }
    }
    char *value = ohb_value_new(max_size);
    char *into = malloc((size_t)FANOUT * max_size);
    memcached_request_st *reqs[FANOUT];
    for (int i = 0; i < FANOUT; i++)
        reqs[i] = memcached_request_create(memc);
    double *samples = malloc(iterations * sizeof(*samples));
    if (into == NULL || samples == NULL) {
        fprintf(stderr, "out of memory for the fan-out floor\n");
        exit(1);
    }
    for (unsigned z = 0; z < size_count; z++) {
        /* a data chunk and its 32-byte header */
        size_t chunk = lmr_ec_chunk_size(sizes[z], 3) + LMR_EC_HEADER_LENGTH;
        for (int i = 0; i < FANOUT; i++) {
            memcached_return_t rc =
                memcached_set(memc, keys[i], key_lengths[i], value, chunk, 0, 0);
            if (!stored(rc))
                ohb_fail(memc, "memcached_set", rc);
        }
        double deadline = ohb_now_us() + max_seconds * 1e6;
        unsigned done = 0;
        while (done < iterations && (done < 3 || ohb_now_us() < deadline)) {
            double start = ohb_now_us();
            for (int i = 0; i < FANOUT; i++)
                memcached_iget(memc, keys[i], key_lengths[i], into + (size_t)i * max_size, max_size,
                               reqs[i]);
            for (int i = 0; i < FANOUT; i++) {
                memcached_return_t rc = memcached_wait(memc, reqs[i]);
                if (rc != MEMCACHED_SUCCESS)
                    ohb_fail(memc, "memcached_wait", rc);
            }
            samples[done++] = ohb_now_us() - start;
        }
        floor[z] = ohb_median(samples, done);
        res_csv_row("get_fanout3", NONE, sizes[z], floor[z]);
        res_progress("fan-out floor of %zu bytes measured", sizes[z]);
    }
    free(samples);
    for (int i = FANOUT; i > 0; i--)
        memcached_request_free(reqs[i - 1]);
    free(into);
    free(value);
    memcached_free(memc);
    res_flush_all();
}

/* Gets of values written with all servers up, then with one and two
 * servers killed (each key's copies and chunks include some of them):
 * latency, and requests per get (the live servers' cmd_get). */
void res_degraded_gets(const char *value)
{
    static double degraded[2][3][MAX_SIZES]; /* [RS, Async-Rep][killed][size] */
    static double requests[2][3][MAX_SIZES];
    const enum scheme kept[2] = {RS, ASYNC_REP};
    const char *tags[2] = {"rs", "async"};
    memcached_st *readers[2];
    for (int k = 0; k < 2; k++) {
        readers[k] = res_client(kept[k]);
        for (unsigned z = 0; z < size_count; z++) {
            uint64_t before = res_servers_stat(true);
            degraded[k][0][z] = blocking(readers[k], tags[k], false, value, sizes[z]);
            requests[k][0][z] = (double)(res_servers_stat(true) - before) / timed_count;
        }
    }
    res_progress("gets with every server up measured (RS(3,2), Async-Rep=3)");
    for (int killed = 1; killed <= 2; killed++) {
        res_server_kill(killed - 1);
        for (int k = 0; k < 2; k++)
            for (unsigned z = 0; z < size_count; z++) {
                /* the value was stored with every server up: read it only */
                char key[64];
                size_t key_length =
                    (size_t)snprintf(key, sizeof(key), "res:%s:%zu", tags[k], sizes[z]);
                uint64_t before = res_servers_stat(true);
                degraded[k][killed][z] = timed(readers[k], key, key_length, false, value, sizes[z]);
                requests[k][killed][z] = (double)(res_servers_stat(true) - before) / timed_count;
            }
        res_progress("gets with %d server%s killed measured", killed, killed > 1 ? "s" : "");
    }
    res_print_degraded("Degraded get latency, blocking (median us), servers killed with SIGKILL",
                       "", degraded);
    res_print_degraded("Degraded gets: requests per get (cmd_get of the live servers / gets)",
                       "_requests", requests);
    for (int k = 1; k >= 0; k--)
        memcached_free(readers[k]);
}
