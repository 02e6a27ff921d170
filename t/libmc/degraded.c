/* t/libmc/degraded.c: one server down must not cost the poll timeout,
 * nor a connect timeout in every read.
 * Against five real servers ($MC_SERVER) over TCP and Unix sockets (with
 * --rdma, inside the Soft-RoCE guest, RXE_VM_ADDR naming its RDMA address:
 * over RDMA instead), with
 * POLL_TIMEOUT at 5 s: with one server killed (connects refused) or
 * stopped (SIGSTOP: connection open, nothing answered), synchronous
 * replicated sets, coded sets, coded and replicated gets and coded deletes
 * complete within 2 s (a functional bound, 2.5 times below the poll
 * timeout, not a speed claim), writes say SOME_ERRORS, values read back byte-exact. A
 * stopped server that keeps answering nothing while the others keep the
 * client busy fails after the poll timeout all the same, and the requests
 * left behind on it are counted as failures then. A server whose connects
 * hang costs reads one CONNECT_TIMEOUT in all, not one per call, and a
 * server that runs again is read again once RETRY_TIMEOUT has passed,
 * by clients that only read. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "tap.h"

#define SERVERS 5
#define KEYS 6
#define SIZE 20000
#define POLL_MS 5000
/* far below the poll timeout; the first write that meets a stopped server
 * waits the write delay (an eighth of the poll timeout here: 625 ms), and
 * sanitizers on a loaded machine added 450 ms to that once */
#define BOUND_MS 2000

static const char *const transport_names[] = {"tcp", "unix", "rdma"}; /* test_transport's */

static struct test_server servers[SERVERS];
static const char *rdma_addr; /* --rdma: RXE_VM_ADDR, an RDMA device's address */
static char values[KEYS][SIZE];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static memcached_st *client(uint64_t replication, uint64_t coding, int poll_ms)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < SERVERS; i++)
        test_server_add_to(memc, &servers[i]);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, (uint64_t)poll_ms);
    /* every call tries the dead server again: a refused connect each time */
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    if (replication != 0)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REPLICATION, replication);
    if (coding != 0) { /* values of SIZE bytes coded, below the library's default */
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING, coding);
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD, 1024);
    }
    return memc;
}

static void key_of(char *key, size_t size, const char *prefix, int i)
{
    snprintf(key, size, "%s-%d", prefix, i);
}

/* Whether the get of key i (named by prefix) gives values[i] byte-exact. */
static bool reads_back(memcached_st *memc, const char *prefix, int i)
{
    char key[80];
    key_of(key, sizeof(key), prefix, i);
    size_t length = 0;
    memcached_return_t rc;
    char *got = memcached_get(memc, key, strlen(key), &length, NULL, &rc);
    bool exact = rc == MEMCACHED_SUCCESS && got != NULL && length == SIZE &&
                 memcmp(got, values[i], SIZE) == 0;
    free(got);
    return exact;
}

/* Sets, gets (byte-exact) and, coded, deletes every key with server
 * `down` killed or stopped; each call within BOUND_MS. Whether the deleted
 * keys are gone is the caller's to check (a get of a missing key waits for
 * a stopped server that might hold a whole copy). */
static void degraded_calls(memcached_st *memc, const char *prefix, const char *what, int down,
                           bool coded)
{
    char key[80];
    int64_t slowest_set = 0, slowest_get = 0, slowest_delete = 0;
    int sets = 0, gets = 0, deletes = 0;
    for (int i = 0; i < KEYS; i++) {
        key_of(key, sizeof(key), prefix, i);
        int64_t start = now_ms();
        memcached_return_t rc = memcached_set(memc, key, strlen(key), values[i], SIZE, 0, 0);
        int64_t took = now_ms() - start;
        slowest_set = took > slowest_set ? took : slowest_set;
        sets += rc == MEMCACHED_SUCCESS || rc == MEMCACHED_SOME_ERRORS;
        start = now_ms();
        gets += reads_back(memc, prefix, i);
        took = now_ms() - start;
        slowest_get = took > slowest_get ? took : slowest_get;
    }
    ok(sets == KEYS && slowest_set < BOUND_MS,
       "%s, server %d %s: %d of %d sets stored, the slowest in %lld ms (poll timeout %d ms)",
       prefix, down, what, sets, KEYS, (long long)slowest_set, POLL_MS);
    ok(gets == KEYS && slowest_get < BOUND_MS,
       "%s: %d of %d gets byte-exact, the slowest in %lld ms", prefix, gets, KEYS,
       (long long)slowest_get);
    if (!coded)
        return;
    for (int i = 0; i < KEYS; i++) {
        key_of(key, sizeof(key), prefix, i);
        int64_t start = now_ms();
        memcached_return_t rc = memcached_delete(memc, key, strlen(key), 0);
        int64_t took = now_ms() - start;
        slowest_delete = took > slowest_delete ? took : slowest_delete;
        deletes += rc == MEMCACHED_SOME_ERRORS;
    }
    ok(deletes == KEYS && slowest_delete < BOUND_MS,
       "%s: %d of %d deletes SOME_ERRORS, the slowest in %lld ms", prefix, deletes, KEYS,
       (long long)slowest_delete);
}

