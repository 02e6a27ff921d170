/* t/libmc/redundancy_calls.c: the calls on REPLICATION and ERASURE_CODING
 * keys against real servers ($MC_SERVER), over TCP and Unix sockets, and
 * with --rdma (inside the Soft-RoCE guest, RXE_VM_ADDR naming its RDMA
 * address) over RDMA and over a mixed cluster of RDMA, TCP and Unix
 * servers: configuration strings and behaviors, chunk items on the
 * servers and the operations refused, which servers a coded get asks, the
 * non-blocking calls on coded and replicated parent requests, the other
 * calls on copies, servers stopped (SIGSTOP) with requests in flight or
 * connected to again, and failures counted. Values kept with servers
 * killed are t/libmc/redundancy_survival.c's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "test_util.h"
#include "redundancy_cluster.h"
#include "tap.h"

/* The chunks are items of their own, with the header the format names. */
static void chunks_on_servers(bool binary)
{
    memcached_st *memc = client(0, MEMCACHED_ERASURE_CODING(3, 2), binary);
    char *value = malloc(300000);
    fill_bytes(value, 300000, 5);
    is_rc(memcached_set(memc, "layout", 6, value, 300000, 0, 0), MEMCACHED_SUCCESS,
          "coded set of 300000 bytes");
    size_t total = 0;
    int with_header = 0;
    for (int i = 0; i < SERVERS; i++) {
        memcached_st *plain = plain_client(i);
        size_t length = 0;
        memcached_return_t rc;
        char *chunk = memcached_get(plain, "layout", 6, &length, NULL, &rc);
        if (rc == MEMCACHED_SUCCESS && length >= 32 && memcmp(chunk, "RSc1", 4) == 0)
            with_header++;
        total += length;
        free(chunk);
        memcached_free(plain);
    }
    ok(with_header == SERVERS, "one chunk item with a header on each of the 5 servers");
    ok(total == 5 * (32 + 100000), "chunks hold 5/3 of the value plus headers (%zu bytes)", total);
    is_rc(memcached_delete(memc, "layout", 6, 0), MEMCACHED_SUCCESS, "coded delete");
    int gone = 0;
    for (int i = 0; i < SERVERS; i++) {
        memcached_st *plain = plain_client(i);
        memcached_return_t rc;
        char *chunk = memcached_get(plain, "layout", 6, NULL, NULL, &rc);
        gone += rc == MEMCACHED_NOTFOUND;
        free(chunk);
        memcached_free(plain);
    }
    ok(gone == SERVERS, "delete removes every chunk");
    memcached_return_t rc;
    char *none = memcached_get(memc, "layout", 6, NULL, NULL, &rc);
    is_rc(rc, MEMCACHED_NOTFOUND, "coded get after delete: NOTFOUND");
    free(none);

    /* unsupported operations are refused, not half-done */
    uint64_t number;
    is_rc(memcached_append(memc, "layout", 6, "x", 1, 0, 0), MEMCACHED_NOT_SUPPORTED, "append");
    is_rc(memcached_prepend(memc, "layout", 6, "x", 1, 0, 0), MEMCACHED_NOT_SUPPORTED, "prepend");
    is_rc(memcached_cas(memc, "layout", 6, "x", 1, 0, 0, 1), MEMCACHED_NOT_SUPPORTED, "cas");
    is_rc(memcached_increment(memc, "layout", 6, 1, &number), MEMCACHED_NOT_SUPPORTED, "incr");
    is_rc(memcached_decrement(memc, "layout", 6, 1, &number), MEMCACHED_NOT_SUPPORTED, "decr");

    /* touch and exist go through every chunk */
    is_rc(memcached_set(memc, "layout", 6, value, 300000, 0, 0), MEMCACHED_SUCCESS, "set again");
    is_rc(memcached_touch(memc, "layout", 6, 100), MEMCACHED_SUCCESS, "coded touch");
    is_rc(memcached_exist(memc, "layout", 6), MEMCACHED_SUCCESS, "coded exist");
    is_rc(memcached_add(memc, "layout", 6, "x", 1, 0, 0),
          binary ? MEMCACHED_DATA_EXISTS : MEMCACHED_NOTSTORED, "coded add of an existing key");

    /* mget fetches whole values */
    const char *keys[] = {"layout", "nothing-here"};
    size_t lengths[] = {6, 12};
    is_rc(memcached_mget(memc, keys, lengths, 2), MEMCACHED_SUCCESS, "coded mget");
    size_t length = 0;
    char key[MEMCACHED_MAX_KEY];
    size_t key_length;
    char *got = memcached_fetch(memc, key, &key_length, &length, NULL, &rc);
    ok(got != NULL && length == 300000 && memcmp(got, value, length) == 0 && key_length == 6,
       "mget: the coded value, whole");
    free(got);
    got = memcached_fetch(memc, key, &key_length, &length, NULL, &rc);
    ok(got == NULL, "mget: the missing key is not fetched");
    free(value);
    memcached_free(memc);
}

/* The servers' cmd_get summed, once it stopped moving (a get's stragglers
 * may still be on their way when it returns): every 50 ms, until two
 * readings agree or 3 s passed. */
