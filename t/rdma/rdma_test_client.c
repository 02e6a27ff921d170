/* t/rdma/rdma_test_client.c: libmemcached-rdma over rdma://host:port against
 * memcached-rdma, inside the Soft-RoCE guest, one client's data calls:
 *   rdma_test_client SERVER_BINARY
 *
 * The same scenario of libmemcached calls runs over TCP and over RDMA, both
 * with the binary protocol, and must give the same transcript (the text
 * protocol's and each call's return code: rdma_test_results); then the
 * server's counts of it (rendezvous, stats conns), large sets' READs and
 * posts, quiet large sets, a large get followed by many sets, server
 * strings and config strings with rdma://, 1,000 non-blocking requests in
 * flight, igets into caller buffers, and a mixed cluster (one server over
 * TCP, one over RDMA). Several client processes are
 * rdma_test_client_procs'; connections closing and servers killed,
 * rdma_test_client_close's.
 *
 * With MC_RDMA_SCHEME=rdma+ud the whole runs over UD: the checks of
 * RC's rendezvous and of values written straight into iget buffers check
 * instead that UD used neither (values come in messages over UD), and the
 * connection counts are rdma_ud_peers. */
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
#include "t/rdma/mc_client.h"
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

/* E-29..E-27: a get reply frame (24 + 4 + value) at the eager payload
 * -1/0/+1 (E-33..E-31: a set request frame of a short key around it);
 * 1048547..1048549 the same around the client's 1 MiB landing buffer for
 * RDMA WRITE replies */
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
        fill_bytes(buf, sizes[i], (unsigned)i);
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
        fill_bytes(buf, 300000, 70 + (unsigned)i);
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
        fill_bytes(buf, 300000, 70 + (unsigned)k);
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
        long reads0 = client_stat(m, "rdma_rendezvous_reads");
        long direct0 = client_stat(m, "rdma_zero_copy_reads");
        memcached_return_t rc = memcached_set(m, "one-read", 8, value, len, 0, 0);
        long reads = client_stat(m, "rdma_rendezvous_reads") - reads0;
        long direct = client_stat(m, "rdma_zero_copy_reads") - direct0;
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
    long before = client_stat(m, "rdma_value_buffer_writes");
    int bad = 0;
    for (size_t i = 0; i < nsizes; i++) {
        fill_bytes(want, vsizes[i], 40 + (unsigned)i);
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
    long after = client_stat(m, "rdma_value_buffer_writes");
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
    fill_bytes(want, 65536, 7);
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
    before = client_stat(m, "rdma_value_buffer_writes");
    rc = memcached_iget(m, "zc-missing", 10, buf, 65536, req);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_wait(m, req);
    memset(buf, 0, 65536);
    rc2 = memcached_iget(m, "zc", 2, buf, 65536, req);
    if (rc2 == MEMCACHED_SUCCESS)
        rc2 = memcached_wait(m, req);
    after = client_stat(m, "rdma_value_buffer_writes");
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
        fill_bytes(want, 65536, 1000 + (unsigned)i);
        memcached_set(m, key, (size_t)kl, want, 65536, 0, (uint32_t)i);
    }
    before = client_stat(m, "rdma_value_buffer_writes");
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
            fill_bytes(want, 65536, 1000 + (unsigned)i);
            if (got == NULL || l != 65536 || memcmp(got, want, l) != 0)
                bad++;
            free(got);
        }
    }
    if (memcached_wait_all(m) != MEMCACHED_SUCCESS)
        bad++;
    for (int i = 0; i < N; i++) {
        fill_bytes(want, 65536, 1000 + (unsigned)i);
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
    after = client_stat(m, "rdma_value_buffer_writes");
    tap_ok(bad == 0 && after - before == (rdma_over_ud() ? 0 : N),
           "100 igets of 64 KiB in flight with bgets and gets in between: all intact (%d wrong), "
           "%ld written straight into their buffers",
           bad, after - before);

    /* two igets in flight whose buffers overlap (one buffer twice, or the
     * first's capacity reaching into the second), then a bget, all answered
     * before the client reads the first reply: all are served, and the
     * connection stays, as over TCP */
    char *w2 = malloc(20000);
    fill_bytes(want, 20000, 71);
    fill_bytes(w2, 20000, 72);
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

/* A large get whose reply needs the landing buffer advertised again,
 * followed at once by many eager sets: their bytes pile up on the server
 * (which pauses the connection) while the get's output waits for the
 * advertisement that comes after them. Everything must complete. */
static void large_get_then_many_sets(memcached_st *m)
{
    enum { SETS = 150, SET_LEN = 7000 };
    size_t n = 3000000, len = 0;
    char *val = malloc(n), *small = malloc(SET_LEN);
    fill_bytes(val, n, 31);
    fill_bytes(small, SET_LEN, 32);
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
    int fd = tcp_connect_loopback(tcp_port);
    static char reply[65536];
    size_t len = 0;
    if (fd >= 0 && write(fd, "stats conns\r\n", 13) == 13) {
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
    if (fd >= 0)
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

int main(int argc, char **argv)
{
    client_tests_env(argc, "rdma_test_client");
    unsigned base = client_tests_begin(argv);
    struct server s1, s2;
    main_server_start(&s1, base);

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

    memcached_free(mr);
    server_stop(&s2, SIGTERM);
    server_stop(&s1, SIGTERM);
    tap_no_plan_end();
    return tap_exit_status();
}
