/*
 * slabs.c: size classes, page accounting against -m, and chunk handout.
 *
 * Memory comes from large anonymous mappings ("regions") that are reserved
 * but untouched until used; each region is cut into page-aligned pages and
 * keeps a small descriptor per page outside the page itself. A page given
 * to a class hands out never-used chunks from its end with a bump pointer
 * and reuses freed chunks through its own free list, so resident memory
 * follows what is stored. A class allocates from its "partial" pages (those
 * with a free chunk). When a page's last chunk is freed and the class has
 * other room, the page goes back to a shared pool (its memory returned to
 * the kernel) where any class can take it: memory freed by delete, expiry
 * or flush_all is not stuck in the class that first used it. With -L one
 * region covering -m is mapped at start (memcached's preallocation).
 *
 * Locking: one mutex per class; the pool has its own mutex, taken inside a
 * class mutex, never the other way round. This file must not call into the
 * LRU or item code.
 */
#include "slabs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define REGION_MIN_BYTES ((size_t)64 * 1024 * 1024)   /* first mapping */
#define REGION_MAX_BYTES ((size_t)4096 * 1024 * 1024) /* largest later mapping */

struct page {
    struct page *next; /* in its class's partial list, or in the pool */
    struct page *prev;
    char *base;
    void *free_list;       /* freed chunks, linked through their first word */
    unsigned nfree;        /* chunks on free_list */
    unsigned end_left;     /* never-used chunks at the end */
    unsigned used;         /* chunks handed out */
    unsigned value_chunks; /* of those, value chunks of chunked items */
    bool in_partial;
    struct page *class_next; /* every page of the class */
    struct page *class_prev;
    /* For pages holding value chunks: per chunk, the item header owning a
     * value chunk (SLABS_OWNER_UNKNOWN until set), NULL for other chunks.
     * Allocated with the page's first value chunk; without it (allocation
     * failed) a page holding value chunks is never emptied. */
    void **owners;
    struct slabs_drain *drain; /* set while the page is being emptied */
    unsigned drain_skip;       /* after a failed emptying: picks to sit out */
};

/* A page being emptied for another class (see slabs.h). */
struct slabs_drain {
    struct page *page;
    unsigned cls;
    unsigned dst; /* 0: the page goes to the pool; else kept for class dst */
    bool done;    /* the page left its class */
};

struct region {
    struct region *next; /* immutable once published */
    char *map;
    size_t map_size;
    char *base; /* page-aligned start of the pages */
    size_t npages;
    size_t fresh; /* pages never handed out yet start here */
    struct page *pages;
};

struct slab_class {
    pthread_mutex_t lock;
    size_t size;
    unsigned perslab;
    struct page *partial; /* pages with at least one free chunk */
    struct page *all;     /* every page of the class */
    size_t pages;
    size_t used_chunks;
    size_t end_left; /* sum over this class's pages */
};

static struct slab_class classes[SLAB_CLASSES_MAX];
static unsigned largest_class;

/* slabs_clsid() for sizes up to CLASS_LOOKUP_MAX: the class of each
 * multiple of 8 bytes (class sizes are multiples of 8), so a small item's
 * class costs one load, not a search; larger sizes search. */
#define CLASS_LOOKUP_MAX 16384
static uint8_t class_of_words[CLASS_LOOKUP_MAX / 8 + 1];
static size_t page_size;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions; /* newest first; read without the lock */
static size_t mapped_bytes;
static struct page *pool; /* released pages, ready for any class */
static size_t pool_pages;
/* Emptied pages kept for the class a "slabs reassign" named, until
 * slabs_grant_page() hands them over; still counted in mem_malloced, so no
 * other class can take their room meanwhile. page->drain_skip holds the
 * destination class while a page waits here. */
static struct page *reserved;
static size_t mem_limit;
static size_t mem_malloced; /* bytes of pages held by classes */
static uint64_t malloc_fails;
static bool preallocated;
static slabs_region_fn region_observer; /* pool_lock */
static void *region_observer_arg;

