/* t/rdma/mixed_workload.h: the mixed sets and gets of the RDMA suite's
 * client processes (rdma_test_ud_lossy, rdma_test_promote,
 * rdma_test_ud_hostile, rdma_test_netem_rc): value sizes and contents, the model of what each
 * key holds and the checks of every reply against it, the tally a client
 * process prints as one line, and the client processes themselves (this
 * program re-executed, its stdout on a pipe, reaped by a deadline).
 * Header-only, like the suite's other shared headers. */
#ifndef MCR_T_RDMA_MIXED_WORKLOAD_H
#define MCR_T_RDMA_MIXED_WORKLOAD_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

#define WORKLOAD_MIB (1u << 20)
#define WORKLOAD_MAX_KEYS 256
#define WORKLOAD_SLOW_MS 1500 /* a call that takes longer is named on stderr */

/* A call's limit: the poll and connect timeouts of the clients
 * workload_client_open makes, past which a call counts as hung. 20 s
 * unless a program sets another before it opens its client. */
static long workload_call_limit_ms = 20000;

/* The next of a xorshift sequence (state must not be 0). */
static inline uint32_t workload_random(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *state = x;
}

/* A size mix: of a thousand values, `small` of 1 B .. 1 KiB, `medium` of
 * up to 64 KiB, the rest (large) up to 1 MiB. */
struct workload_sizes {
    unsigned small, medium;
};

/* One value's size from mix; *large says whether it is of the large kind
 * (of more than 64 KiB; the first large one, when first_large, exactly
 * 1 MiB). */
static inline size_t workload_value_size(uint32_t *rng, struct workload_sizes mix, bool *large,
                                         bool first_large)
{
    uint32_t r = workload_random(rng) % 1000;
    *large = false;
    if (r < mix.small)
        return 1 + workload_random(rng) % 1024;
    if (r < mix.small + mix.medium)
        return 1025 + workload_random(rng) % (65536 - 1024);
    *large = true;
    return first_large ? WORKLOAD_MIB : 65537 + workload_random(rng) % (WORKLOAD_MIB - 65536);
}

/* len bytes determined by seed, the same for the same seed. */
static inline void workload_fill(char *buf, size_t len, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 7;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (char)(x >> 16);
    }
}

/* Milliseconds of the monotonic clock. */
static inline double workload_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* What one client stored last under each of its keys: seed 0 never
 * stored, len (size_t)-1 unknown (a set failed). */
struct workload_model {
    uint32_t seed[WORKLOAD_MAX_KEYS];
    size_t len[WORKLOAD_MAX_KEYS];
};

/* What one client process did. */
struct workload_tally {
    long ops, sets, gets, batches, large, lost, corrupted, failed, hung, ms, slowest_ms;
};

/* A set of key (index i of client k) with value seed/len returned rc:
 * the model learns it, or forgets the key when it failed. */
static inline void workload_note_set(int k, const char *key, struct workload_model *m, int i,
                                     memcached_return_t rc, uint32_t seed, size_t len,
                                     struct workload_tally *t)
{
    t->sets++;
    if (rc == MEMCACHED_SUCCESS) {
        m->seed[i] = seed;
        m->len[i] = len;
        return;
    }
    fprintf(stderr, "client %d: set %s of %zu bytes: %s\n", k, key, len,
            memcached_strerror(NULL, rc));
    t->failed++;
    m->seed[i] = 0;
    m->len[i] = (size_t)-1;
}

/* A get of key (index i of client k) returned rc and got/len/flags: checked
 * against the model (want: scratch of 1 MiB), byte for byte. */
