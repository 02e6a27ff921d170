/* benchmarks/ohb_memlat_resilience.c: the cost of resilience in
 * libmemcached-rdma. It starts five servers of its own (--server-binary,
 * on loopback TCP, with --unix on Unix sockets, with --rdma=ADDR over RDMA
 * on the RDMA device that has ADDR: RC, or with --rdma-transport UD or
 * hybrid) and, for value sizes
 * doubling from --min-size to --max-size, times blocking sets and gets and
 * non-blocking ones (a window of 64 isets or igets, time per operation)
 * under four schemes: none, synchronous replication with 3 copies,
 * asynchronous replication with 3 copies and RS(3,2) erasure coding; then
 * gets with one and two servers killed (SIGKILL); memory efficiency (the
 * servers' `bytes` summed over what the program stored); and the time of
 * encoding and of decoding with two chunks lost, per size, next to the set
 * latency; and the floor of a coded get: three plain gets of a chunk's
 * size on three servers at once. The latency tables are measured in
 * --rounds paired rounds (every scheme in turn per size); --latency-only
 * prints those tables alone, --blocking-only measures no windows. --pairs=N measures only gets of
 * Async-Rep=3 and RS(3,2) in N short paired rounds and prints every round's RS/Async ratio and
 * their median; --count-gets=N runs a fixed number of gets of one scheme (counted_gets) for
 * counters run from outside (callgrind, strace); --hedge-timeout sets the clients' hedge timeout.
 * Tables with ratios; --csv writes every number. Progress (a line per
 * round and size measured, and per later step) goes to stderr; stdout
 * carries the tables alone. */
#include "ohb_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../libmemcached-rdma/src/erasure.h"

#define SERVERS 5
#define WINDOW 64
#define MAX_SIZES 32

static const char notes[] =
    "  Starts five servers (--server-binary) and measures set/get latency\n"
    "  for none, Sync-Rep=3, Async-Rep=3 and RS(3,2), blocking and with a window of 64,\n"
    "  degraded gets, memory efficiency and coding time. Sizes accept k and m suffixes.\n"
    "  A progress line per round and size measured goes to stderr; stdout has the tables.\n";

enum scheme { NONE, SYNC_REP, ASYNC_REP, RS, SCHEMES };
static const char *scheme_names[SCHEMES] = {"none", "Sync-Rep=3", "Async-Rep=3", "RS(3,2)"};
static const char *csv_names[SCHEMES] = {"none", "sync-rep-3", "async-rep-3", "rs-3-2"};

struct server {
    pid_t pid;
    unsigned port;
    unsigned rdma_port; /* --rdma: a new one at every start (a killed
                           server's RDMA port stays taken for a while) */
    char path[108];
};

static struct server servers[SERVERS];
static const char *server_binary = "/usr/bin/memcached";
static bool over_unix;
static const char *rdma_addr; /* --rdma: servers also listen over RDMA there */
/* --rdma-transport: the servers' rdma_transport and the clients' scheme */
static const char *rdma_modes[] = {"rc", "ud", "hybrid"};
static const char *rdma_schemes[] = {"rdma+rc", "rdma+ud", "rdma"};
static int rdma_mode = -1; /* an index of rdma_modes; -1 until parsed: rc */
static size_t min_size = 1024, max_size = 1048576;
static unsigned iterations = 200;
static double max_seconds = 0.3;
static FILE *csv;
static long long ec_threshold = -1;  /* -1: the library's default */
static long long hedge_timeout = -1; /* --hedge-timeout; -1: the library's default */
static unsigned paired_rounds = 3;
static bool degraded_only;      /* --degraded-only: the degraded-get tables alone */
static bool latency_only;       /* --latency-only: the paired latency tables alone */
static bool blocking_only;      /* --blocking-only: no window-of-64 measurements */
static unsigned pair_rounds;    /* --pairs: short paired get rounds of Async-Rep=3 and RS */
static unsigned pair_gets = 16; /* --pair-gets: blocking gets per scheme and round */
static unsigned count_gets;     /* --count-gets: gets of one scheme, for outside counters */
static enum scheme count_scheme = RS;
static bool count_window;    /* --count-window: those gets are igets in windows of 64 */
static unsigned timed_count; /* operations of the last timed() */
static double started_us;    /* when the program started (ohb_now_us) */