/* How many of the keys read back as missing (NOTFOUND, or with a server
 * down the failure of that server: doc/resilience.md), never a value. */
static int gone(memcached_st *memc, const char *prefix)
{
    char key[80];
    int missing = 0;
    for (int i = 0; i < KEYS; i++) {
        key_of(key, sizeof(key), prefix, i);
        size_t length;
        memcached_return_t rc;
        char *got = memcached_get(memc, key, strlen(key), &length, NULL, &rc);
        missing += got == NULL && rc != MEMCACHED_SUCCESS;
        free(got);
    }
    return missing;
}

/* Sets every key; how many answered `want`. The five servers hold every
 * coded key (K + M = 5); a sync write with three copies reaches a down
 * server for some keys, and it answers SOME_ERRORS then: at least one of
 * KEYS does. */
static int sets_answering(memcached_st *memc, const char *prefix, memcached_return_t want)
{
    char key[80];
    int count = 0;
    for (int i = 0; i < KEYS; i++) {
        key_of(key, sizeof(key), prefix, i);
        count += memcached_set(memc, key, strlen(key), values[i], SIZE, 0, 0) == want;
    }
    return count;
}

static void killed(enum test_transport transport)
{
    const char *how = transport_names[transport];
    memcached_st *sync = client(MEMCACHED_REPLICATION_SYNC(3), 0, POLL_MS);
    memcached_st *coded = client(0, MEMCACHED_ERASURE_CODING(3, 2), POLL_MS);
    memcached_set(sync, "warm", 4, "v", 1, 0, 0); /* connections made, then one dies */
    memcached_set(coded, "warm", 4, values[0], SIZE, 0, 0);
    test_server_stop(&servers[2], true);
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "%s-killed-sync", how);
    degraded_calls(sync, prefix, "killed", 2, false);
    ok(sets_answering(sync, prefix, MEMCACHED_SOME_ERRORS) > 0,
       "%s: sync writes that reached it say SOME_ERRORS", prefix);
    snprintf(prefix, sizeof(prefix), "%s-killed-coded", how);
    degraded_calls(coded, prefix, "killed", 2, true);
    ok(gone(coded, prefix) == KEYS, "%s: the deleted keys are gone", prefix);
    ok(sets_answering(coded, prefix, MEMCACHED_SOME_ERRORS) == KEYS,
       "%s: every coded write says SOME_ERRORS", prefix);
    /* over RDMA on a new port: the killed one's stays taken for a while */
    ok(transport == TEST_OVER_RDMA ? test_server_restart_fresh(&servers[2])
                                   : test_server_restart(&servers[2]),
       "%s: server 2 runs again", how);
    memcached_free(coded);
    memcached_free(sync);
}

