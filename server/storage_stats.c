/*
 * storage_stats.c: the storage engine's counters and the stats emitters of
 * items.h ("stats", "stats settings", "stats items", "stats slabs",
 * "stats sizes", "stats reset"), with memcached 1.6's names and formats.
 *
 * Hit counters are per thread: each worker increments its own block
 * (single writer, relaxed atomics, no shared cache line on the hot path)
 * and readers sum all blocks. "stats reset" does not write into other
 * threads' blocks; it records a baseline that later reads subtract.
 * This file reads the other parts' state only through their headers.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assoc.h"
#include "crawler.h"
#include "lru.h"
#include "lru_maintainer.h"
#include "slab_mover.h"
#include "slabs.h"
#include "storage_internal.h"

struct thread_stats {
    struct thread_stats *next;
    uint64_t per_class[SLAB_CLASSES_MAX][CC_COUNT];
    uint64_t global[TC_COUNT];
};

struct stats_sums {
    uint64_t per_class[SLAB_CLASSES_MAX][CC_COUNT];
    uint64_t global[TC_COUNT];
};

/* Item size histogram state (see "sizes histogram" below). */
#define SIZE_BUCKET 32
#define SIZES_MAX_BYTES (1024 * 1024) /* larger items go to the last bucket */

static atomic_bool sizes_on;
static uint64_t sizes_cas_min;
static uint32_t *sizes_hist;
static size_t sizes_len;
static pthread_mutex_t sizes_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct thread_stats *registry;
static struct stats_sums baseline;
static unsigned generation; /* bumped by init so stale thread blocks are dropped */
static _Thread_local struct thread_stats *my_stats;
static _Thread_local unsigned my_generation;

void tstats_init(void)
{
    pthread_mutex_lock(&registry_lock);
    generation++;
    memset(&baseline, 0, sizeof(baseline));
    pthread_mutex_unlock(&registry_lock);
}

static void sizes_shutdown(void);

void tstats_shutdown(void)
{
    sizes_shutdown();
    pthread_mutex_lock(&registry_lock);
    while (registry) {
        struct thread_stats *t = registry;
        registry = t->next;
        free(t);
    }
    generation++;
    pthread_mutex_unlock(&registry_lock);
}

static struct thread_stats *mine(void)
{
    unsigned gen = __atomic_load_n(&generation, __ATOMIC_RELAXED);
    if (my_stats && my_generation == gen)
        return my_stats;
    struct thread_stats *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    pthread_mutex_lock(&registry_lock);
    t->next = registry;
    registry = t;
    my_generation = generation;
    pthread_mutex_unlock(&registry_lock);
    my_stats = t;
    return t;
}

