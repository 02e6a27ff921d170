/* t/rdma/rdma_test_netem_rc.c: memcached-rdma and libmemcached-rdma over
 * RC and over hybrid (UD and RC, clients moved between them) through the
 * kernel's tc netem, inside the Soft-RoCE guest:
 *   rdma_test_netem_rc RXE_DEV,RXE_DEV SERVER_BINARY [RC_OPS [HYBRID_OPS]]
 *
 * t/rdma/netem-link sets the link up: a veth pair with an rxe device on
 * each end (the two named here) and a netem qdisc on both, which loses,
 * duplicates and reorders packets. RXE_VM_ADDR is the server's end; the
 * clients reach it from the other end, so their contexts must open the
 * device their route to the server leaves through, not the server's own
 * (both addresses are local).
 *
 * Three phases, each a server of its own and CLIENTS client processes
 * making RC_OPS (default 40) or HYBRID_OPS (default 120) random sets and
 * gets each (t/rdma/mixed_workload.h), every value read back checked byte
 * for byte against what the client stored last: nothing lost, corrupted,
 * failed or hung.
 *   rc:     -o rdma_transport=rc, clients over rdma+rc://. The kernel's RC
 *           retransmission recovers the losses: the rxe devices' counters
 *           of sequence errors and retries must move. Slow: a lost packet
 *           at the end of a message is sent again only after the ACK
 *           timeout the RDMA CM sets (0.5 s or more on RoCE).
 *   rc again with ACK timeout 16 (268 ms) on both ends: the server's
 *           -o rdma_ack_timeout and the clients'
 *           LIBMEMCACHED_RDMA_ACK_TIMEOUT. The same checks; its speed
 *           and slowest call, against the first phase's, are printed.
 *   hybrid: -o rdma_transport=hybrid with rdma_rc_max=1 and rates that move
 *           a client every second, clients over rdma:// for at least
 *           HYBRID_MIN_MS (more than HYBRID_OPS when fast): promotions and
 *           demotions must both happen, and the server's UD retransmissions
 *           must move.
 * Nothing may be evicted in either (a loss would hide behind an eviction).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "t/rdma/mc_server.h"
#include "t/rdma/mixed_workload.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

#define CLIENTS 3
#define KEYS_PER_CLIENT 64
#define DEFAULT_RC_OPS 40
#define DEFAULT_HYBRID_OPS 120
#define CLIENT_DEADLINE_MS 120000 /* a client stops starting operations after it */
#define REAP_GRACE_MS 60000       /* and is killed (hung) this much later */
/* A call's limit (poll timeout; longer counts as hung): past the RC
 * retry budget. A message the link keeps losing is sent again at each
 * ACK timeout (the RDMA CM's 2.1 s here) and given up after
 * retry_count (7) retries, 18.3 s, when the connection fails. Calls
 * through netem wait out chains of those timeouts: of 600 calls on a
 * quiet host 55 waited one, 9 two, 6 three and 9 four to seven (16.1
 * s), the long chains all values of many packets, which netem's
 * reordering alone makes wait (doc/rdma-hybrid.md); under ASan on a
 * loaded host one waited past 20 s. With 45 s a call fails only when
 * its connection does. */
#define CALL_LIMIT_MS 45000
/* The second rc phase's ACK timeout: 268 ms (doc/rdma-hybrid.md). */
#define LOSSY_ACK_TIMEOUT 16
/* A known failure (TAP's TODO): an rdma:// client of the hybrid server
 * sometimes fails calls. A fresh RC connection whose call timed out after
 * 20 s (HELLO sent, its acknowledgement lost, the landing buffer's window
 * bound behind it: rxe redid the bind at the retransmission and stopped)
 * is fixed (rdma/rc_data.c, bind_after_completions), not yet confirmed
 * here through netem on a quiet host. Left: two UD clients' calls failing
 * at once with the UD dead timeout (server silent for 5 s) just after a
 * third client moved from RC to UD, seen on a host loaded far past its
 * processors (doc/rdma-hybrid.md). The moves stop while a client waits. */
#define HYBRID_TODO " # TODO hybrid through netem: a call can time out, and moves stop"
#define HYBRID_MIN_MS 12000 /* hybrid clients run at least this long: a dozen moves' time */
#define HYBRID_OPTIONS                                                                             \
    "rdma_transport=hybrid,rdma_rc_max=1,rdma_promote_rate=5,rdma_demote_rate=1000000,"            \
    "rdma_move_interval_ms=1000"

