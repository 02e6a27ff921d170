/*
 * watch.h: memcached's "watch" log streams. A connection that sends
 * "watch [fetchers|mutations|deletions|evictions ...]" stops taking
 * commands and receives one "ts=<time> gid=<n> type=..." line per logged
 * event of the kinds it asked for, from every worker. Protocol engines call
 * watch_log() (or the item_get/item_store helpers) where memcached logs,
 * and the storage engine reports evictions; when nobody watches that costs
 * one relaxed load. Owns the watcher list and the delivery to the watchers'
 * workers; parses nothing.
 */
#ifndef MCR_WATCH_H
#define MCR_WATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "items.h"

struct conn;

enum watch_kind {
    WATCH_FETCHERS = 1 << 0,
    WATCH_MUTATIONS = 1 << 1,
    WATCH_DELETIONS = 1 << 2,
    WATCH_EVICTIONS = 1 << 3,
    WATCH_CONNEVENTS = 1 << 4,
};

extern unsigned watch_kinds_active; /* union of the kinds someone watches */

static inline bool watch_wants(unsigned kind)
{
    return (__atomic_load_n(&watch_kinds_active, __ATOMIC_RELAXED) & kind) != 0;
}

/* Parses the kinds of a "watch" command ("" means fetchers); -1 when a
 * word is not a kind memcached knows. */
int watch_parse_kind(const char *word);
/* Makes c a watcher of kinds; false when the limit of watchers is reached,
 * memory is short, or c is a datagram (UDP) connection. */
bool watch_start(struct conn *c, unsigned kinds);
/* Forgets c (its connection is closing); safe for non-watchers. */
void watch_stop(struct conn *c);
/* Sends "ts=... gid=... <text>" to every watcher of kind. */
void watch_log(unsigned kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* For "stats": watchers now, events logged, lines queued to watchers,
 * lines dropped (out of memory), lines skipped (a watcher with
 * WATCH_PENDING_MAX lines it has not read yet). */
void watch_counters(unsigned *watchers, unsigned long long *logged, unsigned long long *sent,
                    unsigned long long *dropped, unsigned long long *skipped);
/* Appends key to buf as memcached logs keys (URI-encoded); returns buf. */
const char *watch_key(char *buf, size_t len, const char *key, size_t nkey);

/* The lines memcached logs for a lookup ("type=item_get", fetchers; it is
 * the item found or NULL), a store ("type=item_store", mutations: the
 * item offered, what became of it, by which operation) and an eviction
 * (evictions, from the storage engine's observer), each a no-op when
 * nobody watches its kind. */
void watch_log_item_get(const char *key, size_t nkey, const item *it, int cfd);
void watch_log_item_store(const item *it, enum store_result res, enum store_op op, int cfd);
/* The request path's calls: one relaxed load when nobody watches. */
static inline void watch_item_get(const char *key, size_t nkey, const item *it, int cfd)
{
    if (watch_wants(WATCH_FETCHERS))
        watch_log_item_get(key, nkey, it, cfd);
}
/* A store looks up the key's current item first: memcached logs that
 * lookup as an item_get (found or not_found) before the item_store. */
void watch_log_store_lookup(const item *it, int cfd);
static inline void watch_store_lookup(const item *it, int cfd)
{
    if (watch_wants(WATCH_FETCHERS))
        watch_log_store_lookup(it, cfd);
}
static inline void watch_item_store(const item *it, enum store_result res, enum store_op op,
                                    int cfd)
{
    if (watch_wants(WATCH_MUTATIONS))
        watch_log_item_store(it, res, op, cfd);
}
void watch_eviction(const struct item_eviction *ev);
/* "type=conn_new" or "type=conn_close" (connevents) for c. */
void watch_conn_event(const struct conn *c, bool closing);

#endif