/* One progress line on stderr: the seconds since the start and what just
 * finished, so that a stalled run can be told from a slow one (stdout
 * keeps the tables alone, for the scripts that read them). */
__attribute__((format(printf, 1, 2))) static void progress(const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    fprintf(stderr, "ohb_memlat_resilience: %.1f s: %s\n", (ohb_now_us() - started_us) / 1e6, what);
}
static double window_cpu_us; /* the client's processor time per operation, last windowed() */

static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    unsigned port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sin, &len) == 0)
        port = ntohs(sin.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Adds server i to memc: over RDMA with --rdma (unless `tcp`), else over
 * its Unix socket or TCP port. */
static void add_server(memcached_st *memc, int i, bool tcp)
{
    const struct server *s = &servers[i];
    if (rdma_addr != NULL && !tcp) {
        char spec[128];
        snprintf(spec, sizeof(spec), "%s://%s:%u", rdma_schemes[rdma_mode], rdma_addr,
                 s->rdma_port);
        memcached_server_st *list = memcached_servers_parse(spec);
        memcached_server_push(memc, list);
        memcached_server_list_free(list);
    } else if (over_unix) {
        memcached_server_add_unix_socket(memc, s->path);
    } else {
        memcached_server_add(memc, "127.0.0.1", (in_port_t)s->port);
    }
}

/* Whether server i answers over TCP (or its Unix socket). */
static bool server_tcp_answers(int i)
{
    memcached_st *probe = memcached_create(NULL);
    add_server(probe, i, true);
    memcached_return_t rc = memcached_exist(probe, "probe", 5);
    memcached_free(probe);
    return rc == MEMCACHED_SUCCESS || rc == MEMCACHED_NOTFOUND;
}

/* Starts server i (again, on the same port or path, when it ran before). */
static bool server_start(int i)
{
    struct server *s = &servers[i];
    char rdma_listen[128] = "", rdma_transport[32];
    if (rdma_addr != NULL) {
        s->rdma_port = free_port();
        snprintf(rdma_listen, sizeof(rdma_listen), "rdma_listen=%s:%u", rdma_addr, s->rdma_port);
    }
    snprintf(rdma_transport, sizeof(rdma_transport), "rdma_transport=%s", rdma_modes[rdma_mode]);
    if (over_unix && s->path[0] == '\0')
        snprintf(s->path, sizeof(s->path), "/tmp/ohb-res-%d-%d.sock", (int)getpid(), i);
    if (!over_unix && s->port == 0)
        s->port = free_port();
    if (over_unix)
        unlink(s->path);
    char port[16];
    snprintf(port, sizeof(port), "%u", s->port);
    s->pid = fork();
    if (s->pid < 0)
        return false;
    if (s->pid == 0) {
        const char *argv[24]; /* 21 at most below, with the NULL */
        int n = 0;
        argv[n++] = server_binary;
        if (over_unix) {
            argv[n++] = "-s";
            argv[n++] = s->path;
        } else {
            argv[n++] = "-p";
            argv[n++] = port;
            argv[n++] = "-l";
            argv[n++] = "127.0.0.1";
        }
        argv[n++] = "-U";
        argv[n++] = "0";
        argv[n++] = "-m";
        argv[n++] = "512";
        argv[n++] = "-t";
        argv[n++] = "1";
        argv[n++] = "-I"; /* 1 MiB values whole, with their key and header */
        argv[n++] = "2m";
        if (rdma_listen[0] != '\0') {
            argv[n++] = "-o";
            argv[n++] = rdma_listen;
            argv[n++] = "-o";
            argv[n++] = rdma_transport;
        }
        if (geteuid() == 0) {
            argv[n++] = "-u";
            argv[n++] = "root";
        }
        argv[n] = NULL;
        execv(server_binary, (char *const *)argv);
        _exit(127);
    }
    char last_error[512] = "";
    bool tcp_answered = false;                  /* so its RDMA listeners are open (see below) */
    for (int tries = 0; tries < 500; tries++) { /* up to 5 s */
        memcached_st *probe = memcached_create(NULL);
        add_server(probe, i, false);
        memcached_return_t rc = memcached_exist(probe, "probe", 5); /* over RDMA too */
        if (rc == MEMCACHED_NOTFOUND)
            rc = MEMCACHED_SUCCESS;
        if (rc != MEMCACHED_SUCCESS)
            snprintf(last_error, sizeof(last_error), "%s", memcached_last_error_message(probe));
        memcached_free(probe);
        if (rc == MEMCACHED_SUCCESS)
            return true;
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            fprintf(stderr, "server %d (%s) exited with status %d before answering\n", i,
                    server_binary,
                    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
            s->pid = 0;
            return false;
        }
        if (tcp_answered) {
            /* an RDMA probe made after the listeners opened was refused */
            fprintf(stderr,
                    "server %d answers over TCP but not at %s://%s:%u (%s): no RDMA at %s?\n", i,
                    rdma_schemes[rdma_mode], rdma_addr, s->rdma_port, last_error, rdma_addr);
            return false;
        }
        if (rdma_addr != NULL && tries >= 50 && server_tcp_answers(i)) {
            /* the server answers TCP only once its RDMA listeners are open
             * or given up (it said why on its standard error); the RDMA
             * probe above may have been refused before they opened, so the
             * next one decides */
            tcp_answered = true;
            continue;
        }
        usleep(10000);
    }
    fprintf(stderr, "server %d did not answer in 5 s: %s\n", i, last_error);
    return false;
}

static void server_kill(int i)
{
    if (servers[i].pid > 0) {
        kill(servers[i].pid, SIGKILL);
        waitpid(servers[i].pid, NULL, 0);
        servers[i].pid = 0;
    }
}

static memcached_st *client(enum scheme scheme)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < SERVERS; i++)
        add_server(memc, i, false);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 3600);
    if (hedge_timeout >= 0)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT,
                               (uint64_t)hedge_timeout);
    if (scheme == SYNC_REP)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REPLICATION, MEMCACHED_REPLICATION_SYNC(3));
    if (scheme == ASYNC_REP)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REPLICATION,
                               MEMCACHED_REPLICATION_ASYNC(3));
    if (scheme == RS) {
        memcached_return_t rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING,
                                                       MEMCACHED_ERASURE_CODING(3, 2));
        if (rc != MEMCACHED_SUCCESS)
            ohb_fail(memc, "ERASURE_CODING", rc);
        if (ec_threshold >= 0)
            memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD,
                                   (uint64_t)ec_threshold);
    }
    return memc;
}

