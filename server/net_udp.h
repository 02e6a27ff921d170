/*
 * net_udp.h: memcached's UDP transport (-U <port>, off by default as in
 * memcached 1.6; never with -s). One UDP socket per listen address, shared
 * by every worker: each worker holds one connection on it, as memcached's
 * worker threads do. Every datagram carries memcached's 8-byte frame
 * header (request id, sequence number, datagram count, reserved), all
 * big-endian; replies echo the request id and are split into datagrams of
 * at most 1400 bytes. Text and binary requests, chosen per datagram. Owns
 * the sockets and framing; parses no requests.
 */
#ifndef MCR_NET_UDP_H
#define MCR_NET_UDP_H

#include "transport.h"

extern const struct transport_ops net_udp_transport;

/* Binds the UDP sockets the settings ask for and gives each worker a
 * connection on them (workers must be running). 0 when UDP is off or
 * ready; -1 after logging why. Each worker's connection closes its own
 * descriptor of the socket when the workers stop. */
int udp_open(void);

#endif
