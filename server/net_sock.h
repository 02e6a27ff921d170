/*
 * net_sock.h: stream sockets (TCP and Unix) for the daemon: the listeners
 * that accept on the listener thread and hand connections to workers, and
 * the transport table (transport.h) conn.c uses on those connections.
 * UDP comes later. Owns socket setup and the -c limit; parses no requests.
 */
#ifndef MCR_NET_SOCK_H
#define MCR_NET_SOCK_H

#include "conn.h"
#include "transport.h"

struct event_base;

extern const struct transport_ops net_sock_transport; /* TCP */
extern const struct transport_ops net_unix_transport; /* Unix stream socket */

/* Opens the listeners the settings ask for (-l/-p, or -s) on base.
 * Returns 0, or -1 after logging why. */
int listeners_open(struct event_base *base);
/* Closes every listener (reverse order of opening). */
void listeners_close(void);
/* Listening sockets for "stats conns". */
void listeners_visit(conn_visit_fn fn, void *ctx);
unsigned listeners_count(void);

#endif
