/*
 * slab_mover.c: moves slab pages between classes when the cache is full
 * and the item sizes stored change (memcached's slab_reassign + automove).
 *
 * Once every page is handed out, a class only reuses its own chunks, so a
 * workload whose item sizes shift would keep evicting young items of the
 * new size while pages full of old items of another size sit untouched.
 * Once a second, while memory is at its limit (so no class may take a new
 * or pooled page), the mover looks for the class that evicted (or failed to allocate) the
 * most since the last look and, among the other classes with at least two
 * pages, the one whose LRU tail is older. It empties one page of that class
 * (the page holding only item headers with the fewest in use): live items
 * in it move into free chunks on the class's other pages while there are
 * some (slab_reassign_rescues), the rest are unlinked, except those someone
 * references, which it waits for for a little while, and the page goes to
 * the pool where the needy class takes it. Items lost this way are counted
 * as slab_reassign_evictions_nomem.
 * A move asked for by "slabs reassign SRC DST" hands the emptied page (or,
 * from class 0, a pooled one) straight to DST, as memcached does.
 * A class holding more than two and a half pages' worth of free chunks
 * (after deletes, expiry or flush_all) that went slab_automove_window
 * seconds without evicting or taking a page gives pages to the pool the
 * same way, one per look, looking again within a millisecond while it
 * does, as memcached's automove fills its global page pool.
 * The class of flash headers (-o ext_path) that evicts while flash has room
 * takes a page from the class holding the most, handed straight to it (a
 * pooled page would go to whichever class allocates first); for a second
 * after it did, the mover looks every 10 ms.
 * When cache_memlimit lowers the limit below what is held, the mover
 * empties pages of the classes with the oldest items in the same way and
 * leaves them in the pool (their memory returned) until within the limit.
 *
 * This file decides and drives; slabs.c empties pages, items.c unlinks.
 */
#include "slab_mover.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flash.h"
#include "lru.h"
#include "slabs.h"
#include "items.h"
#include "bg_thread.h"
#include "storage_internal.h"

#define MOVE_ROUNDS 20         /* visits of a page being emptied that free nothing */
#define ROUND_PAUSE_NS 5000000 /* between visits: 5 ms */
#define POOLING_PAUSE_US 1000  /* between looks while pages go to the pool */
#define HEADERS_PAUSE_US 10000 /* between looks for a second after flash headers got a page */

static struct bg_thread mover = BG_THREAD_INIT;

static pthread_mutex_t decide_lock = PTHREAD_MUTEX_INITIALIZER; /* one move at a time */
static uint64_t last_pressure[SLAB_CLASSES_MAX];
static size_t last_pages[SLAB_CLASSES_MAX];     /* at the last look */
static rel_time_t last_dirty[SLAB_CLASSES_MAX]; /* last evicted or grew */
static atomic_uint_fast64_t pages_moved;
static atomic_uint_fast64_t items_lost;
static atomic_uint_fast64_t items_reclaimed; /* dead items found in moved pages */
static atomic_uint_fast64_t items_busy;      /* in use, waited for */
static atomic_uint_fast64_t items_rescued;   /* live ones copied into spare chunks */
static atomic_uint_fast64_t chunks_rescued;  /* value chunks copied likewise */
static atomic_bool moving;
static atomic_bool auto_on = true;
static int pending_src; /* a requested move (thread_lock), 0 = none */
static int pending_dst; /* its destination class, 0 = the pool */

struct taken_list {
    struct item **items;
    enum move_take *how; /* of each item */
    size_t n, cap;
    struct slabs_drain *drain; /* live items move into its spare chunks */
    unsigned cls;              /* of the page being emptied */
    bool starved;              /* a large item was lost for want of a spare chunk: the
                                * rest wait for the round after, when its other chunks
                                * are free to take them (as memcached moves one at a time) */
    uint64_t lost, reclaimed, busy, rescued, chunks_rescued;
};

/* Called with the page's class lock held: collects items to free later. */
static void take_visit(void *chunk, void *owner, void *arg)
{
    struct taken_list *t = arg;
    if (t->n == t->cap)
        return;
    if (owner && t->starved)
        return;
    enum move_take how;
    struct item *it =
        owner ? item_take_value_chunk(chunk, owner, &how, slabs_drain_spare_value, t->drain)
              : item_take_for_move(chunk, &how, slabs_drain_spare, t->drain);
    if (how == MOVE_CHUNK_RESCUED) { /* the old chunk is freed after the visit */
        t->how[t->n] = how;
        t->items[t->n++] = chunk;
        t->chunks_rescued++;
        return;
    }
    if (owner && how == MOVE_LIVE)
        t->starved = true;
    if (it) {
        t->how[t->n] = how;
        t->items[t->n++] = it;
    }
    if (how == MOVE_LIVE)
        t->lost++;
    else if (how == MOVE_DEAD)
        t->reclaimed++;
    else if (how == MOVE_RESCUED)
        t->rescued++;
    else
        t->busy++;
}

