/*
 * t/test_storage.c: unit tests of the storage engine through items.h (and
 * assoc.h's key hash, to know which keys share a hash chain), printing TAP. Each group starts a
 * fresh engine with the settings it needs; time is moved with clock_advance_for_tests() instead of
 * sleeping. memcached 1.6's behaviour is the reference for every expectation.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/assoc.h"
#include "server/clock.h"
#include "server/flash.h"
#include "server/flash_internal.h"
#include "server/items.h"
#include "server/slabs.h"
#include "t/rdma/tap.h"

/* ---- engine set-up ------------------------------------------------------------ */
#define MIB (1024 * 1024)

static struct storage_config default_config(void)
{
    struct storage_config cfg = {
        .maxbytes = 64 * (size_t)MIB,
        .factor = 1.25,
        .chunk_size = 48,
        .item_size_max = MIB,
        .slab_page_size = MIB,
        .slab_chunk_max = 0,
        .prealloc = false,
        .evict_to_free = true,
        .use_cas = true,
        .hashpower_init = 0,
        .lru_crawler = true,
        .worker_threads = 4,
    };
    return cfg;
}

static int start(const struct storage_config *cfg)
{
    char err[256] = "";
    clock_init();
    int rc = storage_init(cfg, err, sizeof(err));
    if (rc != 0)
        tap_diag("storage_init: %s", err);
    return rc;
}

/* ---- test tools -------------------------------------------------------------------- */
static void fill_pattern(char *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)('a' + (i * 7 + seed * 13 + i / 251) % 26);
}

static void write_value(item *it, const char *val, size_t len)
{
    size_t off = 0;
    unsigned n = item_value_nseg(it);
    for (unsigned i = 0; i < n; i++) {
        struct iovec v = item_value_seg(it, i);
        memcpy(v.iov_base, val + off, v.iov_len);
        off += v.iov_len;
    }
    (void)len;
}

/* Allocates, fills and stores; returns the store result (or -1 when the
 * allocation failed, with *why set). */
static int store_full(const char *key, const char *val, size_t len, uint32_t flags, rel_time_t exp,
                      enum store_op op, uint64_t cas, uint64_t *cas_out, enum alloc_result *why)
{
    enum alloc_result w;
    item *it = item_alloc(key, strlen(key), flags, exp, len, &w);
    if (why)
        *why = w;
    if (!it)
        return -1;
    write_value(it, val, len);
    enum store_result r = item_store(it, op, cas, cas_out);
    item_release(it);
    return (int)r;
}

static int store(const char *key, const char *val, enum store_op op)
{
    return store_full(key, val, strlen(val), 0, 0, op, 0, NULL, NULL);
}

/* The value joined into a malloc'd, NUL-terminated buffer. */
static char *value_of(const item *it)
{
    size_t len = item_nbytes(it), off = 0;
    char *buf = malloc(len + 1);
    unsigned n = item_value_nseg(it);
    for (unsigned i = 0; i < n; i++) {
        struct iovec v = item_value_seg(it, i);
        memcpy(buf + off, v.iov_base, v.iov_len);
        off += v.iov_len;
    }
    buf[off] = '\0';
    return buf;
}

/* 1 when key holds exactly `expect`. */
static int has_value(const char *key, const char *expect)
{
    item *it = item_get(key, strlen(key));
    if (!it)
        return expect == NULL;
    char *v = value_of(it);
    int same = expect && item_nbytes(it) == strlen(expect) && strcmp(v, expect) == 0;
    if (!same)
        tap_diag("%s holds '%.60s' (%zu bytes), expected '%.60s'", key, v, item_nbytes(it),
                 expect ? expect : "(missing)");
    free(v);
    item_release(it);
    return same;
}

static int exists(const char *key)
{
    item *it = item_get(key, strlen(key));
    if (it)
        item_release(it);
    return it != NULL;
}

/* Stats collection into a small list searched by name. */
struct stat_list {
    char names[512][64];
    char values[512][64];
    int n;
};

static void collect(void *ctx, const char *name, const char *value)
{
    struct stat_list *l = ctx;
    if (l->n < 512) {
        snprintf(l->names[l->n], 64, "%s", name);
        snprintf(l->values[l->n], 64, "%s", value);
        l->n++;
    }
}

static const char *stat_get(const struct stat_list *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0)
            return l->values[i];
    return NULL;
}

static unsigned long long general_stat(const char *name)
{
    static struct stat_list l;
    l.n = 0;
    storage_stats_general(collect, &l);
    const char *v = stat_get(&l, name);
    if (!v) {
        tap_diag("stat %s missing", name);
        return (unsigned long long)-1;
    }
    return strtoull(v, NULL, 10);
}

/* total_malloced, from "stats slabs" as memcached has it. */
static unsigned long long malloced(void)
{
    static struct stat_list l;
    l.n = 0;
    storage_stats_slabs(collect, &l);
    const char *v = stat_get(&l, "total_malloced");
    return v ? strtoull(v, NULL, 10) : (unsigned long long)-1;
}

/* Bytes of pages the classes hold (total_malloced less the pool). */
static unsigned long long held(void)
{
    struct slabs_global_stats g;
    slabs_global_stats(&g);
    return g.held_bytes;
}

/* ---- groups ------------------------------------------------------------------------ */
static void test_round_trip(void)
{
    struct storage_config cfg = default_config();
    cfg.item_size_max = 8 * MIB;
    tap_ok(start(&cfg) == 0, "engine starts with -I 8m");

    enum alloc_result why;
    item *it = item_alloc("alpha", 5, 42, 0, 5, &why);
    tap_ok(it != NULL && why == ALLOC_OK, "item_alloc gives a handle");
    write_value(it, "hello", 5);
    uint64_t cas = 0;
    tap_ok(item_store(it, STORE_SET, 0, &cas) == STORE_STORED && cas != 0,
           "set stores, cas assigned");
    tap_ok(item_cas(it) == cas, "stored handle reports the same cas");
    item_release(it);
    it = item_get("alpha", 5);
    tap_ok(it && item_nkey(it) == 5 && memcmp(item_key(it), "alpha", 5) == 0, "get finds the key");
    tap_ok(it && item_flags(it) == 42 && item_nbytes(it) == 5 && item_cas(it) == cas,
           "flags, length and cas round-trip");
    if (it)
        item_release(it);
    tap_ok(has_value("alpha", "hello"), "value round-trips");
    tap_ok(item_get("beta", 4) == NULL, "missing key is a miss");
    tap_ok(store_full("zero", "", 0, 0, 0, STORE_SET, 0, NULL, NULL) == STORE_STORED &&
               has_value("zero", ""),
           "empty value round-trips");

    /* Sizes around the chunking threshold and well beyond it. */
    size_t sizes[] = {1,
                      100,
                      1000,
                      16 * 1024,
                      512 * 1024 - 64,
                      512 * 1024 - 63,
                      512 * 1024 - 62,
                      512 * 1024,
                      512 * 1024 + 1,
                      MIB,
                      2 * MIB + 7,
                      3 * MIB + 12345,
                      7 * MIB};
    int all_ok = 1, chunked_seen = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t len = sizes[i];
        char *val = malloc(len);
        fill_pattern(val, len, (unsigned)i);
        char key[32];
        snprintf(key, sizeof(key), "big:%zu", len);
        it = item_alloc(key, strlen(key), (uint32_t)i, 0, len, &why);
        if (!it) {
            tap_diag("alloc of %zu failed (%d)", len, why);
            all_ok = 0;
            free(val);
            continue;
        }
        write_value(it, val, len);
        item_store(it, STORE_SET, 0, NULL);
        item_release(it);
        it = item_get(key, strlen(key));
        if (!it) {
            tap_diag("%s missing", key);
            all_ok = 0;
        } else {
            char *got = value_of(it);
            if (item_nbytes(it) != len || memcmp(got, val, len) != 0 || item_flags(it) != i) {
                tap_diag("%s differs", key);
                all_ok = 0;
            }
            size_t total = 0;
            for (unsigned s = 0; s < item_value_nseg(it); s++)
                total += item_value_seg(it, s).iov_len;
            if (total != len)
                all_ok = 0;
            if (item_value_nseg(it) > 1)
                chunked_seen = 1;
            free(got);
            item_release(it);
        }
        free(val);
    }
    tap_ok(all_ok, "values of 1 B to 7 MiB, at and around the chunk size, round-trip");
    tap_ok(chunked_seen, "values beyond slab_chunk_max are split into segments");

    tap_ok(item_alloc("huge", 4, 0, 0, 8 * MIB, &why) == NULL && why == ALLOC_TOO_LARGE,
           "a value of item_size_max bytes is too large");
    storage_shutdown();

    cfg = default_config();
    tap_ok(start(&cfg) == 0, "engine restarts with -I 1m");
    it = item_alloc("k", 1, 0, 0, MIB, &why);
    tap_ok(it == NULL && why == ALLOC_TOO_LARGE, "1 MiB value with -I 1m: too large");
    it = item_alloc("k", 1, 0, 0, MIB - 1024, &why);
    tap_ok(it != NULL && why == ALLOC_OK, "1 MiB - 1 KiB value with -I 1m: allowed");
    if (it)
        item_release(it);
    char longkey[KEY_MAX_LENGTH + 2];
    memset(longkey, 'k', sizeof(longkey));
    tap_ok(item_alloc(longkey, KEY_MAX_LENGTH + 1, 0, 0, 1, &why) == NULL, "251-byte key refused");
    it = item_alloc(longkey, KEY_MAX_LENGTH, 0, 0, 1, &why);
    tap_ok(it != NULL, "250-byte key accepted");
    if (it)
        item_release(it);
    storage_shutdown();
}

/* -I up to 1 GiB: a 100 MiB value is stored in slab chunks. */
static void test_huge_item(void)
{
    struct storage_config cfg = default_config();
    cfg.item_size_max = 1024 * (size_t)MIB;
    cfg.maxbytes = 256 * (size_t)MIB;
    tap_ok(start(&cfg) == 0, "engine starts with -I 1g");
    size_t len = 100 * (size_t)MIB + 3;
    char *val = malloc(len);
    fill_pattern(val, len, 11);
    tap_ok(store_full("huge", val, len, 0, 0, STORE_SET, 0, NULL, NULL) == STORE_STORED,
           "a 100 MiB value stores");
    item *it = item_get("huge", 4);
    int same = it && item_nbytes(it) == len;
    size_t off = 0, largest_seg = 0;
    for (unsigned i = 0; same && i < item_value_nseg(it); i++) {
        struct iovec v = item_value_seg(it, i);
        same = off + v.iov_len <= len && memcmp(v.iov_base, val + off, v.iov_len) == 0;
        off += v.iov_len;
        if (v.iov_len > largest_seg)
            largest_seg = v.iov_len;
    }
    tap_ok(same && off == len, "and reads back intact");
    tap_ok(largest_seg <= 1024 * 1024, "in segments no larger than a slab page (largest %zu)",
           largest_seg);
    if (it)
        item_release(it);
    tap_ok(item_delete("huge", 4, 0) == DELETE_DELETED, "and deletes");
    free(val);
    storage_shutdown();
}

/* A small slab_chunk_max: values span many chunks, the last one from a
 * smaller class. */
static void test_small_chunk_max(void)
{
    struct storage_config cfg = default_config();
    cfg.slab_chunk_max = 16387; /* not a multiple of 8: rounded down */
    tap_ok(start(&cfg) == 0, "engine starts with slab_chunk_max 16387");
    size_t sizes[] = {16000, 16384, 16385, 20000, 32768, 33000, 100000, 1000000};
    int all_ok = 1;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char key[32];
        char *val = malloc(sizes[i]);
        fill_pattern(val, sizes[i], (unsigned)i + 40);
        snprintf(key, sizeof(key), "scm:%zu", sizes[i]);
        all_ok &= store_full(key, val, sizes[i], 1, 0, STORE_SET, 0, NULL, NULL) == STORE_STORED;
        item *it = item_get(key, strlen(key));
        char *got = it ? value_of(it) : NULL;
        all_ok &= it && item_nbytes(it) == sizes[i] && memcmp(got, val, sizes[i]) == 0;
        for (unsigned s = 0; it && s < item_value_nseg(it); s++)
            all_ok &= item_value_seg(it, s).iov_len <= 16384;
        free(got);
        if (it)
            item_release(it);
        free(val);
    }
    tap_ok(all_ok, "values around and beyond a 16 KiB chunk size round-trip in 16 KiB segments");
    storage_shutdown();
}

/* The class of every size agrees with a linear search over the classes,
 * for layouts whose largest class is below, at and above the sizes the
 * class lookup table covers. */
static void test_class_of_size(void)
{
    const struct {
        double factor;
        size_t chunk_max;
    } layouts[] = {{1.25, 512 * 1024}, {2.0, 8192}, {1.05, 16384}, {1.25, 16387}, {1.5, 20000}};
    for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
        struct slabs_config cfg = {.factor = layouts[l].factor,
                                   .min_chunk = 48,
                                   .header_size = 50,
                                   .page_size = MIB,
                                   .chunk_max = layouts[l].chunk_max};
        char err[128];
        if (slabs_init(&cfg, err, sizeof(err)) != 0) {
            tap_ok(0, "slabs_init(factor %.2f, chunk_max %zu): %s", cfg.factor, cfg.chunk_max, err);
            continue;
        }
        unsigned largest = slabs_largest_class(), wrong = 0;
        size_t first_wrong = 0;
        for (size_t size = 0; size <= cfg.chunk_max + 64; size++) {
            unsigned want = 0;
            for (unsigned c = 1; size > 0 && c <= largest && want == 0; c++)
                if (slabs_class_size(c) >= size)
                    want = c;
            if (slabs_clsid(size) != want && wrong++ == 0)
                first_wrong = size;
        }
        tap_ok(wrong == 0 && slabs_clsid((size_t)1 << 40) == 0,
               "factor %.2f, largest class %zu bytes (%u classes): every size 0..%zu maps to the "
               "smallest class that holds it (%u wrong, first at %zu)",
               cfg.factor, slabs_class_size(largest), largest, cfg.chunk_max + 64, wrong,
               first_wrong);
        slabs_shutdown();
    }
}

