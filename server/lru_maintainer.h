/*
 * lru_maintainer.h: the LRU maintainer thread of the segmented LRU and the
 * per-thread queues of reads it applies. The thread keeps each class's
 * HOT and WARM segments within their shares (hot_lru_pct, warm_lru_pct of
 * the class's bytes) and tail ages (hot_max_factor, warm_max_factor times
 * COLD's tail age), moving their tails to COLD or WARM, reclaims expired
 * items at every segment's tail, and moves active COLD items to WARM.
 */
#ifndef MCR_LRU_MAINTAINER_H
#define MCR_LRU_MAINTAINER_H

#include <stdbool.h>
#include <stdint.h>

#include "lru.h"

struct item;

/* Tunables ("lru tune"); defaults 20, 40, 0.2, 2.0. */
void lru_maintainer_tune(unsigned hot_pct, unsigned warm_pct, double hot_factor,
                         double warm_factor);
/* The share of a class's bytes segment seg (HOT or WARM) may hold, in
 * percent. */
void lru_maintainer_shares(enum lru_segment seg, unsigned *pct);

int lru_maintainer_start(void);
void lru_maintainer_stop(void);
bool lru_maintainer_running(void);
/* Passes of the thread over the classes ("lru_maintainer_juggles"). */
uint64_t lru_maintainer_juggles(void);
void lru_maintainer_stats_reset(void);

/* Queues a read of an active COLD item for the thread to move it to WARM.
 * The caller holds the item lock and has taken a reference the queue
 * keeps; false (the caller drops it) when this thread's queue is full.
 * Takes only this thread's own queue lock. */
bool lru_bump_enqueue(struct item *it, uint64_t hv);
/* Applies every queued read now (also done by the thread); true when there
 * were any. */
bool lru_bumps_drain(void);
/* Drops every queue, releasing the references they hold (shutdown). */
void lru_bumps_shutdown(void);

#endif
