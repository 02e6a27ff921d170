/* t/rdma/rdma_test_ud_lossy.c: memcached-rdma and libmemcached-rdma over
 * rdma+ud:// on a lossy network, inside the Soft-RoCE guest:
 *   rdma_test_ud_lossy [--netem DEV,DEV] SERVER_BINARY [OPS_PER_CLIENT]
 *
 * The network loses 5% of the datagrams, duplicates 1% and reorders some.
 * Without --netem the loss is the UD endpoint's own (MCR_UD_TEST_NETWORK,
 * at the server and every client process: of the datagrams each end
 * receives, 5% are dropped, 1% duplicated and 2% held back to arrive after
 * later ones), on the guest's one rxe device, whose traffic to its own
 * address never leaves the driver. With --netem it is the kernel's: the
 * two devices named carry a tc netem qdisc each (t/rdma/netem-link sets
 * them up: a veth pair with an rxe device on each end), RXE_VM_ADDR is the
 * server's end, the clients reach it from the other, and the endpoint's
 * own knobs stay off; netem's drop counters must move. With NETEM_LINK
 * and NETEM_OPTS set as well, a connect through a link that loses
 * everything for a moment must succeed soon after the loss ends, first
 * (check_connect_after_loss).
 *
 * CLIENTS client processes each make OPS_PER_CLIENT random sets and gets
 * of values of 1 B to 1 MiB (most small, see value_size) on keys of their
 * own, and check every get against what they stored last, byte for byte:
 * nothing lost, nothing corrupted, no request failed or hung (each call is
 * bounded by the poll timeout, each process by a deadline: one that runs
 * out of time reports how far it came, and the count check fails; every
 * PROGRESS_EVERY_OPS operations a client prints its running tally on
 * stderr, so a long run that is cut short still shows how far it came). The
 * server's retransmission and duplicate counters must move and nothing may
 * be evicted (a loss would hide behind an eviction).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "t/rdma/mc_server.h"
#include "t/rdma/mixed_workload.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

#define CLIENTS 4
#define KEYS_PER_CLIENT 256
#define DEFAULT_OPS_PER_CLIENT 1000
#define LOSSY_NETWORK "50000,10000,20000" /* drop, duplicate, hold back: in a million */
#define MIN_CLIENT_DEADLINE_MS 200000     /* a client stops starting operations after it */
#define DEADLINE_MS_PER_OP 250            /* (or this per operation, when more) */
#define REAP_GRACE_MS 40000               /* and is killed (hung) this much later */
#define PROGRESS_EVERY_OPS 1000           /* a client's running tally on stderr */

_Static_assert(KEYS_PER_CLIENT <= WORKLOAD_MAX_KEYS, "a client's keys fit its model");

/* 95% 1 B .. 1 KiB, 4.9% up to 64 KiB, 0.1% up to 1 MiB (the first of
 * those exactly 1 MiB). */
static const struct workload_sizes value_sizes = {.small = 950, .medium = 49};

/* How long a client of ops operations may keep starting them. */
static double client_deadline_ms(long ops)
{
    double by_ops = (double)ops * DEADLINE_MS_PER_OP;
    return by_ops > MIN_CLIENT_DEADLINE_MS ? by_ops : MIN_CLIENT_DEADLINE_MS;
}

/* The packets tc's qdisc on dev sent and dropped (netem counts the ones
 * it loses as dropped); false when tc printed no counters. */
static bool qdisc_counts(const char *dev, long *sent, long *dropped)
{
    char cmd[96], line[512];
    snprintf(cmd, sizeof(cmd), "tc -s qdisc show dev %s root 2>&1", dev);
    FILE *tc = popen(cmd, "r");
    if (tc == NULL)
        return false;
    bool found = false;
    while (!found && fgets(line, sizeof(line), tc) != NULL)
        found = sscanf(line, " Sent %*[0-9] bytes %ld pkt (dropped %ld", sent, dropped) == 2;
    pclose(tc);
    return found;
}

/* The sums of qdisc_counts() over the comma-separated devices devs. */
static bool netem_counts(const char *devs, long *sent, long *dropped)
{
    char list[64];
    snprintf(list, sizeof(list), "%s", devs);
    *sent = *dropped = 0;
    for (char *save = NULL, *dev = strtok_r(list, ",", &save); dev != NULL;
         dev = strtok_r(NULL, ",", &save)) {
        long s = 0, d = 0;
        if (!qdisc_counts(dev, &s, &d))
            return false;
        *sent += s;
        *dropped += d;
    }
    return true;
}

