/* t/libmc/replicated_place.c: replicated reads receive the first live
 * copy straight into the value (the caller's buffer for iget), against
 * real servers ($MC_SERVER) over TCP: values byte-exact through iget, bget
 * and memcached_get with no, one and two servers of their copies killed
 * (SIGKILL), the bytes around the caller's buffer untouched, a buffer too
 * small left as it was; and reads that completed while a copy's server
 * was stopped (SIGSTOP): their stragglers, once it runs again, never
 * write into the caller's buffers (poisoned after completion, and freed:
 * under AddressSanitizer a write there aborts), including a copy that was
 * being received into the caller's buffer when another copy completed
 * the read. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "test_util.h"
#include "server.h"
#include "tap.h"

#define SERVERS 5
#define GUARD 64
#define POISON 'Q'

static const size_t sizes[] = {0, 1, 31, 32, 33, 5000, 70000, 1000000};
#define VALUES (sizeof(sizes) / sizeof(sizes[0]))

static struct test_server servers[SERVERS];

static memcached_st *client(uint64_t replication, bool binary)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < SERVERS; i++)
        test_server_add_to(memc, &servers[i]);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 5000);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    /* writes here must say SUCCESS on a loaded machine (see redundancy_cluster.c) */
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT, 1000);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REPLICATION, replication);
    return memc;
}

/* The index in servers[] of the key's first server (its copy 0). */
static int first_server_of(memcached_st *memc, const char *key)
{
    memcached_return_t rc;
    const memcached_instance_st *first = memcached_server_by_key(memc, key, strlen(key), &rc);
    in_port_t port = memcached_server_port(first);
    for (int i = 0; i < SERVERS; i++)
        if (port == servers[i].port)
            return i;
    return -1;
}

/* A key named after prefix and n whose copy 0 is on server `first`. */
static void key_on(memcached_st *memc, char *key, size_t size, const char *prefix, int n, int first)
{
    for (int i = 0;; i++) {
        snprintf(key, size, "%s-%d-%d", prefix, n, i);
        if (first_server_of(memc, key) == first || i == 10000)
            return;
    }
}

static bool all_bytes(const char *p, size_t length, char byte)
{
    for (size_t i = 0; i < length; i++)
        if (p[i] != byte)
            return false;
    return true;
}

/* Values whose copies are on servers 0, 1 and 2 (modula placement: copy i
 * on the owner's i-th successor), read with none, then server 0, then
 * servers 0 and 1 killed: each through iget into a buffer of the value's
 * size between guards, into one a byte too small, bget and memcached_get. */
static void exact_with_killed(uint64_t replication, bool binary, const char *what)
{
    memcached_st *memc = client(replication, binary);
    memcached_request_st *req = memcached_request_create(memc);
    char keys[VALUES][64], *values[VALUES];
    int stored = 0;
    for (size_t v = 0; v < VALUES; v++) {
        key_on(memc, keys[v], sizeof(keys[v]), "place", (int)v, 0);
        values[v] = malloc(sizes[v] + 1);
        fill_bytes(values[v], sizes[v], 40 + (unsigned)v);
        stored += memcached_set(memc, keys[v], strlen(keys[v]), values[v], sizes[v], 0,
                                (uint32_t)v + 3) == MEMCACHED_SUCCESS;
    }
    memcached_wait_all(memc);
    ok(stored == (int)VALUES, "%s: %d values stored, copy 0 on server 0", what, stored);
    char *area = malloc(sizes[VALUES - 1] + 2 * GUARD);
    for (int killed = 0; killed <= 2; killed++) {
        if (killed > 0)
            test_server_stop(&servers[killed - 1], true);
        int iget_exact = 0, small_left = 0, bget_exact = 0, get_exact = 0;
        for (size_t v = 0; v < VALUES; v++) {
            size_t size = sizes[v], key_length = strlen(keys[v]);
            char *buffer = area + GUARD;
            memset(area, POISON, size + 2 * GUARD);
            memcached_iget(memc, keys[v], key_length, buffer, size, req);
            size_t length = SIZE_MAX;
            memcached_return_t rc = memcached_wait(memc, req);
            const char *got = memcached_request_value(req, &length);
            bool exact = rc == MEMCACHED_SUCCESS && length == size && got == buffer &&
                         memcmp(buffer, values[v], size) == 0 &&
                         memcached_request_flags(req) == (uint32_t)v + 3 &&
                         all_bytes(area, GUARD, POISON) && all_bytes(buffer + size, GUARD, POISON);
            iget_exact += exact;
            if (!exact)
                tap_diag("%s, %d killed: iget of %zu bytes: %s, length %zu", what, killed, size,
                         memcached_strerror(NULL, rc), length);
            if (size > 0) { /* a byte too small: E2BIG, the buffer as it was */
                memset(area, POISON, size + 2 * GUARD);
                memcached_iget(memc, keys[v], key_length, buffer, size - 1, req);
                rc = memcached_wait(memc, req);
                bool left = rc == MEMCACHED_E2BIG && all_bytes(area, size + 2 * GUARD, POISON);
                small_left += left;
                if (!left)
                    tap_diag("%s, %d killed: iget of %zu bytes into %zu: %s", what, killed, size,
                             size - 1, memcached_strerror(NULL, rc));
            } else {
                small_left++;
            }
            memcached_bget(memc, keys[v], key_length, req);
            rc = memcached_wait(memc, req);
            got = memcached_request_value(req, &length);
            bget_exact += rc == MEMCACHED_SUCCESS && length == size &&
                          (size == 0 || memcmp(got, values[v], size) == 0);
            uint32_t flags = 0;
            char *value = memcached_get(memc, keys[v], key_length, &length, &flags, &rc);
            get_exact += rc == MEMCACHED_SUCCESS && length == size && flags == (uint32_t)v + 3 &&
                         (size == 0 || memcmp(value, values[v], size) == 0);
            free(value);
        }
        ok(iget_exact == (int)VALUES,
           "%s, %d of the copies' servers killed: igets byte-exact in the caller's buffers, "
           "nothing written around them (%d)",
           what, killed, iget_exact);
        ok(small_left == (int)VALUES,
           "%s, %d killed: an iget into a buffer a byte too small says E2BIG and leaves it (%d)",
           what, killed, small_left);
        ok(bget_exact == (int)VALUES && get_exact == (int)VALUES,
           "%s, %d killed: bget and memcached_get byte-exact (%d, %d)", what, killed, bget_exact,
           get_exact);
    }
    for (int i = 0; i < 2; i++)
        if (!test_server_restart(&servers[i]))
            tap_diag("server %d did not start again", i);
    free(area);
    for (size_t v = VALUES; v > 0; v--)
        free(values[v - 1]);
    memcached_request_free(req);
    memcached_free(memc);
}

