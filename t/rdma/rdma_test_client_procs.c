/* t/rdma/rdma_test_client_procs.c: several libmemcached-rdma client
 * processes at once against one memcached-rdma, inside the Soft-RoCE guest:
 *   rdma_test_client_procs SERVER_BINARY
 *
 * Four client processes of sets, gets and requests in flight; three of
 * random mixed operations, every read checked against what the process
 * stored last; a client killed in the middle of 8 MiB transfers, cleaned
 * up while others are served; and a spinning worker (rdma_poll=spin) busy
 * with an RDMA client process serving a socket client too. Each client
 * process is this program run again (verbs resources do not survive
 * fork()): rdma_test_client_procs --client K PORT, --mixed K PORT,
 * --big PORT, --busy PORT.
 *
 * With MC_RDMA_SCHEME=rdma+ud the clients run over UD: the connection
 * counts are rdma_ud_peers, the server's UD keepalive is 10 s (the client
 * sets up a peer unused for 5 s anew) so that a killed client is freed
 * within the test, and the spinning worker's check (RC only) is skipped. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>
#include <libmemcached/nonblocking.h>

#include "mcr/rdma_wire.h"
#include "t/rdma/mc_client.h"
#include "t/rdma/mc_server.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

/* One of several client processes (re-executed, not forked: verbs resources
 * do not survive fork()). Exit status 0 when every check held. */
static int client_process(int k, unsigned rdma_port)
{
    struct server s = {.rdma_port = rdma_port};
    memcached_st *m = rdma_client(&s);
    int wrong = 0;
    for (int i = 0; i < 300; i++) {
        char key[32], val[64];
        int kl = snprintf(key, sizeof(key), "c%d-%d", k, i);
        int vl = snprintf(val, sizeof(val), "client %d value %d", k, i);
        if (memcached_set(m, key, (size_t)kl, val, (size_t)vl, 0, 0) != MEMCACHED_SUCCESS)
            wrong++;
        size_t l = 0;
        memcached_return_t r;
        char *got = memcached_get(m, key, (size_t)kl, &l, &(uint32_t){0}, &r);
        if (!got || l != (size_t)vl || memcmp(got, val, l) != 0)
            wrong++;
        free(got);
    }
    wrong += many_in_flight(m, 500);
    memcached_free(m);
    if (wrong)
        fprintf(stderr, "client %d: %d checks failed\n", k, wrong);
    return wrong == 0 ? 0 : 1;
}

/* ---- mixed load: one client process's random operations on keys of its own ---------- */
enum { MIXED_KEYS = 40, MIXED_WINDOW = 8, MIXED_MAX = 1100000, MIXED_OPS = 400 };

struct mixed {
    memcached_st *m;
    int k;        /* the process */
    uint32_t rng; /* its own sequence: a failure can be replayed */
    size_t len[MIXED_KEYS];
    unsigned seed[MIXED_KEYS];
    bool present[MIXED_KEYS];
    char *want, *buf;
    int wrong;
};

static uint32_t mixed_next(struct mixed *x)
{
    x->rng = x->rng * 1103515245u + 12345u;
    return x->rng >> 8;
}

/* Value sizes: half of them at the edges of one message, the landing
 * buffer and slab chunks, half anywhere up to 200,000 bytes. */
static size_t mixed_size(struct mixed *x)
{
    static const size_t edges[] = {0,      1,      100,     EAGER - 60, EAGER - 35, EAGER - 28,
                                   EAGER,  8170,   8200,    16384,      65536,      100000,
                                   300000, 524288, 1048576, MIXED_MAX};
    if (mixed_next(x) % 2)
        return edges[mixed_next(x) % (sizeof(edges) / sizeof(edges[0]))];
    return mixed_next(x) % 200000;
}

static int mixed_key(const struct mixed *x, int i, char *key, size_t cap)
{
    return snprintf(key, cap, "mix%d-%d", x->k, i);
}

/* The library's words for the last failure: the client's last error and
 * the server's (which names the RDMA cause: a failed work completion, a
 * disconnect, a silent peer), for a failure's diagnostics. */
