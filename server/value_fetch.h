/*
 * value_fetch.h: the one step every protocol engine takes to send an
 * item's value. A RAM item is attached to the response at once; a
 * flash-resident one (items.h: item_on_flash) parks the response, its
 * value is read through the flash tier (flash.h) into a fresh slab item,
 * and the response completes on the connection's worker, in request
 * order. A read that fails or does not match sends the engine's miss
 * reply instead and counts it; wrong data is never sent.
 */
#ifndef MCR_VALUE_FETCH_H
#define MCR_VALUE_FETCH_H

#include <stdbool.h>
#include <stddef.h>

#include "conn.h"

/* Takes over the caller's reference to it. miss (miss_len bytes, at most
 * RESP_HEAD_MAX) replaces the response's header when the value cannot be
 * read; the response's tail stays. False when there was no memory to read
 * a flash value into (get_oom_extstore): the miss is set, and the engine
 * may answer memcached's out-of-memory error instead. */
bool conn_resp_set_value(struct conn *c, struct resp *r, item *it, bool crlf, const char *miss,
                         size_t miss_len);

#endif
