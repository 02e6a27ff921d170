/* benchmarks/ohb_memlat_resilience.c: the cost of resilience in
 * libmemcached-rdma. It starts five servers of its own (--server-binary,
 * on loopback TCP, with --unix on Unix sockets, with --rdma=ADDR over RDMA
 * on the RDMA device that has ADDR) and, for value sizes
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
 * prints those tables alone. Tables with ratios; --csv writes every
 * number. */
#include "ohb_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
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
    "  degraded gets, memory efficiency and coding time. Sizes accept k and m suffixes.\n";

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
static size_t min_size = 1024, max_size = 1048576;
static unsigned iterations = 200;
static double max_seconds = 0.3;
static FILE *csv;
static long long ec_threshold = -1; /* -1: the library's default */
static unsigned paired_rounds = 3;
static bool degraded_only;   /* --degraded-only: the degraded-get tables alone */
static bool latency_only;    /* --latency-only: the paired latency tables alone */
static unsigned timed_count; /* operations of the last timed() */
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
        snprintf(spec, sizeof(spec), "rdma://%s:%u", rdma_addr, s->rdma_port);
        memcached_server_st *list = memcached_servers_parse(spec);
        memcached_server_push(memc, list);
        memcached_server_list_free(list);
    } else if (over_unix) {
        memcached_server_add_unix_socket(memc, s->path);
    } else {
        memcached_server_add(memc, "127.0.0.1", (in_port_t)s->port);
    }
}

/* Starts server i (again, on the same port or path, when it ran before). */
static bool server_start(int i)
{
    struct server *s = &servers[i];
    char rdma_listen[128] = "";
    if (rdma_addr != NULL) {
        s->rdma_port = free_port();
        snprintf(rdma_listen, sizeof(rdma_listen), "rdma_listen=%s:%u", rdma_addr, s->rdma_port);
    }
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
        const char *argv[16];
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
        }
        if (geteuid() == 0) {
            argv[n++] = "-u";
            argv[n++] = "root";
        }
        argv[n] = NULL;
        execv(server_binary, (char *const *)argv);
        _exit(127);
    }
    for (int tries = 0; tries < 500; tries++) { /* up to 5 s */
        memcached_st *probe = memcached_create(NULL);
        add_server(probe, i, false);
        memcached_return_t rc = memcached_exist(probe, "probe", 5); /* over RDMA too */
        if (rc == MEMCACHED_NOTFOUND)
            rc = MEMCACHED_SUCCESS;
        memcached_free(probe);
        if (rc == MEMCACHED_SUCCESS)
            return true;
        usleep(10000);
    }
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

static void flush_all(void)
{
    memcached_st *memc = client(NONE);
    memcached_flush(memc, 0);
    memcached_free(memc);
}

static bool stored(memcached_return_t rc)
{
    return rc == MEMCACHED_SUCCESS || rc == MEMCACHED_SOME_ERRORS;
}

/* The median microseconds of blocking sets (get: false) of size bytes on
 * key, over up to `iterations` operations or max_seconds (the median: the
 * machine is shared, and a stall of someone else's should not count). */
static double timed(memcached_st *memc, const char *key, size_t key_length, bool set,
                    const char *value, size_t size)
{
    static double *samples;
    if (samples == NULL && (samples = malloc(iterations * sizeof(*samples))) == NULL) {
        fprintf(stderr, "out of memory for %u timings\n", iterations);
        exit(1);
    }
    double deadline = ohb_now_us() + max_seconds * 1e6;
    unsigned done = 0;
    while (done < iterations && (done < 3 || ohb_now_us() < deadline)) {
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

/* Mean microseconds per operation with WINDOW isets (or igets) in flight;
 * window_cpu_us: the client's processor time per operation. */
static double windowed(memcached_st *memc, const char *tag, bool set, const char *value,
                       size_t size, char *into, memcached_request_st **reqs)
{
    char keys[WINDOW][64];
    size_t lengths[WINDOW];
    for (int i = 0; i < WINDOW; i++) {
        lengths[i] = (size_t)snprintf(keys[i], sizeof(keys[i]), "resnb:%s:%zu:%d", tag, size, i);
        memcached_return_t rc = memcached_set(memc, keys[i], lengths[i], value, size, 0, 0);
        if (!stored(rc))
            ohb_fail(memc, "memcached_set", rc);
    }
    memcached_wait_all(memc);
    double start = ohb_now_us(), deadline = start + max_seconds * 1e6;
    double cpu_start = process_cpu_us();
    unsigned rounds = 0;
    while (rounds < 2 || (rounds * WINDOW < iterations && ohb_now_us() < deadline)) {
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
        csv_row(ratio_to == SYNC_REP ? "rs_over_sync" : "rs_over_async", RS, sizes[z], ratio[z]);
    }
}

enum measure { SET_BLOCK, GET_BLOCK, SET_WINDOW, GET_WINDOW, GET_WINDOW_CPU, MEASURES };
/* what RS is compared with in each measurement */
static const enum scheme ratio_to[MEASURES] = {SYNC_REP, ASYNC_REP, SYNC_REP, ASYNC_REP, ASYNC_REP};

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
    for (int s = 0; s < SCHEMES; s++) {
        clients[s] = client((enum scheme)s);
        for (int i = 0; i < WINDOW; i++)
            reqs[s][i] = memcached_request_create(clients[s]);
    }
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
                *at[SET_WINDOW] = windowed(memc, tag, true, value, sizes[z], into, reqs[s]);
                *at[GET_WINDOW] = windowed(memc, tag, false, value, sizes[z], into, reqs[s]);
                *at[GET_WINDOW_CPU] = window_cpu_us;
            }
            flush_all(); /* one size's values at a time on the servers */
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
            ratio[m][z] = ohb_median(column, paired_rounds);
        }
    for (int s = SCHEMES; s > 0; s--) {
        for (int i = WINDOW; i > 0; i--)
            memcached_request_free(reqs[s - 1][i - 1]);
        memcached_free(clients[s - 1]);
    }
    free(into);
    free(value);
    free(column);
    free(by_round);
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