/* Every server killed and started again, empty. */
static void restart_all(void)
{
    for (int i = 0; i < SERVERS; i++) {
        server_kill(i);
        if (!server_start(i)) {
            fprintf(stderr, "could not restart %s\n", server_binary);
            exit(1);
        }
    }
}

/* Every running server flushed, over TCP or its Unix socket: a new RDMA
 * connection per server and call costs seconds in the Soft-RoCE guest. */
static void flush_all(void)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < SERVERS; i++)
        if (servers[i].pid > 0)
            add_server(memc, i, true);
    memcached_flush(memc, 0);
    memcached_free(memc);
}

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

static void csv_row(const char *section, enum scheme scheme, size_t size, double value)
{
    if (csv != NULL)
        fprintf(csv, "%s,%s,%zu,%.3f\n", section, csv_names[scheme], size, value);
}

static size_t sizes[MAX_SIZES];
static unsigned size_count;

/* latency[scheme][size] for one measurement, printed with ratio[size]
 * (RS over ratio_to, the median of the rounds' ratios) */
static void print_latency(const char *title, const char *section, double latency[][MAX_SIZES],
                          const double ratio[MAX_SIZES], enum scheme ratio_to)
{
    printf("\n# %s\n# %-10s", title, "Size");
    for (int s = 0; s < SCHEMES; s++)
        printf(" %13s", scheme_names[s]);
    printf(" %9s\n", ratio_to == SYNC_REP ? "RS/Sync" : "RS/Async");
    for (unsigned z = 0; z < size_count; z++) {
        printf("%-12zu", sizes[z]);
        for (int s = 0; s < SCHEMES; s++) {
            printf(" %13.2f", latency[s][z]);
            csv_row(section, (enum scheme)s, sizes[z], latency[s][z]);
        }
        printf(" %9.2f\n", ratio[z]);
        char ratio_section[64]; /* e.g. set_rs_over_sync: one per table */
        snprintf(ratio_section, sizeof(ratio_section), "%s_rs_over_%s", section,
                 ratio_to == SYNC_REP ? "sync" : "async");
        csv_row(ratio_section, RS, sizes[z], ratio[z]);
    }
}

