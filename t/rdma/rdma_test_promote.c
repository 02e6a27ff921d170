/* t/rdma/rdma_test_promote.c: promotion and demotion between UD and RC
 * (-o rdma_transport=hybrid) with requests in flight, inside the
 * Soft-RoCE guest:
 *   rdma_test_promote SERVER_BINARY [SECONDS]
 *
 * The server allows one RC connection (rdma_rc_max=1), promotes an
 * rdma:// client at 5 messages a second and demotes an RC client below
 * 1,000,000 (so every interval of 200 ms the RC client goes back to UD
 * and a busy UD client takes its place): moves are forced over and over.
 * CLIENTS client processes over rdma:// run for SECONDS (default 20), and
 * on until both kinds of move have happened MIN_MOVES times (a loaded host
 * makes fewer requests, so fewer moves, in the same time; at most
 * MAX_STRETCH times SECONDS; the clients stop when a stop file appears):
 * blocking sets and gets, and batches of non-blocking bsets and bgets
 * issued together and then waited for (requests in flight when a MOVE
 * comes: those before the client's END complete on the old transport,
 * the rest go over the new one), values of 1 B to 1 MiB, every value read
 * back checked byte for byte against what the client stored last. A
 * watcher reads rdma_rc_conns over TCP throughout. Checks: every process
 * finished, nothing lost, corrupted, failed or hung; rdma_promotions and
 * rdma_demotions both moved (at least MIN_MOVES each); rdma_rc_conns never
 * above 1; nothing evicted. Then malformed moves from a UD peer of our own
 * (rdma/ud_ep.h): after HELLO a request in a DATA message is answered in
 * one; a message with an unknown control byte, and an END no MOVE asked
 * for, each close that peer only (rdma_ud_peers back to 0, and the server
 * still answers).
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

#include "mcr/rdma_wire.h"
#include "rdma/ud_ep.h"
#include "t/rdma/mc_server.h"
#include "t/rdma/mixed_workload.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

#define CLIENTS 4
#define KEYS_PER_CLIENT 64
#define BATCH 8
#define MIN_MOVES 5
#define DEFAULT_SECONDS 20
#define MAX_STRETCH 3
#define SERVER_OPTIONS                                                                             \
    "rdma_transport=hybrid,rdma_rc_max=1,rdma_promote_rate=5,rdma_demote_rate=1000000,"            \
    "rdma_move_interval_ms=200"

_Static_assert(KEYS_PER_CLIENT <= WORKLOAD_MAX_KEYS, "a client's keys fit its model");

/* 90% 1 B .. 1 KiB, 9% up to 64 KiB, 1% up to 1 MiB (the first of those
 * exactly 1 MiB). */
static const struct workload_sizes value_sizes = {.small = 900, .medium = 90};

/* A batch: BATCH bsets and bgets issued together, then waited for. A get
 * sees the sets issued before it (one server completes in issue order). */