_Static_assert(KEYS_PER_CLIENT <= WORKLOAD_MAX_KEYS, "a client's keys fit its model");

/* 95% 1 B .. 1 KiB, 4.9% up to 64 KiB, 0.1% up to 1 MiB (the first of
 * those exactly 1 MiB). */
static const struct workload_sizes value_sizes = {.small = 950, .medium = 49};

/* The rxe counters the checks read, summed over both devices. */
static const char *const rxe_counter_names[] = {
    "sent_pkts",          /* every packet an rxe device sent */
    "out_of_seq_request", /* a responder saw a gap: a packet was lost */
    "duplicate_request",  /* a responder saw a packet again */
    "completer_retry_err" /* a requester sent again after a timeout or a NAK */
};
#define RXE_COUNTERS (sizeof(rxe_counter_names) / sizeof(rxe_counter_names[0]))

/* One hw counter of port 1 of an rxe device; -1 when missing. */
static long rxe_counter(const char *dev, const char *name)
{
    char path[160];
    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dev, name);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f != NULL) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* counts[i]: rxe_counter_names[i] summed over the comma-separated devs;
 * false when one is missing. */
static bool rxe_counters(const char *devs, long counts[RXE_COUNTERS])
{
    bool all = true;
    for (size_t i = 0; i < RXE_COUNTERS; i++) {
        char list[64];
        snprintf(list, sizeof(list), "%s", devs);
        counts[i] = 0;
        for (char *save = NULL, *dev = strtok_r(list, ",", &save); dev != NULL;
             dev = strtok_r(NULL, ",", &save)) {
            long v = rxe_counter(dev, rxe_counter_names[i]);
            all = all && v >= 0;
            counts[i] += v > 0 ? v : 0;
        }
    }
    return all;
}

/* One client process: ops random sets and gets over scheme, every value
 * checked, its keys named after the phase (key_prefix: what its slow and
 * failed calls on stderr say). Prints its tally; exit status 0 when all
 * held. */
static int client_process(const char *scheme, const char *key_prefix, int k, long ops,
                          unsigned port)
{
    workload_call_limit_ms = CALL_LIMIT_MS;
    memcached_st *m = workload_client_open(scheme, rxe, port, k);
    if (m == NULL)
        return 2;
    static struct workload_model model; /* all never stored */
    char *value = malloc(WORKLOAD_MIB), *want = malloc(WORKLOAD_MIB);
    if (value == NULL || want == NULL)
        return 2;
    uint32_t rng = 0x2545f491u ^ (uint32_t)(k + 1) * 0x85ebca6bu;
    struct workload_tally t = {0};
    double t0 = workload_now_ms(), min_ms = strcmp(scheme, "rdma") == 0 ? HYBRID_MIN_MS : 0;
    for (long op = 0; (op < ops || workload_now_ms() - t0 < min_ms) &&
                      workload_now_ms() - t0 < CLIENT_DEADLINE_MS;
         op++) {
        int i = (int)(workload_random(&rng) % KEYS_PER_CLIENT);
        bool is_set = workload_random(&rng) % 2 == 0;
        workload_one_call(m, k, key_prefix, i, is_set, (uint32_t)(k * 10000000 + op + 1),
                          value_sizes, &rng, &model, value, want, &t);
    }
    t.ms = (long)(workload_now_ms() - t0);
    workload_tally_print(&t);
    free(want);
    free(value);
    memcached_free(m);
    return workload_tally_clean(&t) ? 0 : 1;
}

/* Starts the client processes (this program re-executed with scheme
 * first) and checks their tallies, named label in the checks; the
 * clients' keys start with key_prefix. */
