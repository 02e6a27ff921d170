/*
 * meta_marks.c: a small hash table of (key, cas) -> marker bits under one
 * mutex. Only invalidation and recache commands write it and only items
 * that carry a marker are found in it, so it stays small; it is bounded
 * all the same: past MARKS_MAX entries the oldest entries of a bucket are
 * dropped first, and an entry older than the item's cas is removed when
 * seen. cas values only grow, so a caller holding an older version of an
 * item (it looked the item up before md I gave it a new cas) neither reads
 * nor changes the newer version's markers. Never touches items or
 * connections.
 */
#include "meta_marks.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MARK_BUCKETS 1024
#define MARKS_MAX 65536

struct mark {
    struct mark *next;
    uint64_t cas;
    unsigned marks;
    size_t nkey;
    char key[];
};

static pthread_mutex_t marks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mark *buckets[MARK_BUCKETS];
static size_t nmarks;

static unsigned bucket_of(const char *key, size_t nkey)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < nkey; i++) {
        h ^= (unsigned char)key[i];
        h *= 16777619u;
    }
    return h % MARK_BUCKETS;
}

/* The link pointing at key's entry (or at the end of its bucket). */
static struct mark **find_link(const char *key, size_t nkey)
{
    struct mark **link = &buckets[bucket_of(key, nkey)];
    while (*link && !((*link)->nkey == nkey && memcmp((*link)->key, key, nkey) == 0))
        link = &(*link)->next;
    return link;
}

static void unlink_mark(struct mark **link)
{
    struct mark *m = *link;
    *link = m->next;
    free(m);
    __atomic_store_n(&nmarks, nmarks - 1, __ATOMIC_RELAXED);
}

/* Drops the last entry of a bucket to make room (called when full). */
static void make_room(unsigned prefer_bucket)
{
    for (unsigned i = 0; i < MARK_BUCKETS && nmarks >= MARKS_MAX; i++) {
        struct mark **link = &buckets[(prefer_bucket + i) % MARK_BUCKETS];
        if (!*link)
            continue;
        while ((*link)->next)
            link = &(*link)->next;
        unlink_mark(link);
    }
}

bool meta_marks_any(void)
{
    return __atomic_load_n(&nmarks, __ATOMIC_RELAXED) > 0;
}

void meta_marks_carry(const char *key, size_t nkey, uint64_t from_cas, uint64_t to_cas)
{
    if (!meta_marks_any())
        return;
    pthread_mutex_lock(&marks_lock);
    struct mark *m = *find_link(key, nkey);
    if (m && m->cas == from_cas) /* markers of another version are left alone */
        m->cas = to_cas;
    pthread_mutex_unlock(&marks_lock);
}

void meta_marks_make_stale(const char *key, size_t nkey, uint64_t from_cas, uint64_t to_cas)
{
    unsigned before = meta_marks_get(key, nkey, from_cas);
    meta_marks_set(key, nkey, to_cas, MARK_STALE | (before & MARK_BINARY_KEY));
}

unsigned meta_marks_get(const char *key, size_t nkey, uint64_t cas)
{
    if (__atomic_load_n(&nmarks, __ATOMIC_RELAXED) == 0)
        return 0; /* the common case takes no lock */
    unsigned marks = 0;
    pthread_mutex_lock(&marks_lock);
    struct mark **link = find_link(key, nkey);
    if (*link) {
        if ((*link)->cas == cas)
            marks = (*link)->marks;
        else if ((*link)->cas < cas)
            unlink_mark(link); /* the item was replaced since */
        /* a newer cas: the asker holds an older version; the markers stay
         * for the newer one (cas values only grow) */
    }
    pthread_mutex_unlock(&marks_lock);
    return marks;
}

/* With marks_lock held. */
static void set_locked(const char *key, size_t nkey, uint64_t cas, unsigned marks)
{
    struct mark **link = find_link(key, nkey);
    if (marks == 0) {
        if (*link)
            unlink_mark(link);
        return;
    }
    if (*link) {
        (*link)->cas = cas;
        (*link)->marks = marks;
        return;
    }
    unsigned b = bucket_of(key, nkey);
    if (nmarks >= MARKS_MAX)
        make_room(b + 1);
    struct mark *m = malloc(sizeof(*m) + nkey);
    if (!m)
        return; /* the marker is lost: clients see a plain item */
    memcpy(m->key, key, nkey);
    m->nkey = nkey;
    m->cas = cas;
    m->marks = marks;
    m->next = buckets[b];
    buckets[b] = m;
    __atomic_store_n(&nmarks, nmarks + 1, __ATOMIC_RELAXED);
}

void meta_marks_set(const char *key, size_t nkey, uint64_t cas, unsigned marks)
{
    pthread_mutex_lock(&marks_lock);
    struct mark *m = *find_link(key, nkey);
    if (m == NULL || m->cas <= cas) /* a newer version's markers stay */
        set_locked(key, nkey, cas, marks);
    pthread_mutex_unlock(&marks_lock);
}

unsigned meta_marks_take_token(const char *key, size_t nkey, uint64_t cas)
{
    pthread_mutex_lock(&marks_lock);
    struct mark **link = find_link(key, nkey);
    if (*link && (*link)->cas > cas) { /* a newer version's markers stay */
        pthread_mutex_unlock(&marks_lock);
        return 0;
    }
    unsigned before = (*link && (*link)->cas == cas) ? (*link)->marks : 0;
    set_locked(key, nkey, cas, before | MARK_TOKEN_SENT);
    pthread_mutex_unlock(&marks_lock);
    return before;
}

void meta_marks_free(void)
{
    pthread_mutex_lock(&marks_lock);
    for (unsigned b = 0; b < MARK_BUCKETS; b++) {
        while (buckets[b])
            unlink_mark(&buckets[b]);
    }
    pthread_mutex_unlock(&marks_lock);
}
