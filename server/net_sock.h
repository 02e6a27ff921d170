/*
 * net_sock.h: stream sockets (TCP and Unix) for the daemon: the listeners
 * that accept on the listener thread and hand connections to workers, and
 * the transport table (transport.h) conn.c uses on those connections.
 * UDP is net_udp.c, TLS net_tls.c. Owns socket setup and the -c limit;
 * parses no requests.
 */
#ifndef MCR_NET_SOCK_H
#define MCR_NET_SOCK_H

#include "conn.h"
#include "transport.h"

struct event_base;

/* A stream connection's transport state. TLS (net_tls.c) embeds it as the
 * first member of its own and reuses the event handling below. */
struct sock_state {
    struct event *ev;
    short interest; /* EV_READ / EV_WRITE currently registered */
    bool is_unix;
    /* where socket readiness goes: conn_on_ready, or TLS's translation */
    void (*on_ready)(struct conn *c, bool readable, bool writable);
};

/* The socket half of the transport table, for transports built on it. */
int net_sock_attach(struct conn *c, struct event_base *base);
void net_sock_want(struct conn *c, bool readable, bool writable);
void net_sock_close(struct conn *c); /* frees c->tp_data and closes the socket */
void net_sock_describe(struct conn *c, char *buf, size_t len);

/* A -l entry without memcached's "notls:" prefix (TLS off for that
 * listener); *notls says whether it was there. */
const char *net_sock_strip_notls(const char *spec, bool *notls);

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