/* Maps a region of at least `bytes` (pool_lock held, or at init). */
static struct region *region_map(size_t bytes)
{
    size_t npages = (bytes + page_size - 1) / page_size;
    struct region *r = calloc(1, sizeof(*r));
    struct page *pages = calloc(npages, sizeof(*pages));
    if (!r || !pages) {
        free(pages);
        free(r);
        return NULL;
    }
    size_t map_size = npages * page_size + page_size; /* slack for alignment */
    char *map = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) {
        free(pages);
        free(r);
        return NULL;
    }
    r->map = map;
    r->map_size = map_size;
    r->base = (char *)(((uintptr_t)map + page_size - 1) & ~(uintptr_t)(page_size - 1));
    r->npages = npages;
    r->pages = pages;
    for (size_t i = 0; i < npages; i++)
        pages[i].base = r->base + i * page_size;
    r->next = regions;
    __atomic_store_n(&regions, r, __ATOMIC_RELEASE);
    mapped_bytes += npages * page_size;
    if (region_observer)
        region_observer(region_observer_arg, r->base, npages * page_size);
    return r;
}

static struct page *page_of(const void *chunk)
{
    const char *p = chunk;
    for (struct region *r = __atomic_load_n(&regions, __ATOMIC_ACQUIRE); r; r = r->next) {
        if (p >= r->base && p < r->base + r->npages * page_size)
            return &r->pages[(size_t)(p - r->base) / page_size];
    }
    return NULL;
}

/* Makes pg, just taken for class c, an empty page of c (c->lock held). */
static void page_adopt(struct slab_class *c, struct page *pg)
{
    pg->next = pg->prev = NULL;
    pg->free_list = NULL;
    pg->nfree = 0;
    pg->end_left = c->perslab;
    pg->used = 0;
    pg->value_chunks = 0;
    pg->in_partial = false;
    pg->drain = NULL;
    pg->drain_skip = 0;
    pg->class_prev = NULL;
    pg->class_next = c->all;
    if (c->all)
        c->all->class_prev = pg;
    c->all = pg;
}

/* Whether the limit lets class c hold one more page (pool_lock held). As
 * memcached does, every class may take one page even past -m, so a tiny
 * limit still stores items of every size. */
static bool limit_allows_page(const struct slab_class *c)
{
    return !mem_limit || mem_malloced + page_size <= mem_limit || c->pages == 0;
}

/* Takes a pooled page for class c within the limit (pool_lock held). */
static struct page *pool_take(const struct slab_class *c)
{
    struct page *pg = pool;
    if (!pg || !limit_allows_page(c))
        return NULL;
    pool = pg->next;
    pool_pages--;
    mem_malloced += page_size;
    return pg;
}

/* A page for class c (c->lock held), or NULL when the limit forbids one or
 * no memory can be mapped. */
static struct page *page_take(struct slab_class *c)
{
    struct page *pg = NULL;
    pthread_mutex_lock(&pool_lock);
    if (!limit_allows_page(c))
        goto out;
    if (pool) {
        pg = pool_take(c);
    } else {
        struct region *r = regions;
        if (!r || r->fresh == r->npages) {
            if (preallocated)
                goto out;
            size_t want = mapped_bytes < REGION_MIN_BYTES ? REGION_MIN_BYTES : mapped_bytes;
            if (want > REGION_MAX_BYTES)
                want = REGION_MAX_BYTES;
            if (region_observer && mem_limit) {
                /* an observed region is registered, which makes all of it
                 * resident: map no more than the limit leaves (a page past
                 * it, for a class's first page) */
                size_t room = mapped_bytes < mem_limit ? mem_limit - mapped_bytes : 0;
                room = room < page_size ? page_size : room;
                want = want < room ? want : room;
            }
            r = region_map(want);
            if (!r) {
                malloc_fails++;
                goto out;
            }
        }
        pg = &r->pages[r->fresh++];
        mem_malloced += page_size;
    }
out:
    pthread_mutex_unlock(&pool_lock);
    if (pg)
        page_adopt(c, pg);
    return pg;
}

/* Gives an empty page of class c back to the pool, or keeps it for the
 * class a requested move names (c->lock held). */