static uint64_t settled_gets(void)
{
    uint64_t last = UINT64_MAX;
    for (int tries = 0; tries < 60; tries++) {
        uint64_t total = 0;
        for (int i = 0; i < SERVERS; i++) {
            memcached_st *plain = plain_client(i);
            memcached_return_t rc;
            memcached_stat_st *stats = memcached_stat(plain, NULL, &rc);
            total += stats == NULL ? 0 : stats[0].cmd_get;
            memcached_stat_free(plain, stats);
            memcached_free(plain);
        }
        if (total == last)
            return total;
        last = total;
        usleep(50000);
    }
    return last;
}

/* A get of key asking `expect` servers in all, byte-exact. */
static void gets_asking(memcached_st *memc, const char *key, const char *value, size_t size,
                        uint64_t expect, const char *what)
{
    uint64_t before = settled_gets();
    size_t length = 0;
    memcached_return_t rc;
    char *got = memcached_get(memc, key, strlen(key), &length, NULL, &rc);
    uint64_t asked = settled_gets() - before;
    ok(rc == MEMCACHED_SUCCESS && length == size && memcmp(got, value, size) == 0 &&
           asked == expect,
       "%s: byte-exact, %llu servers asked (%llu expected)", what, (unsigned long long)asked,
       (unsigned long long)expect);
    free(got);
}

/* With a threshold, a get asks position 0 alone (a whole copy there
 * needs no other request) while the latest gets found whole copies, and
 * all K data chunks at once while they found coded values (one round
 * trip instead of two): it follows what the client reads. */
static void coded_or_whole_first(bool binary)
{
    memcached_st *memc = client(0, MEMCACHED_ERASURE_CODING(3, 2), binary);
    char small[100], *big = malloc(300000);
    fill_bytes(small, sizeof(small), 31);
    fill_bytes(big, 300000, 32);
    is_rc(memcached_set(memc, "guess-small", 11, small, sizeof(small), 0, 0), MEMCACHED_SUCCESS,
          "a whole-copy value stored");
    is_rc(memcached_set(memc, "guess-big", 9, big, 300000, 0, 0), MEMCACHED_SUCCESS,
          "a coded value stored");
    gets_asking(memc, "guess-small", small, sizeof(small), 1, "whole copy, nothing read before");
    gets_asking(memc, "guess-big", big, 300000, 3, "coded, after a whole copy (chunk 0 first)");
    for (int i = 0; i < 3; i++)
        gets_asking(memc, "guess-big", big, 300000, 3, "coded, K data chunks");
    gets_asking(memc, "guess-small", small, sizeof(small), 3,
                "whole copy after coded values: K positions asked at once");
    gets_asking(memc, "guess-small", small, sizeof(small), 3, "whole copy, second");
    gets_asking(memc, "guess-small", small, sizeof(small), 1,
                "whole copy once the latest gets found whole copies: position 0 alone");
    free(big);
    memcached_free(memc);
}

/* The non-blocking calls on parent requests, and async copies that outlive
 * the call: they own their value. */