static void test_store_ops(void)
{
    struct storage_config cfg = default_config();
    start(&cfg);
    tap_ok(store("a", "1", STORE_ADD) == STORE_STORED, "add on a missing key stores");
    tap_ok(store("a", "2", STORE_ADD) == STORE_NOT_STORED && has_value("a", "1"),
           "add on an existing key: NOT_STORED, value kept");
    tap_ok(store("r", "x", STORE_REPLACE) == STORE_NOT_STORED && has_value("r", NULL),
           "replace on a missing key: NOT_STORED");
    tap_ok(store("a", "3", STORE_REPLACE) == STORE_STORED && has_value("a", "3"),
           "replace on an existing key stores");
    tap_ok(store("p", "x", STORE_APPEND) == STORE_NOT_STORED &&
               store("p", "x", STORE_PREPEND) == STORE_NOT_STORED,
           "append/prepend on a missing key: NOT_STORED");

    store_full("j", "mid", 3, 77, clock_exptime(1000), STORE_SET, 0, NULL, NULL);
    rel_time_t exp_before = 0;
    item *it = item_get("j", 1);
    if (it) {
        exp_before = item_exptime(it);
        item_release(it);
    }
    tap_ok(store_full("j", "-end", 4, 5, 0, STORE_APPEND, 0, NULL, NULL) == STORE_STORED &&
               has_value("j", "mid-end"),
           "append joins after the value");
    tap_ok(store_full("j", "start-", 6, 9, clock_exptime(5), STORE_PREPEND, 0, NULL, NULL) ==
                   STORE_STORED &&
               has_value("j", "start-mid-end"),
           "prepend joins before the value");
    it = item_get("j", 1);
    tap_ok(it && item_flags(it) == 77 && item_exptime(it) == exp_before,
           "append/prepend keep the old item's flags and exptime");
    if (it)
        item_release(it);

    /* append across chunk boundaries */
    size_t big = 600 * 1024;
    char *val = malloc(big + 10);
    fill_pattern(val, big, 3);
    store_full("bigj", val, big, 0, 0, STORE_SET, 0, NULL, NULL);
    memcpy(val + big, "0123456789", 10);
    tap_ok(store_full("bigj", "0123456789", 10, 0, 0, STORE_APPEND, 0, NULL, NULL) == STORE_STORED,
           "append to a chunked value");
    it = item_get("bigj", 4);
    char *got = it ? value_of(it) : NULL;
    tap_ok(it && item_nbytes(it) == big + 10 && memcmp(got, val, big + 10) == 0,
           "chunked append keeps every byte");
    free(got);
    if (it)
        item_release(it);
    tap_ok(store_full("bigj", val, big, 0, 0, STORE_APPEND, 0, NULL, NULL) == STORE_NOT_STORED,
           "append whose result exceeds item_size_max: NOT_STORED");
    it = item_get("bigj", 4);
    tap_ok(it && item_nbytes(it) == big + 10, "and the value is unchanged");
    if (it)
        item_release(it);
    free(val);

    /* cas */
    uint64_t c1 = 0, c2 = 0;
    store_full("c", "v1", 2, 0, 0, STORE_SET, 0, &c1, NULL);
    tap_ok(store_full("c", "v2", 2, 0, 0, STORE_CAS, c1 + 1000, NULL, NULL) == STORE_EXISTS &&
               has_value("c", "v1"),
           "cas with a stale unique: EXISTS, value kept");
    tap_ok(store_full("c", "v2", 2, 0, 0, STORE_CAS, c1, &c2, NULL) == STORE_STORED &&
               has_value("c", "v2") && c2 != c1,
           "cas with the current unique stores and changes the unique");
    tap_ok(store_full("c", "v3", 2, 0, 0, STORE_CAS, c1, NULL, NULL) == STORE_EXISTS,
           "the old unique no longer matches");
    tap_ok(store_full("nocas", "v", 1, 0, 0, STORE_CAS, 1, NULL, NULL) == STORE_NOT_FOUND,
           "cas on a missing key: NOT_FOUND");
    tap_ok(store_full("c", "v0", 2, 0, 0, STORE_CAS, 0, NULL, NULL) == STORE_EXISTS &&
               has_value("c", "v2"),
           "cas with unique 0 on an existing key: EXISTS");
    uint64_t c3 = 0;
    store_full("c", "v4", 2, 0, 0, STORE_SET, 0, &c3, NULL);
    tap_ok(c3 > c2, "every store takes a new, larger unique");
    tap_ok(store_full("c", "x", 1, 0, 0, STORE_APPEND, c3 + 1, NULL, NULL) == STORE_EXISTS,
           "append with a mismatching unique: EXISTS");

    /* delete */
    uint64_t dc = 0;
    store_full("d", "v", 1, 0, 0, STORE_SET, 0, &dc, NULL);
    tap_ok(item_delete("d", 1, dc + 1) == DELETE_EXISTS && has_value("d", "v"),
           "delete with a wrong unique: EXISTS, item kept");
    tap_ok(item_delete("d", 1, dc) == DELETE_DELETED && has_value("d", NULL),
           "delete with the right unique deletes");
    tap_ok(item_delete("d", 1, 0) == DELETE_NOT_FOUND, "delete of a missing key: NOT_FOUND");
    store("d", "w", STORE_SET);
    tap_ok(item_delete("d", 1, 0) == DELETE_DELETED && has_value("d", NULL), "plain delete");
    storage_shutdown();
}

static void test_cas_disabled(void)
{
    struct storage_config cfg = default_config();
    cfg.use_cas = false;
    start(&cfg);
    uint64_t c = 99;
    store_full("k", "v", 1, 0, 0, STORE_SET, 0, &c, NULL);
    item *it = item_get("k", 1);
    tap_ok(c == 0 && it && item_cas(it) == 0, "with -C every unique reads 0");
    if (it)
        item_release(it);
    tap_ok(store_full("k", "w", 1, 0, 0, STORE_CAS, 5, NULL, NULL) == STORE_EXISTS,
           "with -C cas with a non-zero unique: EXISTS");
    tap_ok(store_full("k", "w", 1, 0, 0, STORE_CAS, 0, NULL, NULL) == STORE_EXISTS &&
               has_value("k", "v"),
           "with -C cas with the unique 0 that gets shows: EXISTS, value kept");
    tap_ok(store_full("missing", "w", 1, 0, 0, STORE_CAS, 0, NULL, NULL) == STORE_NOT_FOUND &&
               store_full("missing", "w", 1, 0, 0, STORE_CAS, 7, NULL, NULL) == STORE_NOT_FOUND &&
               has_value("missing", NULL),
           "with -C cas on a missing key: NOT_FOUND");
    tap_ok(store_full("k", "+a", 2, 0, 0, STORE_APPEND, 5, NULL, NULL) == STORE_STORED &&
               store_full("k", "p+", 2, 0, 0, STORE_PREPEND, 9, NULL, NULL) == STORE_STORED &&
               has_value("k", "p+v+a"),
           "with -C append/prepend ignore the unique given (as memcached)");
    tap_ok(item_delete("k", 1, 3) == DELETE_EXISTS && has_value("k", "p+v+a"),
           "with -C delete with a non-zero unique: EXISTS");
    uint64_t v = 0;
    store("n", "5", STORE_SET);
    tap_ok(item_arith("n", 1, true, 1, 4, &v, NULL, NULL) == ARITH_EXISTS &&
               item_arith("n", 1, true, 1, 0, &v, NULL, NULL) == ARITH_OK && v == 6,
           "with -C incr with a non-zero unique: EXISTS; with 0 it counts");
    tap_ok(item_delete("k", 1, 0) == DELETE_DELETED, "with -C delete with unique 0 deletes");
    storage_shutdown();
}

static int arith_is(const char *key, bool incr, uint64_t delta, enum arith_result want,
                    uint64_t want_value)
{
    uint64_t v = 12345;
    enum arith_result r = item_arith(key, strlen(key), incr, delta, 0, &v, NULL, NULL);
    if (r != want || (want == ARITH_OK && v != want_value)) {
        tap_diag("arith %s: result %d value %llu", key, r, (unsigned long long)v);
        return 0;
    }
    return 1;
}

/* An arith_carry_fn that notes its calls. */
static struct {
    int calls;
    uint64_t old_cas, new_cas;
} carried;

static void note_carry(const char *key, size_t nkey, uint64_t old_cas, uint64_t new_cas)
{
    (void)key;
    (void)nkey;
    carried.calls++;
    carried.old_cas = old_cas;
    carried.new_cas = new_cas;
}

static void test_arith(void)
{
    struct storage_config cfg = default_config();
    start(&cfg);
    store("n", "1", STORE_SET);
    tap_ok(arith_is("n", true, 1, ARITH_OK, 2) && has_value("n", "2"), "incr 1 -> 2");
    tap_ok(arith_is("n", false, 5, ARITH_OK, 0) && has_value("n", "0"),
           "decr below zero stops at 0");
    store("w", "18446744073709551615", STORE_SET);
    tap_ok(arith_is("w", true, 1, ARITH_OK, 0) && has_value("w", "0"), "incr wraps at 2^64");
    store("w", "18446744073709551610", STORE_SET);
    tap_ok(arith_is("w", true, 10, ARITH_OK, 4), "incr past 2^64 wraps modulo 2^64");
    store("w20", "00000000000000000007", STORE_SET);
    tap_ok(arith_is("w20", true, 1, ARITH_OK, 8), "20-digit value with leading zeros is numeric");
    store("big", "18446744073709551616", STORE_SET);
    tap_ok(arith_is("big", true, 1, ARITH_NON_NUMERIC, 0), "value above 2^64-1 is non-numeric");
    store("long", "000000000000000000000000001", STORE_SET);
    tap_ok(arith_is("long", true, 1, ARITH_OK, 2) && has_value("long", "2"),
           "leading zeros do not count towards the 20 digits (memcached)");
    store("long", "123456789012345678901", STORE_SET);
    tap_ok(arith_is("long", true, 1, ARITH_NON_NUMERIC, 0),
           "21 significant digits are non-numeric");
    store("sp", "12  ", STORE_SET);
    tap_ok(arith_is("sp", true, 1, ARITH_OK, 13) && has_value("sp", "13"),
           "trailing spaces end the number (memcached)");
    store("sp", " 7", STORE_SET);
    tap_ok(arith_is("sp", false, 2, ARITH_OK, 5), "leading spaces are skipped (memcached)");
    store("sp", "   ", STORE_SET);
    tap_ok(arith_is("sp", true, 1, ARITH_NON_NUMERIC, 0), "spaces alone are non-numeric");
    store("alpha", "12a", STORE_SET);
    tap_ok(arith_is("alpha", true, 1, ARITH_NON_NUMERIC, 0) && has_value("alpha", "12a"),
           "value with a non-digit is non-numeric and left alone");
    store("empty", "", STORE_SET);
    tap_ok(arith_is("empty", false, 1, ARITH_NON_NUMERIC, 0), "empty value is non-numeric");
    store("neg", "-5", STORE_SET);
    tap_ok(arith_is("neg", true, 1, ARITH_NON_NUMERIC, 0), "negative value is non-numeric");
    tap_ok(arith_is("missing", true, 1, ARITH_NOT_FOUND, 0), "incr of a missing key: NOT_FOUND");

    store_full("grow", "99", 2, 31, 0, STORE_SET, 0, NULL, NULL);
    tap_ok(arith_is("grow", true, 1, ARITH_OK, 100) && has_value("grow", "100"),
           "incr 99 -> 100 grows the value to 3 bytes");
    item *it = item_get("grow", 4);
    tap_ok(it && item_flags(it) == 31, "flags survive a length-changing incr");
    if (it)
        item_release(it);
    tap_ok(arith_is("grow", false, 1, ARITH_OK, 99) && has_value("grow", "99"),
           "decr 100 -> 99 shrinks the value to 2 bytes");

    /* A reader holding the item keeps seeing the old value. */
    store("held", "41", STORE_SET);
    item *held = item_get("held", 4);
    tap_ok(arith_is("held", true, 1, ARITH_OK, 42) && has_value("held", "42"),
           "incr of a held item");
    char *v = held ? value_of(held) : NULL;
    tap_ok(v && strcmp(v, "41") == 0, "the held handle still reads the old value");
    free(v);
    if (held)
        item_release(held);

    uint64_t c = 0, newc = 0, val = 0;
    store_full("ca", "5", 1, 0, 0, STORE_SET, 0, &c, NULL);
    tap_ok(item_arith("ca", 2, true, 1, c + 7, &val, NULL, NULL) == ARITH_EXISTS,
           "incr with a wrong unique: EXISTS");
    tap_ok(item_arith("ca", 2, true, 1, c, &val, &newc, NULL) == ARITH_OK && val == 6 &&
               newc != c && newc != 0,
           "incr with the right unique works and gives a new unique");

    /* What belongs to a version carries over only where memcached rewrites
     * in place: a number no longer than before, nobody else holding it. */
    store_full("cv", "50", 2, 0, 0, STORE_SET, 0, &c, NULL);
    carried.calls = 0;
    tap_ok(item_arith("cv", 2, true, 1, 0, &val, &newc, note_carry) == ARITH_OK &&
               carried.calls == 1 && carried.old_cas == c && carried.new_cas == newc && newc != c,
           "same length: carried from the old cas to the new one");
    tap_ok(item_arith("cv", 2, false, 46, 0, &val, &newc, note_carry) == ARITH_OK && val == 5 &&
               carried.calls == 2 && carried.new_cas == newc && has_value("cv", "5"),
           "a shorter number carries too (memcached pads it in place)");
    tap_ok(item_arith("cv", 2, true, 95, 0, &val, &newc, note_carry) == ARITH_OK && val == 100 &&
               carried.calls == 2,
           "a longer number is a new item: nothing carried");
    held = item_get("cv", 2);
    tap_ok(item_arith("cv", 2, true, 1, 0, &val, &newc, note_carry) == ARITH_OK &&
               carried.calls == 2,
           "with a reader holding the item: nothing carried");
    if (held)
        item_release(held);

    /* md I: a new cas in place, told to recas; a wrong cas or no item */
    store_full("iv", "7", 1, 0, 0, STORE_SET, 0, &c, NULL);
    held = item_get("iv", 2);
    carried.calls = 0;
    tap_ok(item_invalidate("iv", 2, true, c + 1, false, 0, &newc, note_carry) == STORE_EXISTS &&
               item_invalidate("nx", 2, false, 0, false, 0, &newc, note_carry) == STORE_NOT_FOUND &&
               carried.calls == 0,
           "invalidate: a wrong cas is EXISTS, a missing key NOT_FOUND");
    tap_ok(item_invalidate("iv", 2, true, c, true, clock_now() + 50, &newc, note_carry) ==
                   STORE_STORED &&
               newc > c && carried.calls == 1 && carried.old_cas == c && carried.new_cas == newc,
           "invalidate: a new cas, told to recas, while a reader holds the item");
    tap_ok(held && item_cas(held) == newc && item_exptime(held) == clock_now() + 50 &&
               has_value("iv", "7"),
           "invalidate: the same item, its value kept, the new TTL set");
    if (held)
        item_release(held);
    storage_shutdown();
}

