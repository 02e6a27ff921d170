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
 * carries the tables alone.
 * This file: the options and the order of the steps;
 * ohb_memlat_resilience_servers.c starts, kills and restarts the servers,
 * ohb_memlat_resilience_measure.c measures, ohb_memlat_resilience_tables.c
 * prints the tables and CSV rows. */
#include "ohb_memlat_resilience.h"

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char notes[] =
    "  Starts five servers (--server-binary) and measures set/get latency\n"
    "  for none, Sync-Rep=3, Async-Rep=3 and RS(3,2), blocking and with a window of 64,\n"
    "  degraded gets, memory efficiency and coding time. Sizes accept k and m suffixes.\n"
    "  A progress line per round and size measured goes to stderr; stdout has the tables.\n";

const char *server_binary = "/usr/bin/memcached";
bool over_unix;
const char *rdma_addr; /* --rdma: servers also listen over RDMA there */
/* --rdma-transport: the servers' rdma_transport and the clients' scheme */
const char *rdma_modes[] = {"rc", "ud", "hybrid"};
const char *rdma_schemes[] = {"rdma+rc", "rdma+ud", "rdma"};
int rdma_mode = -1; /* an index of rdma_modes; -1 until parsed: rc */
size_t min_size = 1024, max_size = 1048576;
unsigned iterations = 200;
double max_seconds = 0.3;
FILE *csv;
long long ec_threshold = -1;  /* -1: the library's default */
long long hedge_timeout = -1; /* --hedge-timeout; -1: the library's default */
unsigned paired_rounds = 3;
bool degraded_only;      /* --degraded-only: the degraded-get tables alone */
bool latency_only;       /* --latency-only: the paired latency tables alone */
bool blocking_only;      /* --blocking-only: no window-of-64 measurements */
unsigned pair_rounds;    /* --pairs: short paired get rounds of Async-Rep=3 and RS */
unsigned pair_gets = 16; /* --pair-gets: blocking gets per scheme and round */
unsigned count_gets;     /* --count-gets: gets of one scheme, for outside counters */
enum scheme count_scheme = RS;
bool count_window;        /* --count-window: those gets are igets in windows of 64 */
static double started_us; /* when the program started (ohb_now_us) */
size_t sizes[MAX_SIZES];
unsigned size_count;

/* One progress line on stderr: the seconds since the start and what just
 * finished, so that a stalled run can be told from a slow one (stdout
 * keeps the tables alone, for the scripts that read them). */
__attribute__((format(printf, 1, 2))) void res_progress(const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    fprintf(stderr, "ohb_memlat_resilience: %.1f s: %s\n", (ohb_now_us() - started_us) / 1e6, what);
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

/* The tables of every scheme with every server up, memory and coding. */
static void all_but_degraded(void)
{
    static double latency[MEASURES][SCHEMES][MAX_SIZES], ratio[MEASURES][MAX_SIZES];
    res_measure_rounds(latency, ratio);
    double(*set_block)[MAX_SIZES] = latency[SET_BLOCK],
    (*get_block)[MAX_SIZES] = latency[GET_BLOCK];
    res_print_latency("Set latency, blocking (median us)", "set", set_block, ratio[SET_BLOCK],
                      SYNC_REP);
    res_print_latency("Get latency, blocking (median us)", "get", get_block, ratio[GET_BLOCK],
                      ASYNC_REP);
    if (latency_only) {
        res_print_windows(latency, ratio);
        return;
    }
    static double floor_block[MAX_SIZES];
    res_fanout_floor(floor_block);
    printf("\n# Get fan-out floor, blocking (median us): 3 plain gets of a chunk's size on 3\n"
           "# servers at once (no scheme), what a coded get's 3 data chunks cost at least\n");
    printf("# %-10s %13s %13s %13s %9s %9s\n", "Size", "none", "3 at once", "RS(3,2)", "RS/3",
           "3/none");
    for (unsigned z = 0; z < size_count; z++)
        printf("%-12zu %13.2f %13.2f %13.2f %9.2f %9.2f\n", sizes[z], get_block[NONE][z],
               floor_block[z], get_block[RS][z], get_block[RS][z] / floor_block[z],
               floor_block[z] / get_block[NONE][z]);
    res_print_windows(latency, ratio);

    res_memory_efficiency();
    res_coding_time(set_block);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    started_us = ohb_now_us();
    atexit(res_kill_servers);
    signal(SIGPIPE, SIG_IGN);
    for (size_t size = min_size; size <= max_size && size_count < MAX_SIZES; size *= 2)
        sizes[size_count++] = size;
    for (int i = 0; i < SERVERS; i++) {
        if (!res_server_start(i)) {
            fprintf(stderr, "could not start %s\n", server_binary);
            return 1;
        }
    }
    res_progress("%d servers started", SERVERS);
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

    memcached_st *probe = res_client(RS);
    uint64_t threshold = memcached_behavior_get(probe, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD);
    memcached_free(probe);
    printf("# RS(3,2) codes values of %llu bytes and more (ERASURE_CODING_THRESHOLD); smaller\n"
           "# ones are stored as 3 whole copies. Latencies: the median of %u paired rounds\n",
           (unsigned long long)threshold, paired_rounds);

    if (pair_rounds > 0 || count_gets > 0) {
        if (pair_rounds > 0)
            res_paired_get_rounds();
        else
            res_count_only();
        if (csv != NULL)
            fclose(csv);
        return 0;
    }
    char *value = ohb_value_new(max_size);
    if (!degraded_only)
        all_but_degraded();
    if (!latency_only)
        res_degraded_gets(value);
    free(value);
    if (csv != NULL)
        fclose(csv);
    return 0;
}