/* Server 0, which holds copy 0 of every key here, stopped: igets complete
 * from copy 1 after the hedge timeout, their requests to server 0 stay in
 * flight. The caller's buffers are poisoned (first window) or freed
 * (second window) once the igets completed; server 0 runs again and the
 * stragglers are reaped: the poison is intact. */
static void stragglers_stay_out(uint64_t replication, const char *what)
{
    enum { KEYS = 8, SIZE = 300000, HEDGE_MS = 50, POLL_MS = 10000 };
    memcached_st *memc = client(replication, true);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, POLL_MS);
    char keys[KEYS][64], *values[KEYS];
    memcached_request_st *reqs[KEYS];
    for (int i = 0; i < KEYS; i++) {
        key_on(memc, keys[i], sizeof(keys[i]), "straggle", i, 0);
        values[i] = malloc(SIZE);
        fill_bytes(values[i], SIZE, 90 + (unsigned)i);
        memcached_set(memc, keys[i], strlen(keys[i]), values[i], SIZE, 0, 0);
        reqs[i] = memcached_request_create(memc);
    }
    memcached_wait_all(memc); /* connected to every server before one stops */
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT, HEDGE_MS);
    for (int window = 0; window < 2; window++) {
        char *into = malloc((size_t)KEYS * SIZE);
        test_server_pause(&servers[0]);
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (int i = 0; i < KEYS; i++)
            memcached_iget(memc, keys[i], strlen(keys[i]), into + (size_t)i * SIZE, SIZE, reqs[i]);
        int exact = 0;
        for (int i = 0; i < KEYS; i++) {
            size_t length = 0;
            exact += memcached_wait(memc, reqs[i]) == MEMCACHED_SUCCESS &&
                     memcached_request_value(reqs[i], &length) == into + (size_t)i * SIZE &&
                     length == SIZE && memcmp(into + (size_t)i * SIZE, values[i], SIZE) == 0;
        }
        int64_t took = elapsed_ms(&start);
        ok(exact == KEYS && took < POLL_MS / 2,
           "%s, copy 0's server stopped: %d igets byte-exact in the caller's buffers in %lld ms",
           what, exact, (long long)took);
        if (window == 0)
            memset(into, POISON, (size_t)KEYS * SIZE);
        else
            free(into); /* a write there now is a use after free */
        test_server_resume(&servers[0]);
        is_rc(memcached_wait_all(memc), MEMCACHED_SUCCESS, "the stragglers are reaped");
        if (window == 0) {
            ok(all_bytes(into, (size_t)KEYS * SIZE, POISON),
               "%s: the stragglers never wrote into the caller's buffers", what);
            free(into);
        }
    }
    /* server 0 answers again: copy 0 is read, in place */
    char *into = malloc(SIZE);
    memcached_iget(memc, keys[0], strlen(keys[0]), into, SIZE, reqs[0]);
    ok(memcached_wait(memc, reqs[0]) == MEMCACHED_SUCCESS && memcmp(into, values[0], SIZE) == 0,
       "%s: server 0 running again: iget byte-exact", what);
    free(into);
    for (int i = KEYS; i > 0; i--) {
        memcached_request_free(reqs[i - 1]);
        free(values[i - 1]);
    }
    memcached_free(memc);
}