enum measure { SET_BLOCK, GET_BLOCK, SET_WINDOW, GET_WINDOW, GET_WINDOW_CPU, MEASURES };
/* what RS is compared with in each measurement */
static const enum scheme ratio_to[MEASURES] = {SYNC_REP, ASYNC_REP, SYNC_REP, ASYNC_REP, ASYNC_REP};

/* A client per scheme (schemes[0..count)), each with a window of requests. */
static void clients_open(const enum scheme *schemes, int count, memcached_st **clients,
                         memcached_request_st *(*reqs)[WINDOW])
{
    for (int s = 0; s < count; s++) {
        clients[s] = client(schemes[s]);
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

static void quartiles(const double *values, unsigned n, double q[3]);

/* Every round's RS / ratio_to[m] ratio of measurement m at one size, in
 * round order, and their quartiles (also as csv rows `round_ratio_M`). */
static void print_round_ratios(enum measure m, size_t size, const double *by_round)
{
    static const char *names[MEASURES] = {"set", "get", "set_window64", "get_window64",
                                          "get_window64_cpu"};
    printf("# %s %zu: RS/%s by round:", names[m], size, ratio_to[m] == SYNC_REP ? "Sync" : "Async");
    for (unsigned r = 0; r < paired_rounds; r++)
        printf(" %.2f", by_round[r]);
    double q[3];
    quartiles(by_round, paired_rounds, q);
    printf("; quartiles %.2f %.2f %.2f\n", q[0], q[1], q[2]);
    if (csv != NULL)
        for (unsigned r = 0; r < paired_rounds; r++)
            fprintf(csv, "round_ratio_%s,%s,%zu,%.3f\n", names[m], csv_names[RS], size,
                    by_round[r]);
}

/* The four latency measurements of every scheme, in `rounds` rounds: in
 * each round every size is measured under every scheme in turn (the order
 * reversed every other round), so the schemes compared share the
 * machine's moments. latency[m][s][z] is the median of the rounds' values;
 * ratio[m][z] the median of the rounds' RS / ratio_to[m] ratios. */
static void measure_rounds(double latency[MEASURES][SCHEMES][MAX_SIZES],
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
            flush_all(); /* one size's values at a time on the servers */
            progress("round %u of %u: %zu bytes measured under the 4 schemes", r + 1, paired_rounds,
                     sizes[z]);
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
                print_round_ratios(m, sizes[z], column);
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

/* The quartiles of n values (copied, not reordered). */
static void quartiles(const double *values, unsigned n, double q[3])
{
    struct ohb_samples sorted = {0};
    for (unsigned i = 0; i < n; i++)
        ohb_samples_add(&sorted, values[i]);
    ohb_samples_sort(&sorted);
    q[0] = ohb_samples_percentile(&sorted, 25);
    q[1] = ohb_samples_percentile(&sorted, 50);
    q[2] = ohb_samples_percentile(&sorted, 75);
    ohb_samples_free(&sorted);
}

/* --pairs: gets of Async-Rep=3 and RS(3,2) alone, in pair_rounds short
 * paired rounds per size: in each round both schemes in turn (the order
 * swapped every other round) do pair_gets blocking gets (their median)
 * and one window of 64 igets (wall and processor time per get), so the
 * two measurements of a round share the machine's moment. Prints every
 * round's RS/Async ratio, their quartiles (the median is the judgement)
 * and the quartiles of each scheme's own values. */
static void paired_get_rounds(void)
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
            quartiles(column, pair_rounds, q);
            printf("\n# RS/Async: median %.2f (quartiles %.2f, %.2f)", q[1], q[0], q[2]);
            csv_row(pair_sections[m], RS, sizes[z], q[1]);
            for (int p = 0; p < 2; p++) {
                for (unsigned r = 0; r < pair_rounds; r++)
                    column[r] = values[r][p][m];
                quartiles(column, pair_rounds, q);
                printf("; %s median %.2f (%.2f, %.2f)", scheme_names[pair[p]], q[1], q[0], q[2]);
            }
            printf("\n");
        }
        fflush(stdout);
        flush_all();
        progress("--pairs: %zu bytes measured in %u rounds", sizes[z], pair_rounds);
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
static void count_only(void)
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
        flush_all();
        progress("--count-gets: %zu bytes counted", sizes[z]);
    }
    free(into);
    free(value);
    clients_close(1, clients, reqs);
}

