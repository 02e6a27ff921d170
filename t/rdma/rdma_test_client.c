/* t/rdma/rdma_test_client.c: libmemcached-rdma over rdma://host:port against
 * memcached-rdma, inside the Soft-RoCE guest:
 *   rdma_test_client SERVER_BINARY
 *
 * The same scenario of libmemcached calls runs over TCP and over RDMA, both
 * with the binary protocol, and must give the same transcript (the text
 * protocol's and each call's return code: rdma_test_results); then server strings and
 * config strings with rdma://, 1,000 non-blocking requests in flight, a
 * mixed cluster (one server over TCP, one over RDMA), several client
 * processes at once, and a server killed with requests in flight (they
 * complete with MEMCACHED_CONNECTION_FAILURE; after a restart the next call
 * reconnects; killed mid-request over rdma+rc:// and rdma+ud://, the error
 * messages name the RDMA cause).
 *
 * With MC_RDMA_SCHEME=rdma+ud the whole suite runs over UD: the checks of
 * RC's rendezvous and of values written straight into iget buffers check
 * instead that UD used neither (values come in messages over UD), the
 * connection counts are rdma_ud_peers, and the server's UD keepalive is
 * 10 s (the client sets up a peer unused for 5 s anew) so that a killed
 * client is freed within the test. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>
#include <libmemcached/nonblocking.h>

#include "mcr/rdma_wire.h"
#include "t/rdma/mc_server.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

/* ---- one scenario, written down as a transcript ----------------------------------- */
struct transcript {
    char *text;
    size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void note(struct transcript *t, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (t->len + (size_t)n + 2 > t->cap) {
        t->cap = (t->cap + (size_t)n + 2) * 2;
        t->text = realloc(t->text, t->cap);
    }
    memcpy(t->text + t->len, line, (size_t)n);
    t->len += (size_t)n;
    t->text[t->len++] = '\n';
    t->text[t->len] = '\0';
}

static void fill(char *buf, size_t len, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 7;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (char)x;
    }
}

static void get_note(struct transcript *t, memcached_st *m, const char *key, const char *want,
                     size_t want_len)
{
    size_t len = 0;
    uint32_t flags = 0;
    memcached_return_t rc;
    char *v = memcached_get(m, key, strlen(key), &len, &flags, &rc);
    bool same = v != NULL && want != NULL && len == want_len && memcmp(v, want, len) == 0;
    note(t, "get %s: %s len=%zu flags=%u %s", key, memcached_strerror(m, rc), len, flags,
         want ? (same ? "value ok" : "VALUE DIFFERS") : "");
    free(v);
}

/* EAGER: the largest payload of one message with the server's default
 * 8 KiB buffers. E-29..E-27: a get reply frame (24 + 4 + value) at the eager
 * payload -1/0/+1 (E-33..E-31: a set request frame of a short key around
 * it); 1048547..1048549 the same around the client's 1 MiB landing buffer
 * for RDMA WRITE replies */
#define EAGER (8192 - MCR_RDMA_HDR_MAX)
static const size_t sizes[] = {
    0,          1,          100,       EAGER - 33, EAGER - 32, EAGER - 31, EAGER - 29,
    EAGER - 28, EAGER - 27, EAGER - 1, EAGER,      EAGER + 1,  16384,      65536,
    100000,     1048547,    1048548,   1048549,    1048576,    2000000,    8388608};

static void scenario(memcached_st *m, struct transcript *t)
{
    memcached_return_t rc;
    note(t, "flush: %s", memcached_strerror(m, memcached_flush(m, 0)));
    note(t, "set a: %s", memcached_strerror(m, memcached_set(m, "a", 1, "alpha", 5, 0, 3)));
    get_note(t, m, "a", "alpha", 5);
    note(t, "add a: %s", memcached_strerror(m, memcached_add(m, "a", 1, "x", 1, 0, 0)));
    note(t, "add b: %s", memcached_strerror(m, memcached_add(m, "b", 1, "beta", 4, 0, 0)));
    note(t, "replace b: %s", memcached_strerror(m, memcached_replace(m, "b", 1, "BETA", 4, 0, 0)));
    note(t, "replace z: %s", memcached_strerror(m, memcached_replace(m, "z", 1, "x", 1, 0, 0)));
    note(t, "append a: %s", memcached_strerror(m, memcached_append(m, "a", 1, "+", 1, 0, 0)));
    note(t, "prepend a: %s", memcached_strerror(m, memcached_prepend(m, "a", 1, "-", 1, 0, 0)));
    get_note(t, m, "a", "-alpha+", 7);
    note(t, "exist a: %s", memcached_strerror(m, memcached_exist(m, "a", 1)));
    note(t, "exist z: %s", memcached_strerror(m, memcached_exist(m, "z", 1)));
    note(t, "touch a: %s", memcached_strerror(m, memcached_touch(m, "a", 1, 100)));
    note(t, "delete b: %s", memcached_strerror(m, memcached_delete(m, "b", 1, 0)));
    note(t, "delete b: %s", memcached_strerror(m, memcached_delete(m, "b", 1, 0)));
    get_note(t, m, "b", NULL, 0);
    uint64_t v = 0;
    rc = memcached_increment_with_initial(m, "n", 1, 5, 10, 0, &v);
    note(t, "incr_with_initial n: %s %llu", memcached_strerror(m, rc), (unsigned long long)v);
    rc = memcached_increment(m, "n", 1, 5, &v);
    note(t, "incr n: %s %llu", memcached_strerror(m, rc), (unsigned long long)v);
    rc = memcached_decrement(m, "n", 1, 3, &v);
    note(t, "decr n: %s %llu", memcached_strerror(m, rc), (unsigned long long)v);
    rc = memcached_increment(m, "a", 1, 1, &v);
    note(t, "incr a (not a number): %s", memcached_strerror(m, rc));
    rc = memcached_increment(m, "zz", 2, 1, &v);
    note(t, "incr zz (missing): %s", memcached_strerror(m, rc));

    /* cas */
    const char *keys[] = {"a", "n", "missing1", "k3", "missing2"};
    size_t klen[] = {1, 1, 8, 2, 8};
    memcached_set(m, "k3", 2, "three", 5, 0, 0);
    rc = memcached_mget(m, keys, klen, 5);
    note(t, "mget: %s", memcached_strerror(m, rc));
    uint64_t cas_a = 0;
    for (int i = 0; i < 10; i++) {
        memcached_result_st *r = memcached_fetch_result(m, NULL, &rc);
        if (r == NULL)
            break;
        note(t, "fetched %.*s len=%zu", (int)memcached_result_key_length(r),
             memcached_result_key_value(r), memcached_result_length(r));
        if (memcached_result_key_length(r) == 1 && memcached_result_key_value(r)[0] == 'a')
            cas_a = memcached_result_cas(r);
        memcached_result_free(r);
    }
    note(t, "fetch end: %s", memcached_strerror(m, rc));
    rc = memcached_cas(m, "a", 1, "cas!", 4, 0, 0, cas_a);
    note(t, "cas a (right): %s", memcached_strerror(m, rc));
    rc = memcached_cas(m, "a", 1, "cas?", 4, 0, 0, cas_a);
    note(t, "cas a (stale): %s", memcached_strerror(m, rc));
    get_note(t, m, "a", "cas!", 4);
    rc = memcached_set_by_key(m, "group", 5, "bk", 2, "bykey", 5, 0, 0);
    char *bk = memcached_get_by_key(m, "group", 5, "bk", 2, &(size_t){0}, &(uint32_t){0}, &rc);
    note(t, "by_key: %s %s", memcached_strerror(m, rc), bk ? bk : "(null)");
    free(bk);
    note(t, "version: %s", memcached_strerror(m, memcached_version(m)));
    memcached_stat_st *st = memcached_stat(m, NULL, &rc);
    char *pid = st ? memcached_stat_get_value(m, st, "pid", &rc) : NULL;
    note(t, "stat: %s pid %s", memcached_strerror(m, rc), pid ? "present" : "missing");
    free(pid);
    memcached_stat_free(m, st);

    /* value sizes around one eager message and beyond */
    char *buf = malloc(8388608);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        fill(buf, sizes[i], (unsigned)i);
        rc = memcached_set(m, "sz", 2, buf, sizes[i], 0, (uint32_t)i);
        note(t, "set %zu bytes: %s", sizes[i], memcached_strerror(m, rc));
        get_note(t, m, "sz", buf, sizes[i]);
    }
    free(buf);

    /* an mget of several large values: each reply needs the landing
     * buffer again while no request goes out */
    buf = malloc(300000);
    const char *big_keys[] = {"big1", "big2", "big3", "big4"};
    size_t big_len[] = {4, 4, 4, 4};
    for (int i = 0; i < 4; i++) {
        fill(buf, 300000, 70 + (unsigned)i);
        memcached_set(m, big_keys[i], 4, buf, 300000 - (size_t)i, 0, 0);
    }
    rc = memcached_mget(m, big_keys, big_len, 4);
    int intact = 0, fetched = 0;
    for (int i = 0; i < 8; i++) {
        memcached_result_st *r = memcached_fetch_result(m, NULL, &rc);
        if (r == NULL)
            break;
        fetched++;
        int k = memcached_result_key_value(r)[3] - '1';
        fill(buf, 300000, 70 + (unsigned)k);
        if (k >= 0 && k < 4 && memcached_result_length(r) == 300000 - (size_t)k &&
            memcmp(memcached_result_value(r), buf, memcached_result_length(r)) == 0)
            intact++;
        memcached_result_free(r);
    }
    note(t, "mget of 4 large values: %d fetched, %d intact, end %s", fetched, intact,
         memcached_strerror(m, rc));
    free(buf);

    /* noreply sets, then a get sees the last */
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    for (int i = 0; i < 100; i++) {
        char val[16];
        int n = snprintf(val, sizeof(val), "v%d", i);
        memcached_set(m, "nr", 2, val, (size_t)n, 0, 0);
    }
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 0);
    get_note(t, m, "nr", "v99", 3);
}

/* 1,000 non-blocking requests in flight: isets, then igets into caller
 * buffers, then bgets. Returns the number of mismatches. */
