/*
 * crawler.h: the LRU crawler, which walks every class's LRU from the tail
 * and reclaims expired and flushed items that no lookup would otherwise
 * touch. A background thread runs a pass every few seconds; a pass can
 * also be run synchronously. Counted per class as crawler_reclaimed and
 * crawler_items_checked.
 */
#ifndef MCR_CRAWLER_H
#define MCR_CRAWLER_H

int crawler_start(void);
void crawler_stop(void);
/* One full pass over every class, in the calling thread. */
void crawler_run_once(void);

#endif
