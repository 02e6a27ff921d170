/*
 * assoc.h: the key hash, the hash table that finds items by key, and the
 * striped item locks. A key's lock is chosen by the low bits of its hash,
 * so one lock covers whole buckets; every lookup or change of a bucket's
 * chain happens with that key's lock held. The table doubles incrementally
 * (one bucket at a time) when it holds more than 1.5 items per bucket.
 * Knows nothing of LRUs, slabs or expiry.
 */
#ifndef MCR_ASSOC_H
#define MCR_ASSOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct item;

#define HASHPOWER_DEFAULT 16
#define HASHPOWER_MAX 32

int assoc_init(unsigned hashpower, unsigned lock_power, char *errbuf, size_t errlen);
/* Frees the table; items still linked are handed to release_fn first
 * (when not NULL). */
void assoc_shutdown(void (*release_fn)(struct item *it));

uint64_t assoc_hash(const char *key, size_t nkey);

void assoc_lock(uint64_t hv);
bool assoc_trylock(uint64_t hv);
void assoc_unlock(uint64_t hv);

/* These need the key's lock held. */
struct item *assoc_find(const char *key, size_t nkey, uint64_t hv);
void assoc_insert(struct item *it, uint64_t hv);
void assoc_delete(const char *key, size_t nkey, uint64_t hv);
/* Puts new_it where old is in the chain (same key, so same hv); false if
 * old is not in the table. */
bool assoc_replace(struct item *old, struct item *new_it, uint64_t hv);

/* True when the table should grow; assoc_expand() then doubles it. Call
 * assoc_expand() with no item lock held; concurrent calls are serialised
 * and a call that finds nothing to do returns at once. */
bool assoc_wants_expand(void);
void assoc_expand(void);

/* The background expander: once started, assoc_request_expand() wakes it;
 * without it, assoc_request_expand() expands in the calling thread. */
int assoc_start_thread(void);
void assoc_stop_thread(void);
void assoc_request_expand(void);

struct assoc_stats {
    unsigned hash_power;
    size_t hash_bytes;
    bool expanding;
    unsigned hashpower_init;
};
void assoc_stats(struct assoc_stats *out);

#endif