static void test_expiry_and_touch(void)
{
    struct storage_config cfg = default_config();
    start(&cfg);
    tap_ok(clock_exptime(0) == 0, "exptime 0 never expires");
    tap_ok(clock_exptime(-1) != 0 && clock_exptime(-1) < clock_now(),
           "negative exptime is in the past");
    tap_ok(clock_exptime(100) == clock_now() + 100, "exptime up to 30 days is relative");
    time_t future = clock_unix_now() + 500;
    tap_ok(clock_exptime((int64_t)future) == clock_now() + 500,
           "larger exptime is an absolute unix time");
    tap_ok(clock_exptime((int64_t)clock_unix_now() - 100) < clock_now(),
           "absolute time in the past is already expired");

    store_full("e", "v", 1, 0, clock_exptime(10), STORE_SET, 0, NULL, NULL);
    store_full("forever", "v", 1, 0, 0, STORE_SET, 0, NULL, NULL);
    tap_ok(has_value("e", "v"), "item with a 10 s ttl is there at first");
    unsigned long long expired_before = general_stat("get_expired");
    clock_advance_for_tests(11);
    tap_ok(has_value("e", NULL), "and gone 11 s later");
    tap_ok(general_stat("get_expired") == expired_before + 1, "get_expired counts the expired hit");
    tap_ok(has_value("forever", "v"), "exptime 0 item stays");

    store_full("neg", "v", 1, 0, clock_exptime(-1), STORE_SET, 0, NULL, NULL);
    tap_ok(has_value("neg", NULL), "negative exptime: stored already expired");
    tap_ok(store("neg", "w", STORE_ADD) == STORE_STORED, "add over an expired item stores");

    store_full("t", "v", 1, 0, clock_exptime(5), STORE_SET, 0, NULL, NULL);
    tap_ok(item_touch("t", 1, clock_exptime(100)), "touch of an existing key");
    clock_advance_for_tests(10);
    tap_ok(has_value("t", "v"), "touched item outlives its first ttl");
    tap_ok(!item_touch("nothere", 7, clock_exptime(10)), "touch of a missing key fails");

    item *it = item_get_touch("t", 1, clock_exptime(3));
    tap_ok(it && item_exptime(it) == clock_now() + 3,
           "get-and-touch returns the item with the new ttl");
    if (it)
        item_release(it);
    clock_advance_for_tests(4);
    tap_ok(item_get_touch("t", 1, clock_exptime(3)) == NULL,
           "get-and-touch of an expired item misses");

    /* The crawler reclaims expired items nobody asks for. */
    char key[32];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "crawl:%d", i);
        store_full(key, "xyz", 3, 0, clock_exptime(2), STORE_SET, 0, NULL, NULL);
    }
    unsigned long long items_before = general_stat("curr_items");
    unsigned long long reclaimed_before = general_stat("crawler_reclaimed");
    clock_advance_for_tests(3);
    storage_crawl_now();
    tap_ok(general_stat("crawler_reclaimed") - reclaimed_before == 50,
           "the crawler reclaims the 50 expired items");
    tap_ok(general_stat("curr_items") == items_before - 50, "curr_items drops by 50");
    tap_ok(general_stat("crawler_items_checked") >= 50, "crawler_items_checked counts");
    storage_shutdown();

    /* The background crawler does the same on its own. */
    start(&cfg);
    tap_ok(storage_start_threads() == 0, "background threads start");
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof(key), "bg:%d", i);
        store_full(key, "xyz", 3, 0, clock_exptime(2), STORE_SET, 0, NULL, NULL);
    }
    clock_advance_for_tests(10);
    struct timespec step = {0, 100 * 1000 * 1000};
    for (int i = 0; i < 100 && general_stat("crawler_reclaimed") < 30; i++)
        nanosleep(&step, NULL);
    tap_ok(general_stat("crawler_reclaimed") == 30 && general_stat("curr_items") == 0,
           "the background crawler reclaims expired items within seconds");
    tap_ok(storage_crawler_enable(false) == 0 && storage_crawler_enable(false) != 0,
           "lru_crawler disable works once");
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "off:%d", i);
        store_full(key, "xyz", 3, 0, clock_exptime(2), STORE_SET, 0, NULL, NULL);
    }
    clock_advance_for_tests(10);
    for (int i = 0; i < 15; i++) /* an enabled crawler would act within this */
        nanosleep(&step, NULL);
    tap_ok(general_stat("crawler_reclaimed") == 30, "a disabled crawler reclaims nothing");
    tap_ok(storage_crawler_enable(true) == 0 && storage_crawler_enable(true) != 0,
           "lru_crawler enable works once");
    storage_crawler_set_tocrawl(0);
    /* an allocation reuses an expired item at its class's tail first
     * ("reclaimed"): storing the next 10 may take the 10 above that way */
    unsigned long long before_soon = general_stat("crawler_reclaimed") + general_stat("reclaimed");
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "soon:%d", i);
        store_full(key, "xyz", 3, 0, clock_exptime(1), STORE_SET, 0, NULL, NULL);
    }
    clock_advance_for_tests(2);
    storage_crawl_soon();
    for (int i = 0; i < 100 && general_stat("crawler_reclaimed") + general_stat("reclaimed") <
                                   before_soon + 20;
         i++)
        nanosleep(&step, NULL);
    tap_ok(general_stat("crawler_reclaimed") + general_stat("reclaimed") == before_soon + 20,
           "storage_crawl_soon has the background crawler reclaim them");
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "off2:%d", i);
        store_full(key, "xyz", 3, 0, clock_exptime(1), STORE_SET, 0, NULL, NULL);
    }
    clock_advance_for_tests(2);
    unsigned long long before_limit = general_stat("crawler_reclaimed");
    storage_crawler_set_tocrawl(4);
    storage_crawl_now();
    tap_ok(general_stat("crawler_reclaimed") == before_limit + 4,
           "tocrawl 4 limits a pass to 4 items per class");
    storage_crawler_set_tocrawl(0);
    tap_ok(storage_crawler_set_sleep(2000000) != 0 && storage_crawler_set_sleep(50) == 0,
           "lru_crawler sleep accepts at most one second");
    storage_shutdown();
}

static void test_flush(void)
{
    struct storage_config cfg = default_config();
    start(&cfg);
    store("f1", "a", STORE_SET);
    store("f2", "b", STORE_SET);
    storage_flush_all(0);
    tap_ok(has_value("f1", NULL) && has_value("f2", NULL), "flush_all invalidates everything");
    tap_ok(general_stat("get_flushed") >= 1, "get_flushed counts");
    store("f3", "c", STORE_SET);
    tap_ok(has_value("f3", "c"), "items stored after flush_all (same second) stay");
    tap_ok(store("f1", "x", STORE_ADD) == STORE_STORED, "add over a flushed item stores");

    store("d1", "a", STORE_SET);
    storage_flush_all(clock_exptime(5));
    tap_ok(has_value("d1", "a") && has_value("f3", "c"), "delayed flush_all leaves items for now");
    clock_advance_for_tests(6);
    tap_ok(has_value("d1", NULL) && has_value("f3", NULL), "delayed flush_all takes effect later");
    store("d2", "b", STORE_SET);
    tap_ok(has_value("d2", "b"), "items stored after the delayed flush time stay");
    storage_shutdown();
}

static void test_eviction(void)
{
    struct storage_config cfg = default_config();
    cfg.maxbytes = 4 * MIB;
    start(&cfg);
    char key[32], val[1000];
    fill_pattern(val, sizeof(val), 1);
    int fails = 0, n = 20000;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "ev:%d", i);
        if (store_full(key, val, sizeof(val), 0, 0, STORE_SET, 0, NULL, NULL) != STORE_STORED)
            fails++;
    }
    tap_ok(fails == 0, "20000 x 1000-byte sets into -m 4 all store (evicting)");
    tap_ok(general_stat("evictions") > 0, "evictions counted");
    tap_ok(has_value("ev:0", NULL), "the oldest item was evicted");
    snprintf(key, sizeof(key), "ev:%d", n - 1);
    item *it = item_get(key, strlen(key));
    tap_ok(it != NULL, "the newest item is there");
    if (it)
        item_release(it);
    tap_ok(malloced() <= 4 * MIB + 64 * MIB, "memory stays near the limit");

    /* Segmented LRU with its maintainer: an item read all along stays
     * (HOT -> WARM, kept in WARM while read); one never read is evicted. */
    storage_shutdown();
    cfg.lru_maintainer = true;
    cfg.lru_segmented = true;
    start(&cfg);
    tap_ok(storage_start_threads() == 0 && storage_lru_maintainer_running(),
           "the LRU maintainer thread runs");
    store_full("hot", val, sizeof(val), 0, 0, STORE_SET, 0, NULL, NULL);
    store_full("cold", val, sizeof(val), 0, 0, STORE_SET, 0, NULL, NULL);
    int hot_hits = 0, rounds = 0;
    for (int i = 0; i < n; i += 200, rounds++) {
        for (int j = i; j < i + 200; j++) {
            snprintf(key, sizeof(key), "flood:%d", j);
            store_full(key, val, sizeof(val), 0, 0, STORE_SET, 0, NULL, NULL);
        }
        hot_hits += exists("hot");
    }
    tap_ok(hot_hits == rounds, "a key read between every 200 sets is never evicted (%d of %d)",
           hot_hits, rounds);
    tap_ok(!exists("cold"), "a key never read is evicted");
    tap_ok(general_stat("moves_to_cold") > 0 && general_stat("moves_to_warm") > 0,
           "moves_to_cold and moves_to_warm count the moves (%llu, %llu)",
           general_stat("moves_to_cold"), general_stat("moves_to_warm"));
    tap_ok(general_stat("lru_maintainer_juggles") > 0, "the maintainer juggles");
    cfg.lru_maintainer = false;
    cfg.lru_segmented = false;

    /* A referenced item survives eviction pressure untouched. */
    store_full("pinned", val, sizeof(val), 0, 0, STORE_SET, 0, NULL, NULL);
    item *pinned = item_get("pinned", 6);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "ev2:%d", i);
        store_full(key, val + 1, sizeof(val) - 1, 0, 0, STORE_SET, 0, NULL, NULL);
    }
    char *pv = pinned ? value_of(pinned) : NULL;
    tap_ok(pv && item_nbytes(pinned) == sizeof(val) && memcmp(pv, val, sizeof(val)) == 0 &&
               memcmp(item_key(pinned), "pinned", 6) == 0,
           "a referenced item is never evicted or reused");
    free(pv);
    if (pinned)
        item_release(pinned);
    storage_shutdown();

    cfg.evict_to_free = false;
    start(&cfg);
    enum alloc_result why = ALLOC_OK;
    int stored = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "M:%d", i);
        if (store_full(key, val, sizeof(val), 0, 0, STORE_SET, 0, NULL, &why) != STORE_STORED)
            break;
        stored++;
    }
    tap_ok(stored > 0 && stored < n && why == ALLOC_NO_MEMORY,
           "with -M a full cache: ALLOC_NO_MEMORY");
    tap_ok(exists("M:0"), "with -M the first item is still there");
    tap_ok(general_stat("evictions") == 0, "with -M nothing is evicted");
    /* Expired items are still reclaimed with -M. */
    store("M:0", "short", STORE_SET);
    storage_flush_all(0);
    clock_advance_for_tests(1);
    tap_ok(store_full("after", val, sizeof(val), 0, 0, STORE_SET, 0, NULL, NULL) == STORE_STORED,
           "with -M flushed items make room again");
    storage_shutdown();

    /* With -M and a full class, append and a growing incr have no room
     * for their new item. */
    start(&cfg);
    store("counter", "99", STORE_SET);
    store_full("joinme", val, 900, 0, 0, STORE_SET, 0, NULL, NULL);
    item *tail = item_alloc("joinme", 6, 0, 0, 1, &why); /* taken before memory fills */
    if (tail)
        write_value(tail, "x", 1);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "M:%d", i);
        if (store_full(key, val, 900, 0, 0, STORE_SET, 0, NULL, &why) != STORE_STORED)
            break;
    }
    for (int i = 0; i < n; i++) { /* fill the small class too */
        snprintf(key, sizeof(key), "S:%d", i);
        if (store_full(key, "12", 2, 0, 0, STORE_SET, 0, NULL, &why) != STORE_STORED)
            break;
    }
    tap_ok(tail && item_store(tail, STORE_APPEND, 0, NULL) == STORE_NO_MEMORY,
           "with -M append into a full class: STORE_NO_MEMORY");
    uint64_t v = 0;
    tap_ok(item_arith("counter", 7, true, 1, 0, &v, NULL, NULL) == ARITH_NO_MEMORY &&
               has_value("counter", "99"),
           "with -M incr 99 -> 100 in a full class: ARITH_NO_MEMORY, value kept");
    if (tail)
        item_release(tail);
    storage_shutdown();
}

/* Memory freed by deletes goes back to a pool that other classes use. */
/* A per-class "stats slabs" figure of the class with the given chunk size. */
static long long class_stat(size_t chunk_size, const char *name)
{
    static struct stat_list l;
    l.n = 0;
    storage_stats_slabs(collect, &l);
    char want[16], stat[80];
    snprintf(want, sizeof(want), "%zu", chunk_size);
    for (int i = 0; i < l.n; i++) {
        char *colon = strchr(l.names[i], ':');
        if (!colon || strcmp(colon + 1, "chunk_size") != 0 || strcmp(l.values[i], want) != 0)
            continue;
        snprintf(stat, sizeof(stat), "%.*s:%s", (int)(colon - l.names[i]), l.names[i], name);
        const char *v = stat_get(&l, stat);
        return v ? atoll(v) : -1;
    }
    return -1;
}

/* With memory at its limit, a full class borrows spare chunks of a larger
 * class (at most twice its size) that already holds a page, before it
 * evicts. */
/* The flash tier's seam: the oldest COLD items, referenced, nothing moved;
 * items others hold are skipped. */
static void test_cold_select(void)
{
    struct storage_config cfg = default_config(); /* flat: every item in COLD */
    start(&cfg);
    store("cs:a", "1", STORE_SET);
    store("cs:b", "2", STORE_SET);
    store("cs:c", "3", STORE_SET);
    item *got[4] = {NULL};
    unsigned cls = 0;
    item *probe = item_peek("cs:a", 4);
    if (probe) {
        cls = item_class(probe);
        item_release(probe);
    }
    unsigned n = storage_cold_select(cls, 2, got);
    tap_ok(n == 2 && memcmp(item_key(got[0]), "cs:a", 4) == 0 &&
               memcmp(item_key(got[1]), "cs:b", 4) == 0,
           "storage_cold_select: the two oldest COLD items, oldest first");
    for (unsigned i = 0; i < n; i++)
        item_release(got[i]);
    item *held = item_peek("cs:a", 4);
    n = storage_cold_select(cls, 4, got);
    tap_ok(n == 2 && memcmp(item_key(got[0]), "cs:b", 4) == 0,
           "an item someone holds is skipped (%u)", n);
    for (unsigned i = 0; i < n; i++)
        item_release(got[i]);
    if (held)
        item_release(held);
    tap_ok(storage_cold_select(0, 4, got) == 0 && storage_cold_select(200, 4, got) == 0,
           "no class, no items");
    tap_ok(has_value("cs:a", "1") && has_value("cs:b", "2") && has_value("cs:c", "3"),
           "nothing was moved or lost");
    storage_shutdown();

    cfg.lru_segmented = true; /* new items in HOT: none in COLD yet */
    start(&cfg);
    store("cs:h", "1", STORE_SET);
    probe = item_peek("cs:h", 4);
    cls = probe ? item_class(probe) : 0;
    if (probe)
        item_release(probe);
    tap_ok(cls && storage_cold_select(cls, 4, got) == 0,
           "segmented: a new item is in HOT, not COLD");
    storage_shutdown();
}