static void batch(memcached_st *mc, int k, struct workload_model *m, uint32_t *rng, long *op,
                  char *value, char *want, struct workload_tally *t)
{
    memcached_request_st *req[BATCH];
    int key_of[BATCH];
    bool is_set[BATCH];
    uint32_t seed_of[BATCH];
    size_t len_of[BATCH];
    struct workload_model expect = *m; /* what each get must see, as issued */
    static struct workload_model at_get[BATCH];
    char key[BATCH][32];
    for (int j = 0; j < BATCH; j++) {
        req[j] = memcached_request_create(mc);
        key_of[j] = (int)(workload_random(rng) % KEYS_PER_CLIENT);
        snprintf(key[j], sizeof(key[j]), "promote%d-%d", k, key_of[j]);
        is_set[j] = workload_random(rng) % 2 == 0;
        memcached_return_t rc;
        if (is_set[j]) {
            bool large;
            len_of[j] = workload_value_size(rng, value_sizes, &large, t->large == 0);
            t->large += large;
            seed_of[j] = (uint32_t)(k * 10000000 + ++*op);
            workload_fill(value, len_of[j], seed_of[j]);
            rc =
                memcached_bset(mc, key[j], strlen(key[j]), value, len_of[j], 0, seed_of[j], req[j]);
            /* assumed stored; corrected after the wait if it was not */
            expect.seed[key_of[j]] = seed_of[j];
            expect.len[key_of[j]] = len_of[j];
        } else {
            ++*op;
            at_get[j] = expect;
            rc = memcached_bget(mc, key[j], strlen(key[j]), req[j]);
        }
        if (rc != MEMCACHED_SUCCESS)
            fprintf(stderr, "client %d: issue %s: %s\n", k, key[j], memcached_strerror(mc, rc));
    }
    double started = workload_now_ms();
    memcached_wait_all(mc);
    workload_note_call(t, MEMCACHED_SUCCESS, workload_now_ms() - started);
    for (int j = 0; j < BATCH; j++) {
        memcached_return_t rc = memcached_request_return(req[j]);
        if (rc == MEMCACHED_TIMEOUT || rc == MEMCACHED_IN_PROGRESS)
            t->hung++;
        if (is_set[j]) {
            workload_note_set(k, key[j], m, key_of[j], rc, seed_of[j], len_of[j], t);
        } else {
            size_t len = 0;
            const char *got = memcached_request_value(req[j], &len);
            workload_check_get(k, key[j], &at_get[j], key_of[j], rc, got, len,
                               memcached_request_flags(req[j]), want, t);
        }
        memcached_request_free(req[j]);
        t->ops++;
    }
    t->batches++;
}

/* The file whose existence tells the clients of process parent to stop. */
static void stop_file(pid_t parent, char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/rdma_test_promote.%ld.stop", (long)parent);
}

/* One client process over rdma://: blocking sets and gets and batches for
 * `seconds` at most, until its parent's stop file appears, every value
 * checked. Prints its tally; exit status 0 when all held. */
static int client_process(int k, int seconds, unsigned port)
{
    char stop_path[64];
    stop_file(getppid(), stop_path, sizeof(stop_path));
    char cfg[160];
    snprintf(cfg, sizeof(cfg), "--SERVER=rdma://%s:%u%s", rxe, port,
             k % 2 ? " --BINARY-PROTOCOL" : "");
    memcached_st *mc = memcached(cfg, strlen(cfg));
    if (mc == NULL)
        return 2;
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
    static struct workload_model m; /* all never stored */
    char *value = malloc(WORKLOAD_MIB), *want = malloc(WORKLOAD_MIB);
    if (value == NULL || want == NULL)
        return 2;
    uint32_t rng = 0x9e3779b9u ^ (uint32_t)(k + 1) * 0x85ebca6bu;
    struct workload_tally t = {0};
    long op = 0;
    double t0 = workload_now_ms();
    while (workload_now_ms() - t0 < seconds * 1e3 && access(stop_path, F_OK) != 0) {
        uint32_t what = workload_random(&rng) % 10;
        if (what < 3) {
            batch(mc, k, &m, &rng, &op, value, want, &t);
            continue;
        }
        int i = (int)(workload_random(&rng) % KEYS_PER_CLIENT);
        ++op;
        workload_one_call(mc, k, "promote", i, what < 7, (uint32_t)(k * 10000000 + op), value_sizes,
                          &rng, &m, value, want, &t);
    }
    t.ms = (long)(workload_now_ms() - t0);
    workload_tally_print(&t);
    free(want);
    free(value);
    memcached_free(mc);
    return workload_tally_clean(&t) ? 0 : 1;
}

/* ---- malformed moves from a UD peer of our own --------------------------------------- */
static unsigned version_replies, moves, other_replies;

static void on_reply(struct mcr_udep_peer *peer, const void *msg, size_t len, void *user)
{
    (void)peer;
    (void)user;
    const unsigned char *m = msg;
    if (len >= 9 && m[0] == MCR_RDMA_CTL_DATA && memcmp(m + 1, "VERSION ", 8) == 0)
        version_replies++;
    else if (len == MCR_RDMA_MOVE_LEN && m[0] == MCR_RDMA_CTL_MOVE) /* its rate may earn one */
        moves++;
    else
        other_replies++;
}

