/* t/libmc/redundancy.c: REPLICATION and ERASURE_CODING against real servers
 * ($MC_SERVER) killed with SIGKILL, over TCP and Unix sockets, and with
 * --rdma (inside the Soft-RoCE guest, RXE_VM_ADDR naming its RDMA address)
 * over RDMA and over a mixed cluster of RDMA, TCP and Unix servers: RS(3,2) on
 * five servers keeps every value byte-exact with any two servers dead and
 * after they come back empty, fails clearly with three dead, never decodes
 * chunks that lie about their header or mixes two writers' chunks;
 * synchronous and asynchronous replication with three copies lose nothing
 * with any two servers dead; the non-blocking calls work on parent
 * requests; configuration strings and behaviors. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "test_util.h"
#include "server.h"
#include "mcr/byteorder.h"
#include "tap.h"

#define SERVERS 5
#define VALUES 7
/* coded clients code values from 1 KiB on (below the library's default),
 * so the values of 4 and 5 KB and 100 KB are coded too */
#define CODED_FROM 1024

static const size_t sizes[VALUES] = {0, 10, 100, 4095, 5000, 100000, 1048576 + 3};
/* The coded clients' threshold: CODED_FROM, or 0 for a pass where every
 * value is coded (empty and short data chunks, whose padded ends are
 * coded apart from the rest) */
static uint64_t coded_from = CODED_FROM;

enum transport { OVER_TCP, OVER_UNIX, OVER_RDMA, OVER_MIXED };

static struct test_server servers[SERVERS];
static enum transport mode;
static const char *rdma_addr;
/* Values above the servers' item size limit (1 MiB) are stored only when
 * coded (in chunks of a third); copies skip them. */
static size_t largest = SIZE_MAX;

/* A mixed cluster: servers 0 and 3 over RDMA, 1 and 4 over TCP, 2 over a
 * Unix socket. */
static enum transport transport_of(int i)
{
    static const enum transport mixed[3] = {OVER_RDMA, OVER_TCP, OVER_UNIX};
    return mode == OVER_MIXED ? mixed[i % 3] : mode;
}

static bool start_servers(void)
{
    enum test_transport transports[SERVERS];
    for (int i = 0; i < SERVERS; i++) {
        enum transport t = transport_of(i);
        transports[i] = t == OVER_RDMA   ? TEST_OVER_RDMA
                        : t == OVER_UNIX ? TEST_OVER_UNIX
                                         : TEST_OVER_TCP;
    }
    return test_servers_start(servers, SERVERS, transports, rdma_addr);
}

static memcached_st *client(uint64_t replication, uint64_t coding, bool binary)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < SERVERS; i++)
        test_server_add_to(memc, &servers[i]);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 3000);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    /* writes here must say SUCCESS with every server up: a write leaves a
     * server that made no progress for four hedge timeouts behind, and a
     * loaded machine (sanitizers, the emulated guest) can keep a live
     * server off the processor for 400 ms */
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT, 1000);
    if (replication != 0)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REPLICATION, replication);
    if (coding != 0) {
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING, coding);
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD, coded_from);
    }
    return memc;
}

/* A client of one server alone, without any scheme. */
static memcached_st *plain_client(int i)
{
    memcached_st *memc = memcached_create(NULL);
    test_server_add_to(memc, &servers[i]);
    return memc;
}

/* A stored replicated copy: the 32-byte header of a whole copy (K = 1) of
 * a value of `length` bytes, then the value. */
static bool is_copy(const char *item, size_t item_length, const char *value, size_t length)
{
    uint64_t stored_length = item_length >= 32 ? mcr_le_get64(item + 8) : 0;
    return item_length == 32 + length && memcmp(item, "RSc1", 4) == 0 && item[6] == 1 &&
           stored_length == length && memcmp(item + 32, value, length) == 0;
}

static char *values[VALUES];

static void make_values(unsigned seed)
{
    for (int v = 0; v < VALUES; v++) {
        free(values[v]);
        values[v] = malloc(sizes[v] + 1);
        fill_bytes(values[v], sizes[v], seed + (unsigned)v);
    }
}