static void test_borrow(void)
{
    struct storage_config cfg = default_config();
    cfg.maxbytes = 2 * MIB; /* one page for each of the two classes */
    start(&cfg);
    char key[32], val[1300];
    fill_pattern(val, sizeof(val), 4);
    /* 1000-byte values with 6..8-byte keys: 1184-byte chunks (885 a page);
     * a 1300-byte value opens the 1480-byte class (708 a page). */
    store_full("opener", val, 1300, 0, 0, STORE_SET, 0, NULL, NULL);
    store_full("filler", val, 1000, 0, 0, STORE_SET, 0, NULL, NULL);
    int n = 885 + 300, failed = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "b:%d", i);
        failed += store_full(key, val, 1000, 0, 0, STORE_SET, 0, NULL, NULL) != STORE_STORED;
    }
    tap_ok(failed == 0 && general_stat("evictions") == 0,
           "a full class borrows a larger class's spare chunks instead of evicting");
    tap_ok(class_stat(1184, "used_chunks") == 885 && class_stat(1480, "used_chunks") == 302,
           "the borrowed chunks count in the lending class (%lld, %lld)",
           class_stat(1184, "used_chunks"), class_stat(1480, "used_chunks"));
    tap_ok(malloced() == 2 * MIB, "no page taken for it (%llu)", malloced());
    int intact = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "b:%d", i);
        item *it = item_get(key, strlen(key));
        if (it) {
            char *v = value_of(it);
            intact += item_nbytes(it) == 1000 && memcmp(v, val, 1000) == 0;
            free(v);
            item_release(it);
        }
    }
    tap_ok(intact == n, "every item, borrowed or not, reads back intact (%d of %d)", intact, n);
    for (int i = n - 300; i < n; i++) {
        snprintf(key, sizeof(key), "b:%d", i);
        item_delete(key, strlen(key), 0);
    }
    tap_ok(class_stat(1480, "used_chunks") == 2 && class_stat(1184, "used_chunks") == 885,
           "deleting them gives the chunks back to the class they came from");
    /* Once the lender is full too, the class evicts its own oldest. */
    for (int i = 0; i < 3 * n; i++) {
        snprintf(key, sizeof(key), "c:%d", i);
        failed += store_full(key, val, 1000, 0, 0, STORE_SET, 0, NULL, NULL) != STORE_STORED;
    }
    snprintf(key, sizeof(key), "c:%d", 3 * n - 1);
    tap_ok(failed == 0 && general_stat("evictions") > 0 && has_value("b:0", NULL) && exists(key) &&
               malloced() == 2 * MIB,
           "with no spare chunk left the class evicts, within the limit");
    tap_ok(class_stat(1480, "used_chunks") == 708, "the lender's page is all in use (%lld)",
           class_stat(1480, "used_chunks"));
    storage_shutdown();

    /* With -M, borrowing stores what would otherwise be out of memory. */
    cfg.evict_to_free = false;
    start(&cfg);
    store_full("opener", val, 1300, 0, 0, STORE_SET, 0, NULL, NULL);
    failed = 0;
    for (int i = 0; i < 885 + 707; i++) {
        snprintf(key, sizeof(key), "m:%d", i);
        failed += store_full(key, val, 1000, 0, 0, STORE_SET, 0, NULL, NULL) != STORE_STORED;
    }
    tap_ok(failed == 0, "-M: a full class stores in a larger class's spare chunks");
    enum alloc_result why = ALLOC_OK;
    tap_ok(store_full("m:last", val, 1000, 0, 0, STORE_SET, 0, NULL, &why) == -1 &&
               why == ALLOC_NO_MEMORY,
           "-M: out of memory once those are used up");
    storage_shutdown();
}

/* Pages of value chunks emptied while readers hold and read the values:
 * each live chunk is copied and its item's chunk table updated under the
 * item lock, so no reader ever sees a value change. */
enum { CHUNKY_ITEMS = 1000, CHUNKY_LEN = 11000, CHUNKY_READERS = 2 };
static atomic_int chunky_stop;
static atomic_long chunky_torn, chunky_reads;

static void chunky_value(char *buf, int i)
{
    for (int at = 0; at < CHUNKY_LEN; at += 8) {
        char word[16];
        snprintf(word, sizeof(word), "%08d", i % 100000000);
        memcpy(buf + at, word, CHUNKY_LEN - at < 8 ? (size_t)(CHUNKY_LEN - at) : 8);
    }
}

static void *chunky_reader(void *arg)
{
    unsigned seed = (unsigned)(long)arg * 7919u + 1u;
    char key[32], want[CHUNKY_LEN];
    while (!atomic_load(&chunky_stop)) {
        seed = seed * 1103515245u + 12345u;
        int i = (int)((seed >> 8) % CHUNKY_ITEMS) | 1; /* the kept ones */
        snprintf(key, sizeof(key), "chunky:%d", i);
        item *it = item_get(key, strlen(key));
        if (!it)
            continue;
        char *v = value_of(it);
        chunky_value(want, i);
        if (item_nbytes(it) != CHUNKY_LEN || memcmp(v, want, CHUNKY_LEN) != 0)
            atomic_fetch_add(&chunky_torn, 1);
        atomic_fetch_add(&chunky_reads, 1);
        free(v);
        item_release(it);
    }
    return NULL;
}

static void test_value_chunk_pages(void)
{
    struct storage_config cfg = default_config();
    cfg.maxbytes = 32 * MIB;
    cfg.slab_chunk_max = 4096;
    start(&cfg);
    char key[32], val[CHUNKY_LEN];
    for (int i = 0; i < CHUNKY_ITEMS; i++) {
        snprintf(key, sizeof(key), "chunky:%d", i);
        chunky_value(val, i);
        store_full(key, val, CHUNKY_LEN, 0, 0, STORE_SET, 0, NULL, NULL);
    }
    for (int i = 0; i < CHUNKY_ITEMS; i += 2) { /* room for the rescues */
        snprintf(key, sizeof(key), "chunky:%d", i);
        item_delete(key, strlen(key), 0);
    }
    atomic_store(&chunky_stop, 0);
    atomic_store(&chunky_torn, 0);
    atomic_store(&chunky_reads, 0);
    pthread_t th[CHUNKY_READERS];
    for (long i = 0; i < CHUNKY_READERS; i++)
        pthread_create(&th[i], NULL, chunky_reader, (void *)i);
    int moved = 0;
    struct timespec pause = {0, 20 * 1000 * 1000};
    for (int n = 0; n < 3; n++) { /* synchronous: the mover thread is not running */
        nanosleep(&pause, NULL);
        moved += storage_slabs_reassign((int)slabs_largest_class(), 0) == REASSIGN_OK;
    }
    nanosleep(&pause, NULL);
    atomic_store(&chunky_stop, 1);
    for (int i = 0; i < CHUNKY_READERS; i++)
        pthread_join(th[i], NULL);
    tap_ok(moved > 0 && general_stat("slab_reassign_chunk_rescues") > 0,
           "pages of value chunks emptied (%d moves, %llu chunks rescued)", moved,
           general_stat("slab_reassign_chunk_rescues"));
    tap_ok(atomic_load(&chunky_torn) == 0 && atomic_load(&chunky_reads) > 0,
           "readers never saw a value change meanwhile (%ld reads)", atomic_load(&chunky_reads));
    int kept = 0, intact = 0;
    for (int i = 1; i < CHUNKY_ITEMS; i += 2) {
        snprintf(key, sizeof(key), "chunky:%d", i);
        item *it = item_get(key, strlen(key));
        if (!it)
            continue;
        kept++;
        char *v = value_of(it);
        chunky_value(val, i);
        intact += item_nbytes(it) == CHUNKY_LEN && memcmp(v, val, CHUNKY_LEN) == 0;
        free(v);
        item_release(it);
    }
    tap_ok(kept == intact &&
               kept + (int)general_stat("slab_reassign_evictions_nomem") >= CHUNKY_ITEMS / 2,
           "every item kept is whole (%d of %d; %llu lost to moves)", intact, kept,
           general_stat("slab_reassign_evictions_nomem"));
    storage_shutdown();
}

static void test_page_reuse(void)
{
    struct storage_config cfg = default_config();
    cfg.maxbytes = 8 * MIB;
    start(&cfg);
    char key[32], small[1000];
    fill_pattern(small, sizeof(small), 5);
    int n = 0;
    while (n < 100000 && general_stat("evictions") == 0) {
        snprintf(key, sizeof(key), "small:%d", n++);
        store_full(key, small, sizeof(small), 0, 0, STORE_SET, 0, NULL, NULL);
    }
    unsigned long long full = malloced();
    tap_ok(full >= 7 * MIB, "1000-byte items fill -m 8 (%llu bytes of pages)", full);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "small:%d", i);
        item_delete(key, strlen(key), 0);
    }
    tap_ok(held() <= 2 * MIB, "deleting them returns the pages to the pool (%llu left)", held());
    tap_ok(malloced() == full,
           "total_malloced still counts the pooled pages, as memcached does (%llu of %llu)",
           malloced(), full);
    tap_ok(general_stat("slab_global_page_pool") >= 5, "slab_global_page_pool counts them (%llu)",
           general_stat("slab_global_page_pool"));
    size_t big = 300 * 1024;
    char *val = malloc(big);
    fill_pattern(val, big, 6);
    int stored = 0;
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof(key), "large:%d", i);
        stored += store_full(key, val, big, 0, 0, STORE_SET, 0, NULL, NULL) == STORE_STORED;
    }
    int present = 0;
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof(key), "large:%d", i);
        present += exists(key);
    }
    tap_ok(stored == 12 && present == 12,
           "12 x 300 KiB items then fit in the freed memory (%d kept)", present);
    if (present != 12) {
        static struct stat_list sl;
        sl.n = 0;
        storage_stats_slabs(collect, &sl);
        for (int i = 0; i < sl.n; i++)
            if (strstr(sl.names[i], "pages") || strstr(sl.names[i], "chunk_size") ||
                strstr(sl.names[i], "used_chunks"))
                tap_diag("%s %s", sl.names[i], sl.values[i]);
    }
    free(val);
    storage_shutdown();
}

/* The allocator's region observer (the RDMA transport registers slab
 * memory through it): told of the regions already mapped and of each new
 * one; while it is installed, emptied pages keep their memory. */
struct observed {
    int calls;
    const char *base[8];
    size_t len[8];
};

static void observe_region(void *arg, void *base, size_t len)
{
    struct observed *o = arg;
    if (o->calls < 8) {
        o->base[o->calls] = base;
        o->len[o->calls] = len;
    }
    o->calls++;
}

static bool observed_covers(const struct observed *o, const void *p, size_t len)
{
    const char *c = p;
    for (int i = 0; i < o->calls && i < 8; i++)
        if (c >= o->base[i] && c + len <= o->base[i] + o->len[i])
            return true;
    return false;
}

/* The items of test_region_observer: "first" (i = -1), then "obs:I". */
static void observed_key(char *key, size_t len, int i)
{
    if (i < 0)
        snprintf(key, len, "first");
    else
        snprintf(key, len, "obs:%d", i);
}

static void test_region_observer(void)
{
    struct storage_config cfg = default_config();
    cfg.maxbytes = 256 * (size_t)MIB;
    cfg.slab_automove_off = true;
    start(&cfg);
    size_t big = 900 * 1024;
    char *val = malloc(big);
    fill_pattern(val, big, 9);
    char key[32];
    tap_ok(store_full("first", val, big, 0, 0, STORE_SET, 0, NULL, NULL) == STORE_STORED,
           "a first item maps a region");
    struct observed o = {0};
    slabs_observe_regions(observe_region, &o);
    tap_ok(o.calls == 1 && o.len[0] >= 64 * (size_t)MIB,
           "the observer is told of the region already mapped (%d call, %zu bytes)", o.calls,
           o.len[0]);
    int n = 0;
    while (o.calls < 2 && n < 300) {
        observed_key(key, sizeof(key), n++);
        store_full(key, val, big, 0, 0, STORE_SET, 0, NULL, NULL);
    }
    tap_ok(o.calls == 2, "and of a region mapped later, when it is mapped (after %d items)", n);
    bool covered = true;
    enum { PROBES = 300 };
    static char *probe[PROBES];
    int nprobe = 0;
    for (int i = -1; i < n; i++) {
        observed_key(key, sizeof(key), i);
        item *it = item_peek(key, strlen(key));
        if (!it)
            continue;
        for (unsigned k = 0; k < item_value_nseg(it); k++) {
            struct iovec v = item_value_seg(it, k);
            covered = covered && observed_covers(&o, v.iov_base, v.iov_len);
            if (k == 0 && v.iov_len > 8192 && nprobe < PROBES)
                probe[nprobe++] = (char *)v.iov_base + 4096;
        }
        item_release(it);
    }
    tap_ok(covered, "every stored value lies in a region the observer was told of");
    /* a byte well inside each value keeps the value's pattern once the
     * items are deleted and their pages emptied */
    int kept = 0;
    for (int i = -1; i < n; i++) {
        observed_key(key, sizeof(key), i);
        item_delete(key, strlen(key), 0);
    }
    for (int i = 0; i < nprobe; i++)
        kept += *probe[i] == val[4096];
    tap_ok(nprobe > 10 && kept == nprobe && held() <= 4 * (unsigned long long)MIB,
           "emptied pages keep their memory while observed (%d of %d values intact, %llu bytes "
           "of pages left)",
           kept, nprobe, held());
    slabs_observe_regions(NULL, NULL);
    free(val);
    storage_shutdown();
}

/* When the cache is full of old items of one size and new items of another
 * size keep evicting each other, pages move to the new size. */
/* A page a drain set aside for class B waits for that move: a pool-only
 * grant (slabs reassign 0 B) does not take it. */
struct drained_chunks {
    void *chunks[4096];
    size_t n;
};

static void note_drained(void *chunk, void *owner, void *arg)
{
    (void)owner;
    struct drained_chunks *d = arg;
    if (d->n < sizeof(d->chunks) / sizeof(d->chunks[0]))
        d->chunks[d->n++] = chunk;
}