static void run_clients(const char *self, const char *scheme, const char *key_prefix,
                        const char *label, long ops, unsigned port)
{
    char ops_arg[24], port_arg[16];
    snprintf(ops_arg, sizeof(ops_arg), "%ld", ops);
    snprintf(port_arg, sizeof(port_arg), "%u", port);
    pid_t pids[CLIENTS];
    int outs[CLIENTS];
    double t0 = workload_now_ms();
    for (int k = 0; k < CLIENTS; k++) {
        char k_arg[16];
        snprintf(k_arg, sizeof(k_arg), "%d", k);
        pids[k] = workload_spawn(
            self, (const char *[]){"--client", scheme, key_prefix, k_arg, ops_arg, port_arg, NULL},
            &outs[k]);
    }
    struct workload_tally all = {0};
    int finished = 0, clean = 0;
    for (int k = 0; k < CLIENTS; k++) {
        double left = CLIENT_DEADLINE_MS + REAP_GRACE_MS - (workload_now_ms() - t0);
        char line[256];
        int ws = workload_finish(pids[k], outs[k], left > 0 ? (int)left : 0, line, sizeof(line));
        struct workload_tally t = {0};
        if (workload_tally_parse(line, &t)) {
            finished++;
            tap_diag("%s client %d: %ld operations (%ld sets, %ld gets, %ld of more than 64 KiB) "
                     "in %ld ms, slowest %ld ms: %ld lost, %ld corrupted, %ld failed, %ld hung",
                     label, k, t.ops, t.sets, t.gets, t.large, t.ms, t.slowest_ms, t.lost,
                     t.corrupted, t.failed, t.hung);
        } else {
            tap_diag("%s client %d: no tally (%s)", label, k,
                     ws == -1 ? "killed at the deadline: hung" : "ended early");
            t.hung = ops;
        }
        clean += ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
        workload_tally_add(&all, &t);
    }
    double took = workload_now_ms() - t0;
    tap_ok(finished == CLIENTS && all.ops >= ops * CLIENTS,
           "%d client processes over %s through tc netem made %ld of at least %ld sets and gets "
           "(%ld sets, %ld gets; %ld values of more than 64 KiB) in %.1f s, %.0f per second, "
           "slowest call %ld ms",
           CLIENTS, label, all.ops, ops * CLIENTS, all.sets, all.gets, all.large, took / 1e3,
           all.ops / (took / 1e3), all.slowest_ms);
    tap_ok(all.lost == 0 && all.corrupted == 0,
           "%s: every value read back is the one stored last, byte for byte: %ld lost, %ld "
           "corrupted",
           label, all.lost, all.corrupted);
    /* hybrid through netem: known to fail (doc/rdma-hybrid.md, Not done yet) */
    bool todo = strcmp(scheme, "rdma") == 0;
    if (!tap_ok(all.failed == 0 && all.hung == 0 && clean == CLIENTS,
                "%s: no request failed or hung: %ld failed, %ld hung (%d of %d clients clean)%s",
                label, all.failed, all.hung, clean, CLIENTS, todo ? HYBRID_TODO : "") &&
        todo)
        tap_failed--; /* a known failure does not fail the program */
}

/* An rc phase: a server serving RC only, clients over rdma+rc://; with
 * ack_timeout (not 0) the server's -o rdma_ack_timeout and the clients'
 * LIBMEMCACHED_RDMA_ACK_TIMEOUT, else the RDMA CM's. */
static void rc_phase(const char *self, const char *rxe_devs, long ops, unsigned base,
                     unsigned ack_timeout)
{
    long before[RXE_COUNTERS], after[RXE_COUNTERS];
    if (!rxe_counters(rxe_devs, before))
        tap_bail("no hw counters on the rxe devices %s (t/rdma/netem-link up)", rxe_devs);
    char options[64], label[64], value[8];
    snprintf(options, sizeof(options), "rdma_transport=rc,rdma_ack_timeout=%u", ack_timeout);
    snprintf(label, sizeof(label), "rdma+rc:// (ACK timeout %u%s)", ack_timeout,
             ack_timeout ? "" : ": the RDMA CM's");
    snprintf(value, sizeof(value), "%u", ack_timeout);
    setenv("LIBMEMCACHED_RDMA_ACK_TIMEOUT", value, 1); /* the probe's and the clients' */
    struct server s;
    server_start_with(&s, base, base + 1, "2", NULL, options);
    run_clients(self, "rdma+rc", ack_timeout ? "rc-ack-" : "rc-", label, ops, s.rdma_port);
    unsetenv("LIBMEMCACHED_RDMA_ACK_TIMEOUT");
    rxe_counters(rxe_devs, after);
    long d[RXE_COUNTERS];
    for (size_t i = 0; i < RXE_COUNTERS; i++)
        d[i] = after[i] - before[i];
    tap_diag("rxe counters on %s during %s: %s %ld, %s %ld, %s %ld, %s %ld", rxe_devs, label,
             rxe_counter_names[0], d[0], rxe_counter_names[1], d[1], rxe_counter_names[2], d[2],
             rxe_counter_names[3], d[3]);
    /* a gap shows only when a later packet of the same queue pair
     * arrives after the lost one, rare with one-packet messages in a
     * ping-pong (0 to 2 a phase; 0 failed this check once in 6 runs):
     * responders must have seen a gap or a duplicate (a retransmission
     * of a packet whose acknowledgement was lost) */
    tap_ok(d[0] > 0 && d[1] + d[2] > 0 && d[3] > 0,
           "%s: the RC traffic crossed the netem link and the kernel recovered its losses: %ld "
           "packets sent, %ld gaps and %ld duplicates seen by responders, %ld retries by "
           "requesters",
           label, d[0], d[1], d[2], d[3]);
    long evictions = tcp_stat(s.tcp_port, "evictions");
    tap_ok(evictions == 0, "%s: nothing was evicted (evictions %ld)", label, evictions);
    server_stop(&s, SIGTERM);
}

