/*
 * storage.c: the storage engine's start-up and shut-down (storage_init,
 * storage_start_threads, storage_shutdown) and run-time settings
 * (cache_memlimit, the crawler's switches, the segmented LRU's tunables). Fills defaults the way
 * memcached does, sizes the item lock table from the worker count, and brings the parts up in order
 * and down in reverse. Owns no data structure itself.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "assoc.h"
#include "crawler.h"
#include "lru.h"
#include "lru_maintainer.h"
#include "slab_mover.h"
#include "slabs.h"
#include "storage_internal.h"

#define ITEM_SIZE_MAX_LOWER (1024)
#define ITEM_SIZE_MAX_UPPER (1024 * 1024 * 1024)
#define CRAWLER_SLEEP_US 100
#define CRAWLER_INTERVAL_S 5

struct storage_runtime storage_rt;
static bool threads_started;

static unsigned lock_power_for(unsigned threads)
{
    /* More workers, more stripes (memcached's sizing). */
    if (threads < 3)
        return 10;
    if (threads < 4)
        return 11;
    if (threads < 5)
        return 12;
    return 13;
}

int storage_init(const struct storage_config *given, char *errbuf, size_t errlen)
{
    struct storage_config cfg = *given;
    if (cfg.factor == 0)
        cfg.factor = 1.25;
    if (cfg.chunk_size == 0)
        cfg.chunk_size = 48;
    if (cfg.item_size_max == 0)
        cfg.item_size_max = 1024 * 1024;
    if (cfg.slab_page_size == 0)
        cfg.slab_page_size = 1024 * 1024;
    if (cfg.slab_chunk_max == 0)
        cfg.slab_chunk_max = cfg.slab_page_size / 2;
    if (cfg.worker_threads == 0)
        cfg.worker_threads = 4;
    if (cfg.hot_lru_pct == 0)
        cfg.hot_lru_pct = 20;
    if (cfg.warm_lru_pct == 0)
        cfg.warm_lru_pct = 40;
    if (cfg.hot_max_factor <= 0)
        cfg.hot_max_factor = 0.2;
    if (cfg.warm_max_factor <= 0)
        cfg.warm_max_factor = 2.0;
    if (cfg.hot_lru_pct + cfg.warm_lru_pct > 80) {
        snprintf(errbuf, errlen, "hot_lru_pct + warm_lru_pct cannot be more than 80%%");
        return -1;
    }
    if (cfg.item_size_max < ITEM_SIZE_MAX_LOWER || cfg.item_size_max > ITEM_SIZE_MAX_UPPER) {
        snprintf(errbuf, errlen, "item_size_max must be between 1 KiB and 1 GiB");
        return -1;
    }
    if (cfg.slab_chunk_max > cfg.slab_page_size) {
        snprintf(errbuf, errlen, "slab_chunk_max cannot be larger than the slab page size");
        return -1;
    }

    memset(&storage_rt, 0, sizeof(storage_rt));
    storage_rt.cfg = cfg;
    storage_rt.lock_power = lock_power_for(cfg.worker_threads);
    storage_rt.crawler_sleep_us = CRAWLER_SLEEP_US;
    storage_rt.crawler_interval_s = CRAWLER_INTERVAL_S;
    storage_rt.lru_segmented = cfg.lru_segmented;
    storage_rt.temp_lru = cfg.temp_lru;
    storage_rt.temporary_ttl = cfg.temporary_ttl;
    lru_maintainer_tune(cfg.hot_lru_pct, cfg.warm_lru_pct, cfg.hot_max_factor, cfg.warm_max_factor);
    lru_maintainer_stats_reset();

    struct slabs_config sc = {
        .mem_limit = cfg.maxbytes,
        .factor = cfg.factor,
        .min_chunk = cfg.chunk_size,
        /* memcached's item header (48 bytes on 64-bit), not ours: the class
         * sizes (and so the class ids clients and tools see) are memcached's */
        .header_size = MEMCACHED_ITEM_HEADER_SIZE,
        .page_size = cfg.slab_page_size,
        .chunk_max = cfg.slab_chunk_max,
        .sizes = cfg.slab_sizes,
        .nsizes = cfg.slab_sizes_count,
        .prealloc = cfg.prealloc,
    };
    if (slabs_init(&sc, errbuf, errlen) != 0)
        return -1;
    storage_rt.largest_class = slabs_largest_class();
    storage_rt.chunk_max = slabs_class_size(storage_rt.largest_class);
    lru_init();
    if (assoc_init(cfg.hashpower_init, storage_rt.lock_power, errbuf, errlen) != 0) {
        lru_shutdown();
        slabs_shutdown();
        return -1;
    }
    items_init();
    tstats_init();
    slab_mover_reset();
    slab_mover_set_auto(!cfg.slab_automove_off);
    threads_started = false;
    return 0;
}

