/*
 * items.h: the storage engine's one public header (ARCHITECTURE seam 3).
 *
 * Protocol engines, connections and transports see items only through this
 * header: refcounted handles, get/store/delete/arith/touch, and stats
 * emitters. The slab allocator, per-class LRUs, the hash table, the expiry
 * crawler (and later the flash tier) live behind it and are never included
 * by protocol or transport code.
 *
 * Rules every caller relies on:
 *  - Every function is thread-safe; workers call them concurrently.
 *  - A handle returned by item_get*, item_alloc is referenced: the caller
 *    owns one reference and gives it back with item_release() when no reply
 *    or transfer touches the item any more. A referenced item's memory stays
 *    valid (and is never reused) even if it is deleted, replaced, expired or
 *    evicted meanwhile.
 *  - Values are stored without the text protocol's trailing "\r\n".
 *  - Values may be split into several segments (large items are chunked);
 *    item_value_seg() describes them, in order.
 *  - Times are rel_time_t (seconds since the process started, clock.h).
 */
#ifndef MCR_ITEMS_H
#define MCR_ITEMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "clock.h"

#define KEY_MAX_LENGTH 250

typedef struct item item;

/* What main() passes in from the command line (memcached's flags). */
struct storage_config {
    size_t maxbytes;               /* -m, in bytes */
    double factor;                 /* -f growth factor, > 1.0 */
    size_t chunk_size;             /* -n minimum space for key+value+flags */
    size_t item_size_max;          /* -I, 1 KiB .. 1 GiB */
    size_t slab_page_size;         /* 1 MiB normally (memcached's slab page) */
    size_t slab_chunk_max;         /* -o slab_chunk_max; 0 means page size / 2 */
    const unsigned *slab_sizes;    /* -o slab_sizes: the classes below slab_chunk_max, */
    unsigned slab_sizes_count;     /* rising; count 0: they grow by factor from chunk_size */
    bool prealloc;                 /* -L */
    bool evict_to_free;            /* false with -M: answer out of memory instead */
    bool use_cas;                  /* false with -C */
    unsigned hashpower_init;       /* -o hashpower; 0 means default (16) */
    bool no_hashexpand;            /* -o no_hashexpand: never grow the hash table */
    bool lru_crawler;              /* -o lru_crawler / no_lru_crawler */
    unsigned worker_threads;       /* -t, sizes lock tables */
    bool slab_automove_off;        /* -o slab_automove=0: never move pages between
                                      classes (the default moves them, as
                                      memcached's slab_automove=1 does) */
    unsigned slab_automove_window; /* seconds a class must go without
                                      evicting or growing before the mover
                                      gives its spare pages to the pool;
                                      0: 30 */
    /* memcached's segmented LRU (doc/storage.md): */
    bool lru_maintainer;    /* run the LRU maintainer thread */
    bool lru_segmented;     /* HOT/WARM/COLD; false: one flat list (COLD) */
    unsigned hot_lru_pct;   /* HOT's share of a class's bytes; 0: 20 */
    unsigned warm_lru_pct;  /* WARM's share; 0: 40 */
    double hot_max_factor;  /* HOT tail age limit x COLD tail age; 0: 0.2 */
    double warm_max_factor; /* WARM's; 0: 2.0 */
    bool temp_lru;          /* -o temporary_ttl: short TTLs go to TEMP */
    int temporary_ttl;      /* TTLs up to this go to TEMP */
};

/* An item the engine evicts, as "watch evictions" reports it. */
struct item_eviction {
    const char *key;
    size_t nkey;
    bool fetched;
    long long ttl;   /* seconds it had left; -1: it never expired */
    rel_time_t idle; /* seconds since its last store or LRU bump */
    unsigned clsid;
    size_t nbytes;
};
/* fn is called at every eviction, with the engine's locks held: it may
 * only copy out what it is given, never call into the engine. NULL stops
 * it. */
void storage_on_eviction(void (*fn)(const struct item_eviction *ev));

/* Initialises the engine; returns 0, or -1 with a message in errbuf. */
int storage_init(const struct storage_config *cfg, char *errbuf, size_t errlen);
/* Starts the background threads (crawler, hash expansion, slab mover). */
int storage_start_threads(void);
/* Stops the background threads (nothing moves or unlinks items on its own
 * afterwards: a walk then sees every item); storage_shutdown() does it too. */
void storage_stop_threads(void);
/* Stops background threads and frees everything (reverse of init). */
void storage_shutdown(void);