static void nonblocking_parents(bool binary)
{
    enum { WINDOW = 64, SIZE = 20000 };
    memcached_st *memc = client(0, MEMCACHED_ERASURE_CODING(3, 2), binary);
    memcached_request_st *reqs[WINDOW];
    char *buffers[WINDOW];
    char *expect = malloc(SIZE);
    for (int i = 0; i < WINDOW; i++) {
        reqs[i] = memcached_request_create(memc);
        buffers[i] = malloc(SIZE);
        fill_bytes(buffers[i], SIZE, 100 + (unsigned)i);
    }
    char key[64];
    int issued = 0;
    for (int i = 0; i < WINDOW; i++) {
        snprintf(key, sizeof(key), "nb-%d", i);
        issued += memcached_iset(memc, key, strlen(key), buffers[i], SIZE, 0, 0, reqs[i]) ==
                  MEMCACHED_SUCCESS;
    }
    int stored = 0;
    for (int i = 0; i < WINDOW; i++)
        stored += memcached_wait(memc, reqs[i]) == MEMCACHED_SUCCESS;
    ok(issued == WINDOW && stored == WINDOW, "64 coded isets in flight: all stored");
    char *into = malloc((size_t)WINDOW * SIZE);
    for (int i = 0; i < WINDOW; i++) {
        snprintf(key, sizeof(key), "nb-%d", i);
        memcached_iget(memc, key, strlen(key), into + (size_t)i * SIZE, SIZE, reqs[i]);
    }
    int exact = 0, polled = 0;
    for (int i = 0; i < WINDOW; i++) {
        while (memcached_test(memc, reqs[i]) == MEMCACHED_IN_PROGRESS)
            polled++;
        size_t length;
        const char *got = memcached_request_value(reqs[i], &length);
        exact += memcached_request_return(reqs[i]) == MEMCACHED_SUCCESS && length == SIZE &&
                 got == into + (size_t)i * SIZE && memcmp(got, buffers[i], SIZE) == 0;
    }
    ok(exact == WINDOW, "64 coded igets completed by memcached_test: byte-exact in place");
    memcached_bget(memc, "nb-1", 4, reqs[0]);
    size_t length;
    ok(memcached_wait(memc, reqs[0]) == MEMCACHED_SUCCESS &&
           memcmp(memcached_request_value(reqs[0], &length), buffers[1], SIZE) == 0 &&
           length == SIZE,
       "coded bget");
    char small[16];
    memcached_iget(memc, "nb-2", 4, small, sizeof(small), reqs[0]);
    is_rc(memcached_wait(memc, reqs[0]), MEMCACHED_E2BIG, "coded iget into a small buffer: E2BIG");
    memcached_request_value(reqs[0], &length);
    ok(length == SIZE, "E2BIG reports the full length");
    memcached_free(memc);

    /* async copies: the call returns at the first copy; the caller's buffer
     * is reused at once and the other copies still store the original */
    memcached_st *async = client(MEMCACHED_REPLICATION_ASYNC(3), 0, binary);
    fill_bytes(expect, SIZE, 7);
    memcpy(buffers[0], expect, SIZE);
    is_rc(memcached_iset(async, "async-own", 9, buffers[0], SIZE, 0, 0, reqs[1]), MEMCACHED_SUCCESS,
          "async iset issued");
    is_rc(memcached_wait(async, reqs[1]), MEMCACHED_SUCCESS, "async iset: primary stored");
    memset(buffers[0], 'X', SIZE); /* the caller's buffer is its own again */
    memcached_request_free(reqs[1]);
    reqs[1] = NULL;
    is_rc(memcached_wait_all(async), MEMCACHED_SUCCESS, "wait_all settles the other copies");
    int copies = 0;
    for (int i = 0; i < SERVERS; i++) {
        memcached_st *plain = plain_client(i);
        memcached_return_t rc;
        char *got = memcached_get(plain, "async-own", 9, &length, NULL, &rc);
        copies += rc == MEMCACHED_SUCCESS && is_copy(got, length, expect, SIZE);
        free(got);
        memcached_free(plain);
    }
    ok(copies == 3, "three exact copies, none from the reused buffer (%d)", copies);

    /* the same with copies that cannot have been sent when the call
     * returns: small socket buffers and every server but the primary
     * stopped; the copies take the value before the call completes */
    enum { BIG = 900000 };
    char *big = malloc(BIG), *big_expect = malloc(BIG);
    fill_bytes(big_expect, BIG, 11);
    memcpy(big, big_expect, BIG);
    memcached_behavior_set(async, MEMCACHED_BEHAVIOR_SOCKET_SEND_SIZE, 8192);
    memcached_return_t rc;
    const memcached_instance_st *primary = memcached_server_by_key(async, "async-big", 9, &rc);
    int stopped[SERVERS], stopped_count = 0;
    for (int i = 0; i < SERVERS; i++) {
        in_port_t port = memcached_server_port(primary);
        bool is_primary = servers[i].rdma_port != 0 ? port == servers[i].rdma_port
                          : servers[i].port != 0
                              ? port == servers[i].port
                              : strcmp(memcached_server_name(primary), servers[i].socket_path) == 0;
        if (!is_primary) {
            test_server_pause(&servers[i]);
            stopped[stopped_count++] = i;
        }
    }
    is_rc(memcached_iset(async, "async-big", 9, big, BIG, 0, 0, reqs[2]), MEMCACHED_SUCCESS,
          "async iset of 900000 bytes, copies' servers stopped");
    is_rc(memcached_wait(async, reqs[2]), MEMCACHED_SUCCESS, "completes with the primary stored");
    memset(big, 'Y', BIG);
    for (int i = 0; i < stopped_count; i++)
        test_server_resume(&servers[stopped[i]]);
    memcached_wait_all(async);
    copies = 0;
    for (int i = 0; i < SERVERS; i++) {
        memcached_st *plain = plain_client(i);
        char *got = memcached_get(plain, "async-big", 9, &length, NULL, &rc);
        copies += rc == MEMCACHED_SUCCESS && is_copy(got, length, big_expect, BIG);
        free(got);
        memcached_free(plain);
    }
    ok(copies == 3, "three exact copies of the value as it was when issued (%d)", copies);
    free(big_expect);
    free(big);
    memcached_free(async);

    for (int i = WINDOW; i > 0; i--) {
        memcached_request_free(reqs[i - 1]);
        free(buffers[i - 1]);
    }
    free(into);
    free(expect);
}

/* The other key calls on copies: exist, mget, delete, touch, and what is
 * refused. */
