/*
 * net_rdma_ud.h: clients over RDMA unreliable datagrams (rdma/ud_ep.h, made
 * reliable per peer by rdma/ud_reliable.c). Owns one UD endpoint context per
 * RDMA listen address (-o rdma_transport=ud|hybrid), driven by one worker
 * thread, and the transport table conn.c uses for its peers: each peer is a
 * conn like a TCP or RC connection, its byte stream carried as the payloads
 * of whole UD messages (no rendezvous). Parses no requests.
 */
#ifndef MCR_NET_RDMA_UD_H
#define MCR_NET_RDMA_UD_H

#include "config.h"

#include <stdint.h>

#include "stats.h"
#include "transport.h"

#ifdef HAVE_RDMA

extern const struct transport_ops net_rdma_ud_transport;

/* Serves UD on host:port (the UDP port space of the RDMA CM; the same number
 * as an RC listener on that address may use). 1 serving, 0 unavailable
 * (logged). Workers must be running. */
int net_rdma_ud_open(const char *host, uint16_t port);
/* Detaches the contexts from their workers (before workers_stop). */
void net_rdma_ud_close(void);
/* Frees the contexts and the peers left (after workers_stop). */
void net_rdma_ud_shutdown(void);
/* rdma_ud_peers, rdma_ud_retransmits, rdma_ud_duplicates, rdma_ud_malformed. */
void net_rdma_ud_stats(stat_emit_fn emit, void *ctx);
/* UD's part of figures "stats" gives for RC and UD together, summed over
 * the listeners. */
struct net_rdma_ud_totals {
    uint64_t bytes_read, bytes_written; /* stream bytes received from and sent to
                                           peers: rdma_bytes_read, rdma_bytes_written */
    uint64_t rejected; /* peers refused (-c, no memory): rdma_rejected_connections */
};
void net_rdma_ud_totals(struct net_rdma_ud_totals *out);

#endif
#endif