/* A movable peer (HELLO sent) of a context of its own; NULL on failure. */
static struct mcr_udep_peer *movable_peer(unsigned port, struct mcr_udep_ctx **ctx)
{
    struct mcr_udep_opts o = {.addr = rxe};
    mcr_udep_opts_default(&o);
    struct mcr_udep_callbacks cb = {.on_message = on_reply};
    char err[256];
    *ctx = mcr_udep_open(&o, &cb, NULL, err, sizeof(err));
    if (*ctx == NULL)
        tap_bail("UD context: %s", err);
    struct mcr_udep_peer *p = mcr_udep_connect(*ctx, rxe, (uint16_t)port, 5000, err, sizeof(err));
    if (p == NULL || mcr_udep_send(p, MCR_RDMA_UD_HELLO, MCR_RDMA_UD_HELLO_LEN) != 0)
        tap_bail("UD peer: %s", err);
    return p;
}

/* Polls until `want` version replies came, up to 10 s. */
static bool await_versions(struct mcr_udep_ctx *ctx, unsigned want)
{
    for (int i = 0; i < 10000 && version_replies < want; i++)
        mcr_udep_poll(ctx, 1);
    return version_replies >= want;
}

/* rdma_ud_peers reaches want within 10 s (the peer's context polled, so
 * that it acknowledges). */
static long await_peers(struct mcr_udep_ctx *ctx, unsigned tcp_port, long want)
{
    long v = tcp_stat(tcp_port, "rdma_ud_peers");
    for (int i = 0; i < 100 && v != want; i++) {
        mcr_udep_poll(ctx, 100);
        v = tcp_stat(tcp_port, "rdma_ud_peers");
    }
    return v;
}

static void malformed_moves(const struct server *s)
{
    static const char request[] = "\0version\r\n"; /* DATA, then the request */
    struct mcr_udep_ctx *ctx;
    struct mcr_udep_peer *p = movable_peer(s->rdma_port, &ctx);
    bool answered = mcr_udep_send(p, request, sizeof(request) - 1) == 0 && await_versions(ctx, 1);
    tap_ok(answered && other_replies == 0,
           "a movable UD peer's request in a DATA message is answered in one (%u answers, %u "
           "MOVE, %u other messages)",
           version_replies, moves, other_replies);
    static const unsigned char unknown[] = {7, 'x'};
    mcr_udep_send(p, unknown, sizeof(unknown));
    long peers = await_peers(ctx, s->tcp_port, 0);
    tap_ok(peers == 0, "an unknown control byte closes that peer (rdma_ud_peers %ld)", peers);
    mcr_udep_peer_close(p);
    mcr_udep_close(ctx);

    /* the server may have sent this peer MOVE before the first END came
     * (two messages at once reach rdma_promote_rate=5): a second END is
     * never right */
    p = movable_peer(s->rdma_port, &ctx);
    static const unsigned char end = MCR_RDMA_CTL_END;
    mcr_udep_send(p, &end, 1);
    mcr_udep_send(p, &end, 1);
    peers = await_peers(ctx, s->tcp_port, 0);
    tap_ok(peers == 0,
           "an END no MOVE asked for, or a second one, closes that peer (rdma_ud_peers %ld)",
           peers);
    mcr_udep_peer_close(p);
    mcr_udep_close(ctx);

    memcached_st *m = rdma_client_over(s, "rdma");
    memcached_return_t rc = memcached_version(m);
    memcached_free(m);
    tap_ok(rc == MEMCACHED_SUCCESS, "the server still answers an rdma:// client: %s",
           memcached_strerror(NULL, rc));
}