static int many_in_flight(memcached_st *m, int count)
{
    memcached_request_st **reqs = calloc((size_t)count, sizeof(*reqs));
    char(*bufs)[64] = calloc((size_t)count, 64);
    int bad = 0;
    for (int i = 0; i < count; i++) {
        reqs[i] = memcached_request_create(m);
        char key[32];
        int kl = snprintf(key, sizeof(key), "nb%d", i);
        /* iset is zero-copy: the value stays put until the request completed */
        int vl = snprintf(bufs[i], sizeof(bufs[i]), "value-%d", i * 7);
        if (memcached_iset(m, key, (size_t)kl, bufs[i], (size_t)vl, 0, (uint32_t)i, reqs[i]) !=
            MEMCACHED_SUCCESS)
            bad++;
    }
    if (memcached_wait_all(m) != MEMCACHED_SUCCESS)
        bad++;
    for (int i = 0; i < count; i++)
        if (memcached_request_return(reqs[i]) != MEMCACHED_SUCCESS)
            bad++;
    for (int i = 0; i < count; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "nb%d", i);
        memcached_iget(m, key, (size_t)kl, bufs[i], sizeof(bufs[i]), reqs[i]);
    }
    for (int i = count; i-- > 0;) {
        char val[32];
        int vl = snprintf(val, sizeof(val), "value-%d", i * 7);
        size_t len = 0;
        if (memcached_wait(m, reqs[i]) != MEMCACHED_SUCCESS)
            bad++;
        const char *v = memcached_request_value(reqs[i], &len);
        if (v != bufs[i] || len != (size_t)vl || memcmp(v, val, len) != 0 ||
            memcached_request_flags(reqs[i]) != (uint32_t)i)
            bad++;
    }
    for (int i = 0; i < count; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "nb%d", i);
        memcached_bget(m, key, (size_t)kl, reqs[i]);
    }
    memcached_wait_all(m);
    for (int i = 0; i < count; i++) {
        char val[32];
        int vl = snprintf(val, sizeof(val), "value-%d", i * 7);
        size_t len = 0;
        const char *v = memcached_request_value(reqs[i], &len);
        if (memcached_request_return(reqs[i]) != MEMCACHED_SUCCESS || v == NULL ||
            len != (size_t)vl || memcmp(v, val, len) != 0)
            bad++;
    }
    for (int i = 0; i < count; i++)
        memcached_request_free(reqs[i]);
    free(bufs);
    free(reqs);
    return bad;
}

/* One value of a stats snapshot; -1 when missing. */
static long stat_of(memcached_st *m, memcached_stat_st *st, const char *name)
{
    memcached_return_t rc;
    char *v = st ? memcached_stat_get_value(m, st, name, &rc) : NULL;
    long n = v ? atol(v) : -1;
    free(v);
    return n;
}

/* The server's count of open RDMA connections of the scheme under test. */
static const char *conns_stat(void)
{
    return rdma_over_ud() ? "rdma_ud_peers" : "rdma_curr_connections";
}

static long rdma_stat(memcached_st *m, const char *name)
{
    memcached_return_t rc;
    memcached_stat_st *st = memcached_stat(m, NULL, &rc);
    long n = stat_of(m, st, name);
    memcached_stat_free(m, st);
    return n;
}

/* A set larger than one message: its head (header, extras, key) rides on
 * the RNDV_READ, so the server READs the value once, straight into the
 * item, with no READ first to learn what the request is. */
static void one_read_per_large_set(memcached_st *m)
{
    static const size_t set_sizes[] = {65536, 524288};
    bool all = true;
    char why[256] = "";
    for (size_t i = 0; i < sizeof(set_sizes) / sizeof(set_sizes[0]); i++) {
        size_t len = set_sizes[i];
        char *value = malloc(len);
        if (value == NULL)
            tap_bail("out of memory");
        for (size_t k = 0; k < len; k++)
            value[k] = (char)('a' + (k * 7 + i) % 26);
        long reads0 = rdma_stat(m, "rdma_rendezvous_reads");
        long direct0 = rdma_stat(m, "rdma_zero_copy_reads");
        memcached_return_t rc = memcached_set(m, "one-read", 8, value, len, 0, 0);
        long reads = rdma_stat(m, "rdma_rendezvous_reads") - reads0;
        long direct = rdma_stat(m, "rdma_zero_copy_reads") - direct0;
        size_t got_len = 0;
        uint32_t flags;
        memcached_return_t grc;
        char *got = memcached_get(m, "one-read", 8, &got_len, &flags, &grc);
        bool intact = got != NULL && got_len == len && memcmp(got, value, len) == 0;
        long want_reads = rdma_over_ud() ? 0 : 1; /* UD: no rendezvous, messages */
        if (rc != MEMCACHED_SUCCESS || reads != want_reads || direct != want_reads || !intact) {
            all = false;
            snprintf(why, sizeof(why), ": %zu B: %s, %ld READs, %ld into the item, %s", len,
                     memcached_strerror(m, rc), reads, direct, intact ? "intact" : "wrong");
        }
        free(got);
        free(value);
    }
    if (rdma_over_ud())
        tap_ok(all, "a 64 KiB and a 512 KiB set over UD arrive intact in messages, no RDMA READ%s",
               why);
    else
        tap_ok(all, "a 64 KiB and a 512 KiB set each take one RDMA READ, straight into the item%s",
               why);
}

/* The server's posts so far: doorbells and work requests, from one stats
 * call. */
struct posts {
    long doorbells, work_requests;
};

static struct posts server_posts(memcached_st *m)
{
    struct posts p = {-1, -1};
    memcached_return_t rc;
    memcached_stat_st *st = memcached_stat(m, NULL, &rc);
    char *db = st ? memcached_stat_get_value(m, st, "rdma_doorbells", &rc) : NULL;
    char *wr = st ? memcached_stat_get_value(m, st, "rdma_work_requests", &rc) : NULL;
    if (db != NULL && wr != NULL)
        p = (struct posts){atol(db), atol(wr)};
    free(db);
    free(wr);
    memcached_stat_free(m, st);
    return p;
}

/* What a large request costs the server in posts, beyond a stats reply's
 * own: a 64 KiB set two work requests in two doorbells (the value's READ;
 * the reply, which carries the region's READ_DONE), and a 64 KiB get two
 * in one (the value's WRITE; its RNDV_DONE, which carries the reply's
 * header), since what one pass over the completions posts goes to the
 * device together. */
static void posts_per_large_request(memcached_st *m)
{
    if (rdma_over_ud()) {
        tap_skip("RC only: the work requests and doorbells of RC's rendezvous (UD's costs are "
                 "rdma_test_ud's)");
        return;
    }
    size_t len = 65536;
    char *value = malloc(len);
    if (value == NULL)
        tap_bail("out of memory");
    for (size_t k = 0; k < len; k++)
        value[k] = (char)('A' + k % 23);
    struct posts p0 = server_posts(m), p1 = server_posts(m);
    long stats_db = p1.doorbells - p0.doorbells, stats_wr = p1.work_requests - p0.work_requests;
    memcached_return_t rc = memcached_set(m, "posts", 5, value, len, 0, 0);
    struct posts p2 = server_posts(m);
    size_t got_len = 0;
    uint32_t flags;
    memcached_return_t grc;
    char *got = memcached_get(m, "posts", 5, &got_len, &flags, &grc);
    struct posts p3 = server_posts(m);
    bool intact = got != NULL && got_len == len && memcmp(got, value, len) == 0;
    long set_db = p2.doorbells - p1.doorbells - stats_db;
    long set_wr = p2.work_requests - p1.work_requests - stats_wr;
    long get_db = p3.doorbells - p2.doorbells - stats_db;
    long get_wr = p3.work_requests - p2.work_requests - stats_wr;
    tap_ok(rc == MEMCACHED_SUCCESS && intact && p0.doorbells >= 0 && set_wr == 2 && set_db == 2 &&
               get_wr == 2 && get_db == 1,
           "a 64 KiB set posts %ld work requests in %ld doorbells (READ; reply with READ_DONE), "
           "a 64 KiB get %ld in %ld (WRITE; RNDV_DONE with the reply's header); the value intact",
           set_wr, set_db, get_wr, get_db);
    free(got);
    free(value);
}

/* Quiet large sets produce no reply to carry READ_DONE: the server sends
 * it on its own, or the client's request buffer would stay busy and the
 * next large request would wait for ever. */
static void quiet_large_sets(memcached_st *m)
{
    memcached_st *q = memcached_clone(NULL, m);
    size_t len = 65536;
    char *value = malloc(len);
    if (q == NULL || value == NULL)
        tap_bail("out of memory");
    memcached_behavior_set(q, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        memset(value, 'p' + i, len);
        if (memcached_set(q, "quiet-large", 11, value, len, 0, (uint32_t)i) != MEMCACHED_SUCCESS)
            bad++;
    }
    size_t got_len = 0;
    uint32_t flags = 0;
    memcached_return_t rc;
    char *got = memcached_get(q, "quiet-large", 11, &got_len, &flags, &rc);
    bool last = got != NULL && got_len == len && flags == 2 && memcmp(got, value, len) == 0;
    tap_ok(bad == 0 && last, "three quiet 64 KiB sets in a row, then a get: the last value (%s)",
           memcached_strerror(m, rc));
    free(got);
    free(value);
    memcached_free(q);
}

/* igets into caller buffers larger than one message: the server writes each
 * value that is worth it straight into the caller's buffer
 * (rdma_value_buffer_writes counts them); the rest (values that fit one
 * message, values larger than the buffer, misses) come the usual way. */