static bool parse_scheme(void *target, const char *text)
{
    for (int s = 0; s < SCHEMES; s++)
        if (text != NULL && strcmp(text, csv_names[s]) == 0) {
            *(enum scheme *)target = (enum scheme)s;
            return true;
        }
    return false;
}

/* The servers' `bytes` (gets: `cmd_get`) summed over those running. */
static uint64_t servers_stat(bool gets)
{
    uint64_t total = 0;
    for (int i = 0; i < SERVERS; i++) {
        if (servers[i].pid <= 0)
            continue;
        memcached_st *memc = memcached_create(NULL);
        add_server(memc, i, true); /* stats: over TCP or the Unix socket */
        memcached_return_t rc;
        memcached_stat_st *stats = memcached_stat(memc, NULL, &rc);
        if (stats != NULL)
            total += gets ? stats[0].cmd_get : stats[0].bytes;
        memcached_stat_free(memc, stats);
        memcached_free(memc);
    }
    return total;
}

/* The servers' bytes over the bytes stored, for 16 values of each size. */
static void memory_efficiency(void)
{
    enum { VALUES = 16 };
    const enum scheme measured[] = {NONE, SYNC_REP, RS};
    printf("\n# Memory efficiency: sum of `bytes` over the servers / bytes stored (%d values)\n",
           VALUES);
    printf("# %-10s %13s %13s %13s %9s\n", "Size", "none", "Rep=3", "RS(3,2)", "RS coded");
    char *value = ohb_value_new(max_size);
    static double ratio[3][MAX_SIZES];
    for (int s = 0; s < 3; s++) {
        restart_all(); /* empty servers: nothing flushed still counts */
        memcached_st *memc = client(measured[s]);
        for (unsigned z = 0; z < size_count; z++) {
            uint64_t before = servers_stat(false);
            for (int v = 0; v < VALUES; v++) {
                char key[64];
                size_t key_length = (size_t)snprintf(key, sizeof(key), "mem:%zu:%d", sizes[z], v);
                memcached_return_t rc = memcached_set(memc, key, key_length, value, sizes[z], 0, 0);
                if (!stored(rc))
                    ohb_fail(memc, "memcached_set", rc);
            }
            ratio[s][z] = (double)(servers_stat(false) - before) / ((double)sizes[z] * VALUES);
            csv_row("memory", measured[s], sizes[z], ratio[s][z]);
        }
        memcached_free(memc);
        progress("memory efficiency of %s measured", scheme_names[measured[s]]);
    }
    memcached_st *probe = client(RS);
    uint64_t threshold = memcached_behavior_get(probe, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD);
    memcached_free(probe);
    for (unsigned z = 0; z < size_count; z++)
        printf("%-12zu %13.2f %13.2f %13.2f %9s\n", sizes[z], ratio[0][z], ratio[1][z], ratio[2][z],
               sizes[z] >= threshold ? "yes" : "no (3 copies)");
    free(value);
    restart_all();
}

/* Encoding and decoding (two data chunks lost) alone, per size. */
static void coding_time(double set_latency[][MAX_SIZES])
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
        csv_row("encode", RS, sizes[z], encode);
        csv_row("decode", RS, sizes[z], decode);
        free(work);
        progress("coding time of %zu bytes measured", sizes[z]);
    }
    free(value);
    free(matrix);
}

static bool open_csv(void *target, const char *path)
{
    FILE **file = target;
    *file = fopen(path, "w");
    if (*file == NULL) {
        perror(path);
        exit(1);
    }
    fprintf(*file, "section,scheme,size,value\n");
    return true;
}

/* A count of bytes or milliseconds, 0 or more. */
static bool parse_nonnegative(void *target, const char *text)
{
    if (text == NULL)
        return false;
    char *end;
    *(long long *)target = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || *(long long *)target < 0)
        ohb_usage_error();
    return true;
}

/* The floor of a coded get on this machine: K = 3 plain gets (no scheme)
 * of a data chunk's size, issued together to three distinct servers and
 * waited for (median us per size). A coded get cannot beat it: it is the
 * same three round trips. */