int main(int argc, char **argv)
{
    rxe = getenv("RXE_VM_ADDR");
    if (rxe == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    if (argc == 5 && strcmp(argv[1], "--client") == 0)
        return client_process(atoi(argv[2]), atoi(argv[3]), (unsigned)atoi(argv[4]));
    if (argc < 2)
        tap_bail("usage: rdma_test_promote SERVER_BINARY [SECONDS]");
    server_bin = argv[1];
    int seconds = argc > 2 ? atoi(argv[2]) : DEFAULT_SECONDS;
    signal(SIGPIPE, SIG_IGN);
    unsigned base = 29000 + (unsigned)(getpid() % 1000) * 2;
    struct server s;
    server_start_with(&s, base, base + 1, "2", NULL, SERVER_OPTIONS);

    pid_t pids[CLIENTS];
    int outs[CLIENTS];
    char stop_path[64];
    stop_file(getpid(), stop_path, sizeof(stop_path));
    unlink(stop_path);
    double t0 = workload_now_ms();
    workload_spawn_clients(argv[0], CLIENTS, seconds * MAX_STRETCH, s.rdma_port, pids, outs);
    /* the RC connections, read while the clients run; after `seconds`, the
     * moves too, until both reached MIN_MOVES */
    long rc_max_seen = 0, samples = 0;
    while (workload_now_ms() - t0 < seconds * MAX_STRETCH * 1e3) {
        long rc_conns = tcp_stat(s.tcp_port, "rdma_rc_conns");
        if (rc_conns > rc_max_seen)
            rc_max_seen = rc_conns;
        samples++;
        if (workload_now_ms() - t0 >= seconds * 1e3 && samples % 20 == 0 &&
            tcp_stat(s.tcp_port, "rdma_promotions") >= MIN_MOVES &&
            tcp_stat(s.tcp_port, "rdma_demotions") >= MIN_MOVES)
            break;
        usleep(50000);
    }
    FILE *stop = fopen(stop_path, "w");
    if (stop != NULL)
        fclose(stop);
    struct workload_tally all = {0};
    int finished = 0, clean = 0;
    double reap_by = workload_now_ms() + 60000;
    for (int k = 0; k < CLIENTS; k++) {
        double left = reap_by - workload_now_ms();
        char line[256];
        int ws = workload_finish(pids[k], outs[k], left > 0 ? (int)left : 0, line, sizeof(line));
        struct workload_tally t = {0};
        if (workload_tally_parse(line, &t)) {
            finished++;
            tap_diag("client %d: %ld operations (%ld in %ld batches of %d in flight; %ld values "
                     "of more than 64 KiB): %ld lost, %ld corrupted, %ld failed, %ld hung; "
                     "slowest call %ld ms",
                     k, t.ops, t.batches * BATCH, t.batches, BATCH, t.large, t.lost, t.corrupted,
                     t.failed, t.hung, t.slowest_ms);
        } else {
            tap_diag("client %d: no tally (%s)", k,
                     ws == -1 ? "killed at the deadline: hung" : "ended early");
            t.hung++;
        }
        clean += ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
        workload_tally_add(&all, &t);
    }
    double took = workload_now_ms() - t0;
    unlink(stop_path);
    long promotions = tcp_stat(s.tcp_port, "rdma_promotions");
    long demotions = tcp_stat(s.tcp_port, "rdma_demotions");
    tap_ok(finished == CLIENTS && all.ops > 0,
           "%d client processes over rdma:// made %ld sets and gets (%ld in batches of %d in "
           "flight; %ld values of more than 64 KiB, up to 1 MiB) in %.1f s",
           CLIENTS, all.ops, all.batches * BATCH, BATCH, all.large, took / 1e3);
    tap_ok(promotions >= MIN_MOVES && demotions >= MIN_MOVES,
           "clients moved both ways while they worked: rdma_promotions %ld, rdma_demotions %ld "
           "(at least %d each)",
           promotions, demotions, MIN_MOVES);
    tap_ok(all.lost == 0 && all.corrupted == 0,
           "every value read back is the one stored last, byte for byte: %ld lost, %ld corrupted",
           all.lost, all.corrupted);
    tap_ok(all.failed == 0 && all.hung == 0 && clean == CLIENTS,
           "no request failed or hung across the moves: %ld failed, %ld hung (%d of %d clients "
           "clean)",
           all.failed, all.hung, clean, CLIENTS);
    tap_ok(rc_max_seen <= 1 && samples > 0,
           "rdma_rc_conns never above rdma_rc_max=1 (largest of %ld readings: %ld)", samples,
           rc_max_seen);
    long evictions = tcp_stat(s.tcp_port, "evictions");
    tap_ok(evictions == 0, "nothing was evicted (evictions %ld)", evictions);
    malformed_moves(&s); /* after the last fork: verbs resources do not survive one */
    server_stop(&s, SIGTERM);
    tap_no_plan_end();
    return tap_exit_status();
}
