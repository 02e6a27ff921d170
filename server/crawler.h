/*
 * crawler.h: the LRU crawler, which walks every class's LRU from the tail
 * and reclaims expired and flushed items that no lookup would otherwise
 * touch. A background thread visits each class on its own schedule (every
 * 5 s at first, less often while a class has nothing to reclaim, up to
 * every 10 min); a pass over every class can also be run synchronously.
 * The same marker walk serves storage_walk_items() (items.h). Counted per class as
 * crawler_reclaimed and crawler_items_checked.
 */
#ifndef MCR_CRAWLER_H
#define MCR_CRAWLER_H

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"

int crawler_start(void);
void crawler_stop(void);
/* One full pass over every class, in the calling thread. */
void crawler_run_once(void);
/* Asks the background thread for a full pass soon; false when it does
 * not run. */
bool crawler_request_all(void);
/* Makes the background thread visit every class soon after `when` (after
 * flush_all, when everything becomes reclaimable). Never blocks. */
void crawler_visit_all_at(rel_time_t when);
/* Passes started since start-up, and whether one runs now. */
void crawler_stats(uint64_t *starts, bool *running_now);

#endif