static void test_reserved_page(void)
{
    struct storage_config cfg = default_config();
    cfg.maxbytes = 2 * MIB;
    start(&cfg);
    struct slabs_class_stats a;
    slabs_class_stats(1, &a);
    size_t per_page = a.chunks_per_page, n = 0;
    void **chunks = calloc(2 * per_page, sizeof(*chunks));
    while (n < 2 * per_page && (chunks[n] = slabs_alloc(1)) != NULL)
        n++;
    slabs_class_stats(1, &a);
    tap_ok(n == 2 * per_page && a.total_pages == 2, "class 1 holds both pages of -m 2 (%zu chunks)",
           n);
    struct slabs_drain *d = slabs_drain_begin(1, 2);
    bool emptied = false;
    for (int round = 0; d && !emptied && round < 10; round++) {
        struct drained_chunks seen = {.n = 0};
        emptied = slabs_drain_visit(d, note_drained, &seen);
        for (size_t i = 0; i < seen.n; i++)
            slabs_free(seen.chunks[i], 1);
    }
    tap_ok(d && slabs_drain_end(d), "a page of class 1 emptied for class 2");
    struct slabs_global_stats g;
    slabs_global_stats(&g);
    tap_ok(g.pool_pages == 0 && g.total_malloced == 2 * MIB,
           "it waits aside, still counted (pool %zu, %zu bytes)", g.pool_pages, g.total_malloced);
    tap_ok(!slabs_grant_page(2, false),
           "a pool-only grant leaves it to its move (-m leaves no room)");
    tap_ok(slabs_grant_page(2, true), "the move's grant takes it");
    struct slabs_class_stats b;
    slabs_class_stats(2, &b);
    tap_ok(b.total_pages == 1, "class 2 has the page");
    free(chunks); /* the other page's chunks go with the engine */
    storage_shutdown();
}

static void test_slab_move(void)
{
    struct storage_config cfg = default_config();
    cfg.maxbytes = 8 * MIB;
    start(&cfg);
    char key[32], small[1000];
    fill_pattern(small, sizeof(small), 7);
    int n = 0;
    while (n < 100000 && general_stat("evictions") == 0) {
        snprintf(key, sizeof(key), "old:%d", n++);
        store_full(key, small, sizeof(small), 0, 0, STORE_SET, 0, NULL, NULL);
    }
    item *pinned = item_get("old:100", 7);
    clock_advance_for_tests(100);

    size_t big = 50 * 1024;
    char *val = malloc(big);
    fill_pattern(val, big, 8);
    int next = 0;
    for (int round = 0; round < 12; round++) {
        for (int i = 0; i < 40; i++) {
            snprintf(key, sizeof(key), "new:%d", next++);
            store_full(key, val, big, 0, 0, STORE_SET, 0, NULL, NULL);
        }
        storage_slab_move_now();
    }
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof(key), "new:%d", next++);
        store_full(key, val, big, 0, 0, STORE_SET, 0, NULL, NULL);
    }
    int present = 0;
    for (int i = next - 60; i < next; i++) {
        snprintf(key, sizeof(key), "new:%d", i);
        present += exists(key);
    }
    tap_ok(general_stat("slabs_moved") >= 3, "pages moved to the evicting class (%llu)",
           general_stat("slabs_moved"));
    tap_ok(storage_slabs_reassign(3, 3) == REASSIGN_SAME &&
               storage_slabs_reassign(9999, 1) == REASSIGN_BADCLASS &&
               storage_slabs_reassign(1, 9999) == REASSIGN_BADCLASS,
           "slabs reassign: SAME and BADCLASS");
    tap_ok(storage_slab_automove(3) != 0 && storage_slab_automove(0) == 0,
           "slabs automove takes 0, 1 or 2");
    unsigned long long moved_before = general_stat("slabs_moved");
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "new:%d", next++);
        store_full(key, val, big, 0, 0, STORE_SET, 0, NULL, NULL);
    }
    tap_ok(!storage_slab_move_now() && general_stat("slabs_moved") == moved_before,
           "with automove 0 no page moves");
    /* slabs reassign with the mover thread running: the move happens in
     * the background (automatic moves stay off meanwhile). */
    tap_ok(storage_start_threads() == 0, "background threads start");
    static struct stat_list sl;
    sl.n = 0;
    storage_stats_slabs(collect, &sl);
    int src = 0;
    unsigned long most = 0;
    for (int i = 0; i < sl.n; i++) {
        const char *colon = strchr(sl.names[i], ':');
        if (colon && strcmp(colon + 1, "total_pages") == 0 &&
            strtoul(sl.values[i], NULL, 10) > most) {
            most = strtoul(sl.values[i], NULL, 10);
            src = atoi(sl.names[i]);
        }
    }
    unsigned long long moved_then = general_stat("slabs_moved");
    enum slabs_reassign_result rr = storage_slabs_reassign(src, src == 1 ? 2 : 1);
    struct timespec step = {0, 100 * 1000 * 1000};
    for (int i = 0; i < 50 && general_stat("slabs_moved") == moved_then; i++)
        nanosleep(&step, NULL);
    tap_ok(most >= 2 && rr == REASSIGN_OK && general_stat("slabs_moved") == moved_then + 1,
           "slabs reassign from class %d (%lu pages) moves a page in the background", src, most);
    storage_slab_automove(1);
    tap_ok(present == 60, "the 60 newest 50 KiB items all fit afterwards (%d)", present);
    tap_ok(general_stat("slab_reassign_evictions_nomem") > 0, "items lost in moves are counted");
    char *pv = pinned ? value_of(pinned) : NULL;
    tap_ok(pv && item_nbytes(pinned) == sizeof(small) && memcmp(pv, small, sizeof(small)) == 0,
           "a referenced item in a moved class stays intact");
    free(pv);
    if (pinned)
        item_release(pinned);
    free(val);
    storage_shutdown();
}

struct walk_seen {
    int count, bad;
    char last[32];
};

static void walk_fn(void *ctx, const item *it)
{
    struct walk_seen *w = ctx;
    w->count++;
    if (item_nkey(it) < 5 || memcmp(item_key(it), "walk:", 5) != 0 || item_slab_class(it) == 0)
        w->bad++;
    snprintf(w->last, sizeof(w->last), "%.*s", (int)item_nkey(it), item_key(it));
}

static void test_walk(void)
{
    struct storage_config cfg = default_config();
    start(&cfg);
    char key[32];
    for (int i = 0; i < 300; i++) {
        snprintf(key, sizeof(key), "walk:%d", i);
        store_full(key, "v", 1, 0, i < 100 ? clock_exptime(5) : 0, STORE_SET, 0, NULL, NULL);
    }
    clock_advance_for_tests(6);
    struct walk_seen w = {0, 0, ""};
    storage_walk_items(0, 0, walk_fn, &w);
    tap_ok(w.count == 200 && w.bad == 0, "walking items visits the 200 live ones (%d)", w.count);
    struct walk_seen lim = {0, 0, ""};
    storage_walk_items(0, 10, walk_fn, &lim);
    tap_ok(lim.count == 10, "a walk limit of 10 visits 10 items");
    tap_ok(strcmp(w.last, "walk:299") == 0, "the walk goes from oldest to newest (last %s)",
           w.last);

    /* a resumable walk, one item per step, while the store changes */
    bool all[SLAB_CLASSES_MAX] = {true};
    struct storage_walk *sw = storage_walk_open(all, SLAB_CLASSES_MAX, false, false);
    struct walk_seen step = {0, 0, ""};
    unsigned got = storage_walk_step(sw, 1, walk_fn, &step);
    tap_ok(got == 1 && strcmp(step.last, "walk:100") == 0, "a step of one visits the oldest (%s)",
           step.last);
    item_delete("walk:150", 8, 0);     /* not yet visited: never seen */
    store("walk:new", "v", STORE_SET); /* stored after the walk began: at the head */
    storage_crawl_now();               /* the crawler passes the walk's marker */
    struct walk_seen again = {0, 0, ""};
    storage_walk_items(0, 0, walk_fn, &again); /* another walk meanwhile */
    tap_ok(again.count == 200, "a walk meanwhile sees the 200 live items (%d)", again.count);
    while (!storage_walk_done(sw))
        storage_walk_step(sw, 7, walk_fn, &step);
    tap_ok(step.count == 200 && step.bad == 0 && strcmp(step.last, "walk:new") == 0,
           "the resumed walk visits each live item once (%d, last %s)", step.count, step.last);
    storage_walk_close(sw);

    struct storage_walk *nf = storage_walk_open(all, SLAB_CLASSES_MAX, true, false);
    struct walk_seen newest = {0, 0, ""};
    storage_walk_step(nf, 1, walk_fn, &newest);
    tap_ok(strcmp(newest.last, "walk:new") == 0, "newest_first starts at the head (%s)",
           newest.last);
    storage_walk_step(nf, 5, walk_fn, &newest);
    storage_walk_close(nf); /* closed mid-walk: its marker leaves the list */
    struct walk_seen after = {0, 0, ""};
    storage_walk_items(0, 0, walk_fn, &after);
    tap_ok(after.count == 200 && after.bad == 0,
           "after a walk closed mid-way the list walks whole (%d)", after.count);
    bool none[SLAB_CLASSES_MAX] = {false};
    none[SLAB_CLASSES_MAX - 1] = true; /* a class holding nothing */
    struct storage_walk *empty = storage_walk_open(none, SLAB_CLASSES_MAX, false, false);
    tap_ok(storage_walk_step(empty, 10, walk_fn, &after) == 0 && storage_walk_done(empty),
           "a walk of an empty class ends at once");
    storage_walk_close(empty);
    storage_shutdown();
}

struct fetch_seen {
    const char *key;
    int found;
    bool fetched;
    rel_time_t la;
};

static void fetch_fn(void *ctx, const item *it)
{
    struct fetch_seen *f = ctx;
    if (item_nkey(it) == strlen(f->key) && memcmp(item_key(it), f->key, item_nkey(it)) == 0) {
        f->found++;
        f->fetched = item_was_fetched(it);
        f->la = item_last_access(it);
    }
}

/* "fetch=" of lru_crawler metadump for key: 1 yes, 0 no, -1 not listed. */
static int walked_fetched(const char *key, rel_time_t *la)
{
    struct fetch_seen f = {key, 0, false, 0};
    storage_walk_items(0, 0, fetch_fn, &f);
    if (la)
        *la = f.la;
    return f.found == 1 ? f.fetched : -1;
}

static void test_fetched(void)
{
    struct storage_config cfg = default_config();
    start(&cfg);
    store("f", "v", STORE_SET);
    tap_ok(walked_fetched("f", NULL) == 0, "a stored item walks as not fetched");
    item *it = item_get("f", 1);
    tap_ok(it && !item_was_fetched(it), "the first get's handle: not fetched before (mg h0)");
    if (it)
        item_release(it);
    tap_ok(walked_fetched("f", NULL) == 1,
           "after a get the walk shows it fetched (metadump fetch=yes)");
    it = item_get("f", 1);
    tap_ok(it && item_was_fetched(it), "the second get's handle: fetched before (mg h1)");
    if (it)
        item_release(it);

    it = item_get("f", 1);
    tap_ok(it && item_memcached_size(it) == 61, "memcached's size of key f, value v: 61 (%zu)",
           it ? item_memcached_size(it) : 0);
    if (it)
        item_release(it);
    store("p", "v", STORE_SET);
    it = item_peek("p", 1);
    tap_ok(it && !item_was_fetched(it), "item_peek of an unfetched item: not fetched");
    if (it)
        item_release(it);
    tap_ok(walked_fetched("p", NULL) == 0, "item_peek does not count as a fetch");
    it = item_get("p", 1);
    if (it)
        item_release(it);
    it = item_peek("p", 1);
    tap_ok(it && item_was_fetched(it), "item_peek after a get: fetched");
    if (it)
        item_release(it);

    store("t", "v", STORE_SET);
    tap_ok(item_touch("t", 1, 0) && walked_fetched("t", NULL) == 1, "touch marks the item fetched");
    store("g", "v", STORE_SET);
    it = item_get_touch("g", 1, 0);
    tap_ok(it && !item_was_fetched(it), "get-and-touch reports the state before it");
    if (it)
        item_release(it);
    tap_ok(walked_fetched("g", NULL) == 1, "and marks the item fetched");
    store("n", "5", STORE_SET);
    item_arith("n", 1, true, 1, 0, NULL, NULL, NULL);
    tap_ok(walked_fetched("n", NULL) == 0, "incr does not count as a fetch");
    store("f", "w", STORE_SET);
    tap_ok(walked_fetched("f", NULL) == 0, "a new value starts unfetched");

    /* mg l: the last access before the lookup's own bump. */
    store("l", "v", STORE_SET);
    rel_time_t stored_at = clock_now();
    clock_advance_for_tests(70);
    it = item_get("l", 1);
    tap_ok(it && item_last_access(it) == stored_at,
           "a get's handle shows the access before the get");
    if (it)
        item_release(it);
    rel_time_t la = 0;
    int walked = walked_fetched("l", &la);
    tap_ok(walked == 1 && la == clock_now(), "the walk shows the bump the get made (%u, now %u)",
           (unsigned)la, (unsigned)clock_now());

    /* A handle of a newer lookup (or reused memory) never takes over the
     * remembered state of an earlier one. */
    store("x", "v", STORE_SET);
    it = item_get("x", 1);
    uintptr_t x_addr = (uintptr_t)it;
    if (it)
        item_release(it);
    item_delete("x", 1, 0);
    enum alloc_result why;
    item *fresh = item_alloc("y", 1, 0, 0, 1, &why);
    if (fresh) {
        write_value(fresh, "v", 1);
        item_store(fresh, STORE_SET, 0, NULL);
    }
    tap_ok(fresh && !item_was_fetched(fresh), "a new item in reused memory is not fetched (%s)",
           (uintptr_t)fresh == x_addr ? "same chunk" : "other chunk");
    if (fresh)
        item_release(fresh);
    storage_shutdown();
}

static void test_references(void)
{
    struct storage_config cfg = default_config();
    start(&cfg);
    store("r", "old", STORE_SET);
    item *held = item_get("r", 1);
    store("r", "newer", STORE_SET);
    char *v = held ? value_of(held) : NULL;
    tap_ok(v && strcmp(v, "old") == 0 && has_value("r", "newer"), "a held item survives replace");
    free(v);
    item_delete("r", 1, 0);
    v = held ? value_of(held) : NULL;
    tap_ok(v && strcmp(v, "old") == 0 && has_value("r", NULL), "a held item survives delete");
    free(v);
    if (held)
        item_release(held);

    /* An item allocated but never stored is simply released. */
    enum alloc_result why;
    item *it = item_alloc("unstored", 8, 0, 0, 3, &why);
    item_release(it);
    tap_ok(has_value("unstored", NULL), "an abandoned allocation is not visible");
    storage_shutdown();
}