static void iget_into_caller_buffers(memcached_st *m)
{
    static const size_t vsizes[] = {8000, EAGER + 1, 65536, 1000000, 3000000, 8388608};
    size_t nsizes = sizeof(vsizes) / sizeof(vsizes[0]);
    char *want = malloc(8388608);
    char *buf = malloc(2 * 8388608);
    memcached_request_st *req = memcached_request_create(m);
    long before = rdma_stat(m, "rdma_value_buffer_writes");
    int bad = 0;
    for (size_t i = 0; i < nsizes; i++) {
        fill(want, vsizes[i], 40 + (unsigned)i);
        if (memcached_set(m, "zc", 2, want, vsizes[i], 0, (uint32_t)i) != MEMCACHED_SUCCESS)
            bad++;
        /* a buffer of exactly the value's size, then one twice as large */
        for (int twice = 0; twice < 2; twice++) {
            size_t cap = vsizes[i] * (twice ? 2 : 1);
            memset(buf, 0, cap);
            size_t len = 0;
            memcached_return_t rc = memcached_iget(m, "zc", 2, buf, cap, req);
            if (rc == MEMCACHED_SUCCESS)
                rc = memcached_wait(m, req);
            const char *v = memcached_request_value(req, &len);
            if (rc != MEMCACHED_SUCCESS || v != buf || len != vsizes[i] ||
                memcmp(buf, want, len) != 0 || memcached_request_flags(req) != (uint32_t)i) {
                tap_diag("iget of %zu bytes into %zu: %s, len %zu", vsizes[i], cap,
                         memcached_strerror(m, rc), len);
                bad++;
            }
        }
    }
    long after = rdma_stat(m, "rdma_value_buffer_writes");
    /* 8000 bytes fit one message; the other five sizes, twice each (over
     * UD none: values are copied from the stream) */
    long direct = rdma_over_ud() ? 0 : 10;
    tap_ok(bad == 0 && after - before == direct,
           "igets of 8000 B .. 8 MiB into caller buffers arrive intact, %s "
           "(rdma_value_buffer_writes +%ld)",
           rdma_over_ud() ? "copied from UD messages"
                          : "the 10 above one message written straight into them",
           after - before);

    /* larger than the buffer: E2BIG with the full length, the stream stays in step */
    fill(want, 65536, 7);
    memcached_set(m, "zc", 2, want, 65536, 0, 0);
    size_t len = 0;
    memcached_return_t rc = memcached_iget(m, "zc", 2, buf, 32768, req);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_wait(m, req);
    memcached_request_value(req, &len);
    memcached_return_t rc2 = memcached_iget(m, "zc", 2, buf, 65536, req);
    if (rc2 == MEMCACHED_SUCCESS)
        rc2 = memcached_wait(m, req);
    tap_ok(rc == MEMCACHED_E2BIG && len == 65536 && rc2 == MEMCACHED_SUCCESS &&
               memcmp(buf, want, 65536) == 0,
           "a value larger than the iget buffer: %s, length %zu; the next iget gets it (%s)",
           memcached_strerror(m, rc), len, memcached_strerror(m, rc2));

    /* a miss leaves its advertised buffer unused; the next one is used */
    before = rdma_stat(m, "rdma_value_buffer_writes");
    rc = memcached_iget(m, "zc-missing", 10, buf, 65536, req);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_wait(m, req);
    memset(buf, 0, 65536);
    rc2 = memcached_iget(m, "zc", 2, buf, 65536, req);
    if (rc2 == MEMCACHED_SUCCESS)
        rc2 = memcached_wait(m, req);
    after = rdma_stat(m, "rdma_value_buffer_writes");
    tap_ok(rc == MEMCACHED_NOTFOUND && rc2 == MEMCACHED_SUCCESS && memcmp(buf, want, 65536) == 0 &&
               after - before == (rdma_over_ud() ? 0 : 1),
           "an iget that misses (%s) uses no buffer; the next one %s (+%ld)",
           memcached_strerror(m, rc), rdma_over_ud() ? "is copied from UD messages" : "does",
           after - before);
    memcached_request_free(req);

    /* 100 igets of 64 KiB in flight, each into its own buffer, with bgets
     * (landing buffer) and blocking gets in between: every value in its
     * place, replies in order */
    enum { N = 100 };
    char *bufs = malloc((size_t)N * 65536);
    memcached_request_st *reqs[N], *bg[N / 10];
    for (int i = 0; i < N; i++) {
        char key[16];
        int kl = snprintf(key, sizeof(key), "zc%d", i);
        fill(want, 65536, 1000 + (unsigned)i);
        memcached_set(m, key, (size_t)kl, want, 65536, 0, (uint32_t)i);
    }
    before = rdma_stat(m, "rdma_value_buffer_writes");
    bad = 0;
    memset(bufs, 0, (size_t)N * 65536);
    for (int i = 0; i < N; i++) {
        char key[16];
        int kl = snprintf(key, sizeof(key), "zc%d", i);
        reqs[i] = memcached_request_create(m);
        if (memcached_iget(m, key, (size_t)kl, bufs + (size_t)i * 65536, 65536, reqs[i]) !=
            MEMCACHED_SUCCESS)
            bad++;
        if (i % 10 == 5) {
            bg[i / 10] = memcached_request_create(m);
            memcached_bget(m, key, (size_t)kl, bg[i / 10]);
            size_t l = 0;
            char *got = memcached_get(m, key, (size_t)kl, &l, &(uint32_t){0}, &rc);
            fill(want, 65536, 1000 + (unsigned)i);
            if (got == NULL || l != 65536 || memcmp(got, want, l) != 0)
                bad++;
            free(got);
        }
    }
    if (memcached_wait_all(m) != MEMCACHED_SUCCESS)
        bad++;
    for (int i = 0; i < N; i++) {
        fill(want, 65536, 1000 + (unsigned)i);
        if (memcached_request_return(reqs[i]) != MEMCACHED_SUCCESS ||
            memcmp(bufs + (size_t)i * 65536, want, 65536) != 0 ||
            memcached_request_flags(reqs[i]) != (uint32_t)i)
            bad++;
        if (i % 10 == 5) {
            size_t l = 0;
            const char *v = memcached_request_value(bg[i / 10], &l);
            if (v == NULL || l != 65536 || memcmp(v, want, l) != 0)
                bad++;
            memcached_request_free(bg[i / 10]);
        }
        memcached_request_free(reqs[i]);
    }
    after = rdma_stat(m, "rdma_value_buffer_writes");
    tap_ok(bad == 0 && after - before == (rdma_over_ud() ? 0 : N),
           "100 igets of 64 KiB in flight with bgets and gets in between: all intact (%d wrong), "
           "%ld written straight into their buffers",
           bad, after - before);

    /* two igets in flight whose buffers overlap (one buffer twice, or the
     * first's capacity reaching into the second), then a bget, all answered
     * before the client reads the first reply: all are served, and the
     * connection stays, as over TCP */
    char *w2 = malloc(20000);
    fill(want, 20000, 71);
    fill(w2, 20000, 72);
    memcached_set(m, "ovl1", 4, want, 20000, 0, 0);
    memcached_set(m, "ovl2", 4, w2, 20000, 0, 0);
    int overlap_bad = 0;
    for (int layout = 0; layout < 2; layout++) {
        char *second = layout == 0 ? bufs : bufs + 32768;
        size_t second_cap = layout == 0 ? 65536 : 32768;
        memcached_request_st *r1 = memcached_request_create(m), *r2 = memcached_request_create(m),
                             *r3 = memcached_request_create(m);
        memcached_iget(m, "ovl1", 4, bufs, 65536, r1);
        memcached_iget(m, "ovl2", 4, second, second_cap, r2);
        memcached_bget(m, "ovl1", 4, r3);
        memcached_test(m, r3); /* all three sent; their replies all wait when the client looks */
        usleep(200000);
        memcached_return_t all = memcached_wait_all(m);
        size_t l2 = 0, l3 = 0;
        const char *v2 = memcached_request_value(r2, &l2);
        const char *v3 = memcached_request_value(r3, &l3);
        if (all != MEMCACHED_SUCCESS || memcached_request_return(r1) != MEMCACHED_SUCCESS ||
            memcached_request_return(r2) != MEMCACHED_SUCCESS || v2 != second || l2 != 20000 ||
            memcmp(second, w2, 20000) != 0 || v3 == NULL || l3 != 20000 ||
            memcmp(v3, want, 20000) != 0 || (layout == 1 && memcmp(bufs, want, 20000) != 0)) {
            tap_diag("overlapping igets, layout %d: %s / %s / %s", layout,
                     memcached_strerror(m, memcached_request_return(r1)),
                     memcached_strerror(m, memcached_request_return(r2)),
                     memcached_strerror(m, memcached_request_return(r3)));
            overlap_bad++;
        }
        memcached_request_free(r3);
        memcached_request_free(r2);
        memcached_request_free(r1);
        size_t l = 0;
        char *got = memcached_get(m, "ovl2", 4, &l, &(uint32_t){0}, &rc);
        overlap_bad += got == NULL || l != 20000 || memcmp(got, w2, l) != 0;
        free(got);
    }
    tap_ok(overlap_bad == 0,
           "two igets in flight into one buffer, and into two whose capacities overlap, then a "
           "bget: all served, the values in place, the connection kept");
    free(w2);
    free(bufs);
    free(buf);
    free(want);
}

/* One of several client processes (re-executed, not forked: verbs resources
 * do not survive fork()). Exit status 0 when every check held. */
static int client_process(int k, unsigned rdma_port)
{
    struct server s = {.rdma_port = rdma_port};
    memcached_st *m = rdma_client(&s);
    int wrong = 0;
    for (int i = 0; i < 300; i++) {
        char key[32], val[64];
        int kl = snprintf(key, sizeof(key), "c%d-%d", k, i);
        int vl = snprintf(val, sizeof(val), "client %d value %d", k, i);
        if (memcached_set(m, key, (size_t)kl, val, (size_t)vl, 0, 0) != MEMCACHED_SUCCESS)
            wrong++;
        size_t l = 0;
        memcached_return_t r;
        char *got = memcached_get(m, key, (size_t)kl, &l, &(uint32_t){0}, &r);
        if (!got || l != (size_t)vl || memcmp(got, val, l) != 0)
            wrong++;
        free(got);
    }
    wrong += many_in_flight(m, 500);
    memcached_free(m);
    if (wrong)
        fprintf(stderr, "client %d: %d checks failed\n", k, wrong);
    return wrong == 0 ? 0 : 1;
}

/* ---- mixed load: one client process's random operations on keys of its own ---------- */
enum { MIXED_KEYS = 40, MIXED_WINDOW = 8, MIXED_MAX = 1100000, MIXED_OPS = 400 };

struct mixed {
    memcached_st *m;
    int k;        /* the process */
    uint32_t rng; /* its own sequence: a failure can be replayed */
    size_t len[MIXED_KEYS];
    unsigned seed[MIXED_KEYS];
    bool present[MIXED_KEYS];
    char *want, *buf;
    int wrong;
};

static uint32_t mixed_next(struct mixed *x)
{
    x->rng = x->rng * 1103515245u + 12345u;
    return x->rng >> 8;
}

/* Value sizes: half of them at the edges of one message, the landing
 * buffer and slab chunks, half anywhere up to 200,000 bytes. */
static size_t mixed_size(struct mixed *x)
{
    static const size_t edges[] = {0,      1,      100,     EAGER - 60, EAGER - 35, EAGER - 28,
                                   EAGER,  8170,   8200,    16384,      65536,      100000,
                                   300000, 524288, 1048576, MIXED_MAX};
    if (mixed_next(x) % 2)
        return edges[mixed_next(x) % (sizeof(edges) / sizeof(edges[0]))];
    return mixed_next(x) % 200000;
}