static void fanout_floor(double floor[MAX_SIZES])
{
    enum { FANOUT = 3 };
    memcached_st *memc = client(NONE);
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
        csv_row("get_fanout3", NONE, sizes[z], floor[z]);
        progress("fan-out floor of %zu bytes measured", sizes[z]);
    }
    free(samples);
    for (int i = FANOUT; i > 0; i--)
        memcached_request_free(reqs[i - 1]);
    free(into);
    free(value);
    memcached_free(memc);
    flush_all();
}

static bool parse_rdma_mode(void *target, const char *text)
{
    for (int m = 0; m < (int)(sizeof(rdma_modes) / sizeof(rdma_modes[0])); m++)
        if (text != NULL && strcmp(text, rdma_modes[m]) == 0) {
            *(int *)target = m;
            return true;
        }
    fprintf(stderr, "ohb_memlat_resilience: --rdma-transport is rc, ud or hybrid, not %s\n",
            text != NULL ? text : "(nothing)");
    return false;
}

static void parse(int argc, char **argv)
{
    const struct ohb_option table[] = {
        {"server-binary", OHB_OPT_STRING, &server_binary, "PATH", "the server started five times",
         NULL},
        {"unix", OHB_OPT_SET, &over_unix, NULL, "the servers listen on Unix sockets", NULL},
        {"rdma", OHB_OPT_STRING, &rdma_addr, "ADDR",
         "the servers also listen over RDMA on the device that has ADDR", NULL},
        {"rdma-transport", OHB_OPT_CALL, &rdma_mode, "MODE",
         "with --rdma: rc (default; clients rdma+rc://), ud (rdma+ud://) or hybrid (rdma://)",
         parse_rdma_mode},
        {"min-size", OHB_OPT_SIZE, &min_size, "N", "the first value size", NULL},
        {"max-size", OHB_OPT_SIZE, &max_size, "N", "the last value size (sizes double)", NULL},
        {"iterations", OHB_OPT_UNSIGNED, &iterations, "N", "timed operations per size", NULL},
        {"max-time", OHB_OPT_DOUBLE, &max_seconds, "SECONDS", "time cap per size and scheme", NULL},
        {"csv", OHB_OPT_CALL, &csv, "FILE", "also write every number here", open_csv},
        {"rounds", OHB_OPT_UNSIGNED, &paired_rounds, "N",
         "paired rounds of the latency tables (--iterations, --max-time: per round)", NULL},
        {"ec-threshold", OHB_OPT_CALL, &ec_threshold, "BYTES",
         "erasure coding from this value size on (default: the library's)", parse_nonnegative},
        {"hedge-timeout", OHB_OPT_CALL, &hedge_timeout, "MS",
         "RESILIENCE_HEDGE_TIMEOUT of every client (default: the library's; 0: no hedged reads)",
         parse_nonnegative},
        {"degraded-only", OHB_OPT_SET, &degraded_only, NULL,
         "only the degraded gets (servers killed) and their requests per get", NULL},
        {"latency-only", OHB_OPT_SET, &latency_only, NULL,
         "only the latency tables of the paired rounds (no fan-out floor, memory, coding or "
         "degraded gets)",
         NULL},
        {"blocking-only", OHB_OPT_SET, &blocking_only, NULL,
         "no window-of-64 measurements (the blocking tables of the paired rounds alone)", NULL},
        {"pairs", OHB_OPT_UNSIGNED, &pair_rounds, "N",
         "only gets of Async-Rep=3 and RS(3,2) in N short paired rounds, each round's ratio "
         "printed",
         NULL},
        {"pair-gets", OHB_OPT_UNSIGNED, &pair_gets, "N",
         "blocking gets per scheme and round with --pairs (default 16)", NULL},
        {"count-gets", OHB_OPT_UNSIGNED, &count_gets, "N",
         "only N gets of one scheme per size, no time cap (callgrind --toggle-collect="
         "counted_gets, strace)",
         NULL},
        {"count-scheme", OHB_OPT_CALL, &count_scheme, "NAME",
         "the scheme of --count-gets: none, sync-rep-3, async-rep-3 or rs-3-2 (default)",
         parse_scheme},
        {"count-window", OHB_OPT_SET, &count_window, NULL,
         "--count-gets issues igets in windows of 64", NULL},
    };
    const struct ohb_command cmd = {"ohb_memlat_resilience", table,
                                    sizeof(table) / sizeof(table[0]), notes};
    ohb_command_parse(&cmd, argc, argv);
    if (min_size == 0 || min_size > max_size || iterations == 0 || max_seconds <= 0 ||
        paired_rounds == 0 || pair_gets == 0 || (over_unix && rdma_addr != NULL) ||
        (rdma_mode >= 0 && rdma_addr == NULL) ||
        (latency_only + degraded_only + (pair_rounds > 0) + (count_gets > 0)) > 1)
        ohb_usage_error();
    if (rdma_mode < 0)
        rdma_mode = 0;
}