static void test_stats(void)
{
    struct storage_config cfg = default_config();
    cfg.lru_maintainer = true; /* memcached's default; its stats need it */
    cfg.lru_segmented = true;
    start(&cfg);
    storage_start_threads();
    store("s", "v", STORE_SET);
    item *it = item_get("s", 1);
    if (it)
        item_release(it);
    static struct stat_list l;
    l.n = 0;
    storage_stats_general(collect, &l);
    const char *general[] = {"curr_items",
                             "total_items",
                             "bytes",
                             "evictions",
                             "reclaimed",
                             "expired_unfetched",
                             "evicted_unfetched",
                             "evicted_active",
                             "crawler_reclaimed",
                             "crawler_items_checked",
                             "get_expired",
                             "get_flushed",
                             "limit_maxbytes",
                             "hash_power_level",
                             "hash_bytes",
                             "hash_is_expanding",
                             "malloc_fails",
                             "slab_reassign_rescues",
                             "slab_reassign_chunk_rescues",
                             "slab_reassign_evictions_nomem",
                             "slab_reassign_inline_reclaim",
                             "slab_reassign_busy_items",
                             "slab_reassign_busy_deletes",
                             "slab_reassign_running",
                             "slabs_moved",
                             "lru_crawler_running",
                             "lru_crawler_starts",
                             "lru_maintainer_juggles",
                             "slab_global_page_pool",
                             "lrutail_reflocked",
                             "moves_to_cold",
                             "moves_to_warm",
                             "moves_within_lru",
                             "direct_reclaims",
                             "lru_bumps_dropped"};
    int all = 1;
    for (size_t i = 0; i < sizeof(general) / sizeof(general[0]); i++)
        if (!stat_get(&l, general[i])) {
            tap_diag("missing %s", general[i]);
            all = 0;
        }
    tap_ok(all, "general storage stats are all there");
    tap_ok(stat_get(&l, "limit_maxbytes") &&
               strtoull(stat_get(&l, "limit_maxbytes"), NULL, 10) == 64ull * MIB,
           "limit_maxbytes is -m in bytes");
    tap_ok(stat_get(&l, "hash_power_level") &&
               strcmp(stat_get(&l, "hash_power_level"), "16") == 0 &&
               strcmp(stat_get(&l, "hash_bytes"), "524288") == 0,
           "hash table starts at 2^16 buckets of 8 bytes");

    l.n = 0;
    storage_stats_settings(collect, &l);
    const char *settings[] = {"maxbytes",      "growth_factor",  "chunk_size",
                              "item_size_max", "slab_chunk_max", "evictions",
                              "cas_enabled",   "hashpower_init", "lru_crawler"};
    all = 1;
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
        if (!stat_get(&l, settings[i])) {
            tap_diag("missing %s", settings[i]);
            all = 0;
        }
    tap_ok(all, "settings stats are all there");
    tap_ok(strcmp(stat_get(&l, "growth_factor"), "1.25") == 0 &&
               strcmp(stat_get(&l, "evictions"), "on") == 0 &&
               strcmp(stat_get(&l, "cas_enabled"), "yes") == 0 &&
               strcmp(stat_get(&l, "slab_chunk_max"), "524288") == 0,
           "settings use memcached's formats");

    l.n = 0;
    storage_stats_items(collect, &l);
    tap_ok(stat_get(&l, "items:1:number") && strcmp(stat_get(&l, "items:1:number"), "1") == 0,
           "stats items: items:<class>:number");
    const char *item_fields[] = {"number",
                                 "number_hot",
                                 "number_warm",
                                 "number_cold",
                                 "age_hot",
                                 "age_warm",
                                 "age",
                                 "mem_requested",
                                 "evicted",
                                 "evicted_nonzero",
                                 "evicted_time",
                                 "outofmemory",
                                 "tailrepairs",
                                 "reclaimed",
                                 "expired_unfetched",
                                 "evicted_unfetched",
                                 "evicted_active",
                                 "crawler_reclaimed",
                                 "crawler_items_checked",
                                 "lrutail_reflocked",
                                 "moves_to_cold",
                                 "moves_to_warm",
                                 "moves_within_lru",
                                 "direct_reclaims",
                                 "hits_to_hot",
                                 "hits_to_warm",
                                 "hits_to_cold",
                                 "hits_to_temp"};
    size_t nfields = sizeof(item_fields) / sizeof(item_fields[0]);
    all = l.n == (int)nfields;
    for (size_t i = 0; all && i < nfields; i++) {
        char name[64];
        snprintf(name, sizeof(name), "items:1:%s", item_fields[i]);
        if (strcmp(l.names[i], name) != 0) {
            tap_diag("items:1:%s missing or out of memcached's order", item_fields[i]);
            all = 0;
        }
    }
    tap_ok(all, "stats items has memcached 1.6's fields, in its order");
    tap_ok(stat_get(&l, "items:1:hits_to_hot") && stat_get(&l, "items:1:hits_to_cold") &&
               atoi(stat_get(&l, "items:1:hits_to_hot")) +
                       atoi(stat_get(&l, "items:1:hits_to_cold")) ==
                   1,
           "hits_to_hot or hits_to_cold counts the hit (new items enter HOT, the maintainer moves "
           "them on)");

    l.n = 0;
    storage_stats_slabs(collect, &l);
    tap_ok(stat_get(&l, "1:chunk_size") && strtoul(stat_get(&l, "1:chunk_size"), NULL, 10) >= 48 &&
               stat_get(&l, "1:get_hits") && strcmp(stat_get(&l, "1:get_hits"), "1") == 0 &&
               stat_get(&l, "1:cmd_set") && strcmp(stat_get(&l, "1:cmd_set"), "1") == 0 &&
               stat_get(&l, "1:used_chunks") && stat_get(&l, "1:total_pages"),
           "stats slabs: per-class chunk and hit counters");
    tap_ok(stat_get(&l, "active_slabs") && strcmp(stat_get(&l, "active_slabs"), "1") == 0 &&
               stat_get(&l, "total_malloced") &&
               strcmp(stat_get(&l, "total_malloced"), "1048576") == 0,
           "stats slabs ends with active_slabs and total_malloced");

    l.n = 0;
    storage_stats_sizes(collect, &l);
    tap_ok(l.n == 1 && strcmp(l.names[0], "sizes_status") == 0 &&
               strcmp(l.values[0], "disabled") == 0,
           "stats sizes: disabled, as memcached 1.6 by default");

    storage_sizes_enable(true);
    store("sz1", "abc", STORE_SET);
    store("sz2", "abd", STORE_SET);
    l.n = 0;
    storage_stats_sizes(collect, &l);
    tap_ok(l.n == 1 && strtoul(l.names[0], NULL, 10) % 32 == 0 && strcmp(l.values[0], "2") == 0,
           "stats sizes when enabled: one 32-byte bucket holding the 2 new items");
    item_delete("sz1", 3, 0);
    l.n = 0;
    storage_stats_sizes(collect, &l);
    tap_ok(l.n == 1 && strcmp(l.values[0], "1") == 0, "a deleted item leaves the histogram");
    storage_sizes_enable(false);
    l.n = 0;
    storage_stats_sizes(collect, &l);
    tap_ok(l.n == 1 && strcmp(l.names[0], "sizes_status") == 0, "and sizes_disable turns it off");

    storage_stats_reset();
    tap_ok(general_stat("total_items") == 0 && general_stat("curr_items") == 2,
           "stats reset clears total_items but not curr_items");
    l.n = 0;
    storage_stats_slabs(collect, &l);
    tap_ok(stat_get(&l, "1:get_hits") && strcmp(stat_get(&l, "1:get_hits"), "0") == 0,
           "stats reset clears per-class hits");

    /* Memory per small item is below memcached's: a 14-byte key and a
     * 32-byte value fit the smallest class (96 bytes), smaller than the
     * 120-byte chunk memcached 1.6 uses for them. */
    storage_shutdown();
    cfg.lru_maintainer = false;
    cfg.lru_segmented = false;
    start(&cfg);
    char key[32], val[33];
    fill_pattern(val, 32, 9);
    val[32] = 0;
    int n = 1000;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "key:%010d", i);
        store_full(key, val, 32, (uint32_t)(i & 1) * 16, 0, STORE_SET, 0, NULL, NULL);
    }
    unsigned long long bytes = general_stat("bytes");
    unsigned long long memcached_bytes = (48 + 8 + 14 + 1 + 32 + 2) * (unsigned long long)n;
    tap_ok(general_stat("curr_items") == (unsigned long long)n && bytes <= memcached_bytes,
           "bytes per 14-byte key + 32-byte value item (%llu) <= memcached's (%llu)", bytes / n,
           memcached_bytes / n);
    /* the class sizes are memcached's (96, 120, ...): the items without
     * flags fit the 96-byte class, those with flags the 120-byte one, where
     * memcached puts them all (its header is larger) */
    l.n = 0;
    storage_stats_items(collect, &l);
    char in_first[64] = "", in_second[64] = "", first_size[64] = "";
    if (stat_get(&l, "items:1:number"))
        snprintf(in_first, sizeof(in_first), "%s", stat_get(&l, "items:1:number"));
    if (stat_get(&l, "items:2:number"))
        snprintf(in_second, sizeof(in_second), "%s", stat_get(&l, "items:2:number"));
    l.n = 0;
    storage_stats_slabs(collect, &l);
    if (stat_get(&l, "1:chunk_size"))
        snprintf(first_size, sizeof(first_size), "%s", stat_get(&l, "1:chunk_size"));
    tap_ok(strtoul(in_first, NULL, 10) == (unsigned long)n / 2 &&
               strtoul(in_second, NULL, 10) == (unsigned long)n / 2 &&
               strtoul(first_size, NULL, 10) == 96,
           "without flags they sit in the first class, of %s-byte chunks (memcached: 120)",
           first_size);
    tap_ok(storage_set_memlimit(128 * MIB) == 0 && general_stat("limit_maxbytes") == 128ull * MIB,
           "cache_memlimit changes limit_maxbytes");
    char mid[2000];
    fill_pattern(mid, sizeof(mid), 4);
    for (int i = 0; i < 8000; i++) { /* about 16 MiB */
        snprintf(key, sizeof(key), "mem:%d", i);
        store_full(key, mid, sizeof(mid), 0, 0, STORE_SET, 0, NULL, NULL);
    }
    unsigned long long before = malloced();
    storage_set_memlimit(8 * MIB);
    /* down to the limit plus the one page each class in use may keep: the
     * 96- and 120-byte classes above and this one */
    for (int i = 0; i < 40 && malloced() > 11 * MIB; i++)
        storage_slab_move_now();
    tap_ok(before >= 16 * MIB && malloced() <= 11 * MIB && held() <= 11 * MIB,
           "lowering cache_memlimit gives memory back (%llu -> %llu bytes)", before, malloced());
    storage_shutdown();

    cfg.maxbytes = 8 * MIB;
    cfg.prealloc = true;
    tap_ok(start(&cfg) == 0 && store("pre", "v", STORE_SET) == STORE_STORED &&
               has_value("pre", "v"),
           "-L preallocation works");
    tap_ok(storage_set_memlimit(16 * MIB) != 0, "cache_memlimit is refused with -L");
    storage_shutdown();
}

static void test_hash_growth(void)
{
    struct storage_config cfg = default_config();
    cfg.hashpower_init = 12;
    start(&cfg);
    char key[32];
    int n = 20000; /* > 1.5 x 4096 and > 1.5 x 8192 */
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "h:%d", i);
        store_full(key, key, strlen(key), 0, 0, STORE_SET, 0, NULL, NULL);
    }
    tap_ok(general_stat("hash_power_level") > 12, "hash table grew past 2^12 (now 2^%llu)",
           general_stat("hash_power_level"));
    int found = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "h:%d", i);
        found += has_value(key, key);
    }
    tap_ok(found == n, "all %d items found after growth", n);
    storage_shutdown();
}

/* ---- replacing a stored key ------------------------------------------------------ */
#define REPLACE_KEYS 200

/* The value key i holds after `round` rounds of sets: rounds 1 and 3 keep
 * the size class of the first value, round 2 moves odd keys to a larger one. */
static void replace_value(char *buf, size_t cap, int i, int round)
{
    int len = round == 2 && i % 2 ? 300 + i % 7 : 8 + i % 5;
    snprintf(buf, cap, "%d.%d.", round, i);
    size_t head = strlen(buf);
    for (size_t k = head; k < (size_t)len && k + 1 < cap; k++)
        buf[k] = (char)('a' + (k + (size_t)i) % 26);
    buf[(size_t)len < cap ? (size_t)len : cap - 1] = '\0';
}

/* Per-class item counts and bytes ("items:N:number", "items:N:mem_requested"),
 * summed into one comparable string. */
static void class_counts(char *out, size_t cap)
{
    static struct stat_list l;
    l.n = 0;
    storage_stats_items(collect, &l);
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < l.n && at < cap; i++) {
        const char *colon = strrchr(l.names[i], ':');
        if (colon && (strcmp(colon, ":number") == 0 || strcmp(colon, ":mem_requested") == 0))
            at += (size_t)snprintf(out + at, cap - at, "%s=%s ", l.names[i], l.values[i]);
    }
}

/* A set over a live key takes the old item's place in its hash chain (or,
 * when the size class changes, unlinks it and links the new one): every
 * key sharing that chain stays reachable, and the counters end where
 * storing the final values afresh puts them. */
static void test_replace(void)
{
    struct storage_config cfg = default_config();
    cfg.hashpower_init = 1; /* two buckets to start: chains are shared */
    start(&cfg);
    char key[32], val[512];
    for (int i = 0; i < REPLACE_KEYS; i++) {
        snprintf(key, sizeof(key), "rp:%d", i);
        replace_value(val, sizeof(val), i, 0);
        store(key, val, STORE_SET);
    }
    unsigned long long total_before = general_stat("total_items");
    int sets = 0, stored = 0;
    for (int round = 1; round <= 3; round++) {
        for (int k = 0; k < REPLACE_KEYS; k++) {
            int i = round == 2 ? REPLACE_KEYS - 1 - k : k; /* chain heads and tails both */
            snprintf(key, sizeof(key), "rp:%d", i);
            replace_value(val, sizeof(val), i, round);
            enum store_op op = round == 3 && i % 3 == 0 ? STORE_REPLACE : STORE_SET;
            stored += store(key, val, op) == STORE_STORED;
            sets++;
        }
    }
    tap_ok(stored == sets, "%d of %d sets over live keys stored", stored, sets);
    /* the keys that shared a chain while they were replaced */
    size_t buckets = (size_t)1 << general_stat("hash_power_level");
    int longest = 0;
    static int depth[1 << 12];
    if (buckets <= sizeof(depth) / sizeof(depth[0])) {
        memset(depth, 0, sizeof(depth));
        for (int i = 0; i < REPLACE_KEYS; i++) {
            snprintf(key, sizeof(key), "rp:%d", i);
            int d = ++depth[assoc_hash(key, strlen(key)) & (buckets - 1)];
            if (d > longest)
                longest = d;
        }
    }
    tap_ok(longest >= 3, "some chain holds %d of the keys (%zu buckets)", longest, buckets);
    int right = 0;
    for (int i = 0; i < REPLACE_KEYS; i++) {
        snprintf(key, sizeof(key), "rp:%d", i);
        replace_value(val, sizeof(val), i, 3);
        right += has_value(key, val);
    }
    tap_ok(right == REPLACE_KEYS, "every key holds its last value (%d of %d)", right, REPLACE_KEYS);
    tap_ok(general_stat("curr_items") == REPLACE_KEYS, "curr_items is %d after the replacements",
           REPLACE_KEYS);
    tap_ok(general_stat("total_items") == total_before + (unsigned long long)sets,
           "total_items counts every replacement");
    unsigned long long bytes = general_stat("bytes");
    static char counts[8192], fresh_counts[8192];
    class_counts(counts, sizeof(counts));
    storage_shutdown();

    start(&cfg);
    for (int i = 0; i < REPLACE_KEYS; i++) {
        snprintf(key, sizeof(key), "rp:%d", i);
        replace_value(val, sizeof(val), i, 3);
        store(key, val, STORE_SET);
    }
    tap_ok(general_stat("bytes") == bytes,
           "bytes as for the final values stored afresh (%llu, %llu)", bytes,
           general_stat("bytes"));
    class_counts(fresh_counts, sizeof(fresh_counts));
    tap_ok(strcmp(counts, fresh_counts) == 0, "per-class items and bytes as stored afresh");
    if (strcmp(counts, fresh_counts) != 0)
        tap_diag("replaced: %s; afresh: %s", counts, fresh_counts);
    storage_shutdown();
}