static void stopped(enum test_transport transport)
{
    const char *how = transport_names[transport];
    memcached_st *sync = client(MEMCACHED_REPLICATION_SYNC(3), 0, POLL_MS);
    memcached_st *coded = client(0, MEMCACHED_ERASURE_CODING(3, 2), POLL_MS);
    /* connected to every server before one stops: a connect to a stopped
     * server waits for CONNECT_TIMEOUT (over RDMA the server's process
     * must accept it) */
    memcached_version(sync);
    memcached_version(coded);
    test_server_pause(&servers[1]);
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "%s-stopped-sync", how);
    degraded_calls(sync, prefix, "stopped", 1, false);
    snprintf(prefix, sizeof(prefix), "%s-stopped-coded", how);
    degraded_calls(coded, prefix, "stopped", 1, true);
    char again[48];
    snprintf(again, sizeof(again), "%s-again", prefix);
    ok(sets_answering(coded, again, MEMCACHED_SOME_ERRORS) == KEYS,
       "%s: every coded write says SOME_ERRORS", again);
    test_server_resume(&servers[1]);
    ok(memcached_wait_all(coded) == MEMCACHED_SUCCESS, "%s: the chunks left behind are reaped",
       how);
    memcached_wait_all(sync);
    ok(gone(coded, prefix) == KEYS, "%s: the keys deleted while it was stopped are gone", prefix);
    int exact = 0;
    for (int i = 0; i < KEYS; i++)
        exact += reads_back(coded, again, i);
    ok(exact == KEYS, "%s: coded values byte-exact after it resumed (%d)", how, exact);
    memcached_free(coded);
    memcached_free(sync);
}

/* The poll timeout measures silence on every connection; a stopped server
 * among busy ones fails after it all the same, so requests left behind
 * on it complete (as failures) then; new ones fail at once meanwhile. */
static void stopped_among_busy(void)
{
    enum { SHORT_POLL_MS = 600, RUN_MS = 1500 };
    memcached_st *coded = client(0, MEMCACHED_ERASURE_CODING(3, 2), SHORT_POLL_MS);
    memcached_set(coded, "warm", 4, values[0], SIZE, 0, 0);
    ok(memcached_server_error_return(memcached_server_instance_by_position(coded, 3)) !=
           MEMCACHED_TIMEOUT,
       "server 3 has not timed out before it stops");
    test_server_pause(&servers[3]);
    int64_t start = now_ms();
    int calls = 0;
    while (now_ms() - start < RUN_MS && calls < 20000) {
        char key[80];
        key_of(key, sizeof(key), "busy", calls % KEYS);
        memcached_set(coded, key, strlen(key), values[calls % KEYS], SIZE, 0, 0);
        calls++;
    }
    const memcached_instance_st *stopped_server = memcached_server_instance_by_position(coded, 3);
    memcached_return_t failed_with = memcached_server_error_return(stopped_server);
    ok(failed_with == MEMCACHED_TIMEOUT,
       "a stopped server among busy ones fails after the poll timeout (%s, %d sets in %d ms)",
       memcached_strerror(coded, failed_with), calls, RUN_MS);
    test_server_resume(&servers[3]);
    memcached_wait_all(coded);
    memcached_free(coded);
}

/* A server that runs 25 ms after every 300 stopped (stopped and continued
 * by a thread of the test, for at most DUTY_MAX_MS): alive and answering,
 * but off the processor for longer than a hedge timeout at a time, as on
 * a machine loaded far beyond its processors. Its runs are long enough
 * for it to be scheduled within them on a loaded test host: with 5 ms
 * runs, a whole-suite run once failed the slow-sync check, most likely
 * because three runs in a row (a write delay) made no progress. */
enum { DUTY_RUN_MS = 25, DUTY_STOP_MS = 300, DUTY_MAX_MS = 8000 };
static atomic_bool duty_stop;

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *duty_cycle(void *arg)
{
    struct test_server *s = arg;
    int64_t start = now_ms();
    while (!atomic_load(&duty_stop) && now_ms() - start < DUTY_MAX_MS) {
        test_server_pause(s);
        sleep_ms(DUTY_STOP_MS);
        test_server_resume(s);
        sleep_ms(DUTY_RUN_MS);
    }
    return NULL;
}

/* Writes whose server is slow but alive wait for it: a window of isets
 * with the write delay at 1 s (POLL_TIMEOUT 8 s) through a server that is
 * off the processor 300 ms at a time all say SUCCESS, sync replicated and
 * coded. The writes are still in flight when their timer first looks (the
 * server has a queue to work through) and it finds progress; the next
 * look must again be a write delay later, not a hedge timeout, or a
 * 300 ms stop reads as a dead server and the write says SOME_ERRORS. */
