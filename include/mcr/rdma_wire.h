/* include/mcr/rdma_wire.h: the RDMA message header, the one definition shared
 * by the server and the client library.
 *
 * Every RDMA SEND between a memcached-rdma client and server starts with this
 * header: 12 bytes, or 28 on the two rendezvous types (which carry a region
 * descriptor), followed by the payload (a memcached binary-protocol frame, or
 * nothing). The payload's length is what the receive completion reports
 * minus the header, so it is not sent. All fields are little-endian on the
 * wire; use mcr_rdma_hdr_encode()/mcr_rdma_hdr_decode() rather than touching
 * the packed bytes. This file owns the layout only: validation of a received
 * header lives in the substrate (rdma/wire.c), which must run it before any
 * field is used. See doc/rdma-wire.md for the protocol rules.
 */
#ifndef MCR_RDMA_WIRE_H
#define MCR_RDMA_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcr/byteorder.h"

#define MCR_RDMA_MAGIC 0x4d52u /* "MR" read as little-endian bytes 'R','M' */
#define MCR_RDMA_VERSION 3u
#define MCR_RDMA_HDR_BASE 12u /* every message */
#define MCR_RDMA_HDR_RNDV 28u /* RNDV_READ, RNDV_WRITE: plus the descriptor */
#define MCR_RDMA_HDR_MAX MCR_RDMA_HDR_RNDV

/* Message types. */
enum mcr_rdma_msg_type {
    /* Payload in this message. */
    MCR_RDMA_MSG_EAGER = 1,
    /* No payload: only returns credits. */
    MCR_RDMA_MSG_CREDIT = 2,
    /* Rendezvous: the sender advertises (addr, len, rkey) that the receiver
     * may RDMA READ (e.g. the value of a set). Payload: the request frame. */
    MCR_RDMA_MSG_RNDV_READ = 3,
    /* Rendezvous: the sender advertises (addr, len, rkey) that the receiver
     * may RDMA WRITE (e.g. the buffer for a get reply). Payload: request. */
    MCR_RDMA_MSG_RNDV_WRITE = 4,
};
#define MCR_RDMA_MSG_TYPE_MAX MCR_RDMA_MSG_RNDV_WRITE

/* Flags. */
/* This message ends the RNDV_WRITE region the peer advertised under
 * request_id: the region is no longer written and may be released. */
#define MCR_RDMA_F_RNDV_DONE 0x0001u
/* On RNDV_WRITE: the region is for the value of one reply only, the one
 * whose memcached binary-protocol opaque equals request_id (a caller's
 * buffer); with RNDV_DONE: ends such a region. */
#define MCR_RDMA_F_VALUE 0x0002u
/* EAGER only, alone: this message ends the RNDV_READ region the peer
 * advertised under request_id (it has been read and may be reused); the
 * payload, if any, is ordinary payload (a reply riding along). */
#define MCR_RDMA_F_READ_DONE 0x0004u
/* EAGER only, alone: the payload is not stream bytes but one control
 * record (enum mcr_rdma_ctl and what follows it: moves between RC and UD,
 * below). */
#define MCR_RDMA_F_CONTROL 0x0008u
#define MCR_RDMA_F_ALL                                                                             \
    (MCR_RDMA_F_RNDV_DONE | MCR_RDMA_F_VALUE | MCR_RDMA_F_READ_DONE | MCR_RDMA_F_CONTROL)

/* The payload of a message with RNDV_DONE: the count of stream bytes the
 * RDMA WRITE put in the region (4 bytes, little-endian, at least 1), then
 * the stream bytes that come before those (a reply's header), if any. */
#define MCR_RDMA_DONE_COUNT_LEN 4u

struct mcr_rdma_done {
    uint32_t count;   /* bytes written into the region */
    const void *head; /* stream bytes before them (in the payload) */
    uint32_t head_len;
};

static inline void mcr_rdma_done_encode_count(uint32_t count, unsigned char out[4])
{
    mcr_le_put32(out, count);
}

/* Decodes an RNDV_DONE payload; 0, or -1 when it is too short or counts
 * nothing. */
static inline int mcr_rdma_done_decode(const void *payload, uint32_t len, struct mcr_rdma_done *d)
{
    if (len < MCR_RDMA_DONE_COUNT_LEN)
        return -1;
    d->count = mcr_le_get32(payload);
    d->head = (const unsigned char *)payload + MCR_RDMA_DONE_COUNT_LEN;
    d->head_len = len - MCR_RDMA_DONE_COUNT_LEN;
    return d->count == 0 ? -1 : 0;
}

/* Decoded (host byte order) view of the header. */
struct mcr_rdma_hdr {
    uint16_t magic;       /* MCR_RDMA_MAGIC */
    uint8_t version;      /* MCR_RDMA_VERSION */
    uint8_t type;         /* enum mcr_rdma_msg_type */
    uint16_t credits;     /* receive credits returned to the receiver */
    uint16_t flags;       /* MCR_RDMA_F_* */
    uint32_t request_id;  /* chosen by the requester, echoed in replies */
    uint32_t payload_len; /* not on the wire: the received length minus the header */
    uint64_t rndv_addr;   /* rendezvous region: remote virtual address */
    uint32_t rndv_rkey;   /*   its rkey */
    uint32_t rndv_len;    /*   its length in bytes (0 when not rendezvous) */
};

/* The header's size for a message of this type. */
static inline size_t mcr_rdma_hdr_len(uint8_t type)
{
    return type == MCR_RDMA_MSG_RNDV_READ || type == MCR_RDMA_MSG_RNDV_WRITE ? MCR_RDMA_HDR_RNDV
                                                                             : MCR_RDMA_HDR_BASE;
}