/* The hybrid phase: one RC connection at most, a client moved between UD
 * and RC every second, over rdma://. */
static void hybrid_phase(const char *self, long ops, unsigned base)
{
    struct server s;
    /* the start-up probe over UD: an rdma+rc:// probe whose disconnect
     * request the link lost kept the only RC slot for the whole phase (the
     * server has no other way to learn that an idle RC client left), so
     * every client stayed on UD and nothing moved */
    server_probe_scheme = "rdma+ud";
    server_start_with(&s, base, base + 1, "2", NULL, HYBRID_OPTIONS);
    server_probe_scheme = NULL;
    long promotions0 = tcp_stat(s.tcp_port, "rdma_promotions");
    long demotions0 = tcp_stat(s.tcp_port, "rdma_demotions");
    long retrans0 = tcp_stat(s.tcp_port, "rdma_ud_retransmits");
    run_clients(self, "rdma", "hybrid-", "rdma://", ops, s.rdma_port);
    long promotions = tcp_stat(s.tcp_port, "rdma_promotions") - promotions0;
    long demotions = tcp_stat(s.tcp_port, "rdma_demotions") - demotions0;
    long retrans = tcp_stat(s.tcp_port, "rdma_ud_retransmits") - retrans0;
    /* a demoted client's lost disconnect request kept its RC connection,
     * and so the only RC slot, for good (now closed after
     * RDMA_MOVE_END_GRACE_MS); a client whose call timed out makes no
     * requests for 20 s, and a run then ended with 1 promotion */
    if (!tap_ok(promotions >= 2 && demotions >= 2,
                "hybrid (%s): clients moved both ways through the netem link, more than once: %ld "
                "promotions, %ld demotions" HYBRID_TODO,
                HYBRID_OPTIONS, promotions, demotions))
        tap_failed--; /* a known failure does not fail the program */
    tap_ok(retrans > 0, "hybrid: the server retransmitted %ld UD datagrams", retrans);
    long evictions = tcp_stat(s.tcp_port, "evictions");
    tap_ok(evictions == 0, "hybrid: nothing was evicted (evictions %ld)", evictions);
    server_stop(&s, SIGTERM);
}

int main(int argc, char **argv)
{
    rxe = getenv("RXE_VM_ADDR");
    if (rxe == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    if (argc == 7 && strcmp(argv[1], "--client") == 0)
        return client_process(argv[2], argv[3], atoi(argv[4]), atol(argv[5]),
                              (unsigned)atoi(argv[6]));
    if (argc < 3)
        tap_bail("usage: rdma_test_netem_rc RXE_DEV,RXE_DEV SERVER_BINARY [RC_OPS [HYBRID_OPS]]");
    const char *rxe_devs = argv[1];
    server_bin = argv[2];
    long rc_ops = argc > 3 ? atol(argv[3]) : DEFAULT_RC_OPS;
    long hybrid_ops = argc > 4 ? atol(argv[4]) : DEFAULT_HYBRID_OPS;
    if (rc_ops < 1 || hybrid_ops < 1)
        tap_bail("RC_OPS and HYBRID_OPS must be at least 1");
    signal(SIGPIPE, SIG_IGN);
    unsetenv("MCR_UD_TEST_NETWORK"); /* the kernel's loss only */
    unsigned base = 28000 + (unsigned)(getpid() % 500) * 6;
    rc_phase(argv[0], rxe_devs, rc_ops, base, 0);
    rc_phase(argv[0], rxe_devs, rc_ops, base + 2, LOSSY_ACK_TIMEOUT);
    hybrid_phase(argv[0], hybrid_ops, base + 4);
    tap_no_plan_end();
    return tap_exit_status();
}
