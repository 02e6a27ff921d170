/*
 * flash_reader.h: a worker's own io_uring ring for reads of flash values.
 * A get that finds its value on flash submits the read from the worker's
 * thread (batched: the submission goes at the end of the current event
 * loop round); the ring's completions wake the worker's event loop through
 * an eventfd, and the read's done() runs there. No other thread takes part.
 */
#ifndef MCR_FLASH_READER_H
#define MCR_FLASH_READER_H

#include "flash.h"

struct event_base;
struct flash_reader;

/* A reader whose completions run in base's loop; NULL when no ring or
 * event can be made (with a log line). Thread of base only, as every call
 * below. */
struct flash_reader *flash_reader_new(struct event_base *base);
/* Waits for the reads still in flight and runs their done(), then frees
 * the reader (after base's loop stopped, before its connections go; on
 * the thread that made it: the ring may accept no other). */
void flash_reader_free(struct flash_reader *rdr);
/* Reads rd->loc's record into rd->iov (flash_read_target). rd->done(rd) runs later from
 * the loop (never within this call), flash_read_finish() already applied:
 * ok, corrupt, or neither (the record was not there). */
void flash_reader_read(struct flash_reader *rdr, struct flash_read *rd);

#endif