/* Empties one page of class src; true when it left src: to the pool, or
 * kept for class dst (0: the pool) until slabs_grant_page(dst, true). */
static bool move_page_from(unsigned src, unsigned dst)
{
    struct slabs_drain *d = slabs_drain_begin(src, dst);
    if (!d)
        return false;
    atomic_store(&moving, true);
    struct taken_list t = {.n = 0, .cap = 4096, .drain = d, .cls = src};
    t.items = malloc(t.cap * sizeof(*t.items));
    t.how = malloc(t.cap * sizeof(*t.how));
    if (!t.items || !t.how)
        t.cap = 0;
    /* A round that frees chunks of the page is followed by another at once
     * (each frees at least one, so they end); MOVE_ROUNDS bounds the
     * rounds that free none, waiting for items in use. */
    for (int idle = 0; idle < MOVE_ROUNDS;) {
        t.n = 0;
        t.starved = false;
        bool done = slabs_drain_visit(d, take_visit, &t);
        for (size_t i = 0; i < t.n; i++) {
            if (t.how[i] == MOVE_CHUNK_RESCUED)
                slabs_free_value(t.items[i], t.cls);
            else
                item_free_taken(t.items[i], t.how[i]);
        }
        if (done)
            break;
        if (t.n == 0) {
            idle++;
            struct timespec pause = {0, ROUND_PAUSE_NS};
            nanosleep(&pause, NULL);
        }
    }
    free(t.how);
    free(t.items);
    atomic_fetch_add(&items_lost, t.lost);
    atomic_fetch_add(&items_rescued, t.rescued);
    atomic_fetch_add(&chunks_rescued, t.chunks_rescued);
    atomic_fetch_add(&items_reclaimed, t.reclaimed);
    atomic_fetch_add(&items_busy, t.busy);
    bool moved = slabs_drain_end(d);
    atomic_store(&moving, false);
    if (moved)
        atomic_fetch_add(&pages_moved, 1);
    return moved;
}

/* The class other than `except` whose LRU tail is oldest, among those
 * with at least two pages (decide_lock held). */
static unsigned oldest_class(unsigned except)
{
    rel_time_t now = clock_now();
    unsigned best = 0;
    rel_time_t best_age = 0;
    for (unsigned c = 1; c <= storage_rt.largest_class; c++) {
        struct lru_class_stats st;
        struct slabs_class_stats sc;
        slabs_class_stats(c, &sc);
        if (c == except || sc.total_pages < 2)
            continue;
        lru_class_stats_get(c, &st);
        rel_time_t age = lru_class_age(&st, now);
        if (!best || age > best_age) {
            best = c;
            best_age = age;
        }
    }
    return best;
}

/* A requested move: a page of src emptied and handed to dst, or to the
 * pool when dst is 0 (as memcached's slabs reassign gives the page to its
 * destination). True when the page left src. */
static bool run_request(unsigned src, unsigned dst)
{
    pthread_mutex_lock(&decide_lock);
    bool moved = move_page_from(src, dst);
    if (moved && dst > 0)
        slabs_grant_page(dst, true); /* the page emptied for it */
    pthread_mutex_unlock(&decide_lock);
    return moved;
}

