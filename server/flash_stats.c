/*
 * flash_stats.c: the flash tier's stats lines: the get_*extstore counters
 * of "stats", the extstore_* ones, and "stats extstore" (a page's version,
 * bytes and bucket), with memcached's names and order.
 */
#include <pthread.h>
#include <stdio.h>

#include "flash.h"
#include "flash_internal.h"

static const char *const counter_names[FC_COUNT] = {
    "get_extstore",          "get_aborted_extstore", "get_oom_extstore",
    "recache_from_extstore", "miss_from_extstore",   "badcrc_from_extstore",
};

static void emit_u64(flash_emit_fn emit, void *ctx, const char *name, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    emit(ctx, name, buf);
}

void flash_stats_gets(flash_emit_fn emit, void *ctx)
{
    if (!flash_running()) /* memcached prints them only with ext_path */
        return;
    for (int i = 0; i < FC_COUNT; i++)
        emit_u64(emit, ctx, counter_names[i], flash_get(&flash_counters.gets[i]));
}

void flash_stats_store(flash_emit_fn emit, void *ctx)
{
    if (!flash_running())
        return;
    uint64_t free_pages = 0, used_pages = 0, objects = 0, bytes = 0;
    pthread_mutex_lock(&tier.lock);
    for (unsigned i = 0; i < tier.npages; i++) {
        if (tier.pages[i].state == PAGE_FREE) {
            free_pages++;
        } else {
            used_pages++;
            objects += tier.pages[i].live_objects;
            bytes += tier.pages[i].live_bytes;
        }
    }
    uint64_t limit = (uint64_t)tier.npages * tier.cfg.page_size;
    pthread_mutex_unlock(&tier.lock);
    emit_u64(emit, ctx, "extstore_compact_lost", flash_get(&flash_counters.compact_lost));
    emit_u64(emit, ctx, "extstore_compact_rescues", flash_get(&flash_counters.compact_rescues));
    emit_u64(emit, ctx, "extstore_compact_skipped", flash_get(&flash_counters.compact_skipped));
    emit_u64(emit, ctx, "extstore_page_allocs", flash_get(&flash_counters.page_allocs));
    emit_u64(emit, ctx, "extstore_page_evictions", flash_get(&flash_counters.page_evictions));
    emit_u64(emit, ctx, "extstore_page_reclaims", flash_get(&flash_counters.page_reclaims));
    emit_u64(emit, ctx, "extstore_pages_free", free_pages);
    emit_u64(emit, ctx, "extstore_pages_used", used_pages);
    emit_u64(emit, ctx, "extstore_objects_evicted", flash_get(&flash_counters.objects_evicted));
    emit_u64(emit, ctx, "extstore_objects_read", flash_get(&flash_counters.objects_read));
    emit_u64(emit, ctx, "extstore_objects_written", flash_get(&flash_counters.objects_written));
    emit_u64(emit, ctx, "extstore_objects_used", objects);
    emit_u64(emit, ctx, "extstore_bytes_evicted", flash_get(&flash_counters.bytes_evicted));
    emit_u64(emit, ctx, "extstore_bytes_written", flash_get(&flash_counters.bytes_written));
    emit_u64(emit, ctx, "extstore_bytes_read", flash_get(&flash_counters.bytes_read));
    emit_u64(emit, ctx, "extstore_bytes_used", bytes);
    emit_u64(emit, ctx, "extstore_bytes_fragmented", used_pages * tier.cfg.page_size - bytes);
    emit_u64(emit, ctx, "extstore_limit_maxbytes", limit);
    emit_u64(emit, ctx, "extstore_io_queue", flash_get(&flash_counters.io_queue));
}

void flash_stats_pages(flash_emit_fn emit, void *ctx)
{
    if (!flash_running())
        return;
    char name[40];
    pthread_mutex_lock(&tier.lock);
    for (unsigned i = 0; i < tier.npages; i++) {
        const struct flash_page *p = &tier.pages[i];
        bool used = p->state != PAGE_FREE;
        snprintf(name, sizeof(name), "%u:version", i);
        emit_u64(emit, ctx, name, p->version);
        snprintf(name, sizeof(name), "%u:bytes", i);
        emit_u64(emit, ctx, name, used ? p->fill : 0);
        snprintf(name, sizeof(name), "%u:bucket", i);
        emit_u64(emit, ctx, name, used ? p->bucket : 0);
        snprintf(name, sizeof(name), "%u:free_bucket", i);
        emit_u64(emit, ctx, name, 0);
    }
    pthread_mutex_unlock(&tier.lock);
}