int storage_start_threads(void)
{
    if (assoc_start_thread() != 0)
        return -1;
    if (storage_rt.cfg.lru_crawler && crawler_start() != 0) {
        assoc_stop_thread();
        return -1;
    }
    if (slab_mover_start() != 0) {
        if (storage_rt.cfg.lru_crawler)
            crawler_stop();
        assoc_stop_thread();
        return -1;
    }
    if (storage_rt.cfg.lru_maintainer && lru_maintainer_start() != 0) {
        slab_mover_stop();
        if (storage_rt.cfg.lru_crawler)
            crawler_stop();
        assoc_stop_thread();
        return -1;
    }
    threads_started = true;
    return 0;
}

int storage_crawler_enable(bool on)
{
    static pthread_mutex_t switch_lock = PTHREAD_MUTEX_INITIALIZER;
    int rc = -1;
    pthread_mutex_lock(&switch_lock);
    bool now_on = __atomic_load_n(&storage_rt.cfg.lru_crawler, __ATOMIC_RELAXED);
    if (threads_started && on != now_on && (on ? crawler_start() == 0 : (crawler_stop(), true))) {
        __atomic_store_n(&storage_rt.cfg.lru_crawler, on, __ATOMIC_RELAXED);
        rc = 0;
    }
    pthread_mutex_unlock(&switch_lock);
    return rc;
}

bool storage_crawler_enabled(void)
{
    return __atomic_load_n(&storage_rt.cfg.lru_crawler, __ATOMIC_RELAXED);
}

int storage_crawler_set_sleep(unsigned usec)
{
    if (usec > 1000000)
        return -1;
    __atomic_store_n(&storage_rt.crawler_sleep_us, usec, __ATOMIC_RELAXED);
    return 0;
}

void storage_crawler_set_tocrawl(unsigned items)
{
    __atomic_store_n(&storage_rt.crawler_tocrawl, items, __ATOMIC_RELAXED);
}

void storage_stop_threads(void)
{
    if (threads_started) {
        lru_maintainer_stop();
        slab_mover_stop();
        if (storage_rt.cfg.lru_crawler)
            crawler_stop();
        assoc_stop_thread();
        threads_started = false;
    }
}

void storage_shutdown(void)
{
    storage_stop_threads();
    lru_bumps_shutdown();
    tstats_shutdown();
    /* Item memory lives in slab pages, unmapped below as a whole. */
    assoc_shutdown(NULL);
    lru_shutdown();
    slabs_shutdown();
}

int storage_set_memlimit(size_t maxbytes)
{
    if (slabs_set_limit(maxbytes) != 0)
        return -1;
    storage_rt.cfg.maxbytes = maxbytes;
    return 0;
}

int storage_slab_automove(int mode)
{
    if (mode < 0 || mode > 2)
        return -1;
    slab_mover_set_auto(mode != 0);
    return 0;
}

enum slabs_reassign_result storage_slabs_reassign(int src, int dst)
{
    return (enum slabs_reassign_result)slab_mover_request(src, dst);
}

bool storage_slab_move_now(void)
{
    return slab_mover_run_once();
}

void storage_crawl_now(void)
{
    crawler_run_once();
}

void storage_crawl_soon(void)
{
    if (!crawler_request_all())
        crawler_run_once();
}

void storage_lru_tune(unsigned hot_pct, unsigned warm_pct, double hot_factor, double warm_factor)
{
    lru_maintainer_tune(hot_pct, warm_pct, hot_factor, warm_factor);
}

int storage_lru_set_segmented(bool on)
{
    if (!lru_maintainer_running())
        return -1;
    __atomic_store_n(&storage_rt.lru_segmented, on, __ATOMIC_RELAXED);
    return 0;
}

int storage_lru_set_temp_ttl(int ttl)
{
    if (!lru_maintainer_running())
        return -1;
    if (ttl >= 0)
        __atomic_store_n(&storage_rt.temporary_ttl, ttl, __ATOMIC_RELAXED);
    __atomic_store_n(&storage_rt.temp_lru, ttl >= 0, __ATOMIC_RELAXED);
    return 0;
}

bool storage_lru_maintainer_running(void)
{
    return lru_maintainer_running();
}
