/*
 * conn_internal.h: what conn.c (the state machine, a connection's life) and
 * conn_resp.c (responses and the write side) call of each other. Not for
 * transports or protocol engines: they use conn.h.
 */
#ifndef MCR_CONN_INTERNAL_H
#define MCR_CONN_INTERNAL_H

#include <stdbool.h>

#include "conn.h"

/* conn.c */
/* Runs the connection again from its worker's loop (once, however often
 * asked before it runs). */
void conn_schedule_resume(struct conn *c);
/* Frees the connection's memory; the transport is already closed. */
void conn_free(struct conn *c);

/* conn_resp.c */
/* Gives up the connection's reference to an item (a closing connection's
 * transport may keep it, transport.h adopt_item). */
void conn_item_release(struct conn *c, item *it);
/* Releases what a response holds and returns it to the worker's pool. */
void resp_free(struct conn *c, struct resp *r);
/* Writes ready responses in order; false when the connection failed and
 * must close. */
bool conn_flush(struct conn *c);

#endif
