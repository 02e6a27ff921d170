/* io.h: the request pipeline's engine. Queues requests on servers, moves
 * their bytes through the transport, feeds replies to the protocol parser,
 * completes requests in issue order, fails every queued request of a server
 * that breaks, and waits (bounded by the poll timeout). */
#ifndef LMR_IO_H
#define LMR_IO_H

#include <stdbool.h>

#include "client.h"

/* Queues an encoded request on srv and starts sending it, unless requests
 * are buffered or earlier requests on srv await replies: such a request is
 * held and sent with the others at the next poll or wait (or once enough
 * bytes or requests are held). On an immediate failure the request completes
 * with that code, which is returned. */
/* The monotonic clock in milliseconds. */
int64_t lmr_io_now_ms(void);
memcached_return_t lmr_io_issue(memcached_instance_st *srv, memcached_request_st *req);

/* Blocks until req completes; returns its code. */
memcached_return_t lmr_io_wait(struct lmr_client *c, memcached_request_st *req);
/* Blocks until no server has queued requests. */
memcached_return_t lmr_io_wait_all(struct lmr_client *c);
/* Blocks until the fetch queue has an item or no mget is in flight. */
void lmr_io_wait_fetch(struct lmr_client *c);
/* Sends and receives whatever can move without blocking. */
void lmr_io_poll_once(struct lmr_client *c);
/* For a caller that polls and found its request still in progress: what the
 * transports learn only from events (poll_events), then one more pass. */
void lmr_io_poll_events(struct lmr_client *c);

/* Completes the request at the head of srv's queue with rc (parsers). */
void lmr_io_complete_head(memcached_instance_st *srv, memcached_return_t rc);
/* Whether RETRY_TIMEOUT (or DEAD_TIMEOUT, ejected) allows a call to
 * connect to srv, which has no connection, now. */
bool lmr_io_connect_allowed(const memcached_instance_st *srv);
/* Whether srv's transport connects in the background (the poll loop
 * finishes the connect), as sockets do; false when a connect blocks the
 * caller until it is done (RDMA). */
bool lmr_io_connects_in_background(const memcached_instance_st *srv);
/* Closes srv's connection and completes all its requests with rc. */
void lmr_io_fail_server(memcached_instance_st *srv, memcached_return_t rc, const char *why);
/* Closes the connection without failing anything (nothing may be queued). */
void lmr_io_close(memcached_instance_st *srv);
/* Waits until what the transports took is with the servers (transport
 * drain), up to one poll timeout for all of them together; for a close
 * that is not a failure, and memcached_flush_buffers. */
void lmr_io_drain_all(struct lmr_client *c);
/* Waits until what the transports took is on its way (transport push),
 * up to one poll timeout for all of them together; before a blocking call
 * that sent requests without replies returns. */
void lmr_io_push_all(struct lmr_client *c);
/* After a quiet binary request: its error reply (a miss, an add that found
 * the key) is one no call waits for. Every LMR_QUIET_READ_EVERY such
 * requests whatever has arrived is read and parsed (the parser drops those
 * replies), so they cannot fill the connection until the server stalls. */
#define LMR_QUIET_READ_EVERY 64
void lmr_io_note_quiet(struct lmr_client *c);

/* Value reception shared by the parsers: starts a body of value_length
 * bytes into dest (NULL: discard) followed by trailer_length framing bytes;
 * lmr_io_feed_body consumes buffered bytes and returns true when complete. */
void lmr_io_start_body(memcached_instance_st *srv, char *dest, size_t value_length,
                       size_t trailer_length);
/* Returns false with srv->body.no_memory set when the rest of a value had
 * no room (the parser then fails the server). */
bool lmr_io_feed_body(memcached_instance_st *srv);
/* Where a get request's value of length bytes is received: the caller's
 * buffer (NULL if too small) or its library buffer, grown to hold it and a
 * NUL (NULL: no memory). A group's child whose value the group may place
 * gets room for the prefix only (lmr_group_child_prefix); the rest, if not
 * placed, once the group declined (lmr_io_feed_body). */
char *lmr_io_get_destination(memcached_request_st *req, size_t length);
/* A child of a group that places values (lmr_group_place_payload) whose
 * value is arriving: the rest of it is dropped (its parent completed: a
 * straggler never writes into the parent's memory, and nobody reads its
 * value). */
void lmr_io_unplace(memcached_request_st *req);

#endif