/* ---- concurrency smoke test ------------------------------------------------------ */
#define SMOKE_KEYS 16384
#define SMOKE_THREADS 4
static atomic_int smoke_stop;
static int smoke_torn[SMOKE_THREADS];
static long smoke_ops[SMOKE_THREADS];

/* Values carry their own check: byte 0..7 = length, the rest a pattern
 * seeded by a byte, so a torn or mixed value is detected. */
static atomic_int smoke_phase; /* 0: mostly small values, 1: mostly large */

static size_t smoke_len(unsigned r)
{
    static const size_t lens[] = {16, 40, 100, 1000, 5000, 70000, 600000};
    unsigned pick = r % 100;
    if (atomic_load(&smoke_phase) == 0)
        return lens[pick < 10 ? 0 : pick < 20 ? 2 : 3];
    return lens[pick < 60 ? 4 : pick < 98 ? 5 : 6];
}

static void count_fn(void *ctx, const item *it)
{
    (*(long *)ctx) += item_nbytes(it) > 0;
}

/* Sums the "items:N:number" stats. */
static void sum_numbers(void *ctx, const char *name, const char *value)
{
    const char *tail = strrchr(name, ':');
    if (tail && strcmp(tail, ":number") == 0)
        *(unsigned long long *)ctx += strtoull(value, NULL, 10);
}

static void count_every(void *ctx, const item *it)
{
    (void)it;
    (*(long *)ctx)++;
}

/* Counters ("ctr:N") only ever hold decimal numbers; logs ("log:N") only
 * ever hold whole 8-byte records "<id>......" appended or prepended. */
static void smoke_side_op(int id, unsigned r)
{
    char key[32];
    unsigned which = (r >> 8) % 4;
    if (r & 0x100) {
        snprintf(key, sizeof(key), "ctr:%u", which);
        switch ((r >> 10) % 4) {
        case 0:
            store_full(key, "100", 3, 0, 0, STORE_ADD, 0, NULL, NULL);
            break;
        case 1:
        case 2: {
            uint64_t v;
            item_arith(key, strlen(key), (r >> 10) % 4 == 1, 1 + (r % 1000), 0, &v, NULL, NULL);
            break;
        }
        default: {
            item *it = item_get(key, strlen(key));
            if (it) {
                char *v = value_of(it);
                size_t len = item_nbytes(it);
                int bad = len == 0 || len > 20;
                for (size_t i = 0; !bad && i < len; i++)
                    bad = v[i] < '0' || v[i] > '9';
                smoke_torn[id] += bad;
                free(v);
                item_release(it);
            }
        }
        }
        return;
    }
    snprintf(key, sizeof(key), "log:%u", which);
    char rec[8];
    memset(rec, 'a' + id, sizeof(rec));
    switch ((r >> 10) % 4) {
    case 0:
        if (store_full(key, rec, 8, 0, 0, STORE_APPEND, 0, NULL, NULL) == STORE_NOT_STORED)
            store_full(key, rec, 8, 0, 0, STORE_ADD, 0, NULL, NULL);
        break;
    case 1:
        store_full(key, rec, 8, 0, 0, STORE_PREPEND, 0, NULL, NULL);
        break;
    case 2:
        if (r & 0x800)
            item_delete(key, strlen(key), 0);
        break;
    default: {
        item *it = item_get(key, strlen(key));
        if (it) {
            char *v = value_of(it);
            size_t len = item_nbytes(it);
            int bad = len % 8 != 0;
            for (size_t i = 0; !bad && i < len; i += 8)
                bad = memcmp(v + i, v + i + 1, 7) != 0 || v[i] < 'a' || v[i] >= 'a' + SMOKE_THREADS;
            smoke_torn[id] += bad;
            free(v);
            item_release(it);
        }
    }
    }
}

static void *smoke_worker(void *arg)
{
    int id = (int)(long)arg;
    unsigned seed = (unsigned)id * 7919u + 17u;
    char key[32];
    char *buf = malloc(700000);
    while (!atomic_load(&smoke_stop)) {
        seed = seed * 1103515245u + 12345u;
        unsigned r = seed >> 8;
        snprintf(key, sizeof(key), "smoke:%u", r % SMOKE_KEYS);
        unsigned op = (r >> 12) % 10;
        if ((r & 0xf0) == 0) { /* counters and append logs, a few keys each */
            smoke_side_op(id, r);
        } else if (op < 6) {
            item *it = item_get(key, strlen(key));
            if (it) {
                char *v = value_of(it);
                size_t len = item_nbytes(it);
                int bad = len < 9;
                if (!bad) {
                    uint64_t stated;
                    memcpy(&stated, v, 8);
                    bad = stated != len;
                    for (size_t i = 9; !bad && i < len; i++)
                        bad = v[i] != (char)(v[8] + i);
                }
                if (bad)
                    smoke_torn[id]++;
                free(v);
                item_release(it);
            }
        } else if (op < 9) {
            size_t len = smoke_len(r >> 4);
            uint64_t l64 = len;
            memcpy(buf, &l64, 8);
            buf[8] = (char)(r & 0x7f);
            for (size_t i = 9; i < len; i++)
                buf[i] = (char)(buf[8] + i);
            rel_time_t exp = (r & 6) == 6 ? clock_exptime(2) : 0;
            store_full(key, buf, len, 0, exp, (r & 1) ? STORE_SET : STORE_ADD, 0, NULL, NULL);
        } else {
            item_delete(key, strlen(key), 0);
        }
        smoke_ops[id]++;
    }
    free(buf);
    return NULL;
}

static void test_threads(void)
{
    struct storage_config cfg = default_config();
    cfg.maxbytes = 8 * MIB;    /* small enough to evict under load */
    cfg.hashpower_init = 10;   /* grows while the workers run */
    cfg.lru_maintainer = true; /* the segmented LRU, juggled meanwhile */
    cfg.lru_segmented = true;
    cfg.temp_lru = true; /* the 2 s TTLs go to TEMP */
    cfg.temporary_ttl = 61;
    start(&cfg);
    tap_ok(storage_start_threads() == 0, "background threads start");
    pthread_t th[SMOKE_THREADS];
    atomic_store(&smoke_stop, 0);
    for (long i = 0; i < SMOKE_THREADS; i++)
        pthread_create(&th[i], NULL, smoke_worker, (void *)i);
    /* A few thousand small keys to make the table grow meanwhile. */
    char key[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof(key), "grow:%d", i);
        store_full(key, "1234", 4, 0, 0, STORE_SET, 0, NULL, NULL);
    }
    /* Meanwhile: crawler passes, stats reads and a clock that runs fast,
     * so expiry, reclaim and stats race with the workers. */
    static struct stat_list l;
    struct timespec step = {0, 50 * 1000 * 1000};
    long walked = 0;
    atomic_store(&smoke_phase, 0);
    for (int i = 0; i < 40; i++) {
        if (i == 16) /* sizes change: pages must move between classes */
            atomic_store(&smoke_phase, 1);
        nanosleep(&step, NULL);
        if (i % 4 == 0)
            clock_advance_for_tests(1);
        storage_crawl_now();
        storage_slab_move_now();
        storage_walk_items(0, 200, count_fn, &walked);
        l.n = 0;
        storage_stats_general(collect, &l);
        l.n = 0;
        storage_stats_items(collect, &l);
        l.n = 0;
        storage_stats_slabs(collect, &l);
    }
    atomic_store(&smoke_stop, 1);
    long ops = 0;
    int torn = 0;
    for (int i = 0; i < SMOKE_THREADS; i++) {
        pthread_join(th[i], NULL);
        ops += smoke_ops[i];
        torn += smoke_torn[i];
    }
    tap_diag("%ld operations in 2 s over %d threads, %llu evictions, %llu slab pages moved, %ld "
             "items walked",
             ops, SMOKE_THREADS, general_stat("evictions"), general_stat("slabs_moved"), walked);
    tap_ok(ops > 1000 && torn == 0, "concurrent set/add/get/delete never show a torn value");
    tap_ok(general_stat("hash_power_level") > 10, "the table grew in the background under load");
    /* Every linked item counted once, whatever the workers, the LRU
     * maintainer, the crawler and the slab mover did meanwhile: once the
     * TTLs ran out and the crawler reclaimed those items, curr_items and
     * the classes' "number" are the number of items a walk finds. */
    clock_advance_for_tests(10);
    storage_crawl_now();
    long linked = 0;
    storage_walk_items(0, 0, count_every, &linked);
    unsigned long long curr = general_stat("curr_items");
    tap_ok(linked > 0 && curr == (unsigned long long)linked,
           "curr_items %llu after the load: the %ld items a walk finds", curr, linked);
    unsigned long long numbers = 0;
    storage_stats_items(sum_numbers, &numbers);
    tap_ok(numbers == curr, "stats items number sums to curr_items (%llu)", numbers);
    storage_shutdown();
}

/* What the kernel's readv does: the record's bytes across rd's pieces. */
static void scatter(struct flash_read *rd, const char *rec, size_t len)
{
    for (unsigned i = 0; i < rd->niov && len > 0; i++) {
        size_t n = rd->iov[i].iov_len < len ? rd->iov[i].iov_len : len;
        memcpy(rd->iov[i].iov_base, rec, n);
        rec += n;
        len -= n;
    }
}

/* A read of the record rec (len bytes, at page 0 offset 0) into value
 * pieces of the given lengths: 1 ok, 0 not read, -1 corrupt; *same: the
 * pieces hold value. */
static int read_in_pieces(const char *rec, size_t len, int res, const char *key, const char *value,
                          size_t nbytes, const size_t *cuts, unsigned ncuts, bool *same)
{
    struct flash_read rd;
    memset(&rd, 0, sizeof(rd));
    memcpy(&rd.loc.check, rec + 4, 4);
    rd.loc.len = (uint32_t)len;
    rd.nkey = strlen(key);
    memcpy(rd.key, key, rd.nkey);
    rd.nbytes = nbytes;
    char *buf = malloc(nbytes);
    struct iovec pieces[16];
    size_t at = 0;
    for (unsigned i = 0; i < ncuts; i++) {
        pieces[i] = (struct iovec){buf + at, cuts[i]};
        at += cuts[i];
    }
    if (!buf || !flash_read_target(&rd, pieces, ncuts)) {
        free(buf);
        return -2;
    }
    scatter(&rd, rec, len);
    flash_read_finish(&rd, res);
    *same = memcmp(buf, value, nbytes) == 0;
    flash_read_free(&rd);
    free(buf);
    return rd.ok ? 1 : rd.corrupt ? -1 : 0;
}

/* Whether rd's record at page offset `offset` is copied from a write
 * buffer into buf (rd's value pieces) and checks as value. */
static bool copied_at(struct flash_read *rd, uint64_t offset, char *buf, const char *value)
{
    int fd;
    uint64_t off;
    rd->loc.offset = offset;
    memset(buf, 0, rd->nbytes);
    enum flash_place place = flash_read_locate(rd, &fd, &off);
    flash_read_finish(rd, (int)rd->loc.len);
    return place == FLASH_PLACE_COPIED && rd->ok && memcmp(buf, value, rd->nbytes) == 0;
}

/* Where a read finds a record (flash_read_locate): in the buffer being
 * filled, in the one being written, or, once its write moved the page's
 * fill past it, in the file; copies from a buffer land in the read's
 * pieces and check as a read from the file would. The tier's state is set
 * by hand on a page the idle I/O thread leaves alone (no write pending). */
static void test_flash_buffered_read(const char *rec, size_t len, const char *key,
                                     const char *value, size_t nbytes)
{
    struct wbucket *b = &tier.buckets[BUCKET_DEFAULT];
    struct flash_page *p = &tier.pages[0];
    pthread_mutex_lock(&tier.lock);
    unsigned saved_open = b->open_page;
    b->open_page = 0;
    p->state = PAGE_OPEN;
    p->bucket = BUCKET_DEFAULT;
    p->fill = 4096;
    uint32_t version = p->version;
    memcpy(b->wbuf + 64, rec, len);    /* at page offset 4096 + 64 */
    memset(b->wr_buf, 0, 4096);        /* being written: 4096..8191 */
    memcpy(b->wr_buf + 128, rec, len); /* at page offset 4096 + 128 */
    pthread_mutex_unlock(&tier.lock);

    const size_t odd[] = {5, 700, 1, 294};
    char *buf = malloc(nbytes);
    struct iovec pieces[4];
    size_t at = 0;
    for (unsigned i = 0; i < 4; i++) {
        pieces[i] = (struct iovec){buf + at, odd[i]};
        at += odd[i];
    }
    struct flash_read rd;
    memset(&rd, 0, sizeof(rd));
    memcpy(&rd.loc.check, rec + 4, 4);
    rd.loc.len = (uint32_t)len;
    rd.loc.version = version;
    rd.nkey = strlen(key);
    memcpy(rd.key, key, rd.nkey);
    rd.nbytes = nbytes;
    int fd = -1;
    uint64_t off = 0;
    bool targeted = buf && flash_read_target(&rd, pieces, 4);

    tap_ok(targeted && copied_at(&rd, 4096 + 64, buf, value),
           "a record in the buffer being filled is copied from it and checks");

    pthread_mutex_lock(&tier.lock);
    b->writing = true;
    b->wr_page = 0;
    b->wr_len = 4096;
    pthread_mutex_unlock(&tier.lock);
    tap_ok(targeted && copied_at(&rd, 4096 + 128, buf, value),
           "a record in the buffer being written is copied from it and checks");
    tap_ok(targeted && copied_at(&rd, 8192 + 64, buf, value),
           "the buffer being filled starts after the one being written");

    /* the bucket went on to another page while this one's last write is
     * in flight */
    pthread_mutex_lock(&tier.lock);
    b->open_page = 1;
    pthread_mutex_unlock(&tier.lock);
    tap_ok(targeted && copied_at(&rd, 4096 + 128, buf, value),
           "the last write of a page the bucket has left is still read from its buffer");
    rd.loc.offset = 8192 + 64;
    tap_ok(targeted && flash_read_locate(&rd, &fd, &off) == FLASH_PLACE_NONE,
           "nothing of that page lies after its last write");
    pthread_mutex_lock(&tier.lock);
    b->open_page = 0;
    pthread_mutex_unlock(&tier.lock);

    pthread_mutex_lock(&tier.lock);
    b->writing = false;
    p->fill = 8192; /* the write completed */
    pthread_mutex_unlock(&tier.lock);
    rd.loc.offset = 4096 + 128;
    enum flash_place place = targeted ? flash_read_locate(&rd, &fd, &off) : FLASH_PLACE_NONE;
    tap_ok(place == FLASH_PLACE_FILE && fd == p->fd && off == p->file_off + 4096 + 128,
           "once written, the record is read from the file");
    rd.loc.version = version + 1;
    tap_ok(targeted && flash_read_locate(&rd, &fd, &off) == FLASH_PLACE_NONE,
           "a record of another version of the page is nowhere");
    rd.loc.version = version;
    rd.loc.offset = 8192 + 2 * 1024 * 1024;
    tap_ok(targeted && flash_read_locate(&rd, &fd, &off) == FLASH_PLACE_NONE,
           "nor is one past the buffer being filled");

    pthread_mutex_lock(&tier.lock);
    p->state = PAGE_FREE;
    p->fill = 0;
    b->wr_len = 0;
    b->open_page = saved_open;
    pthread_mutex_unlock(&tier.lock);
    flash_read_free(&rd);
    free(buf);
}

