/* include/mcr/ud_wire.h: the header of every datagram of UD's software
 * reliability layer (rdma/ud_reliable.c), the one definition shared by the
 * server and the client library.
 *
 * A UD datagram carries, after the 40-byte GRH the hardware prepends, this
 * 36-byte header and then up to (path MTU - 36) bytes of one segment of a
 * message. All fields are little-endian on the wire; use
 * mcr_ud_hdr_encode()/mcr_ud_hdr_decode() rather than touching the bytes.
 * This file owns the layout and the header check only: every other rule a
 * received datagram must pass (lengths against the datagram, the sequence
 * window, the peer's identity) is enforced by rdma/ud_reliable.c before any
 * field is used. See doc/rdma-ud.md, "UD reliability".
 *
 * Wire layout, byte offsets:
 *   0 version(1) 1 type(1) 2 window(2)
 *   4 conn_id(4)            the receiver's id for this peer
 *   8 seq(4)                sequence number of this datagram (DATA only)
 *  12 ack(4)                cumulative ack: every seq before it was received
 *  16 sack(8)               bit i set: seq ack + 1 + i was received too
 *  24 msg_len(4)            length of the whole message (DATA only)
 *  28 seg_off(4)            offset of this segment in the message (DATA only)
 *  32 seg_len(2)            bytes of payload after the header
 *  34 check(2)              ones'-complement sum of the header's other words
 *                                                      = 36 bytes
 */
#ifndef MCR_UD_WIRE_H
#define MCR_UD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "mcr/byteorder.h"

#define MCR_UD_VERSION 1u
#define MCR_UD_HDR_LEN 36u
#define MCR_UD_GRH_LEN 40u /* what a UD receive buffer holds before the datagram */

/* Datagram types. */
enum mcr_ud_type {
    /* One segment of a message; also carries ack and sack. */
    MCR_UD_DATA = 1,
    /* Ack and sack only (seq, msg_len, seg_off and seg_len are 0). */
    MCR_UD_ACK = 2,
    /* Like ACK, and asks the receiver to answer with an ACK at once (the
     * keepalive probe of an idle peer). */
    MCR_UD_PROBE = 3,
};
#define MCR_UD_TYPE_MAX MCR_UD_PROBE

/* Decoded (host byte order) view of the header. */
struct mcr_ud_hdr {
    uint8_t version;  /* MCR_UD_VERSION */
    uint8_t type;     /* enum mcr_ud_type */
    uint16_t window;  /* datagrams the sender can hold out of order */
    uint32_t conn_id; /* the receiver's id for this peer */
    uint32_t seq;
    uint32_t ack;
    uint64_t sack;
    uint32_t msg_len;
    uint32_t seg_off;
    uint16_t seg_len;
    uint16_t check;
};

/* The header check: the ones'-complement sum of the header's 16-bit
 * little-endian words, the check's own word counted as 0, inverted. It
 * catches a datagram that is not ours or is cut; the payload is covered by
 * the link's own CRC (the ICRC of InfiniBand and RoCE). */
static inline uint16_t mcr_ud_hdr_check(const uint8_t *p)
{
    /* the sum of 32-bit little-endian words, folded, is the sum of their
     * 16-bit halves (end-around carry): 8 words, then the word at 32 */
    uint64_t sum = 0;
    for (size_t i = 0; i < 32; i += 4)
        sum += mcr_le_get32(p + i);
    sum += mcr_le_get16(p + 32);
    while (sum >> 16)
        sum = (sum & 0xffffu) + (sum >> 16);
    return (uint16_t)~sum;
}

/* The names rdma/ud_ep.c writes its CM private data with. */
#define mcr_ud_put16 mcr_le_put16
#define mcr_ud_put32 mcr_le_put32
#define mcr_ud_get16 mcr_le_get16
#define mcr_ud_get32 mcr_le_get32

/* Writes h into out[0..MCR_UD_HDR_LEN) and fills in the check (h->check is
 * ignored). */
static inline void mcr_ud_hdr_encode(const struct mcr_ud_hdr *h, uint8_t *out)
{
    out[0] = h->version;
    out[1] = h->type;
    mcr_le_put16(out + 2, h->window);
    mcr_le_put32(out + 4, h->conn_id);
    mcr_le_put32(out + 8, h->seq);
    mcr_le_put32(out + 12, h->ack);
    mcr_le_put64(out + 16, h->sack);
    mcr_le_put32(out + 24, h->msg_len);
    mcr_le_put32(out + 28, h->seg_off);
    mcr_le_put16(out + 32, h->seg_len);
    mcr_le_put16(out + 34, mcr_ud_hdr_check(out));
}

/* Reads the header fields from in[0..MCR_UD_HDR_LEN) without checking any;
 * the caller must have at least MCR_UD_HDR_LEN bytes. */
static inline void mcr_ud_hdr_decode(const uint8_t *in, struct mcr_ud_hdr *h)
{
    h->version = in[0];
    h->type = in[1];
    h->window = mcr_le_get16(in + 2);
    h->conn_id = mcr_le_get32(in + 4);
    h->seq = mcr_le_get32(in + 8);
    h->ack = mcr_le_get32(in + 12);
    h->sack = mcr_le_get64(in + 16);
    h->msg_len = mcr_le_get32(in + 24);
    h->seg_off = mcr_le_get32(in + 28);
    h->seg_len = mcr_le_get16(in + 32);
    h->check = mcr_le_get16(in + 34);
}

#endif