static int mixed_key(const struct mixed *x, int i, char *key, size_t cap)
{
    return snprintf(key, cap, "mix%d-%d", x->k, i);
}

/* The library's words for the last failure: the client's last error and
 * the server's (which names the RDMA cause: a failed work completion, a
 * disconnect, a silent peer), for a failure's diagnostics. */
static void mixed_why(const struct mixed *x)
{
    const char *server = memcached_server_error(memcached_server_instance_by_position(x->m, 0));
    fprintf(stderr, "mixed %d:   last error: %s; server error: %s\n", x->k,
            memcached_last_error_message(x->m), server ? server : "(none)");
}

/* A read of key i returned (rc, v, len): what the process stored last. */
static void mixed_check(struct mixed *x, int i, const char *how, memcached_return_t rc,
                        const char *v, size_t len)
{
    bool ok;
    if (!x->present[i]) {
        ok = rc == MEMCACHED_NOTFOUND;
    } else {
        fill(x->want, x->len[i], x->seed[i]);
        ok = rc == MEMCACHED_SUCCESS && len == x->len[i] &&
             (len == 0 || memcmp(v, x->want, len) == 0);
    }
    if (!ok) {
        fprintf(stderr, "mixed %d: %s of key %d: %s, %zu bytes (want %zu)\n", x->k, how, i,
                memcached_strerror(x->m, rc), len, x->present[i] ? x->len[i] : 0);
        if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND)
            mixed_why(x);
        x->wrong++;
    }
}

static void mixed_op(struct mixed *x)
{
    int i = (int)(mixed_next(x) % MIXED_KEYS), kind = (int)(mixed_next(x) % 6);
    char key[32];
    int kl = mixed_key(x, i, key, sizeof(key));
    if (kind <= 1) { /* a set, noreply for kind 1 */
        size_t n = mixed_size(x);
        unsigned seed = mixed_next(x);
        fill(x->buf, n, seed);
        memcached_behavior_set(x->m, MEMCACHED_BEHAVIOR_NOREPLY, kind == 1);
        memcached_return_t rc = memcached_set(x->m, key, (size_t)kl, x->buf, n, 0, 0);
        memcached_behavior_set(x->m, MEMCACHED_BEHAVIOR_NOREPLY, 0);
        if (rc != MEMCACHED_SUCCESS) {
            fprintf(stderr, "mixed %d: set of %zu bytes: %s\n", x->k, n,
                    memcached_strerror(x->m, rc));
            mixed_why(x);
            x->wrong++;
            return;
        }
        x->len[i] = n;
        x->seed[i] = seed;
        x->present[i] = true;
    } else if (kind <= 3) { /* a blocking get */
        size_t len = 0;
        memcached_return_t rc;
        char *v = memcached_get(x->m, key, (size_t)kl, &len, &(uint32_t){0}, &rc);
        mixed_check(x, i, "get", rc, v, len);
        free(v);
    } else if (kind == 4) { /* an iget into the process's buffer */
        memcached_request_st *r = memcached_request_create(x->m);
        memcached_return_t rc = memcached_iget(x->m, key, (size_t)kl, x->buf, MIXED_MAX, r);
        if (rc == MEMCACHED_SUCCESS)
            rc = memcached_wait(x->m, r);
        size_t len = 0;
        const char *v = memcached_request_value(r, &len);
        mixed_check(x, i, "iget", rc, v, len);
        memcached_request_free(r);
    } else { /* a window of bsets, then bgets of the same keys */
        memcached_request_st *sets[MIXED_WINDOW], *gets[MIXED_WINDOW];
        char *vals[MIXED_WINDOW];
        size_t lens[MIXED_WINDOW];
        unsigned seeds[MIXED_WINDOW];
        for (int j = 0; j < MIXED_WINDOW; j++) {
            lens[j] = mixed_size(x);
            seeds[j] = mixed_next(x);
            vals[j] = malloc(lens[j] + 1);
            fill(vals[j], lens[j], seeds[j]);
            kl = mixed_key(x, (i + j) % MIXED_KEYS, key, sizeof(key));
            sets[j] = memcached_request_create(x->m);
            memcached_bset(x->m, key, (size_t)kl, vals[j], lens[j], 0, 0, sets[j]);
        }
        for (int j = 0; j < MIXED_WINDOW; j++) {
            kl = mixed_key(x, (i + j) % MIXED_KEYS, key, sizeof(key));
            gets[j] = memcached_request_create(x->m);
            memcached_bget(x->m, key, (size_t)kl, gets[j]);
        }
        memcached_wait_all(x->m);
        for (int j = 0; j < MIXED_WINDOW; j++) {
            int at = (i + j) % MIXED_KEYS;
            if (memcached_request_return(sets[j]) == MEMCACHED_SUCCESS) {
                x->len[at] = lens[j];
                x->seed[at] = seeds[j];
                x->present[at] = true;
            } else {
                fprintf(stderr, "mixed %d: bset of key %d: %s\n", x->k, at,
                        memcached_strerror(x->m, memcached_request_return(sets[j])));
                mixed_why(x);
                x->wrong++;
            }
            size_t len = 0;
            const char *v = memcached_request_value(gets[j], &len);
            mixed_check(x, at, "bget", memcached_request_return(gets[j]), v, len);
            memcached_request_free(gets[j]);
            memcached_request_free(sets[j]);
            free(vals[j]);
        }
    }
}

/* `ops` random operations (sets, noreply sets, gets, igets, windows of
 * bsets and bgets) on keys of process k, every read checked against what
 * it stored last. Exit status 0 when all held. */
static int mixed_client_process(int k, int ops, unsigned rdma_port)
{
    struct server s = {.rdma_port = rdma_port};
    struct mixed x = {.m = rdma_client(&s),
                      .k = k,
                      .rng = 1234567u + (unsigned)k * 7919u,
                      .want = malloc(MIXED_MAX),
                      .buf = malloc(MIXED_MAX)};
    /* UD copies every byte in software: in the emulated guest on a loaded
     * host one 181 KB set of three busy clients took more than the 5 s
     * default poll timeout */
    if (rdma_over_ud())
        memcached_behavior_set(x.m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
    for (int op = 0; op < ops && x.wrong < 10; op++)
        mixed_op(&x);
    memcached_free(x.m);
    free(x.buf);
    free(x.want);
    return x.wrong == 0 ? 0 : 1;
}

/* Sets and gets small values back to back until killed (at most 200,000
 * pairs), keeping a spinning worker busy; exits 1 at the first wrong reply. */
static int busy_client_process(unsigned rdma_port)
{
    struct server s = {.rdma_port = rdma_port};
    memcached_st *m = rdma_client(&s);
    for (int i = 0; i < 200000; i++) {
        char val[32];
        int vl = snprintf(val, sizeof(val), "busy %d", i);
        if (memcached_set(m, "busy", 4, val, (size_t)vl, 0, 0) != MEMCACHED_SUCCESS)
            return 1;
        size_t l = 0;
        char *got = memcached_get(m, "busy", 4, &l, &(uint32_t){0}, &(memcached_return_t){0});
        bool ok = got && l == (size_t)vl && memcmp(got, val, l) == 0;
        free(got);
        if (!ok)
            return 1;
    }
    return 0;
}

/* Sets and gets 8 MiB values until killed (every one a rendezvous). */
static int big_client_process(unsigned rdma_port)
{
    struct server s = {.rdma_port = rdma_port};
    memcached_st *m = rdma_client(&s);
    size_t n = 8388608;
    char *v = malloc(n);
    memset(v, 'k', n);
    for (int i = 0; i < 100000; i++) {
        memcached_set(m, "bigkill", 7, v, n, 0, 0);
        free(
            memcached_get(m, "bigkill", 7, &(size_t){0}, &(uint32_t){0}, &(memcached_return_t){0}));
    }
    return 0;
}

/* Runs this program again as a client process of its own (verbs
 * resources do not survive fork()): self MODE [NUMBER] RDMA_PORT. number < 0:
 * none. Returns the child's pid. */
static pid_t spawn_client(const char *self, const char *mode, int number, unsigned rdma_port)
{
    pid_t pid = proc_fork();
    if (pid == 0) {
        char num[16], port[16];
        snprintf(num, sizeof(num), "%d", number);
        snprintf(port, sizeof(port), "%u", rdma_port);
        if (number < 0)
            execl(self, self, mode, port, (char *)NULL);
        else
            execl(self, self, mode, num, port, (char *)NULL);
        _exit(126);
    }
    return pid;
}

/* Sets keys prefix0 .. prefix<count-1> to their own names; how many
 * calls returned SUCCESS. */
static int set_keys(memcached_st *m, const char *prefix, int count)
{
    int stored = 0;
    for (int i = 0; i < count; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "%s%d", prefix, i);
        stored += memcached_set(m, key, (size_t)kl, key, (size_t)kl, 0, 0) == MEMCACHED_SUCCESS;
    }
    return stored;
}

/* How many of keys prefix0 .. prefix<count-1> the server holds. */
static int keys_present(memcached_st *m, const char *prefix, int count)
{
    int present = 0;
    for (int i = 0; i < count; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "%s%d", prefix, i);
        present += memcached_exist(m, key, (size_t)kl) == MEMCACHED_SUCCESS;
    }
    return present;
}

/* Stores that expect no reply complete once the transport took their
 * bytes; over RDMA those may still wait for credit when the program
 * closes the client or flushes and then goes quiet. As over a socket,
 * whose kernel still delivers what was written, they must reach the
 * server: memcached_free and memcached_quit send them first, and so does
 * memcached_flush_buffers. */