static inline void workload_check_get(int k, const char *key, const struct workload_model *m, int i,
                                      memcached_return_t rc, const char *got, size_t len,
                                      uint32_t flags, char *want, struct workload_tally *t)
{
    t->gets++;
    if (m->len[i] == (size_t)-1)
        return; /* after a failed set either value may be there */
    if (m->seed[i] == 0) {
        if (rc == MEMCACHED_SUCCESS) { /* a value where none was stored */
            fprintf(stderr, "client %d: get %s never stored: %zu bytes\n", k, key, len);
            t->corrupted++;
        } else if (rc != MEMCACHED_NOTFOUND) {
            fprintf(stderr, "client %d: get %s never stored: %s\n", k, key,
                    memcached_strerror(NULL, rc));
            t->failed++;
        }
    } else if (rc == MEMCACHED_NOTFOUND) {
        fprintf(stderr, "client %d: get %s: lost\n", k, key);
        t->lost++;
    } else if (rc != MEMCACHED_SUCCESS || got == NULL) {
        fprintf(stderr, "client %d: get %s: %s\n", k, key, memcached_strerror(NULL, rc));
        t->failed++;
    } else {
        workload_fill(want, m->len[i], m->seed[i]);
        if (len != m->len[i] || flags != m->seed[i] || memcmp(got, want, len) != 0) {
            fprintf(stderr, "client %d: get %s: %zu bytes, flags %u; stored %zu, %u\n", k, key, len,
                    flags, m->len[i], m->seed[i]);
            t->corrupted++;
        }
    }
}

/* A call (or a batch waited for) that returned rc after ms: a timeout or
 * more than workload_call_limit_ms counts as hung; the slowest is kept. */
static inline void workload_note_call(struct workload_tally *t, memcached_return_t rc, double ms)
{
    if (rc == MEMCACHED_TIMEOUT || ms > workload_call_limit_ms)
        t->hung++;
    if (ms > t->slowest_ms)
        t->slowest_ms = (long)ms;
}

/* Client k's connection to host:port over scheme ("rdma", "rdma+rc",
 * "rdma+ud"), binary protocol for odd k. Poll and connect timeouts are
 * workload_call_limit_ms: a call through a lossy link may wait for
 * retransmissions, and the RDMA CM's own exchanges are sent again only
 * after seconds. NULL on failure. */
static inline memcached_st *workload_client_open(const char *scheme, const char *host,
                                                 unsigned port, int k)
{
    char cfg[160];
    snprintf(cfg, sizeof(cfg), "--SERVER=%s://%s:%u%s", scheme, host, port,
             k % 2 ? " --BINARY-PROTOCOL" : "");
    memcached_st *m = memcached(cfg, strlen(cfg));
    if (m == NULL)
        return NULL;
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, (uint64_t)workload_call_limit_ms);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, (uint64_t)workload_call_limit_ms);
    return m;
}

/* One blocking call of client k on key index i (named "PREFIXk-i"): a set
 * (is_set) of a value of a size from mix (rng) made from seed, or a get
 * checked against the model (value and want: scratch of 1 MiB each);
 * counted in t, timed as one call. */
static inline void workload_one_call(memcached_st *mc, int k, const char *prefix, int i,
                                     bool is_set, uint32_t seed, struct workload_sizes mix,
                                     uint32_t *rng, struct workload_model *m, char *value,
                                     char *want, struct workload_tally *t)
{
    char key[48];
    int kl = snprintf(key, sizeof(key), "%s%d-%d", prefix, k, i);
    double started = workload_now_ms();
    memcached_return_t rc;
    size_t len = 0; /* the value's bytes, set or got */
    if (is_set) {
        bool large;
        len = workload_value_size(rng, mix, &large, t->large == 0);
        workload_fill(value, len, seed);
        rc = memcached_set(mc, key, (size_t)kl, value, len, 0, seed);
        t->large += large;
        workload_note_set(k, key, m, i, rc, seed, len, t);
    } else {
        uint32_t flags = 0;
        char *got = memcached_get(mc, key, (size_t)kl, &len, &flags, &rc);
        t->large += len > 65536;
        workload_check_get(k, key, m, i, rc, got, len, flags, want, t);
        free(got);
    }
    double ms = workload_now_ms() - started;
    /* why, in the library's words (which transport, what it saw), and
     * when: a failure's cause is read from these lines */
    if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND)
        fprintf(stderr, "client %d: %s %s after %.0f ms (at %.0f ms): %s\n", k,
                is_set ? "set" : "get", key, ms, started, memcached_last_error_message(mc));
    else if (ms > WORKLOAD_SLOW_MS)
        fprintf(stderr, "client %d: %s %s (%zu bytes) took %.0f ms (at %.0f ms)\n", k,
                is_set ? "set" : "get", key, len, ms, started);
    workload_note_call(t, rc, ms);
    t->ops++;
}

