/*
 * transport.h: how a connection moves bytes (ARCHITECTURE seam 1).
 *
 * conn.c reads requests and writes replies only through this table, so TCP,
 * Unix sockets, UDP and RDMA can sit under the same connection machinery
 * and protocol engines. A transport owns its endpoint (socket, queue pair)
 * and its readiness notifications; it tells the connection "you may read /
 * you may write" by calling conn_on_ready(). It never parses requests.
 */
#ifndef MCR_TRANSPORT_H
#define MCR_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct conn;
struct event_base;
typedef struct item item;

struct transport_ops {
    const char *name; /* "tcp", "unix", ... as in "stats conns" addresses */
    /* Datagram transports (UDP): each recv returns one whole request
     * message; the connection answers it before asking for the next one,
     * drops what of it stays unparsed, and hands each response to sendv
     * on its own (one reply message, framed by the transport). */
    bool datagram;
    /* Starts readiness notifications on the worker's event base. */
    int (*attach)(struct conn *c, struct event_base *base);
    /* Receives up to len bytes: >0 bytes, 0 peer closed, -1 with errno
     * (EAGAIN/EWOULDBLOCK: nothing now). */
    ssize_t (*recv)(struct conn *c, void *buf, size_t len);
    /* Sends from iov; same return convention as recv. */
    ssize_t (*sendv)(struct conn *c, const struct iovec *iov, int iovcnt);
    /* Which notifications the connection wants now (pause = both false). */
    void (*want)(struct conn *c, bool readable, bool writable);
    /* Stops notifications and releases the endpoint; no call after it. */
    void (*close)(struct conn *c);
    /* Optional. The connection is closing and about to release an item
     * (the value being received, or a reply's item). A transport that may
     * still be moving bytes into or out of that item's memory (RDMA READ
     * into the value, RDMA WRITE from a reply) returns true and takes over
     * the reference: it calls item_release() once its transfers ended.
     * Called before close(). */
    bool (*adopt_item)(struct conn *c, item *it);
    /* Peer address for "stats conns", e.g. "tcp:127.0.0.1:5000". */
    void (*describe)(struct conn *c, char *buf, size_t len);
};

/* Called by a transport when its endpoint may be read or written. */
void conn_on_ready(struct conn *c, bool readable, bool writable);

#endif