static void replicated_calls(bool binary)
{
    memcached_st *memc = client(MEMCACHED_REPLICATION_SYNC(3), 0, binary);
    is_rc(memcached_set(memc, "copied", 6, "value", 5, 0, 7), MEMCACHED_SUCCESS, "replicated set");
    is_rc(memcached_exist(memc, "copied", 6), MEMCACHED_SUCCESS, "replicated exist");
    is_rc(memcached_touch(memc, "copied", 6, 100), MEMCACHED_SUCCESS, "replicated touch");
    const char *keys[] = {"copied", "absent"};
    size_t lengths[] = {6, 6};
    is_rc(memcached_mget(memc, keys, lengths, 2), MEMCACHED_SUCCESS, "replicated mget");
    size_t length = 0;
    uint32_t flags = 0;
    memcached_return_t rc;
    char key[MEMCACHED_MAX_KEY];
    size_t key_length;
    char *got = memcached_fetch(memc, key, &key_length, &length, &flags, &rc);
    ok(got != NULL && length == 5 && flags == 7 && memcmp(got, "value", 5) == 0,
       "mget fetches the copy with its flags");
    free(got);
    got = memcached_fetch(memc, key, &key_length, &length, &flags, &rc);
    ok(got == NULL, "and nothing for the absent key");
    uint64_t number;
    is_rc(memcached_increment(memc, "copied", 6, 1, &number), MEMCACHED_NOT_SUPPORTED,
          "replicated incr refused");
    is_rc(memcached_append(memc, "copied", 6, "x", 1, 0, 0), MEMCACHED_NOT_SUPPORTED,
          "replicated append refused");
    is_rc(memcached_delete(memc, "copied", 6, 0), MEMCACHED_SUCCESS, "replicated delete");
    is_rc(memcached_exist(memc, "copied", 6), MEMCACHED_NOTFOUND, "gone from every copy");
    memcached_free(memc);
}

/* The non-blocking calls on replicated parents: isets in flight, igets into
 * the caller's buffers completed by memcached_test, bset and bget; then the
 * same reads with two of the five servers killed. */
static void replicated_nonblocking(uint64_t replication, bool binary, const char *what)
{
    enum { WINDOW = 16, SIZE = 3000 };
    memcached_st *memc = client(replication, 0, binary);
    memcached_request_st *reqs[WINDOW];
    char *buffers[WINDOW], *into = malloc((size_t)WINDOW * SIZE);
    char key[64];
    int issued = 0, stored = 0;
    for (int i = 0; i < WINDOW; i++) {
        reqs[i] = memcached_request_create(memc);
        buffers[i] = malloc(SIZE);
        fill_bytes(buffers[i], SIZE, 300 + (unsigned)i);
        snprintf(key, sizeof(key), "rnb-%d", i);
        issued += memcached_iset(memc, key, strlen(key), buffers[i], SIZE, 0, (uint32_t)i,
                                 reqs[i]) == MEMCACHED_SUCCESS;
    }
    for (int i = 0; i < WINDOW; i++)
        stored += memcached_wait(memc, reqs[i]) == MEMCACHED_SUCCESS;
    memcached_wait_all(memc);
    ok(issued == WINDOW && stored == WINDOW, "%s: 16 isets in flight, all stored", what);
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            test_server_stop(&servers[0], true);
            test_server_stop(&servers[2], true);
        }
        for (int i = 0; i < WINDOW; i++) {
            snprintf(key, sizeof(key), "rnb-%d", i);
            memcached_iget(memc, key, strlen(key), into + (size_t)i * SIZE, SIZE, reqs[i]);
        }
        int exact = 0;
        for (int i = 0; i < WINDOW; i++) {
            while (memcached_test(memc, reqs[i]) == MEMCACHED_IN_PROGRESS)
                ;
            size_t length;
            const char *got = memcached_request_value(reqs[i], &length);
            exact += memcached_request_return(reqs[i]) == MEMCACHED_SUCCESS && length == SIZE &&
                     got == into + (size_t)i * SIZE && memcmp(got, buffers[i], SIZE) == 0 &&
                     memcached_request_flags(reqs[i]) == (uint32_t)i;
        }
        ok(exact == WINDOW, "%s: 16 igets%s byte-exact in the caller's buffers (%d)", what,
           round == 1 ? " with 2 of 5 servers killed:" : ":", exact);
        memcached_bget(memc, "rnb-3", 5, reqs[0]);
        size_t length = 0;
        ok(memcached_wait(memc, reqs[0]) == MEMCACHED_SUCCESS &&
               memcmp(memcached_request_value(reqs[0], &length), buffers[3], SIZE) == 0 &&
               length == SIZE,
           "%s: bget%s", what, round == 1 ? " with 2 of 5 servers killed" : "");
    }
    test_server_restart(&servers[0]);
    test_server_restart(&servers[2]);
    /* bset copies the value at once: the buffer is the caller's again */
    memcpy(into, buffers[5], SIZE);
    is_rc(memcached_bset(memc, "rnb-b", 5, into, SIZE, 0, 0, reqs[1]), MEMCACHED_SUCCESS,
          "bset issued");
    memset(into, 'Z', SIZE);
    ok(memcached_wait(memc, reqs[1]) == MEMCACHED_SUCCESS, "%s: bset stored", what);
    memcached_wait_all(memc);
    size_t length = 0;
    memcached_return_t rc;
    char *got = memcached_get(memc, "rnb-b", 5, &length, NULL, &rc);
    ok(rc == MEMCACHED_SUCCESS && length == SIZE && memcmp(got, buffers[5], SIZE) == 0,
       "%s: the bset value as it was when issued", what);
    free(got);
    for (int i = WINDOW; i > 0; i--) {
        memcached_request_free(reqs[i - 1]);
        free(buffers[i - 1]);
    }
    free(into);
    memcached_free(memc);
}

