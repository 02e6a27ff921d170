/*
 * meta_marks.h: the per-item markers the meta protocol needs and the
 * storage engine (items.h) does not keep: "stale" (set by md I / ms I) and
 * "win token sent" (mg N / R, or a stale item's first fetch), and whether
 * the key was sent base64-encoded (ms b). A marker
 * belongs to one version of an item, named by its key and CAS value: once
 * the item is replaced (new CAS) the marker no longer applies and is
 * dropped when next looked at. Owns only this side table; never touches
 * items or connections.
 */
#ifndef MCR_META_MARKS_H
#define MCR_META_MARKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    MARK_STALE = 1,      /* item was invalidated; clients see X */
    MARK_TOKEN_SENT = 2, /* a client already got W; others see Z */
    MARK_BINARY_KEY = 4, /* stored with a base64 key: k returns it encoded */
};

/* Markers of (key, cas); 0 when none (also when key's markers belong to a
 * newer version). */
unsigned meta_marks_get(const char *key, size_t nkey, uint64_t cas);
/* Replaces the markers of key with `marks` for version cas (0 removes),
 * unless they belong to a newer version (a larger cas). */
void meta_marks_set(const char *key, size_t nkey, uint64_t cas, unsigned marks);
/* Adds MARK_TOKEN_SENT to (key, cas); returns the markers held before, so
 * exactly one caller sees it absent. A newer version's markers stay as
 * they are (0 returned). */
unsigned meta_marks_take_token(const char *key, size_t nkey, uint64_t cas);
/* Whether any item carries a marker (a lock-free look, for fast paths). */
bool meta_marks_any(void);
/* The markers of (key, from_cas) now belong to (key, to_cas): the item was
 * rewritten as memcached rewrites it in place (incr, decr, ma). An
 * arith_carry_fn (items.h): item_arith calls it under the item's lock.
 * Markers of another version of key stay as they are. */
void meta_marks_carry(const char *key, size_t nkey, uint64_t from_cas, uint64_t to_cas);
/* md I: (key, to_cas) is stale with no win token sent, and keeps the base64
 * key marker of (key, from_cas). Also an item_recas_fn. */
void meta_marks_make_stale(const char *key, size_t nkey, uint64_t from_cas, uint64_t to_cas);
/* Frees every marker (shutdown). */
void meta_marks_free(void);

#endif