static void slow_server(void)
{
    enum { WINDOW = 64, BIG = 512 * 1024, SLOW_POLL_MS = 8000 };
    char *big = malloc(BIG);
    memcached_request_st *reqs[WINDOW];
    const char *const prefixes[2] = {"slow-sync", "slow-coded"};
    memcached_st *clients[2] = {client(MEMCACHED_REPLICATION_SYNC(3), 0, SLOW_POLL_MS),
                                client(0, MEMCACHED_ERASURE_CODING(3, 2), SLOW_POLL_MS)};
    for (int i = 0; i < BIG; i++)
        big[i] = (char)(i * 31 + (i >> 9));
    for (int c = 0; c < 2; c++) {
        memcached_st *memc = clients[c];
        memcached_version(memc); /* connected before the server slows down */
        for (int i = 0; i < WINDOW; i++)
            reqs[i] = memcached_request_create(memc);
        atomic_store(&duty_stop, false);
        pthread_t duty;
        bool slowed = pthread_create(&duty, NULL, duty_cycle, &servers[4]) == 0;
        int64_t start = now_ms();
        for (int i = 0; i < WINDOW; i++) {
            char key[80];
            key_of(key, sizeof(key), prefixes[c], i);
            memcached_iset(memc, key, strlen(key), big, BIG, 0, 0, reqs[i]);
        }
        int stored = 0, some_errors = 0;
        for (int i = 0; i < WINDOW; i++) {
            memcached_return_t rc = memcached_wait(memc, reqs[i]);
            stored += rc == MEMCACHED_SUCCESS;
            some_errors += rc == MEMCACHED_SOME_ERRORS;
        }
        int64_t took = now_ms() - start;
        atomic_store(&duty_stop, true);
        if (slowed)
            pthread_join(duty, NULL);
        test_server_resume(&servers[4]);
        memcached_wait_all(memc);
        ok(slowed && stored == WINDOW,
           "%s: %d of %d isets SUCCESS (%d SOME_ERRORS) through a server off the processor "
           "%d ms at a time, in %lld ms",
           prefixes[c], stored, WINDOW, some_errors, DUTY_STOP_MS, (long long)took);
        for (int i = WINDOW; i > 0; i--)
            memcached_request_free(reqs[i - 1]);
    }
    memcached_free(clients[1]);
    memcached_free(clients[0]);
    free(big);
}

/* get_hits (hits: true) or cmd_get of server i, asked by a client of its
 * own. */
static uint64_t server_gets(int i, bool hits)
{
    memcached_st *memc = memcached_create(NULL);
    test_server_add_to(memc, &servers[i]);
    memcached_return_t rc;
    memcached_stat_st *stats = memcached_stat(memc, NULL, &rc);
    uint64_t count = stats == NULL ? 0 : hits ? stats[0].get_hits : stats[0].cmd_get;
    memcached_stat_free(memc, stats);
    memcached_free(memc);
    return count;
}

static uint64_t get_hits(int i)
{
    return server_gets(i, true);
}

/* A server whose machine stopped: its connection gone and new connects
 * hanging (a hung listener on its port). Even with RETRY_TIMEOUT 0, reads
 * take it as an erasure once a connect to it timed out instead of
 * connecting again in every call: many coded and replicated gets cost
 * a few CONNECT_TIMEOUTs in all, not one each (a functional bound: one
 * each would be 60 s; the bound is 5 s, as a loaded host stretched one
 * timeout's worth to 3.2-4.1 s in 2 of 6 runs; the loop gives up after
 * 9 s). Once it runs again, a
 * write connects and reads use it again. */