static void mixed_why(const struct mixed *x)
{
    const char *server = memcached_server_error(memcached_server_instance_by_position(x->m, 0));
    fprintf(stderr, "mixed %d:   last error: %s; server error: %s\n", x->k,
            memcached_last_error_message(x->m), server ? server : "(none)");
}

/* A read of key i returned (rc, v, len): what the process stored last. */
static void mixed_check(struct mixed *x, int i, const char *how, memcached_return_t rc,
                        const char *v, size_t len)
{
    bool ok;
    if (!x->present[i]) {
        ok = rc == MEMCACHED_NOTFOUND;
    } else {
        fill_bytes(x->want, x->len[i], x->seed[i]);
        ok = rc == MEMCACHED_SUCCESS && len == x->len[i] &&
             (len == 0 || memcmp(v, x->want, len) == 0);
    }
    if (!ok) {
        fprintf(stderr, "mixed %d: %s of key %d: %s, %zu bytes (want %zu)\n", x->k, how, i,
                memcached_strerror(x->m, rc), len, x->present[i] ? x->len[i] : 0);
        if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND)
            mixed_why(x);
        x->wrong++;
    }
}

static void mixed_op(struct mixed *x)
{
    int i = (int)(mixed_next(x) % MIXED_KEYS), kind = (int)(mixed_next(x) % 6);
    char key[32];
    int kl = mixed_key(x, i, key, sizeof(key));
    if (kind <= 1) { /* a set, noreply for kind 1 */
        size_t n = mixed_size(x);
        unsigned seed = mixed_next(x);
        fill_bytes(x->buf, n, seed);
        memcached_behavior_set(x->m, MEMCACHED_BEHAVIOR_NOREPLY, kind == 1);
        memcached_return_t rc = memcached_set(x->m, key, (size_t)kl, x->buf, n, 0, 0);
        memcached_behavior_set(x->m, MEMCACHED_BEHAVIOR_NOREPLY, 0);
        if (rc != MEMCACHED_SUCCESS) {
            fprintf(stderr, "mixed %d: set of %zu bytes: %s\n", x->k, n,
                    memcached_strerror(x->m, rc));
            mixed_why(x);
            x->wrong++;
            return;
        }
        x->len[i] = n;
        x->seed[i] = seed;
        x->present[i] = true;
    } else if (kind <= 3) { /* a blocking get */
        size_t len = 0;
        memcached_return_t rc;
        char *v = memcached_get(x->m, key, (size_t)kl, &len, &(uint32_t){0}, &rc);
        mixed_check(x, i, "get", rc, v, len);
        free(v);
    } else if (kind == 4) { /* an iget into the process's buffer */
        memcached_request_st *r = memcached_request_create(x->m);
        memcached_return_t rc = memcached_iget(x->m, key, (size_t)kl, x->buf, MIXED_MAX, r);
        if (rc == MEMCACHED_SUCCESS)
            rc = memcached_wait(x->m, r);
        size_t len = 0;
        const char *v = memcached_request_value(r, &len);
        mixed_check(x, i, "iget", rc, v, len);
        memcached_request_free(r);
    } else { /* a window of bsets, then bgets of the same keys */
        memcached_request_st *sets[MIXED_WINDOW], *gets[MIXED_WINDOW];
        char *vals[MIXED_WINDOW];
        size_t lens[MIXED_WINDOW];
        unsigned seeds[MIXED_WINDOW];
        for (int j = 0; j < MIXED_WINDOW; j++) {
            lens[j] = mixed_size(x);
            seeds[j] = mixed_next(x);
            vals[j] = malloc(lens[j] + 1);
            fill_bytes(vals[j], lens[j], seeds[j]);
            kl = mixed_key(x, (i + j) % MIXED_KEYS, key, sizeof(key));
            sets[j] = memcached_request_create(x->m);
            memcached_bset(x->m, key, (size_t)kl, vals[j], lens[j], 0, 0, sets[j]);
        }
        for (int j = 0; j < MIXED_WINDOW; j++) {
            kl = mixed_key(x, (i + j) % MIXED_KEYS, key, sizeof(key));
            gets[j] = memcached_request_create(x->m);
            memcached_bget(x->m, key, (size_t)kl, gets[j]);
        }
        memcached_wait_all(x->m);
        for (int j = 0; j < MIXED_WINDOW; j++) {
            int at = (i + j) % MIXED_KEYS;
            if (memcached_request_return(sets[j]) == MEMCACHED_SUCCESS) {
                x->len[at] = lens[j];
                x->seed[at] = seeds[j];
                x->present[at] = true;
            } else {
                fprintf(stderr, "mixed %d: bset of key %d: %s\n", x->k, at,
                        memcached_strerror(x->m, memcached_request_return(sets[j])));
                mixed_why(x);
                x->wrong++;
            }
            size_t len = 0;
            const char *v = memcached_request_value(gets[j], &len);
            mixed_check(x, at, "bget", memcached_request_return(gets[j]), v, len);
            memcached_request_free(gets[j]);
            memcached_request_free(sets[j]);
            free(vals[j]);
        }
    }
}