static void key_of(char *key, size_t size, const char *prefix, int v)
{
    snprintf(key, size, "%s-%d", prefix, v);
}

static int write_all(memcached_st *memc, const char *prefix)
{
    int stored = 0;
    for (int v = 0; v < VALUES; v++) {
        if (sizes[v] > largest) {
            stored++;
            continue;
        }
        char key[64];
        key_of(key, sizeof(key), prefix, v);
        memcached_return_t rc =
            memcached_set(memc, key, strlen(key), values[v], sizes[v], 0, (uint32_t)v);
        if (rc == MEMCACHED_SUCCESS)
            stored++;
        else
            tap_diag("%s: set of %zu bytes: %s", key, sizes[v], memcached_strerror(NULL, rc));
    }
    return stored;
}

/* Values read back byte-exact (with their flags). */
static int read_all(memcached_st *memc, const char *prefix)
{
    int exact = 0;
    for (int v = 0; v < VALUES; v++) {
        if (sizes[v] > largest) {
            exact++;
            continue;
        }
        char key[64];
        key_of(key, sizeof(key), prefix, v);
        size_t length;
        uint32_t flags;
        memcached_return_t rc;
        char *got = memcached_get(memc, key, strlen(key), &length, &flags, &rc);
        if (rc == MEMCACHED_SUCCESS && length == sizes[v] && flags == (uint32_t)v &&
            memcmp(got, values[v], length) == 0)
            exact++;
        else
            tap_diag("%s: rc %s, length %zu of %zu", key, memcached_strerror(NULL, rc),
                     rc == MEMCACHED_SUCCESS ? length : 0, sizes[v]);
        free(got);
    }
    return exact;
}

/* Which pairs of servers survive_pairs kills: every pair over TCP and Unix
 * sockets; over RDMA and the mixed cluster (where a server's start and its
 * connections cost seconds on an emulated device) four: each server once
 * at least, data and parity positions, and in the mixed cluster RDMA with
 * TCP, RDMA with RDMA, RDMA with Unix and Unix with TCP. */
static bool pair_wanted(int a, int b)
{
    if (mode == OVER_TCP || mode == OVER_UNIX)
        return true;
    return (a == 0 && b == 1) || (a == 2 && b == 3) || (a == 0 && b == 3) || (a == 2 && b == 4);
}

/* Every pair of servers killed, values read, the pair restarted empty and
 * read again. */
static void survive_pairs(uint64_t replication, uint64_t coding, bool binary, const char *what)
{
    int pairs = 0, exact_dead = 0, exact_back = 0;
    largest = coding != 0 ? SIZE_MAX : 1000000;
    for (int a = 0; a < SERVERS; a++) {
        for (int b = a + 1; b < SERVERS; b++) {
            if (!pair_wanted(a, b))
                continue;
            memcached_st *memc = client(replication, coding, binary);
            make_values((unsigned)(a * 10 + b));
            char prefix[32];
            snprintf(prefix, sizeof(prefix), "pair%d%d", a, b);
            int stored = write_all(memc, prefix);
            memcached_wait_all(memc);
            test_server_stop(&servers[a], true);
            test_server_stop(&servers[b], true);
            exact_dead += read_all(memc, prefix) == VALUES && stored == VALUES;
            /* back empty (over RDMA on new ports: a new client, which places
             * keys as the first did, by the servers' positions) */
            bool restarted =
                test_server_restart_fresh(&servers[a]) && test_server_restart_fresh(&servers[b]);
            if (!restarted)
                tap_diag("%s: servers %d and %d did not start again", prefix, a, b);
            memcached_free(memc);
            memc = client(replication, coding, binary);
            exact_back += restarted && read_all(memc, prefix) == VALUES;
            memcached_free(memc);
            pairs++;
        }
    }
    ok(exact_dead == pairs, "%s: 2 of 5 servers killed: every value byte-exact (%d of %d pairs)",
       what, exact_dead, pairs);
    ok(exact_back == pairs, "%s: killed servers restarted empty: every value byte-exact (%d of %d)",
       what, exact_back, pairs);
}