static void stores_before_close(unsigned tcp_port, unsigned rdma_port)
{
    enum { N = 400 };
    struct server s;
    server_start_with(&s, tcp_port, rdma_port, "1", NULL, NULL);
    memcached_st *check = rdma_client(&s);
    size_t big_len = 3000000;
    char *big = malloc(big_len);
    fill(big, big_len, 55);

    memcached_st *m = rdma_client(&s);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    int took = set_keys(m, "nr", N);
    took += memcached_set(m, "nrbig", 5, big, big_len, 0, 0) == MEMCACHED_SUCCESS;
    memcached_free(m); /* at once: no call in between sends what waits */
    size_t len = 0;
    memcached_return_t rc;
    char *got = memcached_get(check, "nrbig", 5, &len, &(uint32_t){0}, &rc);
    int present = keys_present(check, "nr", N);
    tap_ok(took == N + 1 && present == N && got && len == big_len && memcmp(got, big, len) == 0,
           "noreply sets (%d of 400 small, and 3 MB) reach the server when the client is freed "
           "right after them",
           present);
    free(got);

    m = rdma_client(&s);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    set_keys(m, "nq", N);
    memcached_quit(m);
    present = keys_present(check, "nq", N);
    tap_ok(present == N, "and when it quits (%d of %d)", present, N);
    memcached_free(m);

    m = rdma_client(&s);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_BUFFER_REQUESTS, 1);
    set_keys(m, "nf", N);
    rc = memcached_flush_buffers(m);
    usleep(300000); /* the program goes quiet: nothing pushes them any more */
    present = keys_present(check, "nf", N);
    tap_ok(rc == MEMCACHED_SUCCESS && present == N,
           "buffered sets are all on the server after memcached_flush_buffers (%d of %d)", present,
           N);
    memcached_free(m);
    memcached_free(check);
    free(big);
    server_stop(&s, SIGTERM);
}

/* A large get whose reply needs the landing buffer advertised again,
 * followed at once by many eager sets: their bytes pile up on the server
 * (which pauses the connection) while the get's output waits for the
 * advertisement that comes after them. Everything must complete. */
static void large_get_then_many_sets(memcached_st *m)
{
    enum { SETS = 150, SET_LEN = 7000 };
    size_t n = 3000000, len = 0;
    char *val = malloc(n), *small = malloc(SET_LEN);
    fill(val, n, 31);
    fill(small, SET_LEN, 32);
    memcached_return_t rc = memcached_set(m, "pile", 4, val, n, 0, 0);
    memcached_request_st *get = memcached_request_create(m);
    memcached_request_st *sets[SETS];
    memcached_bget(m, "pile", 4, get);
    for (int i = 0; i < SETS; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "pile%d", i);
        sets[i] = memcached_request_create(m);
        memcached_bset(m, key, (size_t)kl, small, SET_LEN, 0, 0, sets[i]);
    }
    memcached_wait_all(m);
    const char *v = memcached_request_value(get, &len);
    bool got = memcached_request_return(get) == MEMCACHED_SUCCESS && v && len == n &&
               memcmp(v, val, n) == 0;
    int stored = 0;
    for (int i = 0; i < SETS; i++) {
        stored += memcached_request_return(sets[i]) == MEMCACHED_SUCCESS;
        memcached_request_free(sets[i]);
    }
    tap_ok(rc == MEMCACHED_SUCCESS && got && stored == SETS,
           "a 3 MB bget followed at once by %d sets of %d bytes: the value arrives intact (%s) "
           "and %d sets are stored",
           SETS, SET_LEN, memcached_strerror(m, memcached_request_return(get)), stored);
    memcached_request_free(get);
    free(small);
    free(val);
}

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Draining before a close waits one poll timeout in all, not one per
 * server: two servers stopped (SIGSTOP) with noreply stores waiting for
 * their credits, and memcached_free returns after about one timeout. */
static void drain_bounded(unsigned base)
{
    if (rdma_over_ud()) {
        tap_skip("RC only: over UD a noreply store waits for the server's ack when it is sent, "
                 "and a server silent for the dead timeout (5 s) is given up, with what waited "
                 "for it (doc/rdma-ud.md)");
        return;
    }
    struct server a, b;
    server_start_with(&a, base, base + 1, "1", NULL, NULL);
    server_start_with(&b, base + 2, base + 3, "1", NULL, NULL);
    char cfg[256];
    snprintf(cfg, sizeof(cfg), "--SERVER=%s://%s:%u --SERVER=%s://%s:%u --BINARY-PROTOCOL",
             rdma_scheme(), rxe, a.rdma_port, rdma_scheme(), rxe, b.rdma_port);
    memcached_st *m = memcached(cfg, strlen(cfg));
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 2000);
    set_keys(m, "warm", 20); /* both connected */
    kill(a.pid, SIGSTOP);
    kill(b.pid, SIGSTOP);
    usleep(200000);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    set_keys(m, "stuck", 400); /* more than the credits of both */
    double t0 = wall_ms();
    memcached_free(m);
    double took = wall_ms() - t0;
    kill(a.pid, SIGCONT);
    kill(b.pid, SIGCONT);
    /* one timeout per server would be 4,000 ms and more; the rest is the
     * teardown of two connections, slow in an emulated guest */
    tap_ok(took >= 1900 && took < 3600,
           "memcached_free with two stopped servers and stores waiting for both drains for one "
           "2,000 ms poll timeout in all (%.0f ms)",
           took);
    server_stop(&a, SIGTERM);
    server_stop(&b, SIGTERM);
}

/* A blocking call that sends without a reply (NOREPLY) returns with its
 * bytes on their way, as a socket's kernel goes on sending what a call
 * wrote: when the server's credits ran out, the call waits for them
 * instead of leaving its bytes for a later call into the library. And a
 * server that returns no credits for a whole poll timeout is waited for
 * once, not once per call. */
static void noreply_on_its_way(unsigned tcp_port, unsigned rdma_port)
{
    enum { N = 400, RESUME_MS = 500 };
    struct server s;
    server_start_with(&s, tcp_port, rdma_port, "1", NULL, NULL);
    memcached_st *check = rdma_client(&s);
    memcached_st *m = rdma_client(&s);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    double t0 = wall_ms();
    int took = set_keys(m, "on", N); /* m makes no call after these */
    double took_ms = wall_ms() - t0;
    int present = keys_present(check, "on", N);
    tap_ok(took == N && present == N,
           "%d noreply sets in a row (%.0f ms) are all on the server with no later call from "
           "their client (%d of %d)",
           took, took_ms, present, N);

    /* the server stops, and resumes while the client's sets wait for credits */
    memcached_exist(m, "on0", 3); /* connected, credits all back */
    kill(s.pid, SIGSTOP);
    pid_t waker = proc_fork();
    if (waker == 0) {
        usleep(RESUME_MS * 1000);
        kill(s.pid, SIGCONT);
        _exit(0);
    }
    t0 = wall_ms();
    took = set_keys(m, "held", N);
    took_ms = wall_ms() - t0;
    proc_reap(waker, 10000);
    kill(s.pid, SIGCONT);
    usleep(200000);
    present = keys_present(check, "held", N);
    tap_ok(took == N && present == N && took_ms >= RESUME_MS / 2,
           "noreply sets to a stopped server wait for its credits: resumed after %d ms, all are "
           "on it with no later call (%d of %d; the sets took %.0f ms)",
           RESUME_MS, present, N, took_ms);

    if (rdma_over_ud()) { /* UD gives a server silent for 5 s up, with what waited */
        tap_skip("RC only: over UD a server stopped for the dead timeout (5 s) is given up and "
                 "the stores waiting for it are lost (doc/rdma-ud.md)");
        memcached_free(m);
        memcached_free(check);
        server_stop(&s, SIGTERM);
        return;
    }
    /* stopped for longer than the poll timeout: one wait, then none */
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 500);
    kill(s.pid, SIGSTOP);
    t0 = wall_ms();
    took = set_keys(m, "stall", N);
    took_ms = wall_ms() - t0;
    kill(s.pid, SIGCONT);
    memcached_free(m); /* its drain sends what was held */
    present = keys_present(check, "stall", N);
    tap_ok(took == N && took_ms >= 450 && took_ms < 1500 && present == N,
           "a server stopped for good is waited for one 500 ms poll timeout, not one per set "
           "(%d sets took %.0f ms; after the close %d of %d are on it)",
           N, took_ms, present, N);
    memcached_free(check);
    server_stop(&s, SIGTERM);
}

/* Over UD the library sets up a peer unused for LIBMEMCACHED_RDMA_UD_IDLE_MS
 * anew before its next request, but not while replies are awaited (a
 * stopped or overloaded server is slow, not gone). Here the server stops
 * with a get of ours on its way, for longer than the client's idle time
 * (1 s), and resumes; the client then issues a second get before the
 * first reply came, and both must be answered exactly. */
static void reply_slower_than_idle(unsigned tcp_port, unsigned rdma_port)
{
    if (!rdma_over_ud()) {
        tap_skip("UD only: an RC connection is not set up anew when idle");
        return;
    }
    enum { STOPPED_MS = 1600 };
    struct server s;
    server_start_with(&s, tcp_port, rdma_port, "1", NULL, NULL);
    /* read when the connection opens: with the first set */
    setenv("LIBMEMCACHED_RDMA_UD_IDLE_MS", "1000", 1);
    memcached_st *m = rdma_client(&s);
    memcached_request_st *first = memcached_request_create(m);
    memcached_request_st *second = memcached_request_create(m);
    char first_buf[32] = "", second_buf[32] = "";
    bool stored = memcached_set(m, "slow-first", 10, "one", 3, 0, 0) == MEMCACHED_SUCCESS &&
                  memcached_set(m, "slow-second", 11, "two", 3, 0, 0) == MEMCACHED_SUCCESS;
    setenv("LIBMEMCACHED_RDMA_UD_IDLE_MS", "5000", 1); /* main's */
    kill(s.pid, SIGSTOP);
    memcached_return_t rc1 =
        memcached_iget(m, "slow-first", 10, first_buf, sizeof(first_buf), first);
    memcached_test(m, first); /* on its way */
    usleep(STOPPED_MS * 1000);
    kill(s.pid, SIGCONT);
    memcached_return_t rc2 =
        memcached_iget(m, "slow-second", 11, second_buf, sizeof(second_buf), second);
    if (rc1 == MEMCACHED_SUCCESS)
        rc1 = memcached_wait(m, first);
    if (rc2 == MEMCACHED_SUCCESS)
        rc2 = memcached_wait(m, second);
    size_t len1 = 0, len2 = 0;
    const char *v1 = memcached_request_value(first, &len1);
    const char *v2 = memcached_request_value(second, &len2);
    bool exact = rc1 == MEMCACHED_SUCCESS && rc2 == MEMCACHED_SUCCESS && v1 != NULL && v2 != NULL &&
                 len1 == 3 && len2 == 3 && memcmp(v1, "one", 3) == 0 && memcmp(v2, "two", 3) == 0;
    tap_ok(stored && exact,
           "UD: a reply slower than the client's idle time (server stopped %d ms, idle 1 s): "
           "no new peer while it is awaited, both gets answered exactly (%s, %s)",
           STOPPED_MS, memcached_strerror(m, rc1), memcached_strerror(m, rc2));
    memcached_request_free(second);
    memcached_request_free(first);
    memcached_free(m);
    server_stop(&s, SIGTERM);
}