/* ---- handles ----------------------------------------------------------- */
void item_release(item *it);

const char *item_key(const item *it); /* item_nkey() bytes, no NUL */
size_t item_nkey(const item *it);
uint32_t item_flags(const item *it);     /* the client's opaque flags */
size_t item_nbytes(const item *it);      /* value length, no "\r\n" */
uint64_t item_cas(const item *it);       /* 0 when CAS is off (-C) */
rel_time_t item_exptime(const item *it); /* 0 = never */
/* Last store or LRU bump, and whether the item was ever fetched (get,
 * gat, touch). For the handle of this thread's latest item_get or
 * item_get_touch, both describe the item as it was just before that lookup
 * (memcached's mg h and l flags, which it reads before the lookup's own
 * fetch and bump); for other handles (item_peek, item walks) the item as
 * it is ("fetch=" of metadump and me). */
rel_time_t item_last_access(const item *it);
bool item_was_fetched(const item *it);
/* The slab class whose LRU holds the item ("stats slabs", watch's clsid). */
unsigned item_class(const item *it);
/* The item's size as memcached 1.6 computes it (its 48-byte header, CAS
 * when on, key + NUL, value + "\r\n", flags when non-zero): "size=" of
 * lru_crawler metadump and me. */
size_t item_memcached_size(const item *it);

/* Value segments: n = item_value_nseg(it); segment i for i in [0, n).
 * Calls with increasing i over one item are amortised O(1). The memory is
 * writable between item_alloc() and item_store() (to receive the value). */
unsigned item_value_nseg(const item *it);
struct iovec item_value_seg(const item *it, unsigned i);
/* Copies the first len bytes of src into the value's segments, in order
 * (len at most the item's value length; shorter fills its start). */
void item_value_write(item *it, const void *src, size_t len);

/* ---- values on flash (flash.c, item_flash.c) ------------------------------ */
/* Where a value written to flash lies, and the check its record carries. */
struct item_flash_loc {
    uint32_t page;    /* page number across all ext_path files */
    uint32_t version; /* the page's version when written (a reused page has another) */
    uint64_t offset;  /* byte offset of the record in the page */
    uint32_t len;     /* record length (header, key, value) */
    uint32_t check;   /* the record's checksum */
};
/* True when the item's value lives on flash: the item is a header only,
 * item_value_nseg() is 0 and its value must be read (value_fetch.h). */
bool item_on_flash(const item *it);
void item_flash_where(const item *it, struct item_flash_loc *loc);
/* Replaces `it` (referenced by the caller) by a flash header pointing at
 * loc, keeping key, flags, exptime, CAS and access time, if it is still
 * linked with unique `cas` and not active; false otherwise (a store, an
 * invalidate or a second read won) or when no memory is left. */
bool item_move_to_flash(item *it, uint64_t cas, const struct item_flash_loc *loc);
/* Compaction of a flash page (flash_compact.c): whether key's item is a
 * live flash header whose record is the one at `at` (page, version,
 * offset). TAKEN: *out is that header, referenced; UNREAD: it is, but sits
 * in COLD unread (skip_unread: to be dropped, not rewritten). */
enum flash_hold { FLASH_HOLD_GONE, FLASH_HOLD_UNREAD, FLASH_HOLD_TAKEN };
enum flash_hold item_flash_hold(const char *key, size_t nkey, const struct item_flash_loc *at,
                                bool skip_unread, item **out);
/* Points the header h at its record's new place, under its key's lock, if
 * it is still linked with unique cas and pointing at `from`. */
bool item_flash_repoint(item *h, uint64_t cas, const struct item_flash_loc *from,
                        const struct item_flash_loc *to);
/* A read of h's record at `at` failed or did not match: h leaves the
 * table if it still points there (as memcached unlinks such headers), so
 * later gets miss at once. */
void item_flash_drop(item *h, const struct item_flash_loc *at);
/* Re-caching: puts fresh (an unlinked item holding h's value read from
 * flash) in the table in place of the header h, when h is still linked,
 * was read twice (fetched and active) and last accessed within `within`
 * seconds, its key's lock is free at once, and then one in `rate` times
 * (*counter counts those; memcached's conditions). The caller keeps its
 * reference to fresh. */
bool item_flash_recache(item *h, item *fresh, rel_time_t within, unsigned *counter, unsigned rate);
/* The item's unique even when CAS is off (-C); for item_move_to_flash. */
uint64_t item_unique(const item *it);