/* The index in servers[] of the key's first server. */
static int first_server_of(memcached_st *memc, const char *key)
{
    memcached_return_t rc;
    const memcached_instance_st *first = memcached_server_by_key(memc, key, strlen(key), &rc);
    in_port_t port = memcached_server_port(first);
    for (int i = 0; i < SERVERS; i++)
        if (servers[i].rdma_port != 0 ? port == servers[i].rdma_port
            : servers[i].port != 0
                ? port == servers[i].port
                : strcmp(memcached_server_name(first), servers[i].socket_path) == 0)
            return i;
    return 0;
}

/* A server stopped (SIGSTOP), not dead: its connection stays open and
 * silent. Reads complete from the other servers once it has answered
 * nothing for the hedge timeout, long before the poll timeout (10 s here);
 * its requests stay in flight as stragglers that never touch the caller's
 * buffers and are reaped when it answers again. */
static void hung_server(bool binary)
{
    enum { KEYS = 6, SIZE = 20000, POLL_MS = 10000 };
    memcached_st *coded = client(0, MEMCACHED_ERASURE_CODING(3, 2), binary);
    memcached_st *copied = client(MEMCACHED_REPLICATION_SYNC(3), 0, binary);
    memcached_st *async = client(MEMCACHED_REPLICATION_ASYNC(3), 0, binary);
    memcached_behavior_set(coded, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, POLL_MS);
    memcached_behavior_set(copied, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, POLL_MS);
    memcached_behavior_set(async, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, POLL_MS);
    char *value[KEYS], *into = malloc((size_t)KEYS * SIZE), key[32];
    for (int i = 0; i < KEYS; i++) {
        value[i] = malloc(SIZE);
        fill_bytes(value[i], SIZE, 500 + (unsigned)i);
        snprintf(key, sizeof(key), "hung-%d", i);
        memcached_set(coded, key, strlen(key), value[i], SIZE, 0, 0);
        snprintf(key, sizeof(key), "hung-copy-%d", i);
        memcached_set(copied, key, strlen(key), value[i], SIZE, 0, 0);
    }
    /* the first server of hung-copy-0 holds a chunk of every coded key too
     * (5 servers, K + M = 5) */
    int stopped = first_server_of(copied, "hung-copy-0");
    /* connected to every server before one stops (an RDMA connect waits
     * for the server to accept: a stopped one never does) */
    memcached_set(async, "hung-copy-0", 11, value[0], SIZE, 0, 0);
    memcached_wait_all(async);
    test_server_pause(&servers[stopped]);
    memcached_request_st *reqs[KEYS];
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < KEYS; i++) {
        reqs[i] = memcached_request_create(coded);
        snprintf(key, sizeof(key), "hung-%d", i);
        memcached_iget(coded, key, strlen(key), into + (size_t)i * SIZE, SIZE, reqs[i]);
    }
    int exact = 0;
    for (int i = 0; i < KEYS; i++) {
        size_t length;
        exact += memcached_wait(coded, reqs[i]) == MEMCACHED_SUCCESS &&
                 memcached_request_value(reqs[i], &length) == into + (size_t)i * SIZE &&
                 length == SIZE && memcmp(into + (size_t)i * SIZE, value[i], SIZE) == 0;
    }
    int64_t took = elapsed_ms(&start);
    ok(exact == KEYS && took < POLL_MS / 2,
       "RS(3,2), a server stopped: %d coded igets byte-exact in %lld ms (poll timeout %d ms)",
       exact, (long long)took, POLL_MS);
    memset(into, 'Q', (size_t)KEYS * SIZE); /* the caller's buffers are its own again */

    clock_gettime(CLOCK_MONOTONIC, &start);
    int copies_exact = 0;
    for (int i = 0; i < KEYS; i++) {
        snprintf(key, sizeof(key), "hung-copy-%d", i);
        size_t length;
        memcached_return_t rc;
        char *got = memcached_get(copied, key, strlen(key), &length, NULL, &rc);
        copies_exact +=
            rc == MEMCACHED_SUCCESS && length == SIZE && memcmp(got, value[i], SIZE) == 0;
        free(got);
    }
    took = elapsed_ms(&start);
    ok(copies_exact == KEYS && took < POLL_MS / 2,
       "sync F=3, a server stopped: %d replicated gets byte-exact in %lld ms", copies_exact,
       (long long)took);
    clock_gettime(CLOCK_MONOTONIC, &start);
    is_rc(memcached_set(async, "hung-copy-0", 11, value[1], SIZE, 0, 0), MEMCACHED_SUCCESS,
          "async F=3, the first copy's server stopped: the set completes with another copy");
    took = elapsed_ms(&start);
    ok(took < POLL_MS / 2, "without waiting for the stopped server (%lld ms)", (long long)took);

    test_server_resume(&servers[stopped]);
    is_rc(memcached_wait_all(coded), MEMCACHED_SUCCESS, "the coded stragglers are reaped");
    memcached_wait_all(async);
    bool untouched = true;
    for (size_t i = 0; i < (size_t)KEYS * SIZE; i++)
        untouched = untouched && into[i] == 'Q';
    ok(untouched, "the stragglers never wrote into the caller's buffers");
    int exact_copies = 0;
    for (int i = 0; i < SERVERS; i++) {
        memcached_st *plain = plain_client(i);
        size_t length;
        memcached_return_t rc;
        char *got = memcached_get(plain, "hung-copy-0", 11, &length, NULL, &rc);
        exact_copies += rc == MEMCACHED_SUCCESS && is_copy(got, length, value[1], SIZE);
        free(got);
        memcached_free(plain);
    }
    ok(exact_copies == 3,
       "the async set's three copies, the stopped server's too, once it runs (%d)", exact_copies);

    /* without hedging, the poll timeout fails the stopped server first */
    memcached_behavior_set(coded, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT, 0);
    memcached_behavior_set(coded, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 500);
    test_server_pause(&servers[stopped]);
    exact = 0;
    for (int i = 0; i < 2; i++) {
        snprintf(key, sizeof(key), "hung-%d", i);
        size_t length;
        memcached_return_t rc;
        struct timespec get_start;
        clock_gettime(CLOCK_MONOTONIC, &get_start);
        char *got = memcached_get(coded, key, strlen(key), &length, NULL, &rc);
        bool good = rc == MEMCACHED_SUCCESS && length == SIZE && memcmp(got, value[i], SIZE) == 0;
        exact += good;
        if (!good)
            tap_diag("%s: rc %s, length %zu, %lld ms", key, memcached_strerror(NULL, rc), length,
                     (long long)elapsed_ms(&get_start));
        free(got);
    }
    ok(exact == 2, "hedging off: coded gets byte-exact after the poll timeout (%d)", exact);
    test_server_resume(&servers[stopped]);
    for (int i = KEYS; i > 0; i--) {
        memcached_request_free(reqs[i - 1]);
        free(value[i - 1]);
    }
    free(into);
    memcached_free(async);
    memcached_free(copied);
    memcached_free(coded);
}