static void connects_hang(void)
{
    enum { CONNECT_MS = 1000, READS = 60, GIVE_UP_MS = 9000, BOUND_ALL_MS = 5 * CONNECT_MS };
    const char *const prefixes[2] = {"hang-coded", "hang-async"};
    memcached_st *clients[2] = {client(0, MEMCACHED_ERASURE_CODING(3, 2), POLL_MS),
                                client(MEMCACHED_REPLICATION_ASYNC(3), 0, POLL_MS)};
    for (int c = 0; c < 2; c++) {
        memcached_behavior_set(clients[c], MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, CONNECT_MS);
        ok(sets_answering(clients[c], prefixes[c], MEMCACHED_SUCCESS) == KEYS &&
               memcached_wait_all(clients[c]) == MEMCACHED_SUCCESS,
           "%s: written with every server up", prefixes[c]);
    }
    test_server_stop(&servers[0], true);
    struct hung_listener hung;
    if (!ok(hung_listener_start(&hung, servers[0].port), "connects to server 0's port hang")) {
        test_server_restart(&servers[0]);
        memcached_free(clients[1]);
        memcached_free(clients[0]);
        return;
    }
    for (int c = 0; c < 2; c++) {
        int64_t start = now_ms();
        int reads = 0, exact = 0;
        while (reads < READS && now_ms() - start < GIVE_UP_MS)
            exact += reads_back(clients[c], prefixes[c], reads++ % KEYS);
        int64_t took = now_ms() - start;
        ok(exact == READS && took < BOUND_ALL_MS,
           "%s: %d of %d gets byte-exact while server 0's connects hang, %lld ms in all "
           "(CONNECT_TIMEOUT %d ms, RETRY_TIMEOUT 0)",
           prefixes[c], exact, READS, (long long)took, CONNECT_MS);
    }
    hung_listener_stop(&hung);
    ok(test_server_restart(&servers[0]), "server 0 runs again");
    /* reads alone ask it again (RETRY_TIMEOUT 0: at once), each client
     * connecting in the background without waiting for it */
    for (int c = 0; c < 2; c++) {
        uint64_t asked = server_gets(0, false);
        int64_t start = now_ms();
        int reads = 0, exact = 0;
        while (now_ms() - start < GIVE_UP_MS && server_gets(0, false) == asked) {
            for (int i = 0; i < KEYS; i++, reads++)
                exact += reads_back(clients[c], prefixes[c], i);
            sleep_ms(20);
        }
        ok(exact == reads && server_gets(0, false) > asked,
           "%s: reads alone ask server 0 again once it runs (%lld ms, %d gets, %d byte-exact)",
           prefixes[c], (long long)(now_ms() - start), reads, exact);
    }
    /* a write connects (RETRY_TIMEOUT allows it) and ends the erasure */
    ok(sets_answering(clients[0], prefixes[0], MEMCACHED_SUCCESS) == KEYS,
       "%s: written again with every server up", prefixes[0]);
    uint64_t hits = get_hits(0);
    int exact = 0;
    for (int i = 0; i < KEYS; i++)
        exact += reads_back(clients[0], prefixes[0], i);
    ok(exact == KEYS && get_hits(0) > hits,
       "%s: reads byte-exact (%d) and ask server 0 again (%llu chunks read there)", prefixes[0],
       exact, (unsigned long long)(get_hits(0) - hits));
    memcached_free(clients[1]);
    memcached_free(clients[0]);
}

/* A server that was dead and runs again is read again by clients that
 * only read, once RETRY_TIMEOUT has passed, as libmemcached's calls use a
 * failed server again then. Server 0 is killed and read around long enough
 * for a connect to it to be refused (reads then take it as an erasure
 * without connecting in every call), started again empty, and its values
 * are written again by other clients; the readers, which never write,
 * then get chunks and copies from it (its get_hits grow) within the
 * retry timeout and a few reads. */