/* ---- lookups ----------------------------------------------------------- */
/* NULL when missing, expired or flushed. Bumps the item in its LRU. */
item *item_get(const char *key, size_t nkey);
/* The same lookup without counting as a fetch: no fetched mark, no LRU
 * bump, no hit counted (memcached's lookups with DONT_UPDATE, as for me). */
item *item_peek(const char *key, size_t nkey);
/* get-and-touch: sets a new exptime (already converted) on a hit. */
item *item_get_touch(const char *key, size_t nkey, rel_time_t exptime);
/* true when the key existed and got the new exptime; marks it fetched and
 * bumps it, as memcached's touch does. */
bool item_touch(const char *key, size_t nkey, rel_time_t exptime);
/* Sets a live item's exptime without counting a fetch or a touch: no
 * fetched mark, no LRU bump, no stats (memcached's meta commands writing
 * it->exptime directly: ma T, mg u T, ms I over a newer cas). */
bool item_set_exptime(const char *key, size_t nkey, rel_time_t exptime);

/* ---- storing ----------------------------------------------------------- */
enum alloc_result {
    ALLOC_OK,
    ALLOC_TOO_LARGE,
    ALLOC_NO_MEMORY,
    ALLOC_FLASH_WAIT, /* item_alloc_parkable: ask again in a moment */
};
/* A fresh, unlinked item of nbytes value bytes; fill its value segments,
 * then item_store() it (or item_release() it to abandon it). */
item *item_alloc(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime, size_t nbytes,
                 enum alloc_result *why);
/* The same for a request that can be parked (a set whose value is not
 * read yet): where item_alloc would hold up its thread to wait for the
 * flash writer to free a chunk of the item's class (memory full, the
 * class's values go to flash), this returns NULL with ALLOC_FLASH_WAIT,
 * and the caller asks again with the same w a moment later, its thread
 * free meanwhile. Once w's wait lasted 5 ms, or the writer passed twice
 * without moving anything, or the class's COLD list holds nothing to
 * move, it evicts as item_alloc does. w starts zeroed
 * for each request. */
struct alloc_wait {
    bool started; /* the wait began: the request parked */
    /* set by each call: the wait for class cls is over (as above, or the
     * writer no longer takes its values) and, finding no free chunk, the
     * call made room there as item_alloc does (evicting, or out of memory
     * with nothing to evict) */
    bool gave_up;
    unsigned cls;
    uint64_t began_us;
    uint64_t writer_passes, values_moved; /* the writer's, when the wait began */
};
item *item_alloc_parkable(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                          size_t nbytes, struct alloc_wait *w, enum alloc_result *why);

enum store_op { STORE_SET, STORE_ADD, STORE_REPLACE, STORE_APPEND, STORE_PREPEND, STORE_CAS };
enum store_result {
    STORE_STORED,
    STORE_NOT_STORED, /* add on existing, replace/append/prepend on missing,
                         append/prepend whose result would exceed -I */
    STORE_EXISTS,     /* cas mismatch */
    STORE_NOT_FOUND,  /* cas on a missing key */
    STORE_NO_MEMORY,  /* append/prepend could not allocate the joined item
                         (memcached itself answers NOT_STORED here) */
};
/* Links it under its key according to op. For STORE_CAS, cas is the
 * client's unique. *cas_out (may be NULL) receives the stored item's cas.
 * The caller keeps its reference and releases it afterwards. */
enum store_result item_store(item *it, enum store_op op, uint64_t cas, uint64_t *cas_out);

/* ---- delete, arithmetic, flush ------------------------------------------ */
enum delete_result { DELETE_DELETED, DELETE_NOT_FOUND, DELETE_EXISTS };
/* cas 0 deletes whatever is there; otherwise only a matching cas. */
enum delete_result item_delete(const char *key, size_t nkey, uint64_t cas);

enum arith_result { ARITH_OK, ARITH_NOT_FOUND, ARITH_NON_NUMERIC, ARITH_NO_MEMORY, ARITH_EXISTS };
/* Told that the version old_cas of key became new_cas where memcached
 * changes the item in place (an arithmetic whose new number is no longer
 * than the old and nobody else holds the item; md I), so what belongs to
 * that version (meta markers) can follow. Called with the item's lock
 * held: no command that looks the key up sees new_cas before it returns
 * (one already holding the item may read it; cas values only grow). */
