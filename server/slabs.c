/*
 * slabs.c: size classes, page accounting against -m, and chunk handout.
 *
 * Pages are carved from large anonymous mappings ("regions") that are
 * reserved but untouched until used, and chunks are handed out from the
 * newest page with a bump pointer before anything is put on a free list, so
 * resident memory follows what is stored rather than what is reserved. With
 * -L one region covering -m is mapped at start (memcached's preallocation).
 *
 * Locking: one mutex per class; the page pool has its own mutex, taken
 * inside a class mutex, never the other way round. This file must not call
 * into the LRU or item code.
 */
#include "slabs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define BASE_CHUNK_OVERHEAD 48 /* memcached sizes its first class as 48 + -n */
#define REGION_PAGES 64        /* pages reserved per mapping without -L */

struct slab_class {
    pthread_mutex_t lock;
    size_t size;
    size_t perslab;
    void *free_list; /* freed chunks, linked through their first word */
    size_t free_count;
    char *end_ptr; /* never-used chunks at the end of the newest page */
    size_t end_left;
    size_t pages;
};

struct region {
    struct region *next;
    char *base;
    size_t size;
    size_t used;
};

static struct slab_class classes[SLAB_CLASSES_MAX];
static unsigned largest_class;
static size_t page_size;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions; /* newest first */
static size_t mem_limit;
static size_t mem_malloced;
static uint64_t malloc_fails;
static bool preallocated;

static struct region *region_map(size_t size)
{
    struct region *r = malloc(sizeof(*r));
    if (!r)
        return NULL;
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        free(r);
        return NULL;
    }
    r->base = base;
    r->size = size;
    r->used = 0;
    r->next = regions;
    regions = r;
    return r;
}

/* A fresh page for class c (called with c->lock held), or NULL. */
static char *page_take(const struct slab_class *c)
{
    char *page = NULL;
    pthread_mutex_lock(&pool_lock);
    /* As memcached does, every class may take one page even past -m, so a
     * tiny limit still stores items of every size. */
    if (mem_limit && mem_malloced + page_size > mem_limit && c->pages > 0)
        goto out;
    struct region *r = regions;
    if (!r || r->used + page_size > r->size) {
        if (preallocated)
            goto out;
        r = region_map(page_size * REGION_PAGES);
        if (!r) {
            malloc_fails++;
            goto out;
        }
    }
    page = r->base + r->used;
    r->used += page_size;
    mem_malloced += page_size;
out:
    pthread_mutex_unlock(&pool_lock);
    return page;
}

int slabs_init(const struct slabs_config *cfg, char *errbuf, size_t errlen)
{
    if (cfg->factor <= 1.0) {
        snprintf(errbuf, errlen, "growth factor must be greater than 1.0");
        return -1;
    }
    if (cfg->chunk_max < 8 || cfg->chunk_max > cfg->page_size) {
        snprintf(errbuf, errlen, "slab_chunk_max must be between 8 and the page size");
        return -1;
    }
    page_size = cfg->page_size;
    mem_limit = cfg->mem_limit;
    mem_malloced = 0;
    malloc_fails = 0;
    regions = NULL;
    preallocated = false;

    size_t size = BASE_CHUNK_OVERHEAD + cfg->min_chunk;
    unsigned i = 0;
    while (++i < SLAB_CLASSES_MAX - 1) {
        if ((double)size >= (double)cfg->chunk_max / cfg->factor)
            break;
        size = (size + 7) & ~(size_t)7;
        classes[i].size = size;
        size = (size_t)((double)size * cfg->factor);
    }
    largest_class = i;
    classes[i].size = cfg->chunk_max;
    for (unsigned c = 1; c <= largest_class; c++) {
        pthread_mutex_init(&classes[c].lock, NULL);
        classes[c].perslab = page_size / classes[c].size;
        classes[c].free_list = NULL;
        classes[c].free_count = 0;
        classes[c].end_ptr = NULL;
        classes[c].end_left = 0;
        classes[c].pages = 0;
    }

    if (cfg->prealloc && mem_limit) {
        if (!region_map(mem_limit)) {
            snprintf(errbuf, errlen, "could not preallocate %zu bytes", mem_limit);
            return -1;
        }
        preallocated = true;
    }
    return 0;
}

void slabs_shutdown(void)
{
    while (regions) {
        struct region *r = regions;
        regions = r->next;
        munmap(r->base, r->size);
        free(r);
    }
    for (unsigned c = largest_class; c >= 1; c--)
        pthread_mutex_destroy(&classes[c].lock);
    largest_class = 0;
}

unsigned slabs_clsid(size_t size)
{
    if (size == 0 || size > classes[largest_class].size)
        return 0;
    unsigned lo = 1, hi = largest_class;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (classes[mid].size >= size)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

unsigned slabs_largest_class(void)
{
    return largest_class;
}

size_t slabs_class_size(unsigned cls)
{
    return classes[cls].size;
}

void *slabs_alloc(unsigned cls)
{
    struct slab_class *c = &classes[cls];
    void *chunk = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->free_list) {
        chunk = c->free_list;
        c->free_list = *(void **)chunk;
        c->free_count--;
    } else {
        if (c->end_left == 0) {
            char *page = page_take(c);
            if (page) {
                c->pages++;
                c->end_ptr = page;
                c->end_left = c->perslab;
            }
        }
        if (c->end_left > 0) {
            chunk = c->end_ptr;
            c->end_ptr += c->size;
            c->end_left--;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return chunk;
}

void slabs_free(void *chunk, unsigned cls)
{
    struct slab_class *c = &classes[cls];
    pthread_mutex_lock(&c->lock);
    *(void **)chunk = c->free_list;
    c->free_list = chunk;
    c->free_count++;
    pthread_mutex_unlock(&c->lock);
}

int slabs_set_limit(size_t new_limit)
{
    int rc = -1;
    pthread_mutex_lock(&pool_lock);
    if (!preallocated) {
        mem_limit = new_limit;
        rc = 0;
    }
    pthread_mutex_unlock(&pool_lock);
    return rc;
}

void slabs_class_stats(unsigned cls, struct slabs_class_stats *out)
{
    struct slab_class *c = &classes[cls];
    pthread_mutex_lock(&c->lock);
    out->chunk_size = c->size;
    out->chunks_per_page = c->perslab;
    out->total_pages = c->pages;
    out->total_chunks = c->pages * c->perslab;
    out->free_chunks = c->free_count + c->end_left;
    out->free_chunks_end = c->end_left;
    out->used_chunks = out->total_chunks - c->free_count - c->end_left;
    pthread_mutex_unlock(&c->lock);
}

void slabs_global_stats(struct slabs_global_stats *out)
{
    unsigned active = 0;
    for (unsigned c = 1; c <= largest_class; c++) {
        pthread_mutex_lock(&classes[c].lock);
        if (classes[c].pages)
            active++;
        pthread_mutex_unlock(&classes[c].lock);
    }
    pthread_mutex_lock(&pool_lock);
    out->mem_limit = mem_limit;
    out->total_malloced = mem_malloced;
    out->malloc_fails = malloc_fails;
    pthread_mutex_unlock(&pool_lock);
    out->active_classes = active;
}
