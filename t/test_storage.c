/*
 * t/test_storage.c: unit tests of the storage engine's items through items.h (and assoc.h's key
 * hash, to know which keys share a hash chain), printing TAP: storing and reading values, the
 * store, cas, arithmetic, expiry, touch, flush and delete commands, the crawler's reclaim, held
 * items, the fetched bit, hash table growth and sets over live keys. The slab allocator, the LRU
 * and its walks, the stats and the flash tier have their own programs (test_storage_slabs,
 * test_storage_lru, test_storage_stats, test_storage_flash); t/storage_harness.h is what they
 * share. Each group starts a fresh engine with the settings it needs; time is moved with
 * clock_advance_for_tests() instead of sleeping. memcached 1.6's behaviour is the reference for
 * every expectation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/assoc.h"
#include "server/clock.h"
#include "server/items.h"
#include "t/rdma/tap.h"
#include "t/storage_harness.h"

static void test_round_trip(void)
{
    struct storage_config cfg = default_config();
    cfg.item_size_max = 8 * MIB;
    tap_ok(start(&cfg) == 0, "engine starts with -I 8m");

    enum alloc_result why;
    item *it = item_alloc("alpha", 5, 42, 0, 5, &why);
    tap_ok(it != NULL && why == ALLOC_OK, "item_alloc gives a handle");
    item_value_write(it, "hello", 5);
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
        item_value_write(it, val, len);
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
        item_value_write(fresh, "v", 1);
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

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_round_trip();
    test_huge_item();
    test_store_ops();
    test_cas_disabled();
    test_arith();
    test_expiry_and_touch();
    test_flush();
    test_fetched();
    test_references();
    test_hash_growth();
    test_replace();
    tap_no_plan_end();
    return tap_exit_status();
}