/* The tally as one line on stdout (flushed), and read back from one. */
#define WORKLOAD_TALLY_FORMAT "tally %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld"
static inline void workload_tally_print(const struct workload_tally *t)
{
    printf(WORKLOAD_TALLY_FORMAT "\n", t->ops, t->sets, t->gets, t->batches, t->large, t->lost,
           t->corrupted, t->failed, t->hung, t->ms, t->slowest_ms);
    fflush(stdout);
}

static inline bool workload_tally_parse(const char *line, struct workload_tally *t)
{
    return sscanf(line, WORKLOAD_TALLY_FORMAT, &t->ops, &t->sets, &t->gets, &t->batches, &t->large,
                  &t->lost, &t->corrupted, &t->failed, &t->hung, &t->ms, &t->slowest_ms) == 11;
}

/* sum += t, the counts (ms and slowest_ms: the larger). */
static inline void workload_tally_add(struct workload_tally *sum, const struct workload_tally *t)
{
    sum->ops += t->ops;
    sum->sets += t->sets;
    sum->gets += t->gets;
    sum->batches += t->batches;
    sum->large += t->large;
    sum->lost += t->lost;
    sum->corrupted += t->corrupted;
    sum->failed += t->failed;
    sum->hung += t->hung;
    if (t->ms > sum->ms)
        sum->ms = t->ms;
    if (t->slowest_ms > sum->slowest_ms)
        sum->slowest_ms = t->slowest_ms;
}

/* Nothing lost, corrupted, failed or hung. */
static inline bool workload_tally_clean(const struct workload_tally *t)
{
    return !t->lost && !t->corrupted && !t->failed && !t->hung;
}

/* Re-executes self with args (a NULL-terminated list, args[0] the first
 * argument after the program's name; verbs resources do not survive
 * fork) as a child that dies with this program; its stdout goes to *out. */
static inline pid_t workload_spawn(const char *self, const char *const args[], int *out)
{
    int fds[2];
    if (pipe(fds) != 0)
        tap_bail("pipe: %s", strerror(errno));
    pid_t pid = proc_fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        char *argv[16];
        int n = 0;
        argv[n++] = (char *)self;
        for (int i = 0; args[i] != NULL && n < 15; i++)
            argv[n++] = (char *)args[i];
        argv[n] = NULL;
        execv(self, argv);
        _exit(127);
    }
    close(fds[1]);
    *out = fds[0];
    return pid;
}

/* n client processes, client k re-executed as `self --client k amount
 * port` (amount: its count or its seconds). */
static inline void workload_spawn_clients(const char *self, int n, long amount, unsigned port,
                                          pid_t pids[], int outs[])
{
    char amount_arg[24], port_arg[16];
    snprintf(amount_arg, sizeof(amount_arg), "%ld", amount);
    snprintf(port_arg, sizeof(port_arg), "%u", port);
    for (int k = 0; k < n; k++) {
        char k_arg[16];
        snprintf(k_arg, sizeof(k_arg), "%d", k);
        pids[k] = workload_spawn(
            self, (const char *[]){"--client", k_arg, amount_arg, port_arg, NULL}, &outs[k]);
    }
}

/* Reaps pid (killing it after timeout_ms) and reads its output, up to cap
 * bytes, cut at the first newline. Its wait status; -1 when it had to be
 * killed. */
static inline int workload_finish(pid_t pid, int out, int timeout_ms, char *line, size_t cap)
{
    int ws = proc_reap(pid, timeout_ms);
    ssize_t n = read(out, line, cap - 1);
    close(out);
    line[n > 0 ? n : 0] = '\0';
    char *nl = strchr(line, '\n');
    if (nl)
        *nl = '\0';
    return ws;
}

#endif