/* A coded get that connects again, in the call, to a stopped server
 * whose connection the poll timeout closed (over RDMA a connect blocks
 * until CONNECT_TIMEOUT, here longer than the poll timeout) and asks the
 * next chunks after that connect failed: those requests get a poll timeout
 * of their own, the connect's wait is not silence of the servers asked
 * after it. The stopped server holds chunk 1 of the key (chunk 0 answers
 * first, then chunk 1 is asked); over the mixed cluster it is one reached
 * over RDMA. */
static void reconnect_after_poll_timeout(bool binary)
{
    enum { KEYS = 64, SIZE = 20000, POLL_MS = 500, CONNECT_MS = 1500 };
    memcached_st *writer = client(0, MEMCACHED_ERASURE_CODING(3, 2), binary);
    char *value = malloc(SIZE), key[32];
    int chosen = -1, stopped = -1;
    for (int i = 0; i < KEYS && chosen < 0; i++) {
        fill_bytes(value, SIZE, 700 + (unsigned)i);
        snprintf(key, sizeof(key), "chunk1-%d", i);
        memcached_set(writer, key, strlen(key), value, SIZE, 0, 0);
        int server_of[SERVERS] = {-1, -1, -1, -1, -1}; /* chunk index -> server */
        for (int j = 0; j < SERVERS; j++) {
            memcached_st *holder = plain_client(j);
            size_t length;
            memcached_return_t rc;
            char *item = memcached_get(holder, key, strlen(key), &length, NULL, &rc);
            if (rc == MEMCACHED_SUCCESS && length > 32 && memcmp(item, "RSc1", 4) == 0 &&
                (unsigned char)item[5] < SERVERS)
                server_of[(unsigned char)item[5]] = j;
            free(item);
            memcached_free(holder);
        }
        /* over the mixed cluster: chunk 1 over RDMA, chunks 2 and 3 (asked
         * after its connect) over sockets, whose replies no completion of
         * the sends announces */
        if (server_of[1] >= 0 &&
            (mode != OVER_MIXED || (transport_of(server_of[1]) == OVER_RDMA && server_of[2] >= 0 &&
                                    transport_of(server_of[2]) != OVER_RDMA && server_of[3] >= 0 &&
                                    transport_of(server_of[3]) != OVER_RDMA))) {
            chosen = i;
            stopped = server_of[1];
        }
    }
    memcached_free(writer);
    if (!ok(chosen >= 0, "a key whose chunk 1 is on server %d (%d)", stopped, chosen)) {
        free(value);
        return;
    }
    /* no spinning: chunk 0's reply wakes the sleeping pipeline, as on a
     * loaded machine, so the connect comes after the poll timeout's clock
     * started */
    setenv("LIBMEMCACHED_RDMA_SPIN_US", "0", 1);
    setenv("LIBMEMCACHED_SOCKET_SPIN_US", "0", 1);
    memcached_st *reader = client(0, MEMCACHED_ERASURE_CODING(3, 2), binary);
    memcached_behavior_set(reader, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT, 0);
    memcached_behavior_set(reader, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, POLL_MS);
    memcached_behavior_set(reader, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, CONNECT_MS);
    size_t length;
    memcached_return_t rc;
    free(memcached_get(reader, key, strlen(key), &length, NULL, &rc)); /* connected */
    unsetenv("LIBMEMCACHED_RDMA_SPIN_US");
    unsetenv("LIBMEMCACHED_SOCKET_SPIN_US");
    test_server_pause(&servers[stopped]);
    /* the first get times the connection out, the second connects again */
    int exact = 0;
    for (int round = 0; round < 2; round++) {
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        char *got = memcached_get(reader, key, strlen(key), &length, NULL, &rc);
        bool good = rc == MEMCACHED_SUCCESS && length == SIZE && memcmp(got, value, SIZE) == 0;
        exact += good;
        tap_diag("get %d with server %d stopped: rc %s, length %zu, %lld ms", round + 1, stopped,
                 memcached_strerror(NULL, rc), length, (long long)elapsed_ms(&start));
        free(got);
    }
    ok(exact == 2,
       "chunk 1 stopped, connect again (CONNECT_TIMEOUT %d ms > POLL_TIMEOUT %d ms): %d of 2 "
       "coded gets byte-exact",
       CONNECT_MS, POLL_MS, exact);
    test_server_resume(&servers[stopped]);
    memcached_free(reader);
    free(value);
}

