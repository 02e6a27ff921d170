/*
 * t/test_storage_stats.c: unit tests of the storage engine's statistics, printing TAP: the
 * general, settings, items, slabs and sizes stats in memcached 1.6's names, formats and order,
 * stats reset, memory per small item, cache_memlimit and -L preallocation. The engine comes from
 * t/storage_harness.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/items.h"
#include "t/rdma/tap.h"
#include "t/storage_harness.h"

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

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_stats();
    tap_no_plan_end();
    return tap_exit_status();
}
