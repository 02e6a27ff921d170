/*
 * assoc.c: key hash, chained hash table, striped item locks and
 * incremental doubling.
 *
 * Growth: when items exceed 1.5 x buckets, assoc_expand() allocates a table
 * twice as large, then moves one old bucket at a time under that bucket's
 * item lock; expand_bucket says how many old buckets have moved. Because
 * there are never more locks than old buckets, an old bucket's items all
 * share one lock, so a lookup holding its key's lock sees its bucket either
 * wholly old or wholly moved. The switch at start and end (swapping table
 * pointers) holds every item lock for a moment.
 *
 * This file must not free items or touch LRUs; it only links and unlinks
 * chain pointers.
 */
#include "assoc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bg_thread.h"
#include "item_layout.h"

static struct item **primary;   /* current table, 2^hashpower buckets */
static struct item **old_table; /* while expanding: the previous table */
static unsigned hashpower;
static unsigned hashpower_initial;
static atomic_bool expanding;
static atomic_size_t expand_bucket; /* old buckets already moved */
static atomic_size_t item_count;

static pthread_mutex_t *item_locks;
static size_t lock_mask;
static size_t lock_count;
static pthread_mutex_t expand_lock = PTHREAD_MUTEX_INITIALIZER;

static struct bg_thread expander = BG_THREAD_INIT;
static bool expander_wanted; /* a request to grow the table (expander's lock) */

/* ---- hash ---------------------------------------------------------------
 * A multiply-rotate hash over 8-byte words with a final avalanche, so the
 * low bits (used for buckets and locks) depend on every input bit. */
#define HK1 0x9E3779B185EBCA87ULL
#define HK2 0xC2B2AE3D27D4EB4FULL
#define HK3 0x165667B19E3779F9ULL

static inline uint64_t rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t mix_word(uint64_t h, uint64_t w)
{
    w *= HK2;
    w = rotl64(w, 31) * HK1;
    h ^= w;
    return rotl64(h, 27) * HK1 + HK3;
}

uint64_t assoc_hash(const char *key, size_t nkey)
{
    const unsigned char *p = (const unsigned char *)key;
    uint64_t h = HK3 ^ ((uint64_t)nkey * HK1);
    while (nkey >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = mix_word(h, w);
        p += 8;
        nkey -= 8;
    }
    if (nkey) {
        uint64_t w = 0;
        memcpy(&w, p, nkey);
        h = mix_word(h, w ^ ((uint64_t)nkey << 56));
    }
    h ^= h >> 33;
    h *= HK2;
    h ^= h >> 29;
    h *= HK3;
    h ^= h >> 32;
    return h;
}

/* ---- locks ------------------------------------------------------------- */
void assoc_lock(uint64_t hv)
{
    pthread_mutex_lock(&item_locks[hv & lock_mask]);
}

bool assoc_trylock(uint64_t hv)
{
    return pthread_mutex_trylock(&item_locks[hv & lock_mask]) == 0;
}

void assoc_unlock(uint64_t hv)
{
    pthread_mutex_unlock(&item_locks[hv & lock_mask]);
}

static void lock_all(void)
{
    for (size_t i = 0; i < lock_count; i++)
        pthread_mutex_lock(&item_locks[i]);
}

static void unlock_all(void)
{
    for (size_t i = lock_count; i-- > 0;)
        pthread_mutex_unlock(&item_locks[i]);
}

/* ---- table ------------------------------------------------------------- */
static inline size_t mask_of(unsigned power)
{
    return ((size_t)1 << power) - 1;
}

int assoc_init(unsigned power, unsigned lock_power, char *errbuf, size_t errlen)
{
    if (power == 0)
        power = HASHPOWER_DEFAULT;
    if (power > HASHPOWER_MAX) {
        snprintf(errbuf, errlen, "hashpower must be at most %d", HASHPOWER_MAX);
        return -1;
    }
    if (lock_power > power)
        lock_power = power;
    hashpower = hashpower_initial = power;
    primary = calloc((size_t)1 << power, sizeof(*primary));
    if (!primary) {
        snprintf(errbuf, errlen, "could not allocate the hash table");
        return -1;
    }
    old_table = NULL;
    atomic_store(&expanding, false);
    atomic_store(&expand_bucket, 0);
    atomic_store(&item_count, 0);
    lock_count = (size_t)1 << lock_power;
    lock_mask = lock_count - 1;
    item_locks = calloc(lock_count, sizeof(*item_locks));
    if (!item_locks) {
        free(primary);
        primary = NULL;
        snprintf(errbuf, errlen, "could not allocate the item locks");
        return -1;
    }
    for (size_t i = 0; i < lock_count; i++)
        pthread_mutex_init(&item_locks[i], NULL);
    return 0;
}

void assoc_shutdown(void (*release_fn)(struct item *it))
{
    struct item **tables[2] = {old_table, primary};
    size_t sizes[2] = {old_table ? (size_t)1 << (hashpower - 1) : 0, (size_t)1 << hashpower};
    for (int t = 0; t < 2; t++) {
        if (!tables[t])
            continue;
        for (size_t b = 0; b < sizes[t]; b++) {
            struct item *it = tables[t][b];
            while (it && release_fn) {
                struct item *next = it->h_next;
                release_fn(it);
                it = next;
            }
        }
    }
    for (size_t i = lock_count; i-- > 0;)
        pthread_mutex_destroy(&item_locks[i]);
    free(item_locks);
    item_locks = NULL;
    free(old_table);
    old_table = NULL;
    free(primary);
    primary = NULL;
}