/* At any exit, also ohb_fail's: the servers go with the program. */
static void kill_servers(void)
{
    for (int i = SERVERS; i > 0; i--)
        server_kill(i - 1);
    if (over_unix)
        for (int i = 0; i < SERVERS; i++)
            unlink(servers[i].path);
}

/* The windowed tables of measure_rounds. */
static void print_windows(double latency[MEASURES][SCHEMES][MAX_SIZES],
                          double ratio[MEASURES][MAX_SIZES])
{
    if (blocking_only)
        return;
    print_latency("Set, window of 64 (us per operation)", "set_window64", latency[SET_WINDOW],
                  ratio[SET_WINDOW], SYNC_REP);
    print_latency("Get, window of 64 (us per operation)", "get_window64", latency[GET_WINDOW],
                  ratio[GET_WINDOW], ASYNC_REP);
    print_latency("Get, window of 64: the client's processor time (us per operation)",
                  "get_window64_cpu", latency[GET_WINDOW_CPU], ratio[GET_WINDOW_CPU], ASYNC_REP);
    fflush(stdout);
}

/* The tables of every scheme with every server up, memory and coding. */
static void all_but_degraded(void)
{
    static double latency[MEASURES][SCHEMES][MAX_SIZES], ratio[MEASURES][MAX_SIZES];
    measure_rounds(latency, ratio);
    double(*set_block)[MAX_SIZES] = latency[SET_BLOCK],
    (*get_block)[MAX_SIZES] = latency[GET_BLOCK];
    print_latency("Set latency, blocking (median us)", "set", set_block, ratio[SET_BLOCK],
                  SYNC_REP);
    print_latency("Get latency, blocking (median us)", "get", get_block, ratio[GET_BLOCK],
                  ASYNC_REP);
    if (latency_only) {
        print_windows(latency, ratio);
        return;
    }
    static double floor_block[MAX_SIZES];
    fanout_floor(floor_block);
    printf("\n# Get fan-out floor, blocking (median us): 3 plain gets of a chunk's size on 3\n"
           "# servers at once (no scheme), what a coded get's 3 data chunks cost at least\n");
    printf("# %-10s %13s %13s %13s %9s %9s\n", "Size", "none", "3 at once", "RS(3,2)", "RS/3",
           "3/none");
    for (unsigned z = 0; z < size_count; z++)
        printf("%-12zu %13.2f %13.2f %13.2f %9.2f %9.2f\n", sizes[z], get_block[NONE][z],
               floor_block[z], get_block[RS][z], get_block[RS][z] / floor_block[z],
               floor_block[z] / get_block[NONE][z]);
    print_windows(latency, ratio);

    memory_efficiency();
    coding_time(set_block);
    fflush(stdout);
}

/* A degraded-gets table: table[RS or Async-Rep][servers killed][size];
 * with the latencies (`suffix` ""), RS-2 over Async-2. */
static void print_degraded(const char *title, const char *suffix, double table[2][3][MAX_SIZES])
{
    const enum scheme kept[2] = {RS, ASYNC_REP};
    bool latency = suffix[0] == '\0';
    printf("\n# %s\n# %-10s %9s %9s %9s %9s %9s %9s %9s\n", title, "Size", "RS-0", "RS-1", "RS-2",
           "Async-0", "Async-1", "Async-2", latency ? "RS-2/A-2" : "");
    for (unsigned z = 0; z < size_count; z++) {
        printf("%-12zu", sizes[z]);
        for (int k = 0; k < 2; k++)
            for (int killed = 0; killed < 3; killed++) {
                printf(" %9.2f", table[k][killed][z]);
                char section[48];
                snprintf(section, sizeof(section), "get_degraded%d%s", killed, suffix);
                csv_row(section, kept[k], sizes[z], table[k][killed][z]);
            }
        if (latency)
            printf(" %9.2f", table[0][2][z] / table[1][2][z]);
        printf("\n");
    }
}

