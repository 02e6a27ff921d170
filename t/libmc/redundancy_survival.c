/* t/libmc/redundancy_survival.c: REPLICATION and ERASURE_CODING keep
 * values against real servers ($MC_SERVER) killed with SIGKILL, over TCP
 * and Unix sockets, and with --rdma (inside the Soft-RoCE guest, RXE_VM_ADDR
 * naming its RDMA address) over RDMA and over a mixed cluster of RDMA, TCP
 * and Unix servers: RS(3,2) on five servers keeps every value byte-exact
 * with any two servers dead and after they come back empty, fails clearly
 * with three dead, never decodes chunks that lie about their header or
 * mixes two writers' chunks; synchronous and asynchronous replication with
 * three copies lose nothing with any two servers dead and never return a
 * copy that lies. The calls themselves, stopped servers and configuration
 * are t/libmc/redundancy_calls.c's. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "test_util.h"
#include "redundancy_cluster.h"
#include "tap.h"

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

static void run(enum transport transport, bool binary)
{
    /* over RDMA the client speaks the binary protocol only, so these runs
     * cover what the text runs cover elsewhere */
    bool all = !binary || transport == OVER_RDMA || transport == OVER_MIXED;
    if (!ok(start_servers(transport, binary), "%s: five servers", transport_name(transport)))
        return;
    if (!coding_built()) { /* replication only */
        tap_diag("erasure coding not built (no jerasure): its checks are skipped");
        survive_pairs(MEMCACHED_REPLICATION_SYNC(3), 0, binary, "sync replication F=3");
        survive_pairs(MEMCACHED_REPLICATION_ASYNC(3), 0, binary, "async replication F=3");
        test_servers_stop(servers, SERVERS);
        return;
    }
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
    lying_copies(binary);
    test_servers_stop(servers, SERVERS);
}

int main(int argc, char **argv)
{
    if (!run_over_each_transport(argc, argv, run))
        return 1;
    return done_testing();
}