/* The chain head for hv (key lock held). */
static struct item **bucket_of(uint64_t hv)
{
    if (atomic_load_explicit(&expanding, memory_order_relaxed)) {
        size_t old_bucket = hv & mask_of(hashpower - 1);
        if (old_bucket >= atomic_load_explicit(&expand_bucket, memory_order_relaxed))
            return &old_table[old_bucket];
    }
    return &primary[hv & mask_of(hashpower)];
}

struct item *assoc_find(const char *key, size_t nkey, uint64_t hv)
{
    for (struct item *it = *bucket_of(hv); it; it = it->h_next) {
        if (it->nkey == nkey && memcmp(it->data, key, nkey) == 0)
            return it;
    }
    return NULL;
}

void assoc_insert(struct item *it, uint64_t hv)
{
    struct item **head = bucket_of(hv);
    it->h_next = *head;
    *head = it;
    atomic_fetch_add_explicit(&item_count, 1, memory_order_relaxed);
}

void assoc_delete(const char *key, size_t nkey, uint64_t hv)
{
    for (struct item **pos = bucket_of(hv); *pos; pos = &(*pos)->h_next) {
        struct item *it = *pos;
        if (it->nkey == nkey && memcmp(it->data, key, nkey) == 0) {
            *pos = it->h_next;
            it->h_next = NULL;
            atomic_fetch_sub_explicit(&item_count, 1, memory_order_relaxed);
            return;
        }
    }
}

bool assoc_replace(struct item *old, struct item *new_it, uint64_t hv)
{
    for (struct item **pos = bucket_of(hv); *pos; pos = &(*pos)->h_next) {
        if (*pos == old) {
            new_it->h_next = old->h_next;
            *pos = new_it;
            old->h_next = NULL;
            return true;
        }
    }
    return false;
}

bool assoc_wants_expand(void)
{
    if (atomic_load_explicit(&expanding, memory_order_relaxed))
        return false;
    size_t buckets = (size_t)1 << __atomic_load_n(&hashpower, __ATOMIC_RELAXED);
    size_t n = atomic_load_explicit(&item_count, memory_order_relaxed);
    return n > buckets + buckets / 2 &&
           __atomic_load_n(&hashpower, __ATOMIC_RELAXED) < HASHPOWER_MAX;
}

void assoc_expand(void)
{
    pthread_mutex_lock(&expand_lock);
    if (!assoc_wants_expand()) {
        pthread_mutex_unlock(&expand_lock);
        return;
    }
    unsigned new_power = hashpower + 1;
    struct item **grown = calloc((size_t)1 << new_power, sizeof(*grown));
    if (!grown) { /* try again at the next trigger */
        pthread_mutex_unlock(&expand_lock);
        return;
    }
    lock_all();
    old_table = primary;
    primary = grown;
    __atomic_store_n(&hashpower, new_power, __ATOMIC_RELAXED);
    atomic_store(&expand_bucket, 0);
    atomic_store(&expanding, true);
    unlock_all();

    size_t old_buckets = (size_t)1 << (new_power - 1);
    size_t new_mask = mask_of(new_power);
    for (size_t b = 0; b < old_buckets; b++) {
        pthread_mutex_t *lock = &item_locks[b & lock_mask];
        pthread_mutex_lock(lock);
        struct item *it = old_table[b];
        while (it) {
            struct item *next = it->h_next;
            size_t nb = assoc_hash(it->data, it->nkey) & new_mask;
            it->h_next = primary[nb];
            primary[nb] = it;
            it = next;
        }
        old_table[b] = NULL;
        atomic_store_explicit(&expand_bucket, b + 1, memory_order_relaxed);
        pthread_mutex_unlock(lock);
    }

    lock_all();
    struct item **done = old_table;
    old_table = NULL;
    atomic_store(&expanding, false);
    unlock_all();
    free(done);
    pthread_mutex_unlock(&expand_lock);
}

static void *expander_main(void *arg)
{
    (void)arg;
    bg_thread_lock(&expander);
    while (!bg_thread_stopping(&expander)) {
        if (!expander_wanted) {
            bg_thread_wait(&expander);
            continue;
        }
        expander_wanted = false;
        bg_thread_unlock(&expander);
        assoc_expand();
        bg_thread_lock(&expander);
    }
    bg_thread_unlock(&expander);
    return NULL;
}

int assoc_start_thread(void)
{
    bg_thread_lock(&expander);
    if (!expander.running)
        expander_wanted = false;
    bg_thread_unlock(&expander);
    return bg_thread_start(&expander, expander_main);
}

void assoc_stop_thread(void)
{
    bg_thread_stop(&expander);
}

void assoc_request_expand(void)
{
    bg_thread_lock(&expander);
    bool threaded = expander.running;
    if (threaded) {
        expander_wanted = true;
        bg_thread_wake(&expander);
    }
    bg_thread_unlock(&expander);
    if (!threaded)
        assoc_expand();
}

void assoc_stats(struct assoc_stats *out)
{
    unsigned power = __atomic_load_n(&hashpower, __ATOMIC_RELAXED);
    out->hash_power = power;
    out->expanding = atomic_load(&expanding);
    out->hash_bytes = ((size_t)1 << power) * sizeof(struct item *);
    if (out->expanding)
        out->hash_bytes += ((size_t)1 << (power - 1)) * sizeof(struct item *);
    out->hashpower_init = hashpower_initial;
}