/* A server killed (SIGKILL) with a request of ours in flight, over
 * rdma+rc:// and rdma+ud://: the request fails with CONNECTION_FAILURE and
 * the library says why in RDMA's terms (RC: the connection manager's
 * disconnect or a failed work completion; UD: the server silent for the
 * dead timeout), in memcached_server_error and in
 * memcached_last_error_message, not only the generic code. */
static void killed_server_names_cause(unsigned base)
{
    static const char *const schemes[] = {"rdma+rc", "rdma+ud"};
    for (unsigned k = 0; k < 2; k++) {
        const char *scheme = schemes[k];
        if (rdma_over_ud() && k == 0)
            continue; /* the RC run has it */
        struct server s;
        server_probe_scheme = scheme;
        server_start_with(&s, base + 2 * k, base + 2 * k + 1, "2", NULL, NULL);
        server_probe_scheme = NULL;
        memcached_st *m = rdma_client_over(&s, scheme);
        /* longer than UD's dead timeout: the transport finds the cause */
        memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
        memcached_return_t set = memcached_set(m, "cause", 5, "1", 1, 0, 0);
        kill(s.pid, SIGSTOP);
        usleep(300000); /* stopped for sure before the request goes out */
        memcached_request_st *req = memcached_request_create(m);
        memcached_bget(m, "cause", 5, req);
        memcached_test(m, req); /* on its way */
        server_stop(&s, SIGKILL);
        double t0 = wall_ms();
        memcached_return_t rc = memcached_wait(m, req);
        double took = wall_ms() - t0;
        memcached_request_free(req);
        const char *last = memcached_last_error_message(m);
        const char *server = memcached_server_error(memcached_server_instance_by_position(m, 0));
        const char *cause = k == 0 ? "RDMA: " : "RDMA UD: ";
        tap_ok(set == MEMCACHED_SUCCESS && rc == MEMCACHED_CONNECTION_FAILURE && server != NULL &&
                   strstr(server, cause) != NULL && strstr(last, server) != NULL,
               "%s: a server killed mid-request fails it with %s after %.0f ms, and the "
               "library names the cause: memcached_last_error_message \"%s\"",
               scheme, memcached_strerror(m, rc), took, last);
        if (server == NULL || strstr(server, cause) == NULL)
            tap_diag("memcached_server_error: %s", server ? server : "(none)");
        memcached_free(m);
    }
}

/* memcached_test until the request is done or `ms` passed; its last result. */
static memcached_return_t test_until_done(memcached_st *m, memcached_request_st *req, int ms)
{
    memcached_return_t rc = MEMCACHED_IN_PROGRESS;
    for (int waited = 0; rc == MEMCACHED_IN_PROGRESS && waited < ms * 10; waited++) {
        rc = memcached_test(m, req);
        if (rc == MEMCACHED_IN_PROGRESS)
            usleep(100);
    }
    return rc;
}

/* A program that only ever polls with memcached_test gets what one that
 * waits gets: a value larger than the landing buffer (which must be
 * advertised again between its pieces), and CONNECTION_FAILURE from a
 * server that goes away. */
static void polling_with_test_only(unsigned tcp_port, unsigned rdma_port)
{
    struct server s;
    server_start_with(&s, tcp_port, rdma_port, "1", NULL, NULL);
    memcached_st *m = rdma_client(&s);
    size_t n = 3000000, len = 0;
    char *val = malloc(n);
    fill(val, n, 77);
    memcached_return_t rc = memcached_set(m, "polled", 6, val, n, 0, 0);
    memcached_request_st *req = memcached_request_create(m);
    memcached_bget(m, "polled", 6, req);
    memcached_return_t got = test_until_done(m, req, 20000);
    const char *v = memcached_request_value(req, &len);
    tap_ok(rc == MEMCACHED_SUCCESS && got == MEMCACHED_SUCCESS && v != NULL && len == n &&
               memcmp(v, val, n) == 0,
           "a bget of 3 MB completes with memcached_test alone (%s, %zu bytes)",
           memcached_strerror(m, got), len);
    memcached_request_free(req);
    free(val);
    /* every byte of this server went over RDMA: its RDMA byte counters
     * agree with memcached's own, zero-copy WRITEs' reply headers included */
    memcached_stat_st *st = memcached_stat(m, NULL, &rc);
    long written = stat_of(m, st, "bytes_written"),
         rdma_written = stat_of(m, st, "rdma_bytes_written");
    long read = stat_of(m, st, "bytes_read"), rdma_read = stat_of(m, st, "rdma_bytes_read");
    memcached_stat_free(m, st);
    tap_ok(written > 3000000 && rdma_written == written && rdma_read == read,
           "rdma_bytes_written %ld and rdma_bytes_read %ld agree with bytes_written %ld and "
           "bytes_read %ld when all traffic is RDMA",
           rdma_written, rdma_read, written, read);

    kill(s.pid, SIGSTOP);
    req = memcached_request_create(m);
    memcached_bget(m, "polled", 6, req);
    memcached_return_t during = test_until_done(m, req, 300);
    server_stop(&s, SIGKILL);
    got = test_until_done(m, req, 20000);
    tap_ok(during == MEMCACHED_IN_PROGRESS && got == MEMCACHED_CONNECTION_FAILURE,
           "a server killed while the client polls with memcached_test: %s, then %s",
           memcached_strerror(m, during), memcached_strerror(m, got));
    memcached_request_free(req);
    memcached_free(m);
}

/* What a client sees of an idle close: the results of its calls after the
 * server closed its idle connection, until one finds the value (at most
 * three), as "SUCCESS kept" or the error's name, one per line. */
static void after_idle_close(memcached_st *m, char *out, size_t outlen)
{
    out[0] = '\0';
    for (int call = 0; call < 3; call++) {
        memcached_return_t rc;
        size_t len = 0, used = strlen(out);
        char *got = memcached_get(m, "idlekey", 7, &len, &(uint32_t){0}, &rc);
        snprintf(out + used, outlen - used, "%s%s\n", memcached_strerror(m, rc),
                 got && len == 4 && memcmp(got, "kept", 4) == 0 ? " kept" : "");
        free(got);
        if (rc == MEMCACHED_SUCCESS)
            return;
    }
}

/* "stats conns" over a text socket names every RDMA connection by a
 * number of its own, as it names sockets by descriptor: the numbers of
 * the RDMA connections' addr lines, how many there are and how many of
 * them differ, whether any is negative, and how many name a port other
 * than the server's RDMA port (the client's own, as a socket's peer). */
static void rdma_conns_named(unsigned tcp_port, unsigned rdma_port, int *lines, int *distinct,
                             bool *negative, int *peers)
{
    *lines = *distinct = *peers = 0;
    *negative = false;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tcp_port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    static char reply[65536];
    size_t len = 0;
    struct timeval limit = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        write(fd, "stats conns\r\n", 13) == 13) {
        while (len < sizeof(reply) - 1) {
            ssize_t n = read(fd, reply + len, sizeof(reply) - 1 - len);
            if (n <= 0)
                break;
            len += (size_t)n;
            reply[len] = '\0';
            if (strstr(reply, "END\r\n") != NULL)
                break;
        }
    }
    close(fd);
    reply[len] = '\0';
    long seen[64];
    for (char *p = strstr(reply, "STAT "); p; p = strstr(p + 1, "STAT ")) {
        char *end;
        long number = strtol(p + 5, &end, 10);
        const char *prefix = rdma_over_ud() ? ":addr rdma+ud:" : ":addr rdma:";
        size_t prefix_len = strlen(prefix);
        if (strncmp(end, prefix, prefix_len) != 0 || *lines >= 64)
            continue;
        *negative |= number < 0;
        const char *hash = strchr(end, '#'), *colon = NULL;
        for (const char *q = end + prefix_len; hash && q < hash; q++)
            if (*q == ':')
                colon = q;
        *peers += colon != NULL && strtoul(colon + 1, NULL, 10) != rdma_port;
        bool again = false;
        for (int i = 0; i < *lines; i++)
            again |= seen[i] == number;
        *distinct += !again;
        seen[(*lines)++] = number;
    }
}

/* The lines of text joined with ";" (in place). */
static const char *one_line(char *text)
{
    size_t n = strlen(text);
    if (n > 0 && text[n - 1] == '\n')
        text[--n] = '\0';
    for (char *p = strchr(text, '\n'); p; p = strchr(p, '\n'))
        *p = ';';
    return text;
}

/* -o idle_timeout closes idle RDMA connections as it closes sockets: the
 * server's way to get back the resources of a peer that vanished without
 * a disconnect (a crashed machine). The client's next calls see what a
 * socket client sees, and reconnect. */