/* Failures of copies are counted; synchronous writes say SOME_ERRORS. */
static void failure_counts(bool binary)
{
    memcached_st *sync = client(MEMCACHED_REPLICATION_SYNC(3), 0, binary);
    memcached_st *async = client(MEMCACHED_REPLICATION_ASYNC(3), 0, binary);
    memcached_st *coded = client(0, MEMCACHED_ERASURE_CODING(3, 2), binary);
    test_server_stop(&servers[0], true);
    int sync_some = 0, async_ok = 0, coded_some = 0;
    char key[32];
    static char coded_value[9000];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "count-%d", i);
        sync_some += memcached_set(sync, key, strlen(key), "v", 1, 0, 0) != MEMCACHED_SUCCESS;
        async_ok += memcached_set(async, key, strlen(key), "v", 1, 0, 0) == MEMCACHED_SUCCESS;
        coded_some += memcached_set(coded, key, strlen(key), coded_value, 9000, 0, 0) ==
                      MEMCACHED_SOME_ERRORS;
    }
    memcached_wait_all(async);
    uint64_t sync_failures = memcached_behavior_get(sync, MEMCACHED_BEHAVIOR_RESILIENCE_FAILURES);
    uint64_t async_failures = memcached_behavior_get(async, MEMCACHED_BEHAVIOR_RESILIENCE_FAILURES);
    ok(sync_some > 0 && (uint64_t)sync_some == sync_failures,
       "sync, one server dead: %d writes not on all copies, %llu failures counted", sync_some,
       (unsigned long long)sync_failures);
    ok(async_failures == sync_failures,
       "async: the same failures counted after wait_all (%llu), %d of 20 sets SUCCESS",
       (unsigned long long)async_failures, async_ok);
    ok(coded_some == 20, "coded sets with a server dead: SOME_ERRORS (%d of 20)", coded_some);
    is_rc(memcached_behavior_set(sync, MEMCACHED_BEHAVIOR_RESILIENCE_FAILURES, 0),
          MEMCACHED_SUCCESS, "failure count reset");
    ok(memcached_behavior_get(sync, MEMCACHED_BEHAVIOR_RESILIENCE_FAILURES) == 0, "count is 0");
    test_server_restart(&servers[0]);
    memcached_free(coded);
    memcached_free(async);
    memcached_free(sync);
}

static void configuration(void)
{
    char text[512];
    snprintf(text, sizeof(text), "--SERVER=127.0.0.1:%u --SERVER=127.0.0.1:%u --ERASURE-CODING=3,2",
             servers[0].port ? servers[0].port : 1, servers[1].port ? servers[1].port : 2);
    memcached_st *memc = memcached(text, strlen(text));
    ok(memc != NULL && memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING) ==
                           MEMCACHED_ERASURE_CODING(3, 2),
       "--ERASURE-CODING=3,2");
    is_rc(memcached_set(memc, "k", 1, "v", 1, 0, 0), MEMCACHED_INVALID_ARGUMENTS,
          "coding over fewer servers than K+M is refused");
    memcached_free(memc);
    memc = memcached("--SERVER=a --REPLICATION=async:3", 32);
    ok(memc != NULL && memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_REPLICATION) ==
                           MEMCACHED_REPLICATION_ASYNC(3),
       "--REPLICATION=async:3");
    is_rc(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING,
                                 MEMCACHED_ERASURE_CODING(3, 2)),
          MEMCACHED_INVALID_ARGUMENTS, "one scheme at a time");
    memcached_free(memc);
    memc = memcached("--SERVER=a --REPLICATION=sync:2 --ERASURE-CODING-THRESHOLD=100", 62);
    ok(memc != NULL &&
           memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_REPLICATION) ==
               MEMCACHED_REPLICATION_SYNC(2) &&
           memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD) == 100,
       "--REPLICATION=sync:2 --ERASURE-CODING-THRESHOLD=100");
    memcached_free(memc);
    memc = memcached_create(NULL);
    ok(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT) ==
           MEMCACHED_DEFAULT_RESILIENCE_HEDGE_TIMEOUT,
       "RESILIENCE_HEDGE_TIMEOUT defaults to %d ms", MEMCACHED_DEFAULT_RESILIENCE_HEDGE_TIMEOUT);
    ok(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD) ==
           MEMCACHED_DEFAULT_ERASURE_CODING_THRESHOLD,
       "ERASURE_CODING_THRESHOLD defaults to %d bytes", MEMCACHED_DEFAULT_ERASURE_CODING_THRESHOLD);
    memcached_free(memc);
    memc = memcached("--SERVER=a --RESILIENCE-HEDGE-TIMEOUT=250", 41);
    ok(memc != NULL &&
           memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT) == 250,
       "--RESILIENCE-HEDGE-TIMEOUT=250");
    memcached_free(memc);
    const char *bad[] = {"--REPLICATION=sync",    "--REPLICATION=both:3",  "--REPLICATION=sync:1",
                         "--REPLICATION=async:x", "--ERASURE-CODING=3",    "--ERASURE-CODING=1,2",
                         "--ERASURE-CODING=3,0",  "--ERASURE-CODING=30,5", "--ERASURE-CODING=3,2,1",
                         "--ERASURE-CODING"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[256];
        ok(libmemcached_check_configuration(bad[i], strlen(bad[i]), err, sizeof(err)) !=
               MEMCACHED_SUCCESS,
           "malformed %s refused", bad[i]);
    }
}