/* One client process: OPS random sets and gets over rdma+ud://, every
 * value checked. Prints its tally; exit status 0 when all held. */
static int client_process(int k, long ops, unsigned port)
{
    memcached_st *m = workload_client_open("rdma+ud", rxe, port, k);
    if (m == NULL)
        return 2;
    static struct workload_model model; /* all never stored */
    char *value = malloc(WORKLOAD_MIB), *want = malloc(WORKLOAD_MIB);
    if (value == NULL || want == NULL)
        return 2;
    uint32_t rng = 0x9e3779b9u ^ (uint32_t)(k + 1) * 0x85ebca6bu;
    struct workload_tally t = {0};
    double t0 = workload_now_ms(), deadline = client_deadline_ms(ops);
    for (long op = 0; op < ops && workload_now_ms() - t0 < deadline; op++) {
        int key_index = (int)(workload_random(&rng) % KEYS_PER_CLIENT);
        bool is_set = workload_random(&rng) % 2 == 0;
        workload_one_call(m, k, "lossy", key_index, is_set, (uint32_t)(k * 10000000 + op + 1),
                          value_sizes, &rng, &model, value, want, &t);
        if (t.ops % PROGRESS_EVERY_OPS == 0 && t.ops < ops)
            fprintf(stderr,
                    "# client %d: %ld of %ld operations in %.0f s: %ld lost, %ld corrupted, "
                    "%ld failed, %ld hung\n",
                    k, t.ops, ops, (workload_now_ms() - t0) / 1e3, t.lost, t.corrupted, t.failed,
                    t.hung);
    }
    t.ms = (long)(workload_now_ms() - t0);
    workload_tally_print(&t);
    free(want);
    free(value);
    memcached_free(m);
    return workload_tally_clean(&t) ? 0 : 1;
}

/* With NETEM_LINK (the path of t/rdma/netem-link) and NETEM_OPTS (its
 * qdiscs' options): the link loses everything while a client connects
 * over rdma+ud://, and is lifted (no qdisc) LOSS_WINDOW_MS later by a
 * child process, which says when it was done. The kernel's CM sends a lost
 * UD connect request again only about 4.1 s after the first; the
 * endpoint's own resend, every second, must connect the client within
 * CONNECTED_AFTER_LIFT_MS of the lift. The client's connect timeout,
 * CONNECT_TIMEOUT_MS, outlasts a slow lift: in a loaded emulated guest the
 * child's tc commands have taken 7.9 s, and a connect that gave up at the
 * 8 s it had before failed for that, not for a missing resend. Then the
 * link gets NETEM_OPTS back. */
#define LOSS_WINDOW_MS 300
#define CONNECTED_AFTER_LIFT_MS 2000
#define CONNECT_TIMEOUT_MS 30000
static void check_connect_after_loss(const struct server *s)
{
    const char *link = getenv("NETEM_LINK"), *opts = getenv("NETEM_OPTS");
    if (link == NULL || opts == NULL) {
        tap_ok(1, "# SKIP connect through a lost request: NETEM_LINK and NETEM_OPTS not set");
        return;
    }
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s set loss 100%%", link);
    int lifted_pipe[2];
    if (!tap_ok(pipe(lifted_pipe) == 0 && system(cmd) == 0, "the link loses every packet (%s)",
                cmd))
        return;
    double t0 = workload_now_ms();
    pid_t lifter = proc_fork();
    if (lifter == 0) {
        close(lifted_pipe[0]);
        usleep(LOSS_WINDOW_MS * 1000);
        snprintf(cmd, sizeof(cmd), "%s set", link);
        double lifted = system(cmd) == 0 ? workload_now_ms() : -1;
        _exit(write(lifted_pipe[1], &lifted, sizeof(lifted)) == sizeof(lifted) ? 0 : 1);
    }
    close(lifted_pipe[1]);
    memcached_st *m = rdma_client_over(s, "rdma+ud");
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, CONNECT_TIMEOUT_MS);
    memcached_return_t rc = memcached_set(m, "connect-loss", 12, "v", 1, 0, 0);
    double done = workload_now_ms();
    memcached_free(m);
    double lifted = -1;
    if (read(lifted_pipe[0], &lifted, sizeof(lifted)) != sizeof(lifted))
        lifted = -1;
    close(lifted_pipe[0]);
    proc_reap(lifter, 10000);
    snprintf(cmd, sizeof(cmd), "%s set %s", link, opts);
    tap_ok(lifted > 0 && system(cmd) == 0, "the loss lifted after %.0f ms, then back to %s",
           lifted - t0, opts);
    tap_ok(rc == MEMCACHED_SUCCESS && lifted > 0 && done - lifted < CONNECTED_AFTER_LIFT_MS,
           "a UD connect whose request was lost is sent again: %s %.0f ms after the loss "
           "lifted (%.0f ms after the first request; the kernel's own resend comes after "
           "about 4,100)",
           memcached_strerror(NULL, rc), done - lifted, done - t0);
}

