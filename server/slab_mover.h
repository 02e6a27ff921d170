/*
 * slab_mover.h: moves slab pages from a class with old items to a class
 * that is evicting young ones, once memory is full (memcached's automove).
 * A background thread looks once a second; a look can also be run
 * synchronously.
 */
#ifndef MCR_SLAB_MOVER_H
#define MCR_SLAB_MOVER_H

#include <stdbool.h>
#include <stdint.h>

int slab_mover_start(void);
void slab_mover_stop(void);
/* One look (and at most one page moved, in the calling thread); true when
 * a page was moved. */
bool slab_mover_run_once(void);
struct slab_mover_stats {
    uint64_t pages_moved;
    uint64_t items_lost;      /* live items unlinked to empty pages */
    uint64_t items_reclaimed; /* expired or flushed ones found there */
    uint64_t items_busy;      /* in use when visited: waited for */
    uint64_t items_rescued;   /* live ones moved into spare chunks of their class */
    uint64_t chunks_rescued;  /* value chunks of large items moved likewise */
    bool running;             /* a page is being emptied now */
};
void slab_mover_stats(struct slab_mover_stats *out);
/* Automatic moves on or off (the thread keeps running for requests). */
void slab_mover_set_auto(bool on);
bool slab_mover_auto(void);
/* A requested move (slabs reassign); see items.h for the results. With
 * the thread running it happens in the background, else right away. As in
 * memcached, class 0 is the pool of empty pages: a page moved to it waits
 * there, and "from" it is OK while it holds two or more (they go to the
 * first class that needs a page); src -1 picks a class, BADCLASS when
 * none has a page to spare. */
int slab_mover_request(int src, int dst);
void slab_mover_reset(void);

#endif