/* Over RDMA a connect to a stopped server waits CONNECT_TIMEOUT in the
 * call (the server's process must accept it). A client that has no
 * connection to server 0 when it stops pays that once: its reads then take
 * the server as an erasure instead of connecting again in every call
 * (RETRY_TIMEOUT is 0 here, so every call could). A read that connects
 * takes CONNECT_TIMEOUT (2 s) or more; one that does not takes far less,
 * even on the emulated device: at most one read may be that slow. The
 * loop gives up after 12 s. */
static void stopped_connects(bool binary)
{
    enum { CONNECT_MS = 2000, READS = 4, GIVE_UP_MS = 12000 };
    memcached_st *writer = client(0, MEMCACHED_ERASURE_CODING(3, 2), binary);
    largest = SIZE_MAX; /* coded: every value, the one over 1 MiB too */
    make_values(91);
    ok(write_all(writer, "stopconn") == VALUES, "stopped connects: written with every server up");
    memcached_free(writer);
    test_server_pause(&servers[0]);
    memcached_st *fresh = client(0, MEMCACHED_ERASURE_CODING(3, 2), binary);
    memcached_behavior_set(fresh, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, CONNECT_MS);
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int reads = 0, exact = 0, connecting = 0;
    int64_t slowest_other = 0;
    while (reads < READS * VALUES && elapsed_ms(&start) < GIVE_UP_MS) {
        int v = reads++ % VALUES;
        char key[64];
        key_of(key, sizeof(key), "stopconn", v);
        struct timespec one;
        clock_gettime(CLOCK_MONOTONIC, &one);
        size_t length;
        uint32_t flags;
        memcached_return_t rc;
        char *got = memcached_get(fresh, key, strlen(key), &length, &flags, &rc);
        int64_t took = elapsed_ms(&one);
        exact +=
            rc == MEMCACHED_SUCCESS && length == sizes[v] && memcmp(got, values[v], length) == 0;
        free(got);
        if (took >= CONNECT_MS)
            connecting++;
        else if (took > slowest_other)
            slowest_other = took;
    }
    ok(exact == READS * VALUES && connecting <= 1,
       "server 0 stopped, a client without a connection to it: %d of %d coded gets byte-exact, "
       "%d of them as slow as a connect (CONNECT_TIMEOUT %d ms, RETRY_TIMEOUT 0; the others "
       "within %lld ms; %lld ms in all)",
       exact, READS * VALUES, connecting, CONNECT_MS, (long long)slowest_other,
       (long long)elapsed_ms(&start));
    test_server_resume(&servers[0]);
    memcached_free(fresh);
}

static void run(enum transport transport, bool binary)
{
    if (!ok(start_servers(transport, binary), "%s: five servers", transport_name(transport)))
        return;
    if (!coding_built()) { /* replication only */
        tap_diag("erasure coding not built (no jerasure): its checks are skipped");
        replicated_calls(binary);
        test_servers_stop(servers, SERVERS);
        return;
    }
    if (transport == OVER_TCP && !binary)
        configuration();
    chunks_on_servers(binary);
    coded_or_whole_first(binary);
    nonblocking_parents(binary);
    replicated_nonblocking(MEMCACHED_REPLICATION_SYNC(3), binary, "sync F=3");
    replicated_nonblocking(MEMCACHED_REPLICATION_ASYNC(3), binary, "async F=3");
    replicated_calls(binary);
    hung_server(binary);
    reconnect_after_poll_timeout(binary);
    if (transport == OVER_RDMA || transport == OVER_MIXED) /* server 0 over RDMA */
        stopped_connects(binary);
    failure_counts(binary);
    test_servers_stop(servers, SERVERS);
}

int main(int argc, char **argv)
{
    if (!run_over_each_transport(argc, argv, run))
        return 1;
    return done_testing();
}