static inline void bump_counter(uint64_t *c)
{
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

void tstat_class_incr(unsigned cls, enum class_counter which)
{
    struct thread_stats *t = mine();
    if (t && cls < SLAB_CLASSES_MAX)
        bump_counter(&t->per_class[cls][which]);
}

void tstat_get_hit(unsigned cls, unsigned seg)
{
    struct thread_stats *t = mine();
    if (t && cls < SLAB_CLASSES_MAX) {
        bump_counter(&t->per_class[cls][CC_GET_HITS]);
        bump_counter(&t->per_class[cls][CC_HITS_TO_HOT + seg]);
    }
}

void tstat_incr(enum thread_counter which)
{
    struct thread_stats *t = mine();
    if (t)
        bump_counter(&t->global[which]);
}

/* Totals since start (no baseline subtracted); registry_lock held. */
static void sum_raw(struct stats_sums *s)
{
    memset(s, 0, sizeof(*s));
    for (struct thread_stats *t = registry; t; t = t->next) {
        for (unsigned c = 0; c < SLAB_CLASSES_MAX; c++)
            for (unsigned k = 0; k < CC_COUNT; k++)
                s->per_class[c][k] += __atomic_load_n(&t->per_class[c][k], __ATOMIC_RELAXED);
        for (unsigned k = 0; k < TC_COUNT; k++)
            s->global[k] += __atomic_load_n(&t->global[k], __ATOMIC_RELAXED);
    }
}

static struct stats_sums *sum_since_reset(void)
{
    struct stats_sums *s = malloc(sizeof(*s));
    if (!s)
        return NULL;
    pthread_mutex_lock(&registry_lock);
    sum_raw(s);
    for (unsigned c = 0; c < SLAB_CLASSES_MAX; c++)
        for (unsigned k = 0; k < CC_COUNT; k++)
            s->per_class[c][k] -= baseline.per_class[c][k];
    for (unsigned k = 0; k < TC_COUNT; k++)
        s->global[k] -= baseline.global[k];
    pthread_mutex_unlock(&registry_lock);
    return s;
}

void storage_stats_reset(void)
{
    pthread_mutex_lock(&registry_lock);
    sum_raw(&baseline);
    pthread_mutex_unlock(&registry_lock);
    lru_counters_reset();
    lru_maintainer_stats_reset();
    slab_mover_reset();
}

/* ---- formatting -------------------------------------------------------------- */
static void emit_u64(stat_emit_fn emit, void *ctx, const char *name, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    emit(ctx, name, buf);
}

static void emit_class_u64(stat_emit_fn emit, void *ctx, const char *prefix, unsigned cls,
                           const char *name, uint64_t v)
{
    char key[64];
    snprintf(key, sizeof(key), "%s%u:%s", prefix, cls, name);
    emit_u64(emit, ctx, key, v);
}

/* ---- stats --------------------------------------------------------------------- */
void storage_stats_general(stat_emit_fn emit, void *ctx)
{
    struct lru_counters total;
    memset(&total, 0, sizeof(total));
    for (unsigned cls = 1; cls <= storage_rt.largest_class; cls++) {
        struct lru_class_stats st;
        lru_class_stats_get(cls, &st);
        const struct lru_counters *c = &st.sum;
        total.total_items += c->total_items;
        total.evicted += c->evicted;
        total.reclaimed += c->reclaimed;
        total.expired_unfetched += c->expired_unfetched;
        total.evicted_unfetched += c->evicted_unfetched;
        total.evicted_active += c->evicted_active;
        total.crawler_reclaimed += c->crawler_reclaimed;
        total.crawler_items_checked += c->crawler_items_checked;
        total.lrutail_reflocked += c->lrutail_reflocked;
        total.moves_to_cold += c->moves_to_cold;
        total.moves_to_warm += c->moves_to_warm;
        total.moves_within_lru += c->moves_within_lru;
        total.direct_reclaims += c->direct_reclaims;
    }
    /* one counter each, changed only at link and unlink (never by the
     * maintainer's moves between segments) */
    lru_linked_totals(&total.curr_items, &total.bytes);
    bool maintainer = lru_maintainer_running();
    struct stats_sums *s = sum_since_reset();
    struct slabs_global_stats sg;
    slabs_global_stats(&sg);
    struct assoc_stats as;
    assoc_stats(&as);

    struct slab_mover_stats ms;
    slab_mover_stats(&ms);
    uint64_t crawler_starts;
    bool crawler_running;
    crawler_stats(&crawler_starts, &crawler_running);

    /* memcached 1.6's names and order; as memcached, the segmented LRU's
     * figures only while its maintainer thread runs. */
    emit_u64(emit, ctx, "get_expired", s ? s->global[TC_GET_EXPIRED] : 0);
    emit_u64(emit, ctx, "get_flushed", s ? s->global[TC_GET_FLUSHED] : 0);
    emit_u64(emit, ctx, "limit_maxbytes", sg.mem_limit);
    emit_u64(emit, ctx, "hash_power_level", as.hash_power);
    emit_u64(emit, ctx, "hash_bytes", as.hash_bytes);
    emit_u64(emit, ctx, "hash_is_expanding", as.expanding ? 1 : 0);
    emit_u64(emit, ctx, "slab_reassign_rescues", ms.items_rescued);
    emit_u64(emit, ctx, "slab_reassign_chunk_rescues", ms.chunks_rescued);
    emit_u64(emit, ctx, "slab_reassign_evictions_nomem", ms.items_lost);
    emit_u64(emit, ctx, "slab_reassign_inline_reclaim", ms.items_reclaimed);
    emit_u64(emit, ctx, "slab_reassign_busy_items", ms.items_busy);
    emit_u64(emit, ctx, "slab_reassign_busy_deletes", 0);
    emit_u64(emit, ctx, "slab_reassign_running", ms.running ? 1 : 0);
    emit_u64(emit, ctx, "slabs_moved", ms.pages_moved);
    emit_u64(emit, ctx, "lru_crawler_running", crawler_running ? 1 : 0);
    emit_u64(emit, ctx, "lru_crawler_starts", crawler_starts);
    if (maintainer)
        emit_u64(emit, ctx, "lru_maintainer_juggles", lru_maintainer_juggles());
    emit_u64(emit, ctx, "malloc_fails", sg.malloc_fails);
    emit_u64(emit, ctx, "bytes", total.bytes);
    emit_u64(emit, ctx, "curr_items", total.curr_items);
    emit_u64(emit, ctx, "total_items", total.total_items);
    emit_u64(emit, ctx, "slab_global_page_pool", sg.pool_pages);
    emit_u64(emit, ctx, "expired_unfetched", total.expired_unfetched);
    emit_u64(emit, ctx, "evicted_unfetched", total.evicted_unfetched);
    if (maintainer)
        emit_u64(emit, ctx, "evicted_active", total.evicted_active);
    emit_u64(emit, ctx, "evictions", total.evicted);
    emit_u64(emit, ctx, "reclaimed", total.reclaimed);
    emit_u64(emit, ctx, "crawler_reclaimed", total.crawler_reclaimed);
    emit_u64(emit, ctx, "crawler_items_checked", total.crawler_items_checked);
    emit_u64(emit, ctx, "lrutail_reflocked", total.lrutail_reflocked);
    if (maintainer) {
        emit_u64(emit, ctx, "moves_to_cold", total.moves_to_cold);
        emit_u64(emit, ctx, "moves_to_warm", total.moves_to_warm);
        emit_u64(emit, ctx, "moves_within_lru", total.moves_within_lru);
        emit_u64(emit, ctx, "direct_reclaims", total.direct_reclaims);
        emit_u64(emit, ctx, "lru_bumps_dropped", s ? s->global[TC_BUMPS_DROPPED] : 0);
    }
    free(s);
}

void storage_stats_settings(stat_emit_fn emit, void *ctx)
{
    const struct storage_config *cfg = &storage_rt.cfg;
    char buf[32];
    struct slabs_global_stats sg;
    slabs_global_stats(&sg);
    emit_u64(emit, ctx, "maxbytes", sg.mem_limit);
    emit_u64(emit, ctx, "oldest", items_oldest_live());
    emit(ctx, "evictions", cfg->evict_to_free ? "on" : "off");
    snprintf(buf, sizeof(buf), "%.2f", cfg->factor);
    emit(ctx, "growth_factor", buf);
    emit_u64(emit, ctx, "chunk_size", cfg->chunk_size);
    emit(ctx, "cas_enabled", cfg->use_cas ? "yes" : "no");
    emit_u64(emit, ctx, "item_size_max", cfg->item_size_max);
    emit_u64(emit, ctx, "hashpower_init", cfg->hashpower_init);
    emit(ctx, "slab_reassign", "yes");
    emit_u64(emit, ctx, "slab_automove", slab_mover_auto() ? 1 : 0);
    emit_u64(emit, ctx, "slab_chunk_max", storage_rt.chunk_max);
    emit_u64(emit, ctx, "slab_page_size", cfg->slab_page_size);
    emit(ctx, "lru_crawler",
         __atomic_load_n(&storage_rt.cfg.lru_crawler, __ATOMIC_RELAXED) ? "yes" : "no");
    emit_u64(emit, ctx, "lru_crawler_sleep",
             __atomic_load_n(&storage_rt.crawler_sleep_us, __ATOMIC_RELAXED));
    emit_u64(emit, ctx, "lru_crawler_tocrawl",
             __atomic_load_n(&storage_rt.crawler_tocrawl, __ATOMIC_RELAXED));
    emit(ctx, "hash_algorithm", "mcr64");
    emit(ctx, "slab_prealloc", cfg->prealloc ? "yes" : "no");
    emit(ctx, "track_sizes", atomic_load(&sizes_on) ? "yes" : "no");
}

void storage_stats_items(stat_emit_fn emit, void *ctx)
{
    rel_time_t now = clock_now();
    struct stats_sums *s = sum_since_reset();
    bool maintainer = lru_maintainer_running();
    bool temp = __atomic_load_n(&storage_rt.temp_lru, __ATOMIC_RELAXED);
    for (unsigned cls = 1; cls <= storage_rt.largest_class; cls++) {
        struct lru_class_stats st;
        lru_class_stats_get(cls, &st);
        const struct lru_counters c = st.sum;
        if (c.curr_items == 0) /* memcached lists classes holding items */
            continue;
        const char *p = "items:";
        rel_time_t seg_age[LRU_SEGMENTS];
        for (unsigned seg = 0; seg < LRU_SEGMENTS; seg++)
            seg_age[seg] =
                st.has_tail[seg] && st.tail_time[seg] <= now ? now - st.tail_time[seg] : 0;
        emit_class_u64(emit, ctx, p, cls, "number", c.curr_items);
        if (maintainer) {
            emit_class_u64(emit, ctx, p, cls, "number_hot", st.items[LRU_HOT]);
            emit_class_u64(emit, ctx, p, cls, "number_warm", st.items[LRU_WARM]);
            emit_class_u64(emit, ctx, p, cls, "number_cold", st.items[LRU_COLD]);
            if (temp)
                emit_class_u64(emit, ctx, p, cls, "number_temp", st.items[LRU_TEMP]);
            emit_class_u64(emit, ctx, p, cls, "age_hot", seg_age[LRU_HOT]);
            emit_class_u64(emit, ctx, p, cls, "age_warm", seg_age[LRU_WARM]);
        }
        emit_class_u64(emit, ctx, p, cls, "age", seg_age[LRU_COLD]);
        emit_class_u64(emit, ctx, p, cls, "mem_requested", c.bytes);
        emit_class_u64(emit, ctx, p, cls, "evicted", c.evicted);
        emit_class_u64(emit, ctx, p, cls, "evicted_nonzero", c.evicted_nonzero);
        emit_class_u64(emit, ctx, p, cls, "evicted_time", c.evicted_time);
        emit_class_u64(emit, ctx, p, cls, "outofmemory", c.outofmemory);
        emit_class_u64(emit, ctx, p, cls, "tailrepairs", 0);
        emit_class_u64(emit, ctx, p, cls, "reclaimed", c.reclaimed);
        emit_class_u64(emit, ctx, p, cls, "expired_unfetched", c.expired_unfetched);
        emit_class_u64(emit, ctx, p, cls, "evicted_unfetched", c.evicted_unfetched);
        if (maintainer)
            emit_class_u64(emit, ctx, p, cls, "evicted_active", c.evicted_active);
        emit_class_u64(emit, ctx, p, cls, "crawler_reclaimed", c.crawler_reclaimed);
        emit_class_u64(emit, ctx, p, cls, "crawler_items_checked", c.crawler_items_checked);
        emit_class_u64(emit, ctx, p, cls, "lrutail_reflocked", c.lrutail_reflocked);
        if (!maintainer)
            continue;
        emit_class_u64(emit, ctx, p, cls, "moves_to_cold", c.moves_to_cold);
        emit_class_u64(emit, ctx, p, cls, "moves_to_warm", c.moves_to_warm);
        emit_class_u64(emit, ctx, p, cls, "moves_within_lru", c.moves_within_lru);
        emit_class_u64(emit, ctx, p, cls, "direct_reclaims", c.direct_reclaims);
        static const char *const hits_to[LRU_SEGMENTS] = {"hits_to_hot", "hits_to_warm",
                                                          "hits_to_cold", "hits_to_temp"};
        for (unsigned seg = 0; seg < LRU_SEGMENTS; seg++)
            emit_class_u64(emit, ctx, p, cls, hits_to[seg],
                           s ? s->per_class[cls][CC_HITS_TO_HOT + seg] : 0);
    }
    free(s);
}

void storage_stats_slabs(stat_emit_fn emit, void *ctx)
{
    static const char *const hit_names[CC_HITS_TO_HOT] = {
        [CC_GET_HITS] = "get_hits",       [CC_CMD_SET] = "cmd_set",
        [CC_DELETE_HITS] = "delete_hits", [CC_INCR_HITS] = "incr_hits",
        [CC_DECR_HITS] = "decr_hits",     [CC_CAS_HITS] = "cas_hits",
        [CC_CAS_BADVAL] = "cas_badval",   [CC_TOUCH_HITS] = "touch_hits",
    };
    struct stats_sums *s = sum_since_reset();
    unsigned active = 0;
    for (unsigned cls = 1; cls <= storage_rt.largest_class; cls++) {
        struct slabs_class_stats sc;
        slabs_class_stats(cls, &sc);
        if (sc.total_pages == 0)
            continue;
        active++;
        emit_class_u64(emit, ctx, "", cls, "chunk_size", sc.chunk_size);
        emit_class_u64(emit, ctx, "", cls, "chunks_per_page", sc.chunks_per_page);
        emit_class_u64(emit, ctx, "", cls, "total_pages", sc.total_pages);
        emit_class_u64(emit, ctx, "", cls, "total_chunks", sc.total_chunks);
        emit_class_u64(emit, ctx, "", cls, "used_chunks", sc.used_chunks);
        emit_class_u64(emit, ctx, "", cls, "free_chunks", sc.free_chunks);
        emit_class_u64(emit, ctx, "", cls, "free_chunks_end", sc.free_chunks_end);
        for (unsigned k = 0; k < CC_HITS_TO_HOT; k++)
            emit_class_u64(emit, ctx, "", cls, hit_names[k], s ? s->per_class[cls][k] : 0);
    }
    struct slabs_global_stats sg;
    slabs_global_stats(&sg);
    emit_u64(emit, ctx, "active_slabs", active);
    emit_u64(emit, ctx, "total_malloced", sg.total_malloced);
    free(s);
}

/* ---- sizes histogram ------------------------------------------------------
 * Off by default, as in memcached. While on, items stored after it was
 * switched on (CAS unique above sizes_cas_min) are counted per 32-byte
 * size bucket when linked and uncounted when unlinked. The array is kept
 * once allocated (until shutdown), so late updates never touch freed
 * memory. */

void storage_sizes_enable(bool on)
{
    pthread_mutex_lock(&sizes_lock);
    if (on && !atomic_load(&sizes_on)) {
        if (!sizes_hist) {
            sizes_len = SIZES_MAX_BYTES / SIZE_BUCKET + 1;
            sizes_hist = calloc(sizes_len, sizeof(*sizes_hist));
        }
        if (sizes_hist) {
            for (size_t i = 0; i < sizes_len; i++)
                __atomic_store_n(&sizes_hist[i], 0, __ATOMIC_RELAXED);
            __atomic_store_n(&sizes_cas_min, items_cas_now(), __ATOMIC_RELAXED);
            atomic_store(&sizes_on, true);
        }
    } else if (!on) {
        atomic_store(&sizes_on, false);
    }
    pthread_mutex_unlock(&sizes_lock);
}

void tstat_size_change(uint64_t cas, size_t ntotal, bool added)
{
    if (!atomic_load_explicit(&sizes_on, memory_order_relaxed) ||
        cas <= __atomic_load_n(&sizes_cas_min, __ATOMIC_RELAXED))
        return;
    size_t bucket = (ntotal + SIZE_BUCKET - 1) / SIZE_BUCKET;
    if (bucket >= sizes_len)
        bucket = sizes_len - 1;
    if (added)
        __atomic_add_fetch(&sizes_hist[bucket], 1, __ATOMIC_RELAXED);
    else
        __atomic_sub_fetch(&sizes_hist[bucket], 1, __ATOMIC_RELAXED);
}

static void sizes_shutdown(void)
{
    pthread_mutex_lock(&sizes_lock);
    atomic_store(&sizes_on, false);
    free(sizes_hist);
    sizes_hist = NULL;
    sizes_len = 0;
    pthread_mutex_unlock(&sizes_lock);
}

void storage_stats_sizes(stat_emit_fn emit, void *ctx)
{
    pthread_mutex_lock(&sizes_lock);
    if (!atomic_load(&sizes_on)) {
        pthread_mutex_unlock(&sizes_lock);
        emit(ctx, "sizes_status", "disabled");
        return;
    }
    for (size_t i = 0; i < sizes_len; i++) {
        uint32_t n = __atomic_load_n(&sizes_hist[i], __ATOMIC_RELAXED);
        if (n == 0 || n > UINT32_MAX / 2) /* skip empty (and transiently negative) */
            continue;
        char name[24], value[16];
        snprintf(name, sizeof(name), "%zu", i * SIZE_BUCKET);
        snprintf(value, sizeof(value), "%" PRIu32, n);
        emit(ctx, name, value);
    }
    pthread_mutex_unlock(&sizes_lock);
}