static void page_release(struct slab_class *c, struct page *pg)
{
    if (pg->class_prev)
        pg->class_prev->class_next = pg->class_next;
    else
        c->all = pg->class_next;
    if (pg->class_next)
        pg->class_next->class_prev = pg->class_prev;
    pg->class_next = pg->class_prev = NULL;
    free(pg->owners); /* empty: no owner left to record */
    pg->owners = NULL;
    unsigned dst = 0;
    if (pg->drain) {
        pg->drain->done = true;
        dst = pg->drain->dst;
        pg->drain = NULL;
    }
    pthread_mutex_lock(&pool_lock);
    if (dst > 0) {
        pg->drain_skip = dst;
        pg->next = reserved;
        reserved = pg;
        pthread_mutex_unlock(&pool_lock);
        return;
    }
    if (!region_observer) /* registered memory stays as it is (slabs.h) */
        madvise(pg->base, page_size, MADV_DONTNEED);
    pg->next = pool;
    pool = pg;
    pool_pages++;
    mem_malloced -= page_size;
    pthread_mutex_unlock(&pool_lock);
}

void slabs_prefill_pool(void)
{
    pthread_mutex_lock(&pool_lock);
    size_t limit_pages = mem_limit / page_size;
    while (mem_malloced / page_size + pool_pages < limit_pages) {
        struct region *r = regions;
        if (!r || r->fresh == r->npages) {
            if (preallocated)
                break;
            size_t missing = limit_pages - mem_malloced / page_size - pool_pages;
            r = region_map(missing * page_size);
            if (!r) {
                malloc_fails++;
                break;
            }
        }
        struct page *pg = &r->pages[r->fresh++];
        pg->next = pool;
        pool = pg;
        pool_pages++;
    }
    pthread_mutex_unlock(&pool_lock);
}

static void partial_add(struct slab_class *c, struct page *pg)
{
    pg->prev = NULL;
    pg->next = c->partial;
    if (c->partial)
        c->partial->prev = pg;
    c->partial = pg;
    pg->in_partial = true;
}

static void partial_remove(struct slab_class *c, struct page *pg)
{
    if (pg->prev)
        pg->prev->next = pg->next;
    else
        c->partial = pg->next;
    if (pg->next)
        pg->next->prev = pg->prev;
    pg->next = pg->prev = NULL;
    pg->in_partial = false;
}