/* Wire layout, byte offsets:
 *   0 magic(2) 2 version(1) 3 type(1) 4 credits(2) 6 flags(2)
 *   8 request_id(4)                                        = 12 bytes
 * rendezvous types only:
 *   12 rndv_addr(8) 20 rndv_rkey(4) 24 rndv_len(4)          = 28 bytes
 * Writes mcr_rdma_hdr_len(h->type) bytes and returns that count. */
static inline size_t mcr_rdma_hdr_encode(const struct mcr_rdma_hdr *h, void *wire)
{
    unsigned char *p = wire;
    mcr_le_put16(p + 0, h->magic);
    p[2] = h->version;
    p[3] = h->type;
    mcr_le_put16(p + 4, h->credits);
    mcr_le_put16(p + 6, h->flags);
    mcr_le_put32(p + 8, h->request_id);
    if (mcr_rdma_hdr_len(h->type) == MCR_RDMA_HDR_BASE)
        return MCR_RDMA_HDR_BASE;
    mcr_le_put64(p + 12, h->rndv_addr);
    mcr_le_put32(p + 20, h->rndv_rkey);
    mcr_le_put32(p + 24, h->rndv_len);
    return MCR_RDMA_HDR_RNDV;
}

/* Decodes a message of byte_len bytes, which must hold the whole header of
 * its type (mcr_rdma_wire_check() makes sure before anything else). */
static inline void mcr_rdma_hdr_decode(const void *wire, size_t byte_len, struct mcr_rdma_hdr *h)
{
    const unsigned char *p = wire;
    h->magic = mcr_le_get16(p + 0);
    h->version = p[2];
    h->type = p[3];
    h->credits = mcr_le_get16(p + 4);
    h->flags = mcr_le_get16(p + 6);
    h->request_id = mcr_le_get32(p + 8);
    size_t len = mcr_rdma_hdr_len(h->type);
    h->payload_len = (uint32_t)(byte_len - len);
    h->rndv_addr = 0;
    h->rndv_rkey = h->rndv_len = 0;
    if (len == MCR_RDMA_HDR_BASE)
        return;
    h->rndv_addr = mcr_le_get64(p + 12);
    h->rndv_rkey = mcr_le_get32(p + 20);
    h->rndv_len = mcr_le_get32(p + 24);
}

/* Connection private data exchanged in the RDMA CM connect request and
 * accept, 12 bytes, little-endian:
 *   0 magic(2) 2 version(1) 3 reserved(1) 4 credits(2) 6 reserved(2)
 *   8 recv_buf_size(4)
 * credits: receives the sender grants its peer; recv_buf_size: the size of
 * each of the sender's receive buffers (header included), which bounds the
 * eager messages the peer may send it. */
#define MCR_RDMA_CONN_DATA_SIZE 12u

struct mcr_rdma_conn_data {
    uint16_t credits;
    uint32_t recv_buf_size;
};

static inline void mcr_rdma_conn_data_encode(const struct mcr_rdma_conn_data *cd, void *wire)
{
    unsigned char *p = wire;
    memset(p, 0, MCR_RDMA_CONN_DATA_SIZE);
    mcr_le_put16(p, MCR_RDMA_MAGIC);
    p[2] = MCR_RDMA_VERSION;
    mcr_le_put16(p + 4, cd->credits);
    mcr_le_put32(p + 8, cd->recv_buf_size);
}

/* Returns 0, or -1 when the data is missing or not ours. */
static inline int mcr_rdma_conn_data_decode(const void *wire, unsigned len,
                                            struct mcr_rdma_conn_data *cd)
{
    const unsigned char *p = wire;
    if (wire == NULL || len < MCR_RDMA_CONN_DATA_SIZE)
        return -1;
    if (mcr_le_get16(p) != MCR_RDMA_MAGIC || p[2] != MCR_RDMA_VERSION)
        return -1;
    cd->credits = mcr_le_get16(p + 4);
    cd->recv_buf_size = mcr_le_get32(p + 8);
    return 0;
}

/* ---- moves between RC and UD (rdma_transport=hybrid; doc/rdma-hybrid.md,
 * "Promotion and demotion") --------------------------------------------------------------
 * A client that follows the server's choice (rdma://) marks its UD peer
 * movable with a first message of exactly MCR_RDMA_UD_HELLO_LEN bytes,
 * MCR_RDMA_UD_HELLO (it starts with a zero byte, which no memcached request
 * does). On such a peer every later message in either direction starts
 * with one byte of enum mcr_rdma_ctl: DATA is followed by stream bytes (at
 * least one), MOVE by one byte of enum mcr_rdma_move_to, END by nothing.
 * An empty message still ends the stream (the client closed).
 * Over RC the same records travel as the payload of EAGER messages with
 * MCR_RDMA_F_CONTROL, and a movable client's first one is HELLO.
 * The move: the server sends MOVE; the client sends nothing new on the old
 * transport but, between two whole requests, END; the server answers every
 * request before the client's END and then sends END; the client reads up
 * to the server's END, closes the old transport and opens the other one
 * (RC refused: UD again). So no byte is lost, duplicated or reordered. */
enum mcr_rdma_ctl {
    MCR_RDMA_CTL_DATA = 0,
    MCR_RDMA_CTL_MOVE = 1,
    MCR_RDMA_CTL_END = 2,
    MCR_RDMA_CTL_HELLO = 3, /* RC: the client's first control record marks it movable */
};
enum mcr_rdma_move_to {
    MCR_RDMA_MOVE_TO_RC = 1,
    MCR_RDMA_MOVE_TO_UD = 2,
};
#define MCR_RDMA_UD_HELLO "\0mcr-movable-1\0"
#define MCR_RDMA_UD_HELLO_LEN 16u
#define MCR_RDMA_MOVE_LEN 2u /* MOVE and its target */

#endif
