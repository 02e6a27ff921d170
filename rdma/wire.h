/* rdma/wire.h: validation of received RDMA message headers.
 *
 * Owns the rules a received header must pass before any of its fields is
 * used (magic, version, type, flags, lengths, rendezvous descriptor). It does
 * not know about endpoints or credits accounting beyond the per-message bound.
 */
#ifndef MCR_RDMA_WIRE_CHECK_H
#define MCR_RDMA_WIRE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "mcr/rdma_wire.h"

struct mcr_rdma_wire_limits {
    uint32_t max_payload;  /* eager buffer size minus the header */
    uint16_t max_credits;  /* credits one message may return */
    uint32_t max_rndv_len; /* largest rendezvous region accepted */
};

/* Decodes and checks the received bytes [wire, wire+byte_len). Returns NULL
 * when valid (and fills *out), otherwise a short static reason. */
const char *mcr_rdma_wire_check(const void *wire, size_t byte_len,
                                const struct mcr_rdma_wire_limits *limits,
                                struct mcr_rdma_hdr *out);

#endif