/* The flash tier's read check (flash.h): a record read in pieces (header
 * and key, value pieces of any length, the padding) checks as written;
 * one changed byte, a short read or a stopped tier does not. */
static void test_flash_read_check(void)
{
    struct storage_config cfg = default_config();
    start(&cfg);
    char path[] = "/tmp/test_storage_flash.XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0)
        close(fd);
    struct ext_settings ext;
    memset(&ext, 0, sizeof(ext));
    ext.paths[0] = (struct ext_path){path, 4u << 20};
    ext.npaths = 1;
    ext.page_size = ext.wbuf_size = 2u << 20;
    ext.item_size = 512;
    ext.item_age = UINT32_MAX;
    ext.max_frag = 0.5;
    char err[256] = "";
    tap_ok(fd >= 0 && flash_start(&ext, err, sizeof(err)) == 0, "flash tier starts on %s %s", path,
           err);

    const char *key = "fr:key";
    size_t nkey = strlen(key), nbytes = 1000;
    size_t len = flash_record_size(nkey, nbytes);
    char *rec = calloc(1, len), value[1000];
    for (size_t i = 0; i < nbytes; i++)
        value[i] = (char)(i * 131 + 7);
    uint32_t magic = RECORD_MAGIC, n32 = (uint32_t)nbytes;
    memcpy(rec, &magic, 4);
    memcpy(rec + 8, &n32, 4);
    rec[12] = (char)nkey;
    memcpy(rec + RECORD_HEADER, key, nkey);
    memcpy(rec + RECORD_HEADER + nkey, value, nbytes);
    uint32_t check = flash_record_check(rec, RECORD_HEADER + nkey + nbytes);
    memcpy(rec + 4, &check, 4);

    bool same = false;
    const size_t whole[] = {1000};
    const size_t odd[] = {5, 700, 1, 294};
    const size_t many[] = {100, 100, 100, 100, 100, 100, 100, 100, 100, 37, 63};
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, whole, 1, &same) == 1 && same,
           "a record read whole checks, the value in place");
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, odd, 4, &same) == 1 && same,
           "in pieces of 5, 700, 1 and 294 bytes too");
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, many, 11, &same) == 1 && same,
           "in more pieces than a read holds itself (11)");
    rec[RECORD_HEADER + nkey + 703] ^= 0x10;
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, odd, 4, &same) == -1,
           "one bit changed in the value: corrupt");
    rec[RECORD_HEADER + nkey + 703] ^= 0x10;
    rec[RECORD_HEADER + 1] ^= 1;
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, odd, 4, &same) == -1,
           "another key: corrupt");
    rec[RECORD_HEADER + 1] ^= 1;
    tap_ok(read_in_pieces(rec, len, (int)len - 8, key, value, nbytes, odd, 4, &same) == 0 &&
               read_in_pieces(rec, len, -5, key, value, nbytes, odd, 4, &same) == 0,
           "a short or failed read: not read, not corrupt");
    test_flash_buffered_read(rec, len, key, value, nbytes);
    flash_stop();
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, odd, 4, &same) == 0,
           "after the tier stopped: not read");
    free(rec);
    unlink(path);
    storage_shutdown();
}

/* The settings of start_flash_file's tier (see there) on path. */
static void flash_file_settings(struct ext_settings *ext, char *path)
{
    memset(ext, 0, sizeof(*ext));
    ext->paths[0] = (struct ext_path){path, 32u << 20};
    ext->npaths = 1;
    ext->page_size = 4u << 20;
    ext->wbuf_size = 2u << 20;
    ext->item_size = 512;
    ext->item_age = UINT32_MAX;
    ext->recache_rate = 2000;
    ext->max_frag = 0.8;
    ext->automove_freeratio = 0.01;
}

/* Starts a flash tier on a new 32 MiB file named after the template
 * path (memcached's defaults but for the sizes; values of 512 bytes and
 * more go to flash, smaller chunks hold their headers). */
static bool start_flash_file(char *path)
{
    int fd = mkstemp(path);
    if (fd >= 0)
        close(fd);
    struct ext_settings ext;
    flash_file_settings(&ext, path);
    char err[256] = "";
    bool started = fd >= 0 && flash_start(&ext, err, sizeof(err)) == 0;
    tap_ok(started, "flash tier starts on %s %s", path, err);
    return started;
}

/* A burst of 128 KiB sets, back to back, into -m 8 with a flash tier:
 * the value class has a few dozen chunks and the writer keeps 18 of them
 * free, so the sets outrun it. A set that finds no free chunk waits for
 * the writer to move COLD's tail to flash instead of evicting a value
 * flash would keep: no key is lost while flash has room. The wait's
 * bounds are widened to a minute, so that an I/O thread kept off the
 * CPU for a while (a loaded machine, a sanitizer build) only makes the
 * sets slower: the wait still ends only when the writer freed a chunk or
 * found nothing to move. Without the wait the sets evict. */
static void test_flash_room_wait(void)
{
    struct storage_config cfg = default_config(); /* flat: every item in COLD */
    cfg.maxbytes = 8 * MIB;
    cfg.slab_automove_off = true;
    start(&cfg);
    item_alloc_flash_wait_limits(60000000, 60000000, 60000000);
    char path[] = "/tmp/test_storage_room.XXXXXX";
    bool started = start_flash_file(path);

    enum { N = 150, LEN = 128 * 1024 };
    char *val = malloc(LEN), key[32];
    int fails = 0;
    for (int i = 0; started && val && i < N; i++) {
        fill_pattern(val, LEN, (unsigned)i);
        snprintf(key, sizeof(key), "rw:%d", i);
        if (store_full(key, val, LEN, 0, 0, STORE_SET, 0, NULL, NULL) != STORE_STORED)
            fails++;
    }
    tap_ok(started && fails == 0, "%d sets of 128 KiB into -m 8 all store (%d failed)", N, fails);
    unsigned long long evicted = general_stat("evictions");
    tap_ok(evicted == 0, "none evicted: the sets waited for the writer (%llu evicted)", evicted);
    int present = 0, on_flash = 0, intact = 0, in_ram = 0;
    for (int i = 0; started && val && i < N; i++) {
        snprintf(key, sizeof(key), "rw:%d", i);
        item *it = item_peek(key, strlen(key));
        if (!it)
            continue;
        present++;
        if (item_on_flash(it)) {
            on_flash++;
        } else {
            in_ram++;
            fill_pattern(val, LEN, (unsigned)i);
            char *v = value_of(it);
            intact += item_nbytes(it) == LEN && memcmp(v, val, LEN) == 0;
            free(v);
        }
        item_release(it);
    }
    tap_ok(present == N, "every key is kept (%d of %d, %d on flash)", present, N, on_flash);
    tap_ok(on_flash > 0 && intact == in_ram, "values went to flash, those in RAM intact (%d of %d)",
           intact, in_ram);
    /* the same burst as a connection makes it: an allocation that would
     * wait returns at once (ALLOC_FLASH_WAIT) and is asked again later */
    int parks = 0, stored = 0, gave_up = 0;
    for (int i = 0; started && val && i < N; i++) {
        snprintf(key, sizeof(key), "rp:%d", i);
        struct alloc_wait w = {0};
        enum alloc_result why;
        item *it;
        while (!(it = item_alloc_parkable(key, strlen(key), 0, 0, LEN, &w, &why)) &&
               why == ALLOC_FLASH_WAIT) {
            parks++;
            struct timespec later = {0, 500 * 1000};
            nanosleep(&later, NULL);
        }
        gave_up += w.gave_up;
        if (!it)
            continue;
        fill_pattern(val, LEN, (unsigned)i);
        write_value(it, val, LEN);
        stored += item_store(it, STORE_SET, 0, NULL) == STORE_STORED;
        item_release(it);
    }
    evicted = general_stat("evictions");
    tap_ok(stored == N && evicted == 0 && gave_up == 0,
           "%d parkable sets store (%d), none evicted (%llu) nor gave up waiting (%d): they "
           "parked %d times",
           N, stored, evicted, gave_up, parks);
    /* a set that parked, then finds its wait over (the writer no longer
     * takes its class's values) and no free chunk of its class, gives up
     * waiting and evicts */
    struct alloc_wait w = {0};
    enum alloc_result why = ALLOC_OK;
    item *it = NULL;
    int sets = 0;
    for (; started && val && sets < 4 * N; sets++) {
        snprintf(key, sizeof(key), "rg:%d", sets);
        w = (struct alloc_wait){0};
        if (!(it = item_alloc_parkable(key, strlen(key), 0, 0, LEN, &w, &why)))
            break;
        item_store(it, STORE_SET, 0, NULL);
        item_release(it);
    }
    bool waits = !it && why == ALLOC_FLASH_WAIT && w.started;
    struct ext_settings ext;
    flash_file_settings(&ext, path);
    ext.item_size = UINT32_MAX;
    flash_tune(&ext);
    flash_write_now(); /* its pass in flight, if any, has ended */
    void *held[256];
    size_t nheld = 0;
    while (waits && nheld < sizeof(held) / sizeof(*held) && (held[nheld] = slabs_alloc(w.cls)))
        nheld++;
    evicted = general_stat("evictions");
    it = waits ? item_alloc_parkable(key, strlen(key), 0, 0, LEN, &w, &why) : NULL;
    unsigned long long evicted_after = general_stat("evictions");
    tap_ok(waits && it && w.gave_up && evicted_after > evicted,
           "a set parked after %d sets (%d), its class's %zu free chunks taken, it gives up "
           "waiting (%d) and evicts (%llu -> %llu)",
           sets, waits, nheld, w.gave_up, evicted, evicted_after);
    if (it)
        item_release(it);
    while (nheld > 0)
        slabs_free(held[--nheld], w.cls);
    ext.item_size = 512;
    flash_tune(&ext);
    free(val);
    if (started)
        flash_stop();
    unlink(path);
    item_alloc_flash_wait_limits(0, 0, 0);
    storage_shutdown();
}

/* The class of flash headers (chunks smaller than ext_item_size) that
 * evicts while flash has room gets a page from the class holding the
 * most, handed straight to it: the page never sits in the pool, where an
 * allocation of another class (a set waiting for the flash writer polls
 * for a chunk) would take it first. */
static void test_flash_header_page(void)
{
    struct storage_config cfg = default_config(); /* the mover on */
    cfg.maxbytes = 8 * MIB;
    start(&cfg);
    char path[] = "/tmp/test_storage_hdr.XXXXXX";
    bool started = start_flash_file(path);
    /* values too small for flash: 3 MiB of 300 bytes, then 100-byte ones
     * until their class evicts */
    enum { MEDIUM = 300, SMALL = 100 };
    char *val = malloc(MEDIUM), key[32];
    if (val)
        fill_pattern(val, MEDIUM, 7);
    for (int i = 0; started && val && i < 8000; i++) {
        snprintf(key, sizeof(key), "hm:%d", i);
        store_full(key, val, MEDIUM, 0, 0, STORE_SET, 0, NULL, NULL);
    }
    unsigned small_cls = 0;
    for (int i = 0; started && val && i < 60000 && general_stat("evictions") < 1000; i++) {
        snprintf(key, sizeof(key), "hs:%d", i);
        store_full(key, val, SMALL, 0, 0, STORE_SET, 0, NULL, NULL);
        item *it = small_cls ? NULL : item_peek(key, strlen(key));
        if (it) {
            small_cls = item_slab_class(it);
            item_release(it);
        }
    }
    struct slabs_class_stats before, after;
    slabs_class_stats(small_cls, &before);
    unsigned long long pool = general_stat("slab_global_page_pool");
    tap_ok(started && small_cls > 0 && general_stat("evictions") >= 1000 &&
               flash_header_class_short(before.chunk_size),
           "the class of %zu-byte chunks, a headers' class, evicts (%llu)", before.chunk_size,
           general_stat("evictions"));
    bool moved = storage_slab_move_now();
    slabs_class_stats(small_cls, &after);
    tap_ok(moved && after.total_pages == before.total_pages + 1 &&
               general_stat("slab_global_page_pool") == pool,
           "the mover hands it a page at once (%zu -> %zu pages, pool %llu -> %llu)",
           before.total_pages, after.total_pages, pool, general_stat("slab_global_page_pool"));
    free(val);
    if (started)
        flash_stop();
    unlink(path);
    storage_shutdown();
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_round_trip();
    test_huge_item();
    test_small_chunk_max();
    test_class_of_size();
    test_store_ops();
    test_cas_disabled();
    test_arith();
    test_expiry_and_touch();
    test_flush();
    test_eviction();
    test_cold_select();
#ifdef HAVE_LIBURING
    test_flash_read_check();
    test_flash_room_wait();
    test_flash_header_page();
#endif
    test_borrow();
    test_page_reuse();
    test_value_chunk_pages();
    test_region_observer();
    test_slab_move();
    test_reserved_page();
    test_walk();
    test_fetched();
    test_references();
    test_stats();
    test_hash_growth();
    test_replace();
    test_threads();
    tap_no_plan_end();
    return tap_exit_status();
}
