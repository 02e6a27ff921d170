/*
 * slabs.h: the slab allocator. Memory comes in pages (1 MiB by default),
 * each page belongs to one size class and is cut into equal chunks. Classes
 * grow by the -f factor from the smallest chunk (-n plus the item header)
 * up to slab_chunk_max. The total of pages is bounded
 * by -m. Knows nothing about items (their header size is passed in), LRUs
 * or eviction: a failed slabs_alloc() tells the caller to evict and retry.
 */
#ifndef MCR_SLABS_H
#define MCR_SLABS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLAB_CLASSES_MAX 64 /* class ids are 1 .. SLAB_CLASSES_MAX - 1 */

struct slabs_config {
    size_t mem_limit; /* 0 = unlimited */
    double factor;
    size_t min_chunk;   /* -n: space for key + value + flags in the first class */
    size_t header_size; /* per-item overhead added to it */
    size_t page_size;
    size_t chunk_max;      /* size of the largest class */
    const unsigned *sizes; /* nsizes > 0: the classes below chunk_max, rising */
    unsigned nsizes;       /* (each rounded up to 8 bytes), instead of factor */
    bool prealloc;
};

int slabs_init(const struct slabs_config *cfg, char *errbuf, size_t errlen);
void slabs_shutdown(void);

/* Smallest class whose chunks hold `size` bytes, 0 when none does. */
unsigned slabs_clsid(size_t size);
unsigned slabs_largest_class(void);
size_t slabs_class_size(unsigned cls);

/* A chunk of class cls, or NULL when the class has no free chunk and no
 * new page may be taken (memory limit, or the page could not be mapped). */
void *slabs_alloc(unsigned cls);
void slabs_free(void *chunk, unsigned cls);
/* The same for chunks holding part of a large value rather than an item
 * header (see slabs_value_set_owner). */
void *slabs_alloc_value(unsigned cls);
void slabs_free_value(void *chunk, unsigned cls);
/* A chunk of class cls only if one of its pages has a free chunk: never
 * takes a page (used to borrow a larger class's spare chunk when the
 * right class is full and memory is at its limit). */
void *slabs_alloc_spare(unsigned cls, bool value);
/* A freed chunk of a page of class cls that the slab mover is emptying,
 * or NULL: the last resort of an allocation whose evictions freed chunks
 * only there (the chunk taken is one more the mover waits for). */
void *slabs_alloc_draining(unsigned cls, bool value);

/* Emptying a page so it can serve another class (the slab mover):
 * slabs_drain_begin() picks the class's page holding only item headers
 * with the fewest in use and stops handing out its chunks (NULL when the
 * class has fewer than two pages or none qualifies). slabs_drain_visit()
 * calls visit() on each chunk still in use, with the class lock held (owner:
 * NULL for an item header, else the chunk is a value chunk and owner what
 * slabs_value_set_owner() last recorded for it, SLABS_OWNER_UNKNOWN before;
 * only a hint, to check under the owner's lock):
 * visit must not free chunks or wait for locks. It returns true once the
 * page's last chunk was freed and the page went to the pool.
 * slabs_drain_end() finishes (putting the page back in service if it is
 * not empty) and returns whether it was emptied. With dst > 0 the emptied
 * page does not go to the pool: it stays counted and waits for
 * slabs_grant_page(dst, true), so no other class can take it on the way. */
struct slabs_drain;
struct slabs_drain *slabs_drain_begin(unsigned cls, unsigned dst);
bool slabs_drain_visit(struct slabs_drain *d, void (*visit)(void *chunk, void *owner, void *arg),
                       void *arg);
bool slabs_drain_end(struct slabs_drain *d);
/* Inside slabs_drain_visit's visit (class lock held): a free chunk of the
 * drained class on another of its pages, to move a live item into (never
 * takes a page), NULL when none. drain: the struct slabs_drain. */
void *slabs_drain_spare(void *drain);
/* The same for a value chunk moving out of the drained page: the free
 * chunk is counted as a value chunk owned by owner. */
void *slabs_drain_spare_value(void *drain, void *owner);
/* Records the item header owning value chunk `chunk` of class cls (after
 * allocating it, or when the header moves), so that a page holding value
 * chunks can be emptied: the slab mover moves each to a spare chunk and
 * updates the owner's chunk table under the owner's lock. */
#define SLABS_OWNER_UNKNOWN ((void *)1)
void slabs_value_set_owner(void *chunk, unsigned cls, void *owner);
/* Gives class cls a page: with emptied_for_it, one a drain set aside for it
 * (slabs_drain_begin's dst), else a pooled one within the limit as any
 * page a class takes; without, only the pooled one, so a page set aside
 * for cls by a move still running stays for that move. False when there
 * is none or the limit forbids it. */
bool slabs_grant_page(unsigned cls, bool emptied_for_it);
/* Puts every page the limit allows and no class holds yet into the pool,
 * as memcached does when extstore runs: "slabs reassign 0 N" can then hand
 * out all of -m, and a class that has none left cannot grow. The memory is
 * mapped, not touched. */
void slabs_prefill_pool(void);

/* cache_memlimit: 0 on success, -1 when memory was preallocated. */
int slabs_set_limit(size_t mem_limit);

struct slabs_class_stats {
    size_t chunk_size;
    size_t chunks_per_page;
    size_t total_pages;
    size_t total_chunks;
    size_t used_chunks;
    size_t free_chunks;     /* on the free list or never used */
    size_t free_chunks_end; /* of those, never used at the newest page's end */
};
void slabs_class_stats(unsigned cls, struct slabs_class_stats *out);

struct slabs_global_stats {
    size_t mem_limit;
    size_t held_bytes;     /* bytes of pages classes hold (or set aside for one) */
    size_t total_malloced; /* those and the pooled pages within the limit,
                            * as memcached counts them: the pool's memory
                            * is returned to the kernel until a class takes
                            * a page again, but the cache may take it back
                            * without growing past what it has claimed */
    uint64_t malloc_fails;
    unsigned active_classes;
    size_t pool_pages; /* empty pages waiting for any class */
};
void slabs_global_stats(struct slabs_global_stats *out);

/* Region observer (the RDMA transport registers slab memory with its
 * devices): slabs_observe_regions(fn, arg) calls fn once for every region
 * already mapped, oldest first, and from then on for every region right
 * after it is mapped; fn(NULL, NULL) stops that. fn runs with the
 * allocator's pool lock held (possibly inside a class lock, on whatever
 * thread maps the region): it must not call into this allocator. While an
 * observer is installed, emptied pages keep their memory (no
 * MADV_DONTNEED): registered memory is pinned, and a page the kernel
 * replaced would no longer be the memory the device reads and writes. For
 * the same reason new regions then stay within the -m limit (a region
 * otherwise grows with what is mapped, up to 4 GiB, and costs nothing
 * until touched). */
typedef void (*slabs_region_fn)(void *arg, void *base, size_t len);
void slabs_observe_regions(slabs_region_fn fn, void *arg);

#endif
