/*
 * t/test_storage_slabs.c: unit tests of the storage engine's slab allocator and slab mover,
 * printing TAP: the size classes and chunked values, borrowing a larger class's chunks, the page
 * pool, pages of value chunks emptied under readers, the region observer, pages reserved for a
 * move, and moving pages between classes. Each group starts a fresh engine (t/storage_harness.h)
 * with the settings it needs. memcached 1.6's behaviour is the reference for every expectation.
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

/* Memory freed by deletes goes back to a pool that other classes use. */
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

/* When the cache is full of old items of one size and new items of another
 * size keep evicting each other, pages move to the new size. */
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

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_small_chunk_max();
    test_class_of_size();
    test_borrow();
    test_page_reuse();
    test_value_chunk_pages();
    test_region_observer();
    test_slab_move();
    test_reserved_page();
    tap_no_plan_end();
    return tap_exit_status();
}