int slab_mover_request(int src, int dst)
{
    if (src == dst)
        return REASSIGN_SAME;
    /* class 0 is the pool of empty pages, as memcached's global page pool */
    if (src < -1 || src > (int)storage_rt.largest_class || dst < 0 ||
        dst > (int)storage_rt.largest_class)
        return REASSIGN_BADCLASS;
    if (pthread_mutex_trylock(&decide_lock) != 0)
        return REASSIGN_BUSY;
    unsigned from = src == -1 ? oldest_class((unsigned)dst) : (unsigned)src;
    size_t spare_pages = 0;
    if (from > 0) {
        struct slabs_class_stats sc;
        slabs_class_stats(from, &sc);
        spare_pages = sc.total_pages;
    } else if (src == 0) {
        struct slabs_global_stats g;
        slabs_global_stats(&g);
        spare_pages = g.pool_pages;
    }
    pthread_mutex_unlock(&decide_lock);
    if (src == -1 && from == 0)
        return REASSIGN_BADCLASS; /* nothing to pick from: memcached says so */
    if (spare_pages < 2)
        return REASSIGN_NOSPARE;
    if (from == 0) /* from the pool: no page to empty; -m may forbid it */
        return slabs_grant_page((unsigned)dst, false) ? REASSIGN_OK : REASSIGN_NOSPARE;
    bg_thread_lock(&mover);
    bool threaded = mover.running;
    int rc = REASSIGN_OK;
    if (threaded) {
        if (pending_src) {
            rc = REASSIGN_BUSY;
        } else {
            pending_src = (int)from;
            pending_dst = dst;
            bg_thread_wake(&mover);
        }
    }
    bg_thread_unlock(&mover);
    if (!threaded)
        rc = run_request(from, (unsigned)dst) ? REASSIGN_OK : REASSIGN_UNSAFE;
    return rc;
}

void slab_mover_set_auto(bool on)
{
    atomic_store(&auto_on, on);
}

bool slab_mover_auto(void)
{
    return atomic_load(&auto_on);
}

/* What one look did. */
enum look_result { LOOK_NOTHING, LOOK_MOVED, LOOK_HEADERS, LOOK_POOLED };

/* Whether class c has more than MIN_POOL_SPARE pages' worth of free chunks
 * and went a whole window without evicting or taking a page (decide_lock
 * held): its spare pages then serve better in the pool. */
#define MIN_POOL_SPARE 2.5
static bool spare_for_pool(unsigned c, const struct slabs_class_stats *sc, rel_time_t now)
{
    unsigned window =
        storage_rt.cfg.slab_automove_window ? storage_rt.cfg.slab_automove_window : 30;
    return sc->total_pages >= 2 &&
           (double)sc->free_chunks > (double)sc->chunks_per_page * MIN_POOL_SPARE &&
           now - last_dirty[c] >= window;
}

/* One look; with headers_only (the short looks after flash headers got a
 * page) the only move between classes made is one to flash headers. */
static enum look_result look_once(bool headers_only)
{
    if (!storage_rt.cfg.evict_to_free || !atomic_load(&auto_on))
        return LOOK_NOTHING;
    pthread_mutex_lock(&decide_lock);
    rel_time_t now = clock_now();
    unsigned dst = 0;
    uint64_t dst_pressure = 0;
    rel_time_t age[SLAB_CLASSES_MAX] = {0};
    size_t pages[SLAB_CLASSES_MAX] = {0};
    unsigned spare_class = 0;
    for (unsigned c = 1; c <= storage_rt.largest_class; c++) {
        struct lru_class_stats st;
        lru_class_stats_get(c, &st);
        uint64_t pressure = st.sum.evicted + st.sum.outofmemory;
        /* "stats reset" may have zeroed the counters. */
        uint64_t delta = pressure >= last_pressure[c] ? pressure - last_pressure[c] : pressure;
        last_pressure[c] = pressure;
        if (delta > dst_pressure) {
            dst_pressure = delta;
            dst = c;
        }
        age[c] = lru_class_age(&st, now);
        struct slabs_class_stats sc;
        slabs_class_stats(c, &sc);
        pages[c] = sc.total_pages;
        if (delta > 0 || sc.total_pages > last_pages[c])
            last_dirty[c] = now;
        last_pages[c] = sc.total_pages;
        if (!spare_class && spare_for_pool(c, &sc, now))
            spare_class = c;
    }
    struct slabs_global_stats g;
    slabs_global_stats(&g);
    bool full = g.mem_limit && g.held_bytes + storage_rt.cfg.slab_page_size > g.mem_limit;
    enum look_result result = LOOK_NOTHING;
    /* After cache_memlimit lowered the limit: give pages back, oldest
     * class first, until within it (allowing the one page per class that
     * tiny limits grant). */
    size_t allowance = (size_t)g.active_classes * storage_rt.cfg.slab_page_size;
    if (g.mem_limit && g.held_bytes > g.mem_limit + allowance) {
        unsigned src = 0;
        for (unsigned c = 1; c <= storage_rt.largest_class; c++)
            if (pages[c] >= 2 && (!src || age[c] > age[src]))
                src = c;
        if (src && move_page_from(src, 0))
            result = LOOK_POOLED;
    } else if (spare_class) {
        /* A class with pages' worth of free chunks (after deletes or
         * expiry) gives one page to the pool, its live items moved into
         * the free chunks of its other pages, as memcached's automove
         * does. */
        if (move_page_from(spare_class, 0))
            result = LOOK_POOLED;
    } else if (dst && full) {
        /* Pooled pages only help while the limit allows taking one. A
         * class of flash headers that evicts while flash has room takes a
         * page from the class holding the most, whatever the ages: a
         * header's item keeps its old access time, and each header lost
         * loses a whole value on flash. */
        bool headers = flash_header_class_short(slabs_class_size(dst));
        unsigned src = 0;
        for (unsigned c = 1; c <= storage_rt.largest_class && (headers || !headers_only); c++) {
            if (c == dst || pages[c] < 2 || (!headers && age[c] <= age[dst]))
                continue;
            if (!src || (headers ? pages[c] > pages[src] : age[c] > age[src]))
                src = c;
        }
        /* the headers' page is handed to them, not pooled: an allocation
         * of another class (one waiting for the flash writer to free a
         * chunk of its own tries again and again) would take a pooled
         * page first, and the headers would go on evicting */
        if (src && move_page_from(src, headers ? dst : 0)) {
            if (headers)
                slabs_grant_page(dst, true);
            result = headers ? LOOK_HEADERS : LOOK_MOVED;
        }
    }
    pthread_mutex_unlock(&decide_lock);
    return result;
}