int slabs_init(const struct slabs_config *cfg, char *errbuf, size_t errlen)
{
    if (cfg->factor <= 1.0) {
        snprintf(errbuf, errlen, "growth factor must be greater than 1.0");
        return -1;
    }
    if (cfg->page_size < 1024 || (cfg->page_size & (cfg->page_size - 1)) != 0) {
        snprintf(errbuf, errlen, "slab page size must be a power of two of at least 1 KiB");
        return -1;
    }
    if (cfg->chunk_max < 8 || cfg->chunk_max > cfg->page_size) {
        snprintf(errbuf, errlen, "slab_chunk_max must be between 8 and the page size");
        return -1;
    }
    page_size = cfg->page_size;
    mem_limit = cfg->mem_limit;
    mem_malloced = 0;
    /* memcached's test hook (its t/64bit.t): start as if this many bytes
     * were already allocated, to reach a limit above 4 GiB cheaply */
    const char *initial = getenv("T_MEMD_INITIAL_MALLOC");
    if (initial)
        mem_malloced = (size_t)strtoull(initial, NULL, 10);
    mapped_bytes = 0;
    malloc_fails = 0;
    regions = NULL;
    pool = NULL;
    pool_pages = 0;
    reserved = NULL;
    preallocated = false;

    unsigned i = 0;
    if (cfg->nsizes > 0) { /* memcached's -o slab_sizes, checked by the caller */
        if (cfg->nsizes >= SLAB_CLASSES_MAX - 1) {
            snprintf(errbuf, errlen, "too many slab classes specified");
            return -1;
        }
        for (; i < cfg->nsizes; i++)
            classes[i + 1].size = ((size_t)cfg->sizes[i] + 7) & ~(size_t)7;
        i++; /* the largest class comes next (after a last size equal to it
              * too, as memcached adds it) */
    } else {
        size_t size = cfg->header_size + cfg->min_chunk;
        while (++i < SLAB_CLASSES_MAX - 1) {
            if ((double)size >= (double)cfg->chunk_max / cfg->factor)
                break;
            size = (size + 7) & ~(size_t)7;
            classes[i].size = size;
            size = (size_t)((double)size * cfg->factor);
        }
    }
    largest_class = i;
    classes[i].size = cfg->chunk_max & ~(size_t)7; /* chunks stay 8-byte aligned */
    unsigned cls = 1;
    for (size_t words = 0; words <= CLASS_LOOKUP_MAX / 8; words++) {
        while (cls <= largest_class && classes[cls].size < words * 8)
            cls++;
        class_of_words[words] = cls <= largest_class ? (uint8_t)cls : 0;
    }
    class_of_words[0] = 0; /* size 0 has no class */
    for (unsigned c = 1; c <= largest_class; c++) {
        pthread_mutex_init(&classes[c].lock, NULL);
        classes[c].perslab = (unsigned)(page_size / classes[c].size);
        classes[c].partial = NULL;
        classes[c].all = NULL;
        classes[c].pages = 0;
        classes[c].used_chunks = 0;
        classes[c].end_left = 0;
    }

    if (cfg->prealloc && mem_limit) {
        if (!region_map(mem_limit)) {
            snprintf(errbuf, errlen, "could not preallocate %zu bytes", mem_limit);
            for (unsigned c = largest_class; c >= 1; c--)
                pthread_mutex_destroy(&classes[c].lock);
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
        munmap(r->map, r->map_size);
        for (size_t i = 0; i < r->fresh; i++)
            free(r->pages[i].owners);
        free(r->pages);
        free(r);
    }
    pool = NULL;
    for (unsigned c = largest_class; c >= 1; c--)
        pthread_mutex_destroy(&classes[c].lock);
    largest_class = 0;
}

unsigned slabs_clsid(size_t size)
{
    if (size <= CLASS_LOOKUP_MAX)
        return class_of_words[(size + 7) / 8];
    if (size > classes[largest_class].size)
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

static size_t chunk_index(const struct slab_class *c, const struct page *pg, const void *chunk)
{
    return (size_t)((const char *)chunk - pg->base) / c->size;
}

/* A chunk of pg, a page on c's partial list (class lock held). */
static void *take_chunk(struct slab_class *c, struct page *pg, bool value)
{
    void *chunk;
    if (pg->free_list) {
        chunk = pg->free_list;
        pg->free_list = *(void **)chunk;
        pg->nfree--;
    } else {
        chunk = pg->base + (size_t)(c->perslab - pg->end_left) * c->size;
        pg->end_left--;
        c->end_left--;
    }
    pg->used++;
    if (value) {
        if (!pg->owners && pg->value_chunks == 0)
            pg->owners = calloc(c->perslab, sizeof(*pg->owners));
        if (pg->owners)
            __atomic_store_n(&pg->owners[chunk_index(c, pg, chunk)], SLABS_OWNER_UNKNOWN,
                             __ATOMIC_RELAXED);
        pg->value_chunks++;
    }
    c->used_chunks++;
    if (pg->in_partial && pg->nfree == 0 && pg->end_left == 0)
        partial_remove(c, pg);
    return chunk;
}

static void *chunk_alloc(unsigned cls, bool value, bool new_page)
{
    struct slab_class *c = &classes[cls];
    pthread_mutex_lock(&c->lock);
    struct page *pg = c->partial;
    if (!pg) {
        pg = new_page ? page_take(c) : NULL;
        if (!pg) {
            pthread_mutex_unlock(&c->lock);
            return NULL;
        }
        c->pages++;
        c->end_left += pg->end_left;
        partial_add(c, pg);
    }
    void *chunk = take_chunk(c, pg, value);
    pthread_mutex_unlock(&c->lock);
    return chunk;
}

void *slabs_alloc(unsigned cls)
{
    return chunk_alloc(cls, false, true);
}

void *slabs_alloc_value(unsigned cls)
{
    return chunk_alloc(cls, true, true);
}

void *slabs_alloc_spare(unsigned cls, bool value)
{
    return chunk_alloc(cls, value, false);
}

void *slabs_alloc_draining(unsigned cls, bool value)
{
    struct slab_class *c = &classes[cls];
    void *chunk = NULL;
    pthread_mutex_lock(&c->lock);
    for (struct page *pg = c->all; pg && !chunk; pg = pg->class_next)
        if (pg->drain && !pg->drain->done && pg->free_list)
            chunk = take_chunk(c, pg, value);
    pthread_mutex_unlock(&c->lock);
    return chunk;
}

bool slabs_grant_page(unsigned cls, bool emptied_for_it)
{
    struct slab_class *c = &classes[cls];
    pthread_mutex_lock(&c->lock);
    pthread_mutex_lock(&pool_lock);
    struct page *pg = NULL;
    for (struct page **link = &reserved; emptied_for_it && *link; link = &(*link)->next) {
        if ((*link)->drain_skip == cls) { /* emptied for this class */
            pg = *link;
            *link = pg->next;
            break;
        }
    }
    if (!pg)
        pg = pool_take(c);
    pthread_mutex_unlock(&pool_lock);
    if (pg) {
        page_adopt(c, pg);
        c->pages++;
        c->end_left += pg->end_left;
        partial_add(c, pg);
    }
    pthread_mutex_unlock(&c->lock);
    return pg != NULL;
}

static void chunk_free(void *chunk, unsigned cls, bool value)
{
    struct slab_class *c = &classes[cls];
    struct page *pg = page_of(chunk);
    pthread_mutex_lock(&c->lock);
    *(void **)chunk = pg->free_list;
    pg->free_list = chunk;
    pg->nfree++;
    pg->used--;
    if (value)
        pg->value_chunks--;
    if (pg->owners)
        __atomic_store_n(&pg->owners[chunk_index(c, pg, chunk)], NULL, __ATOMIC_RELAXED);
    c->used_chunks--;
    if (pg->drain) {
        /* Being emptied: hands out nothing; leaves once empty. */
        if (pg->used == 0) {
            c->pages--;
            c->end_left -= pg->end_left;
            page_release(c, pg);
        }
        pthread_mutex_unlock(&c->lock);
        return;
    }
    if (!pg->in_partial)
        partial_add(c, pg);
    /* An empty page goes back to the pool unless it is the class's only
     * room left (keeps a class that churns from trading pages back and
     * forth). */
    if (pg->used == 0 && (c->partial != pg || pg->next != NULL)) {
        partial_remove(c, pg);
        c->pages--;
        c->end_left -= pg->end_left;
        page_release(c, pg);
    }
    pthread_mutex_unlock(&c->lock);
}

void slabs_free(void *chunk, unsigned cls)
{
    chunk_free(chunk, cls, false);
}

void slabs_free_value(void *chunk, unsigned cls)
{
    chunk_free(chunk, cls, true);
}

/* ---- emptying a page for another class ---------------------------------- */
struct slabs_drain *slabs_drain_begin(unsigned cls, unsigned dst)
{
    struct slab_class *c = &classes[cls];
    struct slabs_drain *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->dst = dst;
    pthread_mutex_lock(&c->lock);
    struct page *best = NULL;
    if (c->pages >= 2) {
        for (struct page *pg = c->all; pg; pg = pg->class_next) {
            if (pg->drain_skip) { /* held items kept it from emptying lately */
                pg->drain_skip--;
                continue;
            }
            bool known = pg->value_chunks == 0 || pg->owners; /* each chunk's kind */
            /* the class's only page with free chunks is where the live
             * chunks of another would go: emptying it rescues nothing */
            bool sole_room = pg->in_partial && c->partial == pg && pg->next == NULL;
            if (known && !pg->drain && !sole_room && (!best || pg->used < best->used))
                best = pg;
        }
    }
    if (best) {
        if (best->in_partial)
            partial_remove(c, best);
        best->drain = d;
        d->page = best;
        d->cls = cls;
        if (best->used == 0) { /* already empty */
            c->pages--;
            c->end_left -= best->end_left;
            page_release(c, best);
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (!best) {
        free(d);
        return NULL;
    }
    return d;
}

bool slabs_drain_visit(struct slabs_drain *d, void (*visit)(void *chunk, void *owner, void *arg),
                       void *arg)
{
    struct slab_class *c = &classes[d->cls];
    pthread_mutex_lock(&c->lock);
    if (!d->done) {
        struct page *pg = d->page;
        unsigned handed = c->perslab - pg->end_left;
        unsigned char *is_free = calloc(handed ? handed : 1, 1);
        if (is_free) {
            for (void *f = pg->free_list; f; f = *(void **)f)
                is_free[(size_t)((char *)f - pg->base) / c->size] = 1;
            for (unsigned i = 0; i < handed; i++)
                if (!is_free[i])
                    visit(pg->base + (size_t)i * c->size,
                          pg->owners ? __atomic_load_n(&pg->owners[i], __ATOMIC_RELAXED) : NULL,
                          arg);
            free(is_free);
        }
    }
    bool done = d->done;
    pthread_mutex_unlock(&c->lock);
    return done;
}

void *slabs_drain_spare(void *drain)
{
    struct slabs_drain *d = drain;
    struct slab_class *c = &classes[d->cls];
    /* the page being emptied left the partial list when the drain began */
    return c->partial ? take_chunk(c, c->partial, false) : NULL;
}

void *slabs_drain_spare_value(void *drain, void *owner)
{
    struct slabs_drain *d = drain;
    struct slab_class *c = &classes[d->cls];
    struct page *pg = c->partial;
    void *chunk = pg ? take_chunk(c, pg, true) : NULL;
    if (chunk && pg->owners)
        __atomic_store_n(&pg->owners[chunk_index(c, pg, chunk)], owner, __ATOMIC_RELAXED);
    return chunk;
}

void slabs_value_set_owner(void *chunk, unsigned cls, void *owner)
{
    struct page *pg = page_of(chunk);
    /* the chunk is the caller's, so its page and owner table stay */
    if (pg && pg->owners)
        __atomic_store_n(&pg->owners[chunk_index(&classes[cls], pg, chunk)], owner,
                         __ATOMIC_RELAXED);
}

bool slabs_drain_end(struct slabs_drain *d)
{
    struct slab_class *c = &classes[d->cls];
    pthread_mutex_lock(&c->lock);
    bool done = d->done;
    if (!done) { /* give up: the page serves allocations again */
        struct page *pg = d->page;
        pg->drain = NULL;
        pg->drain_skip = 8;
        if (pg->nfree || pg->end_left)
            partial_add(c, pg);
    }
    pthread_mutex_unlock(&c->lock);
    free(d);
    return done;
}

/* Calls fn on r and the regions after it, oldest first (pool_lock held). */
static void regions_report(struct region *r, slabs_region_fn fn, void *arg)
{
    if (!r)
        return;
    regions_report(r->next, fn, arg);
    fn(arg, r->base, r->npages * page_size);
}

void slabs_observe_regions(slabs_region_fn fn, void *arg)
{
    pthread_mutex_lock(&pool_lock);
    region_observer = fn;
    region_observer_arg = arg;
    if (fn)
        regions_report(regions, fn, arg);
    pthread_mutex_unlock(&pool_lock);
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
    out->used_chunks = c->used_chunks;
    out->free_chunks = out->total_chunks - c->used_chunks;
    out->free_chunks_end = c->end_left;
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
    out->held_bytes = mem_malloced;
    /* Pooled pages stay counted, as memcached counts its global page pool,
     * up to the limit (past it, after cache_memlimit lowered it, they are
     * released as memcached frees them). */
    size_t pooled = pool_pages * page_size;
    if (mem_limit)
        pooled = mem_malloced >= mem_limit           ? 0
                 : pooled > mem_limit - mem_malloced ? mem_limit - mem_malloced
                                                     : pooled;
    out->total_malloced = mem_malloced + pooled;
    out->malloc_fails = malloc_fails;
    out->pool_pages = pool_pages;
    pthread_mutex_unlock(&pool_lock);
    out->active_classes = active;
}