/* Three servers killed: coded values fail with a server error, never a
 * wrong value; small (replicated) values are either exact or an error. */
static void three_dead(bool binary)
{
    memcached_st *memc = client(0, MEMCACHED_ERASURE_CODING(3, 2), binary);
    make_values(77);
    write_all(memc, "three");
    for (int i = 0; i < 3; i++)
        test_server_stop(&servers[i], true);
    int wrong = 0, failed_coded = 0, coded = 0;
    for (int v = 0; v < VALUES; v++) {
        char key[64];
        key_of(key, sizeof(key), "three", v);
        size_t length;
        uint32_t flags;
        memcached_return_t rc;
        char *got = memcached_get(memc, key, strlen(key), &length, &flags, &rc);
        if (rc == MEMCACHED_SUCCESS && (length != sizes[v] || memcmp(got, values[v], length) != 0))
            wrong++;
        if (sizes[v] >= CODED_FROM) {
            coded++;
            failed_coded += rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND;
        }
        free(got);
    }
    ok(wrong == 0, "3 of 5 killed: no wrong value");
    ok(failed_coded == coded, "3 of 5 killed: every coded value fails with a server error (%d/%d)",
       failed_coded, coded);
    for (int i = 0; i < 3; i++)
        test_server_restart(&servers[i]);
    memcached_free(memc);
}

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

/* Bytes stored under a chunk's key by a plain client are never decoded. */
static void lying_chunks(bool binary)
{
    memcached_st *memc = client(0, MEMCACHED_ERASURE_CODING(3, 2), binary);
    size_t size = 90000;
    char *value = malloc(size);
    fill_bytes(value, size, 9);
    memcached_set(memc, "liar", 4, value, size, 0, 3);
    /* which server holds which chunk: read each one's header */
    char *chunk[SERVERS] = {0};
    size_t chunk_length[SERVERS] = {0};
    int index_at[SERVERS];
    for (int i = 0; i < SERVERS; i++) {
        memcached_st *plain = plain_client(i);
        memcached_return_t rc;
        chunk[i] = memcached_get(plain, "liar", 4, &chunk_length[i], NULL, &rc);
        index_at[i] = chunk[i] != NULL && chunk_length[i] >= 32 ? (unsigned char)chunk[i][5] : -1;
        memcached_free(plain);
    }
    int data0 = -1, data1 = -1, data2 = -1;
    for (int i = 0; i < SERVERS; i++) {
        data0 = index_at[i] == 0 ? i : data0;
        data1 = index_at[i] == 1 ? i : data1;
        data2 = index_at[i] == 2 ? i : data2;
    }
    if (!ok(data0 >= 0 && data1 >= 0 && data2 >= 0, "data chunks found on their servers"))
        return;
    memcached_st *p0 = plain_client(data0), *p1 = plain_client(data1), *p2 = plain_client(data2);
    struct {
        const char *what;
        const char *bytes;
        size_t length;
    } lies[3];
    char *altered = malloc(chunk_length[data0]);
    memcpy(altered, chunk[data0], chunk_length[data0]);
    altered[100] ^= 1; /* the payload changed, the header kept */
    lies[0].what = "garbage";
    lies[0].bytes = "hello, I am not a chunk";
    lies[0].length = 23;
    lies[1].what = "another chunk's header and payload";
    lies[1].bytes = chunk[data1];
    lies[1].length = chunk_length[data1];
    lies[2].what = "a true header with a changed payload";
    lies[2].bytes = altered;
    lies[2].length = chunk_length[data0];
    for (int l = 0; l < 3; l++) {
        memcached_set(p0, "liar", 4, lies[l].bytes, lies[l].length, 0, 0);
        size_t length;
        uint32_t flags;
        memcached_return_t rc;
        char *got = memcached_get(memc, "liar", 4, &length, &flags, &rc);
        ok(rc == MEMCACHED_SUCCESS && length == size && flags == 3 && memcmp(got, value, size) == 0,
           "data chunk 0 replaced by %s: decoded from the others, byte-exact", lies[l].what);
        free(got);
        /* into the caller's buffer, where data chunks land as they arrive
         * (a lying one too, until the value is rebuilt over it) */
        char *into = malloc(size);
        memset(into, '#', size);
        memcached_request_st *req = memcached_request_create(memc);
        memcached_iget(memc, "liar", 4, into, size, req);
        rc = memcached_wait(memc, req);
        ok(rc == MEMCACHED_SUCCESS && memcmp(into, value, size) == 0,
           "... and with iget into the caller's buffer");
        memcached_request_free(req);
        free(into);
    }
    /* three liars: not enough true chunks, and nothing decoded */
    memcached_set(p1, "liar", 4, "nope", 4, 0, 0);
    memcached_set(p2, "liar", 4, altered, chunk_length[data0], 0, 0);
    memcached_return_t rc;
    char *got = memcached_get(memc, "liar", 4, NULL, NULL, &rc);
    ok(got == NULL && rc == MEMCACHED_NOTFOUND, "three lying chunks: NOTFOUND, no value (%s)",
       memcached_strerror(NULL, rc));
    free(got);
    /* NUMBER_OF_REPLICAS must not read a raw chunk from another server */
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_NUMBER_OF_REPLICAS, 1);
    got = memcached_get(memc, "liar", 4, NULL, NULL, &rc);
    ok(got == NULL && rc == MEMCACHED_NOTFOUND, "with NUMBER_OF_REPLICAS too: NOTFOUND, no value");
    free(got);
    free(altered);
    for (int i = 0; i < SERVERS; i++)
        free(chunk[i]);
    memcached_free(p2);
    memcached_free(p1);
    memcached_free(p0);
    free(value);
    memcached_free(memc);
}