static void comes_back(enum test_transport transport)
{
    enum { RETRY_S = 1, DOWN_MS = 2500, GIVE_UP_MS = 5000, PAUSE_MS = 20 };
    const char *how = transport_names[transport];
    char prefixes[2][32];
    snprintf(prefixes[0], sizeof(prefixes[0]), "%s-back-coded", how);
    snprintf(prefixes[1], sizeof(prefixes[1]), "%s-back-async", how);
    const uint64_t replication[2] = {0, MEMCACHED_REPLICATION_ASYNC(3)};
    const uint64_t coding[2] = {MEMCACHED_ERASURE_CODING(3, 2), 0};
    memcached_st *readers[2];
    for (int c = 0; c < 2; c++) {
        readers[c] = client(replication[c], coding[c], POLL_MS);
        memcached_behavior_set(readers[c], MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, RETRY_S);
        int stored = sets_answering(readers[c], prefixes[c], MEMCACHED_SUCCESS);
        ok(stored == KEYS && memcached_wait_all(readers[c]) == MEMCACHED_SUCCESS,
           "%s: written with every server up (%d of %d SUCCESS, failures counted: %llu)",
           prefixes[c], stored, KEYS,
           (unsigned long long)memcached_behavior_get(readers[c],
                                                      MEMCACHED_BEHAVIOR_RESILIENCE_FAILURES));
    }
    test_server_stop(&servers[0], true);
    for (int c = 0; c < 2; c++) {
        int64_t start = now_ms();
        int reads = 0, exact = 0;
        while (now_ms() - start < DOWN_MS) {
            for (int i = 0; i < KEYS; i++, reads++)
                exact += reads_back(readers[c], prefixes[c], i);
            sleep_ms(PAUSE_MS);
        }
        ok(exact == reads, "%s: %d of %d gets byte-exact in %d ms with server 0 killed",
           prefixes[c], exact, reads, DOWN_MS);
    }
    ok(test_server_restart(&servers[0]), "%s: server 0 runs again, empty", how);
    for (int c = 0; c < 2; c++) {
        memcached_st *writer = client(replication[c], coding[c], POLL_MS);
        int stored = sets_answering(writer, prefixes[c], MEMCACHED_SUCCESS);
        ok(stored == KEYS && memcached_wait_all(writer) == MEMCACHED_SUCCESS,
           "%s: written again by another client (%d of %d SUCCESS, failures counted: %llu)",
           prefixes[c], stored, KEYS,
           (unsigned long long)memcached_behavior_get(writer,
                                                      MEMCACHED_BEHAVIOR_RESILIENCE_FAILURES));
        memcached_free(writer);
    }
    for (int c = 0; c < 2; c++) {
        uint64_t hits = get_hits(0);
        int64_t start = now_ms();
        int reads = 0, exact = 0;
        while (now_ms() - start < GIVE_UP_MS && get_hits(0) == hits) {
            for (int i = 0; i < KEYS; i++, reads++)
                exact += reads_back(readers[c], prefixes[c], i);
            sleep_ms(PAUSE_MS);
        }
        ok(exact == reads && get_hits(0) > hits,
           "%s: reads alone get values from server 0 again (%llu hits there after %lld ms and "
           "%d gets, %d byte-exact; RETRY_TIMEOUT %d s)",
           prefixes[c], (unsigned long long)(get_hits(0) - hits), (long long)(now_ms() - start),
           reads, exact, RETRY_S);
    }
    memcached_free(readers[1]);
    memcached_free(readers[0]);
}

static bool start_all(enum test_transport transport)
{
    enum test_transport transports[SERVERS];
    for (int i = 0; i < SERVERS; i++)
        transports[i] = transport;
    return test_servers_start(servers, SERVERS, transports, rdma_addr);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    enum test_transport first = TEST_OVER_TCP, last = TEST_OVER_UNIX;
    if (argc > 1 && strcmp(argv[1], "--rdma") == 0) {
        rdma_addr = getenv("RXE_VM_ADDR");
        if (rdma_addr == NULL || rdma_addr[0] == '\0') {
            tap_diag("--rdma needs RXE_VM_ADDR, the address of an RDMA device");
            return 1;
        }
        first = last = TEST_OVER_RDMA;
    }
    for (int i = 0; i < KEYS; i++)
        for (int j = 0; j < SIZE; j++)
            values[i][j] = (char)((i * 131 + j * 7) ^ (j >> 5));
    memcached_st *probe = memcached_create(NULL);
    bool coding = memcached_behavior_set(probe, MEMCACHED_BEHAVIOR_ERASURE_CODING,
                                         MEMCACHED_ERASURE_CODING(3, 2)) == MEMCACHED_SUCCESS;
    memcached_free(probe);
    if (!coding) {
        tap_diag("erasure coding not built (no jerasure): skipped");
        ok(1, "skipped");
        return done_testing();
    }
    for (enum test_transport t = first; t <= last; t++) {
        if (!ok(start_all(t), "five servers over %s", transport_names[t]))
            return done_testing();
        killed(t);
        stopped(t);
        if (t != TEST_OVER_RDMA)
            comes_back(t); /* over RDMA a restarted server listens on a new port */
        if (t == TEST_OVER_TCP) {
            stopped_among_busy();
            connects_hang();
            slow_server();
        }
        test_servers_stop(servers, SERVERS);
    }
    return done_testing();
}
