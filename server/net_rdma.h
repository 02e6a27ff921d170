/*
 * net_rdma.h: clients over RDMA (reliable connected queue pairs through the
 * rdma/ substrate). Owns the RDMA listeners (-o rdma_listen), one substrate
 * context per worker thread watched by that worker's event base, and the
 * transport table (transport.h) conn.c uses on RDMA connections, which
 * always speak the binary protocol. Parses no requests.
 *
 * Built without rdma-core, or started on a machine without an RDMA device,
 * net_rdma_open() logs one line and the server keeps serving TCP.
 */
#ifndef MCR_NET_RDMA_H
#define MCR_NET_RDMA_H

#include "transport.h"

struct event_base;

extern const struct transport_ops net_rdma_transport;

/* Opens the listeners of -o rdma_listen on the main event base and a
 * context per worker (workers must be running). Returns 0 (also when RDMA is
 * unavailable, after one log line) or -1 for a listen address that cannot
 * be parsed. */
int net_rdma_open(struct event_base *base);
/* Closes the listeners and detaches the contexts from the workers' event
 * bases (before workers_stop). */
void net_rdma_close(void);
/* Frees the contexts and what is left of their connections (after
 * workers_stop). */
void net_rdma_shutdown(void);

#endif
