/* t/rdma/rdma_test_ud_lossy.c: memcached-rdma and libmemcached-rdma over
 * rdma+ud:// on a lossy network, inside the Soft-RoCE guest:
 *   rdma_test_ud_lossy SERVER_BINARY [OPS_PER_CLIENT]
 *
 * The server and every client process run with MCR_UD_TEST_NETWORK: of the
 * datagrams each end receives, 5% are dropped, 1% duplicated and 2% held
 * back to arrive after later ones (tc netem on the guest's interface never
 * sees this traffic: rxe loops datagrams to its own address back inside
 * the driver). CLIENTS client processes each make OPS_PER_CLIENT random
 * sets and gets of values of 1 B to 1 MiB (most small, see value_size) on
 * keys of their own, and check every get against what they stored last,
 * byte for byte: nothing lost, nothing corrupted, no request failed or
 * hung (each call is bounded by the poll timeout, each process by a
 * deadline: one that runs out of time reports how far it came, and the
 * count check fails). The server's retransmission and duplicate counters must move
 * and nothing may be evicted (a loss would hide behind an eviction).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "t/rdma/mc_server.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

#define CLIENTS 4
#define KEYS_PER_CLIENT 256
#define DEFAULT_OPS_PER_CLIENT 1000
#define MIB (1u << 20)
#define LOSSY_NETWORK "50000,10000,20000" /* drop, duplicate, hold back: in a million */
#define CLIENT_DEADLINE_MS 200000         /* a client stops starting operations after it */
#define REAP_DEADLINE_MS 240000           /* and is killed (hung) after this */

/* What one client process did, as one line on its stdout. */
struct tally {
    long ops, sets, gets, large, lost, corrupted, failed, hung, ms;
};

static uint32_t next_random(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *state = x;
}

/* 95% 1 B .. 1 KiB, 4.9% up to 64 KiB, 0.1% up to 1 MiB (the first of
 * those exactly 1 MiB). */
static size_t value_size(uint32_t *rng, bool *large, bool first_large)
{
    uint32_t r = next_random(rng) % 1000;
    *large = false;
    if (r < 950)
        return 1 + next_random(rng) % 1024;
    if (r < 999)
        return 1025 + next_random(rng) % (65536 - 1024);
    *large = true;
    return first_large ? MIB : 65537 + next_random(rng) % (MIB - 65536);
}