typedef void (*item_recas_fn)(const char *key, size_t nkey, uint64_t old_cas, uint64_t new_cas);
/* incr wraps at 2^64; decr stops at 0. cas != 0 must match (binary/meta).
 * *value receives the new value, *cas_out (may be NULL) the new cas;
 * carry (may be NULL) is called as described above. */
enum arith_result item_arith(const char *key, size_t nkey, bool incr, uint64_t delta, uint64_t cas,
                             uint64_t *value, uint64_t *cas_out, item_recas_fn carry);

/* md I: gives the live item (whose cas must be `cas` when has_cas) a new cas,
 * and with set_exptime a new expiry, in place, as memcached marks an item
 * stale: value, access time, fetched bit and LRU place stay, and nothing
 * counts as a store. recas (may be NULL) is called as described above.
 * STORE_STORED (*new_cas set unless NULL), STORE_NOT_FOUND or STORE_EXISTS. */
enum store_result item_invalidate(const char *key, size_t nkey, bool has_cas, uint64_t cas,
                                  bool set_exptime, rel_time_t exptime, uint64_t *new_cas,
                                  item_recas_fn recas);

/* Invalidates every item stored at or before `when` (0 = now). */
void storage_flush_all(rel_time_t when);
/* cache_memlimit: new -m in bytes; 0 on success, -1 when memory was
 * preallocated (-L) and cannot change. */
int storage_set_memlimit(size_t maxbytes);
/* "slabs automove <0|1|2>": 0 stops moving pages between classes, 1 and 2
 * (memcached's two policies; ours is one) start it again. -1 for other
 * values. */
int storage_slab_automove(int mode);
/* "slabs reassign <src> <dst>": empties one page of class src (-1: the
 * class with the oldest items) so that it can serve class dst. The move
 * happens in the background once the threads run. */
enum slabs_reassign_result {
    REASSIGN_OK,
    REASSIGN_BUSY,     /* a move is already under way */
    REASSIGN_BADCLASS, /* no such class */
    REASSIGN_NOSPARE,  /* the source class has fewer than two pages */
    REASSIGN_NOTFULL,  /* never returned: pages also move to classes with room */
    REASSIGN_UNSAFE,   /* the page could not be emptied right now */
    REASSIGN_SAME,     /* source and destination are the same class */
};
enum slabs_reassign_result storage_slabs_reassign(int src, int dst);
/* "stats sizes_enable|sizes_disable": item size histogram of "stats sizes"
 * (32-byte buckets, items stored after enabling), as memcached's
 * -o track_sizes. */
void storage_sizes_enable(bool on);

/* Moves at most one slab page towards the class evicting most, if memory
 * is full ("slabs automove" work done at once; also used by tests). True
 * when a page moved. */
bool storage_slab_move_now(void);
/* The bounds of an allocation's wait for the flash writer (item_alloc.c):
 * it ends once the I/O thread showed no activity for quiet_us, or after
 * wait_us in all; a parked set (item_alloc_parkable) is evicted for after
 * park_us. 0 restores the default (250 us, 1 ms, 5 ms). Tests widen them
 * so that a starved I/O thread cannot change their outcome. */
void item_alloc_flash_wait_limits(unsigned quiet_us, unsigned wait_us, unsigned park_us);
/* Runs one LRU crawler pass now, in the calling thread, reclaiming expired
 * and flushed items ("lru_crawler crawl all"; also used by tests). */
void storage_crawl_now(void);
/* The same pass, done by the background crawler soon after (memcached's
 * "lru_crawler crawl" answers OK and crawls in the background); in the
 * calling thread when the crawler is not running. */
void storage_crawl_soon(void);
/* "lru_crawler enable|disable": starts or stops the background crawler
 * (after storage_start_threads). 0 on success, -1 when it was already in
 * that state or the thread could not start. */
int storage_crawler_enable(bool on);
/* Whether the LRU crawler runs now (-o lru_crawler, `lru_crawler enable`). */
bool storage_crawler_enabled(void);
/* "lru_crawler sleep <us>" (pause between batches, at most 1000000) and
 * "lru_crawler tocrawl <n>" (items examined per LRU list per pass, 0 = all). */
int storage_crawler_set_sleep(unsigned usec);
void storage_crawler_set_tocrawl(unsigned items);
/* The segmented LRU at run time, as memcached's "lru" command: "lru tune"
 * (HOT and WARM shares in percent of a class's bytes, their tail age
 * limits as factors of COLD's tail age), "lru mode" (segmented or flat:
 * flat drains HOT and WARM into COLD) and "lru temp_ttl" (< 0: TEMP off).
 * mode and temp_ttl need the maintainer thread: -1 without it. */