/* A writer of the concurrent-writers check: its own client in a thread of
 * its own (threads, not processes: an RDMA device context does not survive
 * fork). */
struct writer {
    pthread_t thread;
    int number;
    uint64_t replication, coding;
    bool binary;
    atomic_bool done;
};

enum { RACE_SIZE = 60000 };

static void *write_race(void *arg)
{
    struct writer *w = arg;
    memcached_st *memc = client(w->replication, w->coding, w->binary);
    uint64_t *value = malloc(RACE_SIZE);
    int writes = mode == OVER_TCP || mode == OVER_UNIX ? 150 : 40; /* emulated RDMA: slower */
    for (int n = 0; n < writes; n++) {
        uint64_t word = (uint64_t)(w->number + 1) << 32 | (uint64_t)n;
        for (size_t i = 0; i < RACE_SIZE / 8; i++)
            value[i] = word;
        memcached_set(memc, "race", 4, (const char *)value, RACE_SIZE, 0, 0);
    }
    free(value);
    memcached_free(memc);
    atomic_store(&w->done, true);
    return NULL;
}

/* Writers of one key in other threads while servers die and one comes back
 * empty: every read is one writer's whole value. Values are one 8-byte word
 * repeated. */
static void concurrent_writers(uint64_t replication, uint64_t coding, bool binary, const char *what)
{
    enum { WRITERS = 2, SIZE = RACE_SIZE };
    struct writer writers[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        writers[w] = (struct writer){
            .number = w, .replication = replication, .coding = coding, .binary = binary};
        atomic_init(&writers[w].done, false);
        pthread_create(&writers[w].thread, NULL, write_race, &writers[w]);
    }
    memcached_st *memc = client(replication, coding, binary);
    int reads = 0, whole = 0, mixed = 0, missed = 0, failed = 0;
    memcached_return_t first_failure = MEMCACHED_SUCCESS;
    /* 200 reads at least, and on while the writers write (slow devices) */
    int reads_at_least = mode == OVER_TCP || mode == OVER_UNIX ? 200 : 60;
    for (int n = 0; n < reads_at_least ||
                    (n < 2000 && !(atomic_load(&writers[0].done) && atomic_load(&writers[1].done)));
         n++) {
        if (n == reads_at_least / 5)
            test_server_stop(&servers[1], true);
        if (n == 2 * reads_at_least / 5)
            test_server_stop(&servers[3], true);
        if (n == 3 * reads_at_least / 5) /* back, empty, while the writers go on */
            test_server_restart(&servers[1]);
        size_t length;
        memcached_return_t rc;
        char *got = memcached_get(memc, "race", 4, &length, NULL, &rc);
        if (rc == MEMCACHED_SUCCESS) {
            reads++;
            bool same = length == SIZE;
            for (size_t i = 8; same && i < length; i += 8)
                same = memcmp(got, got + i, 8) == 0;
            whole += same;
            mixed += !same;
        } else if (rc == MEMCACHED_NOTFOUND) {
            missed++;
        } else {
            failed++;
            first_failure = first_failure == MEMCACHED_SUCCESS ? rc : first_failure;
        }
        free(got);
        usleep(1000);
    }
    if (failed > 0)
        tap_diag("%s: %d reads failed, the first with %s, %d missed", what, failed,
                 memcached_strerror(NULL, first_failure), missed);
    for (int w = 0; w < WRITERS; w++)
        pthread_join(writers[w].thread, NULL);
    ok(mixed == 0 && reads > 0,
       "%s: concurrent writers, 2 servers killed, one back empty: %d reads, %d whole, %d mixed",
       what, reads, whole, mixed);
    test_server_restart(&servers[3]);
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

/* Bytes stored under a replicated key by a plain client, or another
 * key's copy, are never returned: the next copy is read. */
static void lying_copies(bool binary)
{
    memcached_st *memc = client(MEMCACHED_REPLICATION_SYNC(3), 0, binary);
    char value[2000];
    fill_bytes(value, sizeof(value), 21);
    memcached_set(memc, "copy-liar", 9, value, sizeof(value), 0, 5);
    memcached_return_t rc;
    /* which servers hold copies 0, 1 and 2: read each one's header */
    int holder[3] = {-1, -1, -1};
    for (int i = 0; i < SERVERS; i++) {
        memcached_st *plain = plain_client(i);
        size_t length = 0;
        char *item = memcached_get(plain, "copy-liar", 9, &length, NULL, &rc);
        if (item != NULL && is_copy(item, length, value, sizeof(value)) &&
            (unsigned char)item[5] < 3)
            holder[(unsigned char)item[5]] = i;
        free(item);
        memcached_free(plain);
    }
    if (!ok(holder[0] >= 0 && holder[1] >= 0 && holder[2] >= 0,
            "replicated copies 0, 1, 2 found with their headers"))
        return;
    memcached_st *first = plain_client(holder[0]), *second = plain_client(holder[1]);
    size_t item_length = 0, second_length = 0;
    char *item = memcached_get(first, "copy-liar", 9, &item_length, NULL, &rc);
    char *second_copy = memcached_get(second, "copy-liar", 9, &second_length, NULL, &rc);
    memcached_free(second);
    if (item != NULL && item_length > 40)
        item[40] ^= 1;
    struct {
        const char *what;
        const char *bytes;
        size_t length;
    } lies[] = {
        {"garbage", "not a copy", 10},
        {"a true header over a changed byte", item, item_length},
        {"copy 1 (a true copy at the wrong place)", second_copy, second_length},
    };
    for (size_t l = 0; l < sizeof(lies) / sizeof(lies[0]); l++) {
        memcached_set(first, "copy-liar", 9, lies[l].bytes, lies[l].length, 0, 0);
        size_t length;
        uint32_t flags;
        char *got = memcached_get(memc, "copy-liar", 9, &length, &flags, &rc);
        ok(rc == MEMCACHED_SUCCESS && length == sizeof(value) && flags == 5 &&
               memcmp(got, value, length) == 0,
           "copy 0 replaced by %s: copy 1 read, byte-exact", lies[l].what);
        free(got);
    }
    /* every copy a lie: a miss, never the lie */
    for (int c = 1; c < 3; c++) {
        memcached_st *p = plain_client(holder[c]);
        memcached_set(p, "copy-liar", 9, "not a copy", 10, 0, 0);
        memcached_free(p);
    }
    char *got = memcached_get(memc, "copy-liar", 9, NULL, NULL, &rc);
    is_rc(rc, MEMCACHED_NOTFOUND, "every copy replaced: NOTFOUND, never the bytes");
    free(got);
    free(second_copy);
    free(item);
    memcached_free(first);
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

/* Whether the library was built with erasure coding (jerasure). */
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

static bool coding_built(void)
{
    memcached_st *memc = memcached_create(NULL);
    memcached_return_t rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING,
                                                   MEMCACHED_ERASURE_CODING(3, 2));
    memcached_free(memc);
    return rc != MEMCACHED_NOT_SUPPORTED;
}

static void run(enum transport transport, bool binary)
{
    static const char *const names[] = {"tcp", "unix", "rdma", "mixed rdma+tcp+unix"};
    mode = transport;
    const char *how = names[transport];
    /* over RDMA the client speaks the binary protocol only, so these runs
     * cover what the text runs cover elsewhere */
    bool all = !binary || transport == OVER_RDMA || transport == OVER_MIXED;
    tap_diag("over %s, %s protocol", how, binary ? "binary" : "text");
    if (!ok(start_servers(), "%s: five servers", how))
        return;
    if (!coding_built()) { /* replication only */
        tap_diag("erasure coding not built (no jerasure): its checks are skipped");
        survive_pairs(MEMCACHED_REPLICATION_SYNC(3), 0, binary, "sync replication F=3");
        survive_pairs(MEMCACHED_REPLICATION_ASYNC(3), 0, binary, "async replication F=3");
        replicated_calls(binary);
        test_servers_stop(servers, SERVERS);
        return;
    }
    if (transport == OVER_TCP && !binary)
        configuration();
    chunks_on_servers(binary);
    coded_or_whole_first(binary);
    survive_pairs(0, MEMCACHED_ERASURE_CODING(3, 2), binary, "RS(3,2)");
    if (transport == OVER_TCP) {
        coded_from = 0;
        survive_pairs(0, MEMCACHED_ERASURE_CODING(3, 2), binary, "RS(3,2), every value coded");
        coded_from = CODED_FROM;
    }
    three_dead(binary);
    lying_chunks(binary);
    if (all) {
        survive_pairs(MEMCACHED_REPLICATION_SYNC(3), 0, binary, "sync replication F=3");
        survive_pairs(MEMCACHED_REPLICATION_ASYNC(3), 0, binary, "async replication F=3");
        concurrent_writers(0, MEMCACHED_ERASURE_CODING(3, 2), binary, "RS(3,2)");
        concurrent_writers(MEMCACHED_REPLICATION_SYNC(3), 0, binary, "sync F=3");
        concurrent_writers(MEMCACHED_REPLICATION_ASYNC(3), 0, binary, "async F=3");
    }
    nonblocking_parents(binary);
    replicated_nonblocking(MEMCACHED_REPLICATION_SYNC(3), binary, "sync F=3");
    replicated_nonblocking(MEMCACHED_REPLICATION_ASYNC(3), binary, "async F=3");
    replicated_calls(binary);
    lying_copies(binary);
    hung_server(binary);
    reconnect_after_poll_timeout(binary);
    if (transport == OVER_RDMA || transport == OVER_MIXED) /* server 0 over RDMA */
        stopped_connects(binary);
    failure_counts(binary);
    test_servers_stop(servers, SERVERS);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "--rdma") == 0) {
        rdma_addr = getenv("RXE_VM_ADDR");
        if (rdma_addr == NULL || rdma_addr[0] == '\0') {
            tap_diag("--rdma needs RXE_VM_ADDR, the address of an RDMA device");
            return 1;
        }
        run(OVER_RDMA, true);
        run(OVER_MIXED, true);
    } else {
        run(OVER_TCP, false);
        run(OVER_TCP, true);
        run(OVER_UNIX, false);
    }
    for (int v = 0; v < VALUES; v++)
        free(values[v]);
    return done_testing();
}