static void fill(char *buf, size_t len, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 7;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (char)(x >> 16);
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One client process: OPS random sets and gets over rdma+ud://, every
 * value checked. Prints its tally; exit status 0 when all held. */
static int client_process(int k, long ops, unsigned port)
{
    char cfg[160];
    snprintf(cfg, sizeof(cfg), "--SERVER=rdma+ud://%s:%u%s", rxe, port,
             k % 2 ? " --BINARY-PROTOCOL" : "");
    memcached_st *m = memcached(cfg, strlen(cfg));
    if (m == NULL)
        return 2;
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
    uint32_t stored_seed[KEYS_PER_CLIENT] = {0}; /* 0: never stored */
    size_t stored_len[KEYS_PER_CLIENT] = {0};
    char *value = malloc(MIB), *want = malloc(MIB);
    if (value == NULL || want == NULL)
        return 2;
    uint32_t rng = 0x9e3779b9u ^ (uint32_t)(k + 1) * 0x85ebca6bu;
    struct tally t = {0};
    double t0 = now_ms();
    for (long op = 0; op < ops && now_ms() - t0 < CLIENT_DEADLINE_MS; op++) {
        int key_index = (int)(next_random(&rng) % KEYS_PER_CLIENT);
        char key[32];
        int kl = snprintf(key, sizeof(key), "lossy%d-%d", k, key_index);
        double started = now_ms();
        memcached_return_t rc;
        if (next_random(&rng) % 2 == 0) {
            bool large;
            size_t len = value_size(&rng, &large, t.large == 0);
            uint32_t seed = (uint32_t)(k * 10000000 + op + 1);
            fill(value, len, seed);
            rc = memcached_set(m, key, (size_t)kl, value, len, 0, seed);
            t.sets++;
            t.large += large;
            if (rc == MEMCACHED_SUCCESS) {
                stored_seed[key_index] = seed;
                stored_len[key_index] = len;
            } else {
                fprintf(stderr, "client %d: set %s of %zu bytes: %s\n", k, key, len,
                        memcached_strerror(m, rc));
                t.failed++;
                stored_seed[key_index] = 0; /* not known any more */
                stored_len[key_index] = (size_t)-1;
            }
        } else {
            size_t len = 0;
            uint32_t flags = 0;
            char *got = memcached_get(m, key, (size_t)kl, &len, &flags, &rc);
            t.gets++;
            uint32_t seed = stored_seed[key_index];
            t.large += len > 65536;
            if (stored_len[key_index] == (size_t)-1) {
                /* after a failed set either value may be there */
            } else if (seed == 0) {
                if (rc == MEMCACHED_SUCCESS) { /* a value where none was stored */
                    fprintf(stderr, "client %d: get %s never stored: %zu bytes\n", k, key, len);
                    t.corrupted++;
                } else if (rc != MEMCACHED_NOTFOUND) {
                    fprintf(stderr, "client %d: get %s never stored: %s\n", k, key,
                            memcached_strerror(m, rc));
                    t.failed++;
                }
            } else if (rc == MEMCACHED_NOTFOUND) {
                fprintf(stderr, "client %d: get %s: lost\n", k, key);
                t.lost++;
            } else if (rc != MEMCACHED_SUCCESS || got == NULL) {
                fprintf(stderr, "client %d: get %s: %s\n", k, key, memcached_strerror(m, rc));
                t.failed++;
            } else {
                fill(want, stored_len[key_index], seed);
                if (len != stored_len[key_index] || flags != seed || memcmp(got, want, len) != 0) {
                    fprintf(stderr, "client %d: get %s: %zu bytes, flags %u; stored %zu, %u\n", k,
                            key, len, flags, stored_len[key_index], seed);
                    t.corrupted++;
                }
            }
            free(got);
        }
        if (rc == MEMCACHED_TIMEOUT || now_ms() - started > 20000)
            t.hung++;
        t.ops++;
    }
    t.ms = (long)(now_ms() - t0);
    printf("tally %ld %ld %ld %ld %ld %ld %ld %ld %ld\n", t.ops, t.sets, t.gets, t.large, t.lost,
           t.corrupted, t.failed, t.hung, t.ms);
    fflush(stdout);
    free(want);
    free(value);
    memcached_free(m);
    return t.lost || t.corrupted || t.failed || t.hung ? 1 : 0;
}

/* Re-executes this program as client k (verbs resources do not survive
 * fork); its stdout goes to *out. */
static pid_t spawn_client(const char *self, int k, long ops, unsigned port, int *out)
{
    int fds[2];
    if (pipe(fds) != 0)
        tap_bail("pipe: %s", strerror(errno));
    pid_t pid = proc_fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        char kb[16], ob[24], pb[16];
        snprintf(kb, sizeof(kb), "%d", k);
        snprintf(ob, sizeof(ob), "%ld", ops);
        snprintf(pb, sizeof(pb), "%u", port);
        execl(self, self, "--client", kb, ob, pb, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    *out = fds[0];
    return pid;
}

int main(int argc, char **argv)
{
    rxe = getenv("RXE_VM_ADDR");
    if (rxe == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    if (argc == 5 && strcmp(argv[1], "--client") == 0)
        return client_process(atoi(argv[2]), atol(argv[3]), (unsigned)atoi(argv[4]));
    if (argc < 2)
        tap_bail("usage: rdma_test_ud_lossy SERVER_BINARY [OPS_PER_CLIENT]");
    server_bin = argv[1];
    long ops = argc > 2 ? atol(argv[2]) : DEFAULT_OPS_PER_CLIENT;
    signal(SIGPIPE, SIG_IGN);
    setenv("MCR_UD_TEST_NETWORK", LOSSY_NETWORK, 1); /* the server's and the clients' */
    unsigned base = 27000 + (unsigned)(getpid() % 1000) * 2;
    struct server s;
    server_start_with(&s, base, base + 1, "2", NULL, NULL);
    long retrans0 = tcp_stat(s.tcp_port, "rdma_ud_retransmits");
    long dups0 = tcp_stat(s.tcp_port, "rdma_ud_duplicates");

    pid_t pids[CLIENTS];
    int outs[CLIENTS];
    double t0 = now_ms();
    for (int k = 0; k < CLIENTS; k++)
        pids[k] = spawn_client(argv[0], k, ops, s.rdma_port, &outs[k]);
    struct tally all = {0};
    int finished = 0, clean = 0;
    for (int k = 0; k < CLIENTS; k++) {
        double left = REAP_DEADLINE_MS - (now_ms() - t0);
        int ws = proc_reap(pids[k], left > 0 ? (int)left : 0);
        char line[256] = "";
        ssize_t n = read(outs[k], line, sizeof(line) - 1);
        close(outs[k]);
        line[n > 0 ? n : 0] = '\0';
        struct tally t = {0};
        if (sscanf(line, "tally %ld %ld %ld %ld %ld %ld %ld %ld %ld", &t.ops, &t.sets, &t.gets,
                   &t.large, &t.lost, &t.corrupted, &t.failed, &t.hung, &t.ms) == 9) {
            finished++;
            tap_diag("client %d: %ld operations (%ld sets, %ld gets, %ld of more than 64 KiB) in "
                     "%ld ms: %ld lost, %ld corrupted, %ld failed, %ld hung",
                     k, t.ops, t.sets, t.gets, t.large, t.ms, t.lost, t.corrupted, t.failed,
                     t.hung);
        } else {
            tap_diag("client %d: no tally (%s)", k,
                     ws == -1 ? "killed at the deadline: hung" : "ended early");
            t.hung = ops;
        }
        clean += ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
        all.ops += t.ops;
        all.sets += t.sets;
        all.gets += t.gets;
        all.large += t.large;
        all.lost += t.lost;
        all.corrupted += t.corrupted;
        all.failed += t.failed;
        all.hung += t.hung;
    }
    double took = now_ms() - t0;
    tap_ok(finished == CLIENTS && all.ops == ops * CLIENTS,
           "%d client processes over rdma+ud:// on a lossy network made %ld of %ld sets and gets "
           "(%ld sets, %ld gets; %ld values of more than 64 KiB, up to 1 MiB) in %.1f s, %.0f "
           "per second",
           CLIENTS, all.ops, ops * CLIENTS, all.sets, all.gets, all.large, took / 1e3,
           all.ops / (took / 1e3));
    tap_ok(all.lost == 0 && all.corrupted == 0,
           "every value read back is the one stored last, byte for byte: %ld lost, %ld corrupted",
           all.lost, all.corrupted);
    tap_ok(all.failed == 0 && all.hung == 0 && clean == CLIENTS,
           "no request failed or hung: %ld failed, %ld hung (%d of %d clients clean)", all.failed,
           all.hung, clean, CLIENTS);
    long retrans = tcp_stat(s.tcp_port, "rdma_ud_retransmits") - retrans0;
    long dups = tcp_stat(s.tcp_port, "rdma_ud_duplicates") - dups0;
    long evictions = tcp_stat(s.tcp_port, "evictions");
    tap_ok(retrans > 0 && dups > 0,
           "the server retransmitted %ld datagrams and dropped %ld duplicates", retrans, dups);
    tap_ok(evictions == 0, "nothing was evicted (evictions %ld)", evictions);
    server_stop(&s, SIGTERM);
    tap_no_plan_end();
    return tap_exit_status();
}