void storage_lru_tune(unsigned hot_pct, unsigned warm_pct, double hot_factor, double warm_factor);
int storage_lru_set_segmented(bool on);
int storage_lru_set_temp_ttl(int ttl);
/* Whether the LRU maintainer thread runs ("lru_maintainer_thread"). */
bool storage_lru_maintainer_running(void);

/* ---- flash tier seam ------------------------------------------------------ */
/* Up to max live items from the tail of class cls's COLD list, oldest
 * first, each referenced (the caller releases them); items others hold
 * are skipped, so are flash headers (their value is already on flash),
 * and nothing is moved; at most 16 x max items are looked at. A writer
 * copying values elsewhere re-checks an item's CAS under its key lock
 * before replacing it (item_move_to_flash). */
unsigned storage_cold_select(unsigned cls, unsigned max, item **out);

/* ---- warm restart seam (restart.c) ----------------------------------------- */
/* What the engine must carry across a restart besides the items. */
struct storage_restart_state {
    uint64_t cas_counter;   /* the last CAS unique handed out */
    uint64_t oldest_cas;    /* flush_all: items with cas <= this are flushed */
    rel_time_t oldest_live; /* flush_all boundary, 0 = none */
    unsigned hash_power;    /* the hash table's size, as a power of two */
};
void storage_restart_state_get(struct storage_restart_state *out);
/* Before the first item is restored and before serving (hash_power is not
 * applied here: it is the hashpower_init given to storage_init). */
void storage_restart_state_set(const struct storage_restart_state *in);
/* Links a fresh item (from item_alloc, value filled in) with the CAS unique,
 * last access time and fetched mark it had before the restart, without
 * counting a store; false (nothing linked) when its key is already there.
 * The caller keeps its reference and releases it afterwards. */
bool item_restore(item *it, uint64_t unique, rel_time_t last_access, bool fetched);

/* ---- walking items ------------------------------------------------------ */
/* The slab class whose LRU holds the item ("cls=" of metadump). */
unsigned item_slab_class(const item *it);
/* Calls fn on live items, oldest first per class, for "lru_crawler
 * metadump" and "stats cachedump": cls 0 = every class, limit 0 = all.
 * Each item is referenced during the call and no engine lock is held, so
 * fn may block; it must not keep the handle. */
typedef void (*storage_item_fn)(void *ctx, const item *it);
void storage_walk_items(unsigned cls, unsigned limit, storage_item_fn fn, void *ctx);
/* The same over class cls's COLD list only ("stats cachedump", which
 * memcached answers from COLD; with a flat LRU that is every item). */
void storage_walk_cold_items(unsigned cls, storage_item_fn fn, void *ctx);
/* The same walk, a few items at a time, for replies streamed as the client
 * reads: classes[0] selects every class, classes[c] class c (nclasses
 * entries); cold_only walks only each class's COLD list. Between steps the
 * walk holds no item and no lock, only a marker in the LRU list being
 * walked. newest_first walks each list from its head instead of its tail.
 * NULL when out of memory. */
struct storage_walk;
struct storage_walk *storage_walk_open(const bool *classes, unsigned nclasses, bool newest_first,
                                       bool cold_only);
/* Calls fn on up to max more live items; returns how many. */
unsigned storage_walk_step(struct storage_walk *w, unsigned max, storage_item_fn fn, void *ctx);
/* Whether every selected class has been walked. */
bool storage_walk_done(const struct storage_walk *w);
/* Ends the walk (finished or not) and frees it; NULL is ignored. */
void storage_walk_close(struct storage_walk *w);

/* ---- stats -------------------------------------------------------------- */
/* Storage stats are named here once; callers format them. `emit` gets a
 * stat name and its value already formatted as text. */
typedef void (*stat_emit_fn)(void *ctx, const char *name, const char *value);
void storage_stats_general(stat_emit_fn emit, void *ctx); /* for "stats" */
void storage_stats_settings(stat_emit_fn emit, void *ctx);
void storage_stats_items(stat_emit_fn emit, void *ctx);
void storage_stats_slabs(stat_emit_fn emit, void *ctx);
/* "sizes_status disabled", or when enabled one "<size> <count>" per
 * non-empty 32-byte bucket. */
void storage_stats_sizes(stat_emit_fn emit, void *ctx);
void storage_stats_reset(void);

#endif
