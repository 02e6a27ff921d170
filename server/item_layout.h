/*
 * item_layout.h: the in-memory layout of an item, shared by the storage
 * engine's files only (items.c, item_lru.c, lru.c, lru_maintainer.c,
 * assoc.c, crawler.c, storage_stats.c).
 * Nothing outside the engine includes it; callers see opaque handles.
 *
 * Layout of one item (header 50 bytes, then the variable part):
 *
 *   next, prev      LRU links inside the item's class (head = most recent)
 *   h_next          hash chain
 *   cas             unique id; always assigned (flush_all relies on it),
 *                   reported as 0 when CAS is off
 *   time            last store or LRU bump (rel_time_t)
 *   exptime         0 = never
 *   nbytes          value length (no "\r\n")
 *   refcount        1 for being linked + 1 per caller handle
 *   it_flags, nkey  it_flags' top two bits: the item's LRU segment
 *   data[]          key (not NUL-terminated), client flags (4 bytes, only
 *                   when non-zero), then either the value (small items) or,
 *                   for chunked items, a tail-class byte and, 8-aligned, the
 *                   table of value chunk pointers. A flash header (the
 *                   value lives on flash, flash.c) is marked chunked with
 *                   the tail-class byte ITEM_FLASH_TAIL; where the chunk
 *                   table would be it holds a struct item_flash_loc.
 *
 * A 14-byte key with a 32-byte value and zero flags takes 96 bytes and fits
 * the smallest default slab class.
 */
#ifndef MCR_ITEM_LAYOUT_H
#define MCR_ITEM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "clock.h"

struct item {
    struct item *next;
    struct item *prev;
    struct item *h_next;
    uint64_t cas;
    rel_time_t time;
    rel_time_t exptime;
    uint32_t nbytes;
    uint32_t refcount;
    uint8_t it_flags;
    uint8_t nkey;
    char data[];
};

#define ITEM_HEADER_SIZE offsetof(struct item, data)
/* memcached 1.6's item header on a 64-bit build, the base of its slab class
 * sizes (-n is added to it); ours is a little larger (ITEM_HEADER_SIZE). */
#define MEMCACHED_ITEM_HEADER_SIZE 48

enum {
    ITEM_LINKED = 1,        /* in the hash table and its LRU */
    ITEM_FETCHED = 2,       /* read (get, gat, touch) at least once */
    ITEM_BORROWED = 4,      /* in a chunk of a larger class than its size
                               needs; that class id is the byte right after
                               the item's bytes (item_chunk_class()) */
    ITEM_ACTIVE = 8,        /* segmented LRU: read again after its first
                               read; kept in (or moved to) WARM */
    ITEM_CHUNKED = 16,      /* value lives in separate slab chunks */
    ITEM_HAS_FLAGS = 32,    /* 4 bytes of client flags follow the key */
    ITEM_SEGMENT_SHIFT = 6, /* bits 6-7: the LRU segment (enum lru_segment) */
    ITEM_SEGMENT_MASK = 3 << ITEM_SEGMENT_SHIFT,
};

/* The crawler's marker has no key; every real item has one. */
static inline int item_is_marker(const struct item *it)
{
    return it->nkey == 0;
}

static inline uint8_t item_flags_load(const struct item *it)
{
    return __atomic_load_n(&it->it_flags, __ATOMIC_RELAXED);
}

static inline void item_flags_set(struct item *it, uint8_t bits)
{
    __atomic_fetch_or(&it->it_flags, bits, __ATOMIC_RELAXED);
}

static inline void item_flags_clear(struct item *it, uint8_t bits)
{
    __atomic_fetch_and(&it->it_flags, (uint8_t)~bits, __ATOMIC_RELAXED);
}

/* The segment whose list holds a linked item. It only changes under the
 * item's lock (and the lists' locks), so a holder of the item lock reads a
 * stable value. */
static inline unsigned item_segment(const struct item *it)
{
    return (item_flags_load(it) & ITEM_SEGMENT_MASK) >> ITEM_SEGMENT_SHIFT;
}

static inline void item_set_segment(struct item *it, unsigned seg)
{
    item_flags_clear(it, ITEM_SEGMENT_MASK);
    item_flags_set(it, (uint8_t)(seg << ITEM_SEGMENT_SHIFT));
}

static inline size_t item_flags_size(const struct item *it)
{
    return (item_flags_load(it) & ITEM_HAS_FLAGS) ? sizeof(uint32_t) : 0;
}

/* Where the value (small items) or the chunk area (chunked items) begins. */
static inline char *item_payload(const struct item *it)
{
    return (char *)it->data + it->nkey + item_flags_size(it);
}

static inline size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Chunked items: offset (from the item start) of the chunk pointer table. */
static inline size_t chunk_table_offset(size_t nkey, size_t flags_size)
{
    return align8(ITEM_HEADER_SIZE + nkey + flags_size + 1);
}

static inline char **item_chunk_table(const struct item *it)
{
    return (char **)((char *)it + chunk_table_offset(it->nkey, item_flags_size(it)));
}

static inline uint8_t *item_tail_class(const struct item *it)
{
    return (uint8_t *)item_payload(it);
}

/* Never a slab class id: marks a flash header's tail-class byte. */
#define ITEM_FLASH_TAIL 0xFF

static inline int item_is_flash(const struct item *it)
{
    return (item_flags_load(it) & ITEM_CHUNKED) && *item_tail_class(it) == ITEM_FLASH_TAIL;
}

/* Chunked items other than flash headers: their value is in slab chunks. */
static inline int item_has_value_chunks(const struct item *it)
{
    return (item_flags_load(it) & ITEM_CHUNKED) && *item_tail_class(it) != ITEM_FLASH_TAIL;
}

static inline rel_time_t item_time_load(const rel_time_t *t)
{
    return __atomic_load_n(t, __ATOMIC_RELAXED);
}

static inline void item_time_store(rel_time_t *t, rel_time_t v)
{
    __atomic_store_n(t, v, __ATOMIC_RELAXED);
}

#endif