static void idle_rdma_connection(unsigned tcp_port, unsigned rdma_port)
{
    struct server s;
    /* one worker: one idle check closes both idle connections */
    server_start_with(&s, tcp_port, rdma_port, "1", NULL, "idle_timeout=2");
    memcached_st *by_rdma = rdma_client(&s);
    memcached_st *by_tcp = memcached_create(NULL);
    memcached_server_add(by_tcp, "127.0.0.1", (in_port_t)s.tcp_port);
    memcached_behavior_set(by_tcp, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    memcached_st *watch = memcached_create(NULL); /* over TCP, busy enough to stay */
    memcached_server_add(watch, "127.0.0.1", (in_port_t)s.tcp_port);
    memcached_behavior_set(by_rdma, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    memcached_behavior_set(by_tcp, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    /* the socket goes idle first: it is closed no later than the RDMA connection */
    memcached_return_t rc_tcp = memcached_version(by_tcp);
    memcached_return_t rc = memcached_set(by_rdma, "idlekey", 7, "kept", 4, 0, 0);
    if (rdma_over_ud()) {
        /* Over UD the server closes the idle connection (curr_connections
         * drops by both idle ones), but its peer lingers until its last
         * reply is acknowledged or the keepalive gives it up: the client
         * runs the reliability layer only inside calls and left that ack
         * for later. The library sets up a peer unused for
         * LIBMEMCACHED_RDMA_UD_IDLE_MS (5 s here) anew, so once that
         * passed the next call finds the value at once. */
        long open = rdma_stat(watch, "curr_connections");
        long now = open;
        for (int i = 0; i < 60 && now != open - 2; i++) {
            usleep(200000);
            now = rdma_stat(watch, "curr_connections");
        }
        tap_ok(rc == MEMCACHED_SUCCESS && rc_tcp == MEMCACHED_SUCCESS && now == open - 2,
               "-o idle_timeout=2 closes an idle UD connection and an idle socket "
               "(curr_connections %ld -> %ld)",
               open, now);
        for (int i = 0; i < 55; i++) { /* the watcher stays busy meanwhile */
            usleep(100000);
            memcached_version(watch);
        }
        char seen_rdma[256];
        after_idle_close(by_rdma, seen_rdma, sizeof(seen_rdma));
        long reopened = rdma_stat(watch, "curr_connections");
        bool found_at_once = strcmp(seen_rdma, "SUCCESS kept\n") == 0; /* before one_line */
        tap_ok(found_at_once && reopened == open - 1,
               "after it, the UD client unused for 5 s sets its peer up anew: the value is found "
               "at once on a new connection (curr_connections %ld; calls: %s)",
               reopened, one_line(seen_rdma));
        memcached_free(watch);
        memcached_free(by_tcp);
        memcached_free(by_rdma);
        server_stop(&s, SIGTERM);
        return;
    }
    long open = rdma_stat(watch, conns_stat());
    long now = open;
    for (int i = 0; i < 60 && now != 0; i++) { /* idle 2 s, checked every second */
        usleep(200000);
        now = rdma_stat(watch, conns_stat());
    }
    tap_ok(rc == MEMCACHED_SUCCESS && rc_tcp == MEMCACHED_SUCCESS && open >= 1 && now == 0,
           "-o idle_timeout=2 closes an idle RDMA connection (%s %ld -> %ld)", conns_stat(), open,
           now);
    char seen_rdma[256], seen_tcp[256];
    after_idle_close(by_rdma, seen_rdma, sizeof(seen_rdma));
    after_idle_close(by_tcp, seen_tcp, sizeof(seen_tcp));
    long reopened = rdma_stat(watch, conns_stat());
    bool same = strstr(seen_rdma, "SUCCESS kept") != NULL && strcmp(seen_rdma, seen_tcp) == 0;
    if (!same)
        tap_diag("--- rdma\n%s--- tcp\n%s", seen_rdma, seen_tcp);
    tap_ok(same && reopened == 1,
           "after it, the RDMA client's calls give what a socket client's give, and the "
           "value is found on a new connection (%s %ld; calls: %s)",
           conns_stat(), reopened, one_line(seen_rdma));
    memcached_free(watch);
    memcached_free(by_tcp);
    memcached_free(by_rdma);
    server_stop(&s, SIGTERM);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        tap_bail("usage: rdma_test_client SERVER_BINARY");
    rxe = getenv("RXE_VM_ADDR");
    if (rxe == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    if (strcmp(argv[1], "--client") == 0 && argc == 4)
        return client_process(atoi(argv[2]), (unsigned)atoi(argv[3]));
    if (strcmp(argv[1], "--big") == 0 && argc == 3)
        return big_client_process((unsigned)atoi(argv[2]));
    if (strcmp(argv[1], "--busy") == 0 && argc == 3)
        return busy_client_process((unsigned)atoi(argv[2]));
    if (strcmp(argv[1], "--mixed") == 0 && argc == 4)
        return mixed_client_process(atoi(argv[2]), MIXED_OPS, (unsigned)atoi(argv[3]));
    const char *self = argv[0];
    server_bin = argv[1];
    signal(SIGPIPE, SIG_IGN);
    unsigned base = 23000 + (unsigned)(getpid() % 1000) * 4;
    struct server s1, s2;
    if (rdma_over_ud()) {
        setenv("LIBMEMCACHED_RDMA_UD_IDLE_MS", "5000", 1); /* below the server's keepalive */
        server_start_with(&s1, base, base + 1, "2", NULL, "rdma_ud_keepalive_ms=10000");
    } else {
        /* 32 credits per RC connection, rc's default: with hybrid's 8 a
         * 64 KiB set costs the server an explicit CREDIT message more
         * (posts_per_large_request counts 3 work requests in 3 doorbells) */
        server_start_with(&s1, base, base + 1, "2", NULL, "rdma_rc_credits=32");
    }

    /* ---- the same calls over TCP and over RDMA ----------------------------------------- */
    struct transcript tcp = {0}, rdma = {0};
    memcached_st *mt = memcached_create(NULL);
    memcached_server_add(mt, "127.0.0.1", (in_port_t)s1.tcp_port);
    memcached_behavior_set(mt, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    memcached_behavior_set(mt, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
    scenario(mt, &tcp);
    memcached_free(mt);
    memcached_st *mr = rdma_client(&s1);
    tap_ok(mr != NULL, "config string --SERVER=%s://%s:%u", rdma_scheme(), rxe, s1.rdma_port);
    tap_ok(memcached_behavior_get(mr, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL) == 1,
           "--BINARY-PROTOCOL selects the binary protocol over RDMA");
    memcached_behavior_set(mr, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
    scenario(mr, &rdma);
    bool same = tcp.len == rdma.len && memcmp(tcp.text, rdma.text, tcp.len) == 0;
    size_t lines = 0;
    for (size_t i = 0; i < tcp.len; i++)
        lines += tcp.text[i] == '\n';
    tap_ok(same, "every call gives the same result over RDMA as over TCP (%zu calls)", lines);
    if (!same) {
        tap_diag("--- tcp\n%s", tcp.text);
        tap_diag("--- rdma\n%s", rdma.text);
    }
    tap_ok(strstr(rdma.text, "DIFFERS") == NULL &&
               strstr(rdma.text, "get sz: SUCCESS len=8388608") != NULL &&
               strstr(rdma.text, "mget of 4 large values: 4 fetched, 4 intact") != NULL,
           "values up to 8 MiB, and an mget of four 300 KB values, arrive intact over RDMA");
    tap_ok(strstr(rdma.text, "cas a (right): SUCCESS") != NULL &&
               strstr(rdma.text, "cas a (stale): SUCCESS") == NULL,
           "cas over RDMA: the right cas stores, a stale one is refused");
    memcached_stat_st *st = memcached_stat(mr, NULL, &(memcached_return_t){0});
    memcached_return_t rc;
    char *curr = st ? memcached_stat_get_value(mr, st, conns_stat(), &rc) : NULL;
    tap_ok(curr != NULL && atoi(curr) >= 1, "stats over RDMA show %s %s", conns_stat(),
           curr ? curr : "(missing)");
    free(curr);
    memcached_st *mr2 = rdma_client(&s1);
    memcached_return_t rc2 = memcached_version(mr2);
    int named, distinct, peers;
    bool negative;
    rdma_conns_named(s1.tcp_port, s1.rdma_port, &named, &distinct, &negative, &peers);
    tap_ok(rc2 == MEMCACHED_SUCCESS && named >= 2 && distinct == named && !negative,
           "stats conns names each RDMA connection by a number of its own (%d connections, %d "
           "numbers%s)",
           named, distinct, negative ? ", negative ones" : "");
    tap_ok(named >= 2 && peers == named,
           "stats conns gives each RDMA connection its client's address and port (%d of %d)", peers,
           named);
    memcached_free(mr2);
    char *rw = st ? memcached_stat_get_value(mr, st, "rdma_rendezvous_writes", &rc) : NULL;
    char *rr = st ? memcached_stat_get_value(mr, st, "rdma_rendezvous_reads", &rc) : NULL;
    if (rdma_over_ud()) {
        tap_ok(rw != NULL && atoi(rw) == 0 && rr != NULL && atoi(rr) == 0,
               "over UD large values went in messages, no rendezvous: rdma_rendezvous_writes %s, "
               "rdma_rendezvous_reads %s",
               rw ? rw : "(missing)", rr ? rr : "(missing)");
    } else {
        tap_ok(rw != NULL && atoi(rw) >= 1,
               "large replies went as RDMA WRITEs: rdma_rendezvous_writes %s",
               rw ? rw : "(missing)");
        tap_ok(rr != NULL && atoi(rr) >= 1,
               "large requests were pulled by RDMA READs: rdma_rendezvous_reads %s",
               rr ? rr : "(missing)");
    }
    free(rr);
    free(rw);
    memcached_stat_free(mr, st);
    free(tcp.text);
    free(rdma.text);
    one_read_per_large_set(mr);
    posts_per_large_request(mr);
    quiet_large_sets(mr);
    large_get_then_many_sets(mr);

    /* ---- server strings ---------------------------------------------------------------- */
    char spec[128];
    snprintf(spec, sizeof(spec), "%s://%s:%u", rdma_scheme(), rxe, s1.rdma_port);
    memcached_server_list_st list = memcached_servers_parse(spec);
    tap_ok(list != NULL && memcached_server_list_count(list) == 1 &&
               list[0].type ==
                   (rdma_over_ud() ? MEMCACHED_CONNECTION_RDMA_UD : MEMCACHED_CONNECTION_RDMA) &&
               list[0].port == s1.rdma_port,
           "memcached_servers_parse(\"%s://host:port\")", rdma_scheme());
    memcached_st *mp = memcached_create(NULL);
    memcached_server_push(mp, list);
    memcached_server_list_free(list);
    rc = memcached_set(mp, "parsed", 6, "yes", 3, 0, 0);
    size_t len = 0;
    char *v = memcached_get(mp, "parsed", 6, &len, &(uint32_t){0}, &rc);
    tap_ok(v && len == 3 && memcmp(v, "yes", 3) == 0, "a client from a parsed server list works");
    free(v);
    memcached_free(mp);

    /* ---- 1,000 non-blocking requests in flight ---------------------------------------- */
    int bad = many_in_flight(mr, 1000);
    tap_ok(bad == 0, "1,000 isets, igets and bgets in flight over RDMA (%d wrong)", bad);

    /* ---- values straight into iget buffers --------------------------------------------- */
    iget_into_caller_buffers(mr);

    /* ---- several clients at once ------------------------------------------------------- */
    long conns_base = rdma_stat(mr, conns_stat());
    pid_t kids[4];
    for (int k = 0; k < 4; k++)
        kids[k] = spawn_client(self, "--client", k, s1.rdma_port);
    int kids_ok = 0;
    for (int k = 0; k < 4; k++) {
        int ws = proc_reap(kids[k], 120000);
        if (ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
            kids_ok++;
    }
    tap_ok(kids_ok == 4,
           "four client processes at once, 300 set/get and 500 in flight each (%d ok)", kids_ok);
    for (int k = 0; k < 3; k++)
        kids[k] = spawn_client(self, "--mixed", k, s1.rdma_port);
    kids_ok = 0;
    for (int k = 0; k < 3; k++) {
        int ws = proc_reap(kids[k], 120000);
        if (ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
            kids_ok++;
        else if (ws == -1 || WIFSIGNALED(ws)) /* a crash, or the kernel's OOM killer */
            tap_diag("mixed client %d: %s %d", k, ws == -1 ? "killed after 120 s" : "signal",
                     ws == -1 ? -1 : WTERMSIG(ws));
    }
    tap_ok(kids_ok == 3,
           "three client processes at once, %d random operations each (sets, noreply sets, gets, "
           "igets, windows of bsets and bgets; values of 0 B .. 1.1 MB around the message and "
           "landing-buffer edges), every read what the process stored last (%d ok)",
           MIXED_OPS, kids_ok);

    /* ---- a client killed in the middle of rendezvous transfers ------------------------- */
    long conns_before = -1; /* the four client processes' connections closed */
    for (int i = 0; i < 250 && conns_before != conns_base; i++) {
        conns_before = rdma_stat(mr, conns_stat());
        if (conns_before != conns_base)
            usleep(20000);
    }
    /* transfers under way: rendezvous over RC; over UD 8 MiB values read
     * and written in messages (12 of them: 96 MiB) */
    const char *moved_a = rdma_over_ud() ? "bytes_read" : "rdma_rendezvous_reads";
    const char *moved_b = rdma_over_ud() ? "bytes_written" : "rdma_rendezvous_writes";
    long unit = rdma_over_ud() ? 8388608 : 1;
    long rv_before = (rdma_stat(mr, moved_a) + rdma_stat(mr, moved_b)) / unit;
    pid_t big = spawn_client(self, "--big", -1, s1.rdma_port);
    long rv_now = rv_before;
    /* UD copies every byte in software: in the emulated guest 12 transfers
     * took more than 4 s */
    for (int i = 0; i < (rdma_over_ud() ? 1500 : 200) && rv_now < rv_before + 12; i++) {
        usleep(20000);
        rv_now = (rdma_stat(mr, moved_a) + rdma_stat(mr, moved_b)) / unit;
    }
    kill(big, SIGKILL);
    proc_reap(big, 10000);
    long conns_after = -1;
    /* over UD the server finds a killed client by its keepalive: probed
     * after 10 s silent, freed after 10 s more */
    for (int i = 0; i < (rdma_over_ud() ? 1500 : 250); i++) {
        conns_after = rdma_stat(mr, conns_stat());
        if (conns_after == conns_before)
            break;
        usleep(20000);
    }
    tap_ok(rv_now >= rv_before + 12 && conns_after == conns_before,
           "a client killed during 8 MiB %s transfers is cleaned up "
           "(%ld transfers seen; %s %ld, before %ld)",
           rdma_over_ud() ? "UD" : "rendezvous", rv_now - rv_before, conns_stat(), conns_after,
           conns_before);
    {
        size_t n = 3000000, l = 0;
        char *val3 = malloc(n);
        fill(val3, n, 99);
        memcached_return_t r = memcached_set(mr, "afterkill", 9, val3, n, 0, 0);
        char *got = memcached_get(mr, "afterkill", 9, &l, &(uint32_t){0}, &r);
        tap_ok(r == MEMCACHED_SUCCESS && got && l == n && memcmp(got, val3, n) == 0,
               "others are served after it (a 3 MB set and get)");
        free(got);
        free(val3);
    }

    /* ---- mixed cluster: one server over TCP, one over RDMA ------------------------------ */
    server_start(&s2, base + 2, base + 3);
    char cfg[256];
    snprintf(cfg, sizeof(cfg), "--SERVER=127.0.0.1:%u --SERVER=%s://%s:%u --BINARY-PROTOCOL",
             s1.tcp_port, rdma_scheme(), rxe, s2.rdma_port);
    memcached_st *mm = memcached(cfg, strlen(cfg));
    int mixed_bad = 0;
    for (int i = 0; i < 200; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "mixed%d", i);
        memcached_return_t src = memcached_set(mm, key, (size_t)kl, key, (size_t)kl, 0, 0);
        if (src != MEMCACHED_SUCCESS && mixed_bad++ == 0)
            tap_diag("mixed cluster: set %s: %s", key, memcached_strerror(mm, src));
    }
    for (int i = 0; i < 200; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "mixed%d", i);
        size_t l = 0;
        char *got = memcached_get(mm, key, (size_t)kl, &l, &(uint32_t){0}, &rc);
        if ((!got || l != (size_t)kl || memcmp(got, key, l) != 0) && mixed_bad++ == 0)
            tap_diag("mixed cluster: get %s: %s, %zu bytes", key, memcached_strerror(mm, rc), l);
        free(got);
    }
    int before_flight = mixed_bad;
    int flight_bad = many_in_flight(mm, 1000);
    mixed_bad += flight_bad;
    if (mixed_bad != 0)
        tap_diag("mixed cluster: %d sets and gets wrong, %d in flight wrong", before_flight,
                 flight_bad);
    /* both servers hold some of the keys */
    memcached_st *m2 = rdma_client(&s2);
    int on_rdma = 0;
    for (int i = 0; i < 200; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "mixed%d", i);
        if (memcached_exist(m2, key, (size_t)kl) == MEMCACHED_SUCCESS)
            on_rdma++;
    }
    tap_ok(mixed_bad == 0 && on_rdma > 0 && on_rdma < 200,
           "mixed cluster (TCP + RDMA): 200 keys and 1,000 in flight, %d of 200 on the RDMA server",
           on_rdma);
    memcached_free(m2);
    memcached_free(mm);

    /* ---- a server that goes away --------------------------------------------------------- */
    memcached_st *mk = rdma_client(&s2);
    memcached_behavior_set(mk, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    memcached_behavior_set(mk, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
    tap_ok(memcached_set(mk, "before", 6, "1", 1, 0, 0) == MEMCACHED_SUCCESS,
           "client connected to the second server");
    kill(s2.pid, SIGSTOP);
    usleep(300000); /* stopped for sure before the requests go out */
    memcached_request_st *inflight[50];
    char kb[50][16];
    for (int i = 0; i < 50; i++) {
        inflight[i] = memcached_request_create(mk);
        memcached_iget(mk, "before", 6, kb[i], sizeof(kb[i]), inflight[i]);
    }
    for (int i = 0; i < 50; i++)
        memcached_test(mk, inflight[i]);
    server_stop(&s2, SIGKILL);
    int failed = 0;
    for (int i = 0; i < 50; i++) {
        memcached_return_t r = memcached_wait(mk, inflight[i]);
        if (r == MEMCACHED_CONNECTION_FAILURE)
            failed++;
        else if (failed == 0 && i == 0)
            tap_diag("first in-flight request: %s", memcached_strerror(mk, r));
        memcached_request_free(inflight[i]);
    }
    tap_ok(failed == 50,
           "a killed server completes 50 in-flight requests with "
           "CONNECTION_FAILURE (%d)",
           failed);
    server_start(&s2, base + 2, base + 3);
    rc = memcached_set(mk, "after", 5, "2", 1, 0, 0);
    if (rc != MEMCACHED_SUCCESS) /* one failed connect may be counted first */
        rc = memcached_set(mk, "after", 5, "2", 1, 0, 0);
    tap_ok(rc == MEMCACHED_SUCCESS, "after a restart the next call reconnects (%s)",
           memcached_strerror(mk, rc));
    memcached_free(mk);

    /* ---- a spinning worker serves its sockets between polling passes --------------------- */
    if (rdma_over_ud()) {
        tap_skip("RC only: rdma_poll=spin spins on RC worker contexts; the UD context is driven "
                 "by events");
    } else {
        struct server s3;
        server_start_with(&s3, base + 4, base + 5, "1", "spin", NULL); /* one worker for both */
        pid_t busy = spawn_client(self, "--busy", -1, s3.rdma_port);
        memcached_st *m3 = rdma_client(&s3);
        long served_before = 0;
        for (int i = 0; i < 200 && served_before < 50; i++) { /* the busy client is at work */
            usleep(50000);
            served_before = rdma_stat(m3, "get_hits");
        }
        memcached_free(m3);
        memcached_st *mt3 = memcached_create(NULL);
        memcached_server_add(mt3, "127.0.0.1", (in_port_t)s3.tcp_port);
        memcached_behavior_set(mt3, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 3000);
        int tcp_bad = 0;
        for (int i = 0; i < 300 && tcp_bad == 0; i++) {
            char key[32];
            int kl = snprintf(key, sizeof(key), "sock%d", i);
            rc = memcached_set(mt3, key, (size_t)kl, key, (size_t)kl, 0, 0);
            if (rc != MEMCACHED_SUCCESS) {
                tap_diag("socket set %d: %s", i, memcached_strerror(mt3, rc));
                tcp_bad++;
            }
            size_t l = 0;
            char *got = memcached_get(mt3, key, (size_t)kl, &l, &(uint32_t){0}, &rc);
            if (!got || l != (size_t)kl || memcmp(got, key, l) != 0) {
                tap_diag("socket get %d: %s", i, memcached_strerror(mt3, rc));
                tcp_bad++;
            }
            free(got);
        }
        m3 = rdma_client(&s3);
        long served_during = rdma_stat(m3, "get_hits") - served_before;
        memcached_free(m3);
        int ws = 0;
        bool busy_alive = waitpid(busy, &ws, WNOHANG) == 0;
        kill(busy, SIGKILL);
        proc_reap(busy, 10000);
        memcached_free(mt3);
        tap_ok(tcp_bad == 0 && busy_alive && served_during >= 300 + 10,
               "a spinning worker busy with an RDMA client serves a socket client too (300 "
               "TCP sets and gets, %d wrong; %ld hits in all meanwhile)",
               tcp_bad, served_during);
        server_stop(&s3, SIGTERM);
    }

    killed_server_names_cause(base + 18);
    idle_rdma_connection(base + 6, base + 7);
    polling_with_test_only(base + 8, base + 9);
    stores_before_close(base + 10, base + 11);
    drain_bounded(base + 12);
    noreply_on_its_way(base + 16, base + 17);
    reply_slower_than_idle(base + 22, base + 23);

    memcached_free(mr);
    server_stop(&s2, SIGTERM);
    server_stop(&s1, SIGTERM);
    tap_no_plan_end();
    return tap_exit_status();
}
