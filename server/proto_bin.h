/*
 * proto_bin.h: memcached's binary protocol engine (frames defined in
 * include/mcr/binary_wire.h) with memcached 1.6's replies, status codes and
 * connection handling. Uses conn.h's engine interface and items.h; never
 * touches sockets or slabs. main() registers it as conn_binary_engine, which
 * connections starting with byte 0x80 (-B auto) or every connection
 * (-B binary) use.
 */
#ifndef MCR_PROTO_BIN_H
#define MCR_PROTO_BIN_H

#include "conn.h"

extern const struct proto_engine proto_bin_engine;

#endif