int main(int argc, char **argv)
{
    rxe = getenv("RXE_VM_ADDR");
    if (rxe == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    if (argc == 5 && strcmp(argv[1], "--client") == 0)
        return client_process(atoi(argv[2]), atol(argv[3]), (unsigned)atoi(argv[4]));
    const char *self = argv[0], *netem_devs = NULL;
    if (argc > 2 && strcmp(argv[1], "--netem") == 0) {
        netem_devs = argv[2];
        argc -= 2;
        argv += 2;
    }
    if (argc < 2)
        tap_bail("usage: rdma_test_ud_lossy [--netem DEV,DEV] SERVER_BINARY [OPS_PER_CLIENT]");
    server_bin = argv[1];
    long ops = argc > 2 ? atol(argv[2]) : DEFAULT_OPS_PER_CLIENT;
    signal(SIGPIPE, SIG_IGN);
    long netem_sent0 = 0, netem_dropped0 = 0;
    if (netem_devs != NULL) {
        unsetenv("MCR_UD_TEST_NETWORK"); /* the kernel's loss only */
        if (!netem_counts(netem_devs, &netem_sent0, &netem_dropped0))
            tap_bail("no queueing discipline counters on %s (t/rdma/netem-link up)", netem_devs);
        /* the server is asked over UD, the transport under test (its
         * address is the clients' peer's: rdma_test_netem_rc asks over RC) */
        server_probe_scheme = "rdma+ud";
    } else {
        setenv("MCR_UD_TEST_NETWORK", LOSSY_NETWORK, 1); /* the server's and the clients' */
    }
    const char *network = netem_devs ? "tc netem" : "MCR_UD_TEST_NETWORK";
    unsigned base = 27000 + (unsigned)(getpid() % 1000) * 2;
    struct server s;
    server_start_with(&s, base, base + 1, "2", NULL, NULL);
    if (netem_devs != NULL)
        check_connect_after_loss(&s);
    long retrans0 = tcp_stat(s.tcp_port, "rdma_ud_retransmits");
    long dups0 = tcp_stat(s.tcp_port, "rdma_ud_duplicates");

    pid_t pids[CLIENTS];
    int outs[CLIENTS];
    double t0 = workload_now_ms(), reap_deadline = client_deadline_ms(ops) + REAP_GRACE_MS;
    workload_spawn_clients(self, CLIENTS, ops, s.rdma_port, pids, outs);
    struct workload_tally all = {0};
    int finished = 0, clean = 0;
    for (int k = 0; k < CLIENTS; k++) {
        double left = reap_deadline - (workload_now_ms() - t0);
        char line[256];
        int ws = workload_finish(pids[k], outs[k], left > 0 ? (int)left : 0, line, sizeof(line));
        struct workload_tally t = {0};
        if (workload_tally_parse(line, &t)) {
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
        workload_tally_add(&all, &t);
    }
    double took = workload_now_ms() - t0;
    tap_ok(finished == CLIENTS && all.ops == ops * CLIENTS,
           "%d client processes over rdma+ud:// on a lossy network (%s) made %ld of %ld sets and "
           "gets (%ld sets, %ld gets; %ld values of more than 64 KiB, up to 1 MiB) in %.1f s, "
           "%.0f per second",
           CLIENTS, network, all.ops, ops * CLIENTS, all.sets, all.gets, all.large, took / 1e3,
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
    if (netem_devs != NULL) {
        long sent = 0, dropped = 0;
        bool counted = netem_counts(netem_devs, &sent, &dropped);
        sent -= netem_sent0;
        dropped -= netem_dropped0;
        tap_ok(counted && dropped > 0,
               "the traffic passed tc netem on %s: it sent %ld packets and dropped %ld (%.1f%%)",
               netem_devs, sent, dropped,
               sent + dropped > 0 ? 100.0 * dropped / (sent + dropped) : 0);
    }
    server_stop(&s, SIGTERM);
    tap_no_plan_end();
    return tap_exit_status();
}