/* F = 2, copies on servers 0 and 1, both stopped; an iget of a value
 * larger than the sockets hold asks copy 0, then (hedge) copy 1. Server 0
 * runs for 300 ms (until its socket is full) and stops again: the client
 * receives copy 0's header and the first part of its payload, straight
 * into the caller's buffer (seen there: the value's first bytes, the
 * poison after them). Server 1 runs: copy 1 completes the read. Copy 0 is
 * still being received: the rest of it, once server 0 runs again, goes to
 * library memory, never into the caller's buffer (poisoned, or freed). */
static void placed_straggler(bool free_buffer)
{
    enum { SIZE = 12 << 20, HEDGE_MS = 50 };
    memcached_st *memc = client(MEMCACHED_REPLICATION_SYNC(2), true);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
    char key[64];
    key_on(memc, key, sizeof(key), "midvalue", free_buffer, 0);
    char *value = malloc(SIZE), *into = malloc(SIZE);
    fill_bytes(value, SIZE, 7 + free_buffer);
    is_rc(memcached_set(memc, key, strlen(key), value, SIZE, 0, 0), MEMCACHED_SUCCESS,
          "a 12 MiB value stored with two copies");
    memcached_wait_all(memc);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT, HEDGE_MS);
    memcached_request_st *req = memcached_request_create(memc);
    test_server_pause(&servers[0]);
    test_server_pause(&servers[1]);
    memset(into, POISON, SIZE);
    memcached_iget(memc, key, strlen(key), into, SIZE, req);
    usleep(3 * HEDGE_MS * 1000);
    memcached_return_t first = memcached_test(memc, req); /* the hedge: copy 1 asked */
    test_server_resume(&servers[0]);
    usleep(300000);
    test_server_pause(&servers[0]);
    memcached_return_t second = memcached_test(memc, req); /* copy 0's first part */
    size_t placed = 0;
    while (placed < SIZE && into[placed] == value[placed])
        placed++;
    ok(first == MEMCACHED_IN_PROGRESS && second == MEMCACHED_IN_PROGRESS && placed > 0 &&
           placed < SIZE && all_bytes(into + placed + 1, SIZE - placed - 1, POISON),
       "copy 0's first %zu bytes of %d arrived in the caller's buffer, the rest not yet", placed,
       SIZE);
    test_server_resume(&servers[1]);
    memcached_return_t rc = memcached_wait(memc, req);
    size_t length = 0;
    const char *got = memcached_request_value(req, &length);
    ok(rc == MEMCACHED_SUCCESS && got == into && length == SIZE && memcmp(into, value, SIZE) == 0,
       "copy 1 completes the iget: byte-exact in the caller's buffer");
    if (free_buffer)
        free(into); /* a write there now is a use after free */
    else
        memset(into, POISON, SIZE);
    test_server_resume(&servers[0]);
    is_rc(memcached_wait_all(memc), MEMCACHED_SUCCESS, "copy 0, still arriving, is reaped");
    if (!free_buffer) {
        ok(all_bytes(into, SIZE, POISON),
           "the rest of copy 0 went to library memory, not the caller's buffer");
        free(into);
    }
    memcached_request_free(req);
    free(value);
    memcached_free(memc);
}

int main(void)
{
    /* room for values larger than the sockets hold (placed_straggler) */
    const char *const extra[] = {"-m", "256", "-I", "16m", NULL};
    for (int i = 0; i < SERVERS; i++)
        if (!test_server_start_args(&servers[i], false, extra)) {
            printf("1..0 # SKIP servers did not start\n");
            return 0;
        }
    placed_straggler(false);
    placed_straggler(true);
    exact_with_killed(MEMCACHED_REPLICATION_SYNC(3), true, "sync F=3, binary");
    exact_with_killed(MEMCACHED_REPLICATION_ASYNC(3), false, "async F=3, text");
    stragglers_stay_out(MEMCACHED_REPLICATION_SYNC(3), "sync F=3");
    stragglers_stay_out(MEMCACHED_REPLICATION_ASYNC(3), "async F=3");
    test_servers_stop(servers, SERVERS);
    return done_testing();
}