bool slab_mover_run_once(void)
{
    return look_once(false) != LOOK_NOTHING;
}

static void *mover_main(void *arg)
{
    (void)arg;
    bg_thread_lock(&mover);
    bool pooling = false;       /* the last look gave a page to the pool */
    unsigned headers_looks = 0; /* short looks left after flash headers got a page */
    while (!bg_thread_stopping(&mover)) {
        /* after a page went to the pool more may follow: look again soon,
         * as memcached; so, for a second, after flash headers took one
         * (a burst of sets of small values fills flash far faster than a
         * page a second gives their headers room; the page just taken
         * lasts them a while, so the next look that finds them evicting
         * may be many short looks later) */
        uint64_t pause_us = pooling             ? POOLING_PAUSE_US
                            : headers_looks > 0 ? HEADERS_PAUSE_US
                                                : 1000000;
        if (!pooling && headers_looks > 0)
            headers_looks--;
        struct timespec until = bg_thread_deadline_us(pause_us);
        while (!bg_thread_stopping(&mover) && !pending_src &&
               bg_thread_wait_until(&mover, &until)) {
        }
        if (bg_thread_stopping(&mover))
            break;
        int request = pending_src, request_dst = pending_dst;
        bg_thread_unlock(&mover);
        pooling = false;
        if (request) {
            run_request((unsigned)request, (unsigned)request_dst);
        } else {
            enum look_result did = look_once(headers_looks > 0);
            pooling = did == LOOK_POOLED;
            if (did == LOOK_HEADERS)
                headers_looks = 1000000 / HEADERS_PAUSE_US;
        }
        bg_thread_lock(&mover);
        if (request)
            pending_src = 0;
    }
    bg_thread_unlock(&mover);
    return NULL;
}

int slab_mover_start(void)
{
    pthread_mutex_lock(&decide_lock);
    memset(last_pressure, 0, sizeof(last_pressure));
    memset(last_pages, 0, sizeof(last_pages));
    memset(last_dirty, 0, sizeof(last_dirty));
    pthread_mutex_unlock(&decide_lock);
    bg_thread_lock(&mover);
    if (!mover.running)
        pending_src = 0;
    bg_thread_unlock(&mover);
    return bg_thread_start(&mover, mover_main);
}

void slab_mover_stop(void)
{
    bg_thread_stop(&mover);
}

void slab_mover_stats(struct slab_mover_stats *out)
{
    out->pages_moved = atomic_load(&pages_moved);
    out->items_lost = atomic_load(&items_lost);
    out->items_reclaimed = atomic_load(&items_reclaimed);
    out->items_busy = atomic_load(&items_busy);
    out->items_rescued = atomic_load(&items_rescued);
    out->chunks_rescued = atomic_load(&chunks_rescued);
    out->running = atomic_load(&moving);
}

void slab_mover_reset(void)
{
    atomic_store(&pages_moved, 0);
    atomic_store(&items_lost, 0);
    atomic_store(&items_reclaimed, 0);
    atomic_store(&items_busy, 0);
    atomic_store(&items_rescued, 0);
    atomic_store(&chunks_rescued, 0);
    pthread_mutex_lock(&decide_lock);
    memset(last_pressure, 0, sizeof(last_pressure));
    pthread_mutex_unlock(&decide_lock);
}