static bool parse_ec_threshold(void *target, const char *text)
{
    char *end;
    *(long long *)target = strtoll(text, &end, 10);
    if (end == text || *end != '\0')
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
    }
    free(samples);
    for (int i = FANOUT; i > 0; i--)
        memcached_request_free(reqs[i - 1]);
    free(into);
    free(value);
    memcached_free(memc);
    flush_all();
}

static void parse(int argc, char **argv)
{
    const struct ohb_option table[] = {
        {"server-binary", OHB_OPT_STRING, &server_binary, "PATH", "the server started five times",
         NULL},
        {"unix", OHB_OPT_SET, &over_unix, NULL, "the servers listen on Unix sockets", NULL},
        {"rdma", OHB_OPT_STRING, &rdma_addr, "ADDR",
         "the servers also listen over RDMA on the device that has ADDR", NULL},
        {"min-size", OHB_OPT_SIZE, &min_size, "N", "the first value size", NULL},
        {"max-size", OHB_OPT_SIZE, &max_size, "N", "the last value size (sizes double)", NULL},
        {"iterations", OHB_OPT_UNSIGNED, &iterations, "N", "timed operations per size", NULL},
        {"max-time", OHB_OPT_DOUBLE, &max_seconds, "SECONDS", "time cap per size and scheme", NULL},
        {"csv", OHB_OPT_CALL, &csv, "FILE", "also write every number here", open_csv},
        {"rounds", OHB_OPT_UNSIGNED, &paired_rounds, "N",
         "paired rounds of the latency tables (--iterations, --max-time: per round)", NULL},
        {"ec-threshold", OHB_OPT_CALL, &ec_threshold, "BYTES",
         "erasure coding from this value size on (default: the library's)", parse_ec_threshold},
        {"degraded-only", OHB_OPT_SET, &degraded_only, NULL,
         "only the degraded gets (servers killed) and their requests per get", NULL},
        {"latency-only", OHB_OPT_SET, &latency_only, NULL,
         "only the latency tables of the paired rounds (no fan-out floor, memory, coding or "
         "degraded gets)",
         NULL},
    };
    const struct ohb_command cmd = {"ohb_memlat_resilience", table,
                                    sizeof(table) / sizeof(table[0]), notes};
    ohb_command_parse(&cmd, argc, argv);
    if (min_size == 0 || min_size > max_size || iterations == 0 || max_seconds <= 0 ||
        paired_rounds == 0 || (over_unix && rdma_addr != NULL) || (latency_only && degraded_only))
        ohb_usage_error();
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
    printf("# OHB Memcached Resilience Test\n");
    printf("# Servers: 5 x %s over %s, binary protocol  Iterations: <= %u or %.2f s per size"
           "  Clock: %s\n",
           server_binary,
           rdma_addr != NULL ? "RDMA"
           : over_unix       ? "Unix sockets"
                             : "TCP",
           iterations, max_seconds, ohb_clock_name());

    memcached_st *probe = client(RS);
    uint64_t threshold = memcached_behavior_get(probe, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD);
    memcached_free(probe);
    printf("# RS(3,2) codes values of %llu bytes and more (ERASURE_CODING_THRESHOLD); smaller\n"
           "# ones are stored as 3 whole copies. Latencies: the median of %u paired rounds\n",
           (unsigned long long)threshold, paired_rounds);

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