/* `ops` random operations (sets, noreply sets, gets, igets, windows of
 * bsets and bgets) on keys of process k, every read checked against what
 * it stored last. Exit status 0 when all held. */
static int mixed_client_process(int k, int ops, unsigned rdma_port)
{
    struct server s = {.rdma_port = rdma_port};
    struct mixed x = {.m = rdma_client(&s),
                      .k = k,
                      .rng = 1234567u + (unsigned)k * 7919u,
                      .want = malloc(MIXED_MAX),
                      .buf = malloc(MIXED_MAX)};
    /* UD copies every byte in software: in the emulated guest on a loaded
     * host one 181 KB set of three busy clients took more than the 5 s
     * default poll timeout */
    if (rdma_over_ud())
        memcached_behavior_set(x.m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
    for (int op = 0; op < ops && x.wrong < 10; op++)
        mixed_op(&x);
    memcached_free(x.m);
    free(x.buf);
    free(x.want);
    return x.wrong == 0 ? 0 : 1;
}

/* Sets and gets small values back to back until killed (at most 200,000
 * pairs), keeping a spinning worker busy; exits 1 at the first wrong reply. */
static int busy_client_process(unsigned rdma_port)
{
    struct server s = {.rdma_port = rdma_port};
    memcached_st *m = rdma_client(&s);
    for (int i = 0; i < 200000; i++) {
        char val[32];
        int vl = snprintf(val, sizeof(val), "busy %d", i);
        if (memcached_set(m, "busy", 4, val, (size_t)vl, 0, 0) != MEMCACHED_SUCCESS)
            return 1;
        size_t l = 0;
        char *got = memcached_get(m, "busy", 4, &l, &(uint32_t){0}, &(memcached_return_t){0});
        bool ok = got && l == (size_t)vl && memcmp(got, val, l) == 0;
        free(got);
        if (!ok)
            return 1;
    }
    return 0;
}

/* Sets and gets 8 MiB values until killed (every one a rendezvous). */
static int big_client_process(unsigned rdma_port)
{
    struct server s = {.rdma_port = rdma_port};
    memcached_st *m = rdma_client(&s);
    size_t n = 8388608;
    char *v = malloc(n);
    memset(v, 'k', n);
    for (int i = 0; i < 100000; i++) {
        memcached_set(m, "bigkill", 7, v, n, 0, 0);
        free(
            memcached_get(m, "bigkill", 7, &(size_t){0}, &(uint32_t){0}, &(memcached_return_t){0}));
    }
    return 0;
}

/* Runs this program again as a client process of its own (verbs
 * resources do not survive fork()): self MODE [NUMBER] RDMA_PORT. number < 0:
 * none. Returns the child's pid. */
static pid_t spawn_client(const char *self, const char *mode, int number, unsigned rdma_port)
{
    pid_t pid = proc_fork();
    if (pid == 0) {
        char num[16], port[16];
        snprintf(num, sizeof(num), "%d", number);
        snprintf(port, sizeof(port), "%u", rdma_port);
        if (number < 0)
            execl(self, self, mode, port, (char *)NULL);
        else
            execl(self, self, mode, num, port, (char *)NULL);
        _exit(126);
    }
    return pid;
}

int main(int argc, char **argv)
{
    client_tests_env(argc, "rdma_test_client_procs");
    if (strcmp(argv[1], "--client") == 0 && argc == 4)
        return client_process(atoi(argv[2]), (unsigned)atoi(argv[3]));
    if (strcmp(argv[1], "--big") == 0 && argc == 3)
        return big_client_process((unsigned)atoi(argv[2]));
    if (strcmp(argv[1], "--busy") == 0 && argc == 3)
        return busy_client_process((unsigned)atoi(argv[2]));
    if (strcmp(argv[1], "--mixed") == 0 && argc == 4)
        return mixed_client_process(atoi(argv[2]), MIXED_OPS, (unsigned)atoi(argv[3]));
    const char *self = argv[0];
    unsigned base = client_tests_begin(argv);
    struct server s1;
    main_server_start(&s1, base);
    memcached_st *mr = rdma_client(&s1);
    memcached_return_t rc;

    /* ---- several clients at once ------------------------------------------------------- */
    long conns_base = client_stat(mr, conns_stat());
    pid_t kids[4];
    for (int k = 0; k < 4; k++)
        kids[k] = spawn_client(self, "--client", k, s1.rdma_port);
    int kids_ok = 0;
    for (int k = 0; k < 4; k++) {
        int ws = proc_reap(kids[k], 120000);
        if (ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
            kids_ok++;
    }
    tap_ok(kids_ok == 4,
           "four client processes at once, 300 set/get and 500 in flight each (%d ok)", kids_ok);
    for (int k = 0; k < 3; k++)
        kids[k] = spawn_client(self, "--mixed", k, s1.rdma_port);
    kids_ok = 0;
    for (int k = 0; k < 3; k++) {
        int ws = proc_reap(kids[k], 120000);
        if (ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
            kids_ok++;
        else if (ws == -1 || WIFSIGNALED(ws)) /* a crash, or the kernel's OOM killer */
            tap_diag("mixed client %d: %s %d", k, ws == -1 ? "killed after 120 s" : "signal",
                     ws == -1 ? -1 : WTERMSIG(ws));
    }
    tap_ok(kids_ok == 3,
           "three client processes at once, %d random operations each (sets, noreply sets, gets, "
           "igets, windows of bsets and bgets; values of 0 B .. 1.1 MB around the message and "
           "landing-buffer edges), every read what the process stored last (%d ok)",
           MIXED_OPS, kids_ok);

    /* ---- a client killed in the middle of rendezvous transfers ------------------------- */
    long conns_before = -1; /* the four client processes' connections closed */
    for (int i = 0; i < 250 && conns_before != conns_base; i++) {
        conns_before = client_stat(mr, conns_stat());
        if (conns_before != conns_base)
            usleep(20000);
    }
    /* transfers under way: rendezvous over RC; over UD 8 MiB values read
     * and written in messages (12 of them: 96 MiB) */
    const char *moved_a = rdma_over_ud() ? "bytes_read" : "rdma_rendezvous_reads";
    const char *moved_b = rdma_over_ud() ? "bytes_written" : "rdma_rendezvous_writes";
    long unit = rdma_over_ud() ? 8388608 : 1;
    long rv_before = (client_stat(mr, moved_a) + client_stat(mr, moved_b)) / unit;
    pid_t big = spawn_client(self, "--big", -1, s1.rdma_port);
    long rv_now = rv_before;
    /* UD copies every byte in software: in the emulated guest 12 transfers
     * took more than 4 s */
    for (int i = 0; i < (rdma_over_ud() ? 1500 : 200) && rv_now < rv_before + 12; i++) {
        usleep(20000);
        rv_now = (client_stat(mr, moved_a) + client_stat(mr, moved_b)) / unit;
    }
    kill(big, SIGKILL);
    proc_reap(big, 10000);
    long conns_after = -1;
    /* over UD the server finds a killed client by its keepalive: probed
     * after 10 s silent, freed after 10 s more */
    for (int i = 0; i < (rdma_over_ud() ? 1500 : 250); i++) {
        conns_after = client_stat(mr, conns_stat());
        if (conns_after == conns_before)
            break;
        usleep(20000);
    }
    tap_ok(rv_now >= rv_before + 12 && conns_after == conns_before,
           "a client killed during 8 MiB %s transfers is cleaned up "
           "(%ld transfers seen; %s %ld, before %ld)",
           rdma_over_ud() ? "UD" : "rendezvous", rv_now - rv_before, conns_stat(), conns_after,
           conns_before);
    {
        size_t n = 3000000, l = 0;
        char *val3 = malloc(n);
        fill_bytes(val3, n, 99);
        memcached_return_t r = memcached_set(mr, "afterkill", 9, val3, n, 0, 0);
        char *got = memcached_get(mr, "afterkill", 9, &l, &(uint32_t){0}, &r);
        tap_ok(r == MEMCACHED_SUCCESS && got && l == n && memcmp(got, val3, n) == 0,
               "others are served after it (a 3 MB set and get)");
        free(got);
        free(val3);
    }
    /* ---- a spinning worker serves its sockets between polling passes --------------------- */
    if (rdma_over_ud()) {
        tap_skip("RC only: rdma_poll=spin spins on RC worker contexts; the UD context is driven "
                 "by events");
    } else {
        struct server s3;
        server_start_with(&s3, base + 4, base + 5, "1", "spin", NULL); /* one worker for both */
        pid_t busy = spawn_client(self, "--busy", -1, s3.rdma_port);
        memcached_st *m3 = rdma_client(&s3);
        long served_before = 0;
        for (int i = 0; i < 200 && served_before < 50; i++) { /* the busy client is at work */
            usleep(50000);
            served_before = client_stat(m3, "get_hits");
        }
        memcached_free(m3);
        memcached_st *mt3 = memcached_create(NULL);
        memcached_server_add(mt3, "127.0.0.1", (in_port_t)s3.tcp_port);
        memcached_behavior_set(mt3, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 3000);
        int tcp_bad = 0;
        for (int i = 0; i < 300 && tcp_bad == 0; i++) {
            char key[32];
            int kl = snprintf(key, sizeof(key), "sock%d", i);
            rc = memcached_set(mt3, key, (size_t)kl, key, (size_t)kl, 0, 0);
            if (rc != MEMCACHED_SUCCESS) {
                tap_diag("socket set %d: %s", i, memcached_strerror(mt3, rc));
                tcp_bad++;
            }
            size_t l = 0;
            char *got = memcached_get(mt3, key, (size_t)kl, &l, &(uint32_t){0}, &rc);
            if (!got || l != (size_t)kl || memcmp(got, key, l) != 0) {
                tap_diag("socket get %d: %s", i, memcached_strerror(mt3, rc));
                tcp_bad++;
            }
            free(got);
        }
        m3 = rdma_client(&s3);
        long served_during = client_stat(m3, "get_hits") - served_before;
        memcached_free(m3);
        int ws = 0;
        bool busy_alive = waitpid(busy, &ws, WNOHANG) == 0;
        kill(busy, SIGKILL);
        proc_reap(busy, 10000);
        memcached_free(mt3);
        tap_ok(tcp_bad == 0 && busy_alive && served_during >= 300 + 10,
               "a spinning worker busy with an RDMA client serves a socket client too (300 "
               "TCP sets and gets, %d wrong; %ld hits in all meanwhile)",
               tcp_bad, served_during);
        server_stop(&s3, SIGTERM);
    }

    memcached_free(mr);
    server_stop(&s1, SIGTERM);
    tap_no_plan_end();
    return tap_exit_status();
}
