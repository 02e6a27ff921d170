/*
 * t/test_storage_lru.c: unit tests of the storage engine's LRU, printing TAP: eviction (flat, and
 * segmented with its maintainer thread), -M when memory is full, the flash tier's selection of
 * COLD items, walks of the LRU (whole, limited and resumable), and the concurrency smoke test:
 * workers storing, reading and deleting while the maintainer, the crawler and the slab mover run.
 * Each group starts a fresh engine (t/storage_harness.h) with the settings it needs. memcached
 * 1.6's behaviour is the reference for every expectation.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/clock.h"
#include "server/items.h"
#include "server/slabs.h"
#include "t/rdma/tap.h"
#include "t/storage_harness.h"

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
        item_value_write(tail, "x", 1);
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

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_eviction();
    test_cold_select();
    test_walk();
    test_threads();
    tap_no_plan_end();
    return tap_exit_status();
}