/* Gets of values written with all servers up, then with one and two
 * servers killed (each key's copies and chunks include some of them):
 * latency, and requests per get (the live servers' cmd_get). */
static void degraded_gets(const char *value)
{
    static double degraded[2][3][MAX_SIZES]; /* [RS, Async-Rep][killed][size] */
    static double requests[2][3][MAX_SIZES];
    const enum scheme kept[2] = {RS, ASYNC_REP};
    const char *tags[2] = {"rs", "async"};
    memcached_st *readers[2];
    for (int k = 0; k < 2; k++) {
        readers[k] = client(kept[k]);
        for (unsigned z = 0; z < size_count; z++) {
            uint64_t before = servers_stat(true);
            degraded[k][0][z] = blocking(readers[k], tags[k], false, value, sizes[z]);
            requests[k][0][z] = (double)(servers_stat(true) - before) / timed_count;
        }
    }
    progress("gets with every server up measured (RS(3,2), Async-Rep=3)");
    for (int killed = 1; killed <= 2; killed++) {
        server_kill(killed - 1);
        for (int k = 0; k < 2; k++)
            for (unsigned z = 0; z < size_count; z++) {
                /* the value was stored with every server up: read it only */
                char key[64];
                size_t key_length =
                    (size_t)snprintf(key, sizeof(key), "res:%s:%zu", tags[k], sizes[z]);
                uint64_t before = servers_stat(true);
                degraded[k][killed][z] = timed(readers[k], key, key_length, false, value, sizes[z]);
                requests[k][killed][z] = (double)(servers_stat(true) - before) / timed_count;
            }
        progress("gets with %d server%s killed measured", killed, killed > 1 ? "s" : "");
    }
    print_degraded("Degraded get latency, blocking (median us), servers killed with SIGKILL", "",
                   degraded);
    print_degraded("Degraded gets: requests per get (cmd_get of the live servers / gets)",
                   "_requests", requests);
    for (int k = 1; k >= 0; k--)
        memcached_free(readers[k]);
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    started_us = ohb_now_us();
    atexit(kill_servers);
    signal(SIGPIPE, SIG_IGN);
    for (size_t size = min_size; size <= max_size && size_count < MAX_SIZES; size *= 2)
        sizes[size_count++] = size;
    for (int i = 0; i < SERVERS; i++) {
        if (!server_start(i)) {
            fprintf(stderr, "could not start %s\n", server_binary);
            return 1;
        }
    }
    progress("%d servers started", SERVERS);
    printf("# OHB Memcached Resilience Test\n");
    char over[64];
    if (rdma_addr != NULL)
        snprintf(over, sizeof(over), "RDMA (%s://)", rdma_schemes[rdma_mode]);
    printf("# Servers: 5 x %s over %s, binary protocol  Iterations: <= %u or %.2f s per size"
           "  Clock: %s\n",
           server_binary,
           rdma_addr != NULL ? over
           : over_unix       ? "Unix sockets"
                             : "TCP",
           iterations, max_seconds, ohb_clock_name());

    memcached_st *probe = client(RS);
    uint64_t threshold = memcached_behavior_get(probe, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD);
    memcached_free(probe);
    printf("# RS(3,2) codes values of %llu bytes and more (ERASURE_CODING_THRESHOLD); smaller\n"
           "# ones are stored as 3 whole copies. Latencies: the median of %u paired rounds\n",
           (unsigned long long)threshold, paired_rounds);

    if (pair_rounds > 0 || count_gets > 0) {
        if (pair_rounds > 0)
            paired_get_rounds();
        else
            count_only();
        if (csv != NULL)
            fclose(csv);
        return 0;
    }
    char *value = ohb_value_new(max_size);
    if (!degraded_only)
        all_but_degraded();
    if (!latency_only)
        degraded_gets(value);
    free(value);
    if (csv != NULL)
        fclose(csv);
    return 0;
}
