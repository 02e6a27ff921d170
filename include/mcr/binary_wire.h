/*
 * include/mcr/binary_wire.h: memcached's binary protocol on the wire, the one
 * definition shared by the server (server/proto_bin.c) and the client
 * library (ARCHITECTURE seam 4).
 *
 * A frame is a fixed 24-byte header followed by bodylen body bytes laid out
 * as extras (extlen bytes), key (keylen bytes), value (the rest). Every
 * multi-byte field is big-endian. Requests start with MCR_BIN_MAGIC_REQUEST,
 * replies with MCR_BIN_MAGIC_RESPONSE; a reply echoes the request's opcode
 * and opaque.
 *
 * Header, byte offsets:
 *   0 magic  1 opcode  2 keylen(2)  4 extlen  5 datatype
 *   6 vbucket id (request) / status (response) (2)
 *   8 bodylen(4)  12 opaque(4)  16 cas(8)                     = 24 bytes
 *
 * This file owns the layout only: constants, the decoded header and
 * encode/decode helpers. It must not hold policy (which opcodes a server
 * serves, what a status means for a client): that lives with each side.
 */
#ifndef MCR_BINARY_WIRE_H
#define MCR_BINARY_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "mcr/byteorder.h"

#define MCR_BIN_HEADER_LEN 24u
#define MCR_BIN_MAGIC_REQUEST 0x80u
#define MCR_BIN_MAGIC_RESPONSE 0x81u
#define MCR_BIN_DATATYPE_RAW 0x00u

/* Opcodes. Quiet variants ("...Q") answer only on error, except that the
 * quiet gets (GETQ, GETKQ, GATQ, GATKQ) answer only on a hit. */
enum mcr_bin_opcode {
    MCR_BIN_OP_GET = 0x00,
    MCR_BIN_OP_SET = 0x01,
    MCR_BIN_OP_ADD = 0x02,
    MCR_BIN_OP_REPLACE = 0x03,
    MCR_BIN_OP_DELETE = 0x04,
    MCR_BIN_OP_INCREMENT = 0x05,
    MCR_BIN_OP_DECREMENT = 0x06,
    MCR_BIN_OP_QUIT = 0x07,
    MCR_BIN_OP_FLUSH = 0x08,
    MCR_BIN_OP_GETQ = 0x09,
    MCR_BIN_OP_NOOP = 0x0a,
    MCR_BIN_OP_VERSION = 0x0b,
    MCR_BIN_OP_GETK = 0x0c,
    MCR_BIN_OP_GETKQ = 0x0d,
    MCR_BIN_OP_APPEND = 0x0e,
    MCR_BIN_OP_PREPEND = 0x0f,
    MCR_BIN_OP_STAT = 0x10,
    MCR_BIN_OP_SETQ = 0x11,
    MCR_BIN_OP_ADDQ = 0x12,
    MCR_BIN_OP_REPLACEQ = 0x13,
    MCR_BIN_OP_DELETEQ = 0x14,
    MCR_BIN_OP_INCREMENTQ = 0x15,
    MCR_BIN_OP_DECREMENTQ = 0x16,
    MCR_BIN_OP_QUITQ = 0x17,
    MCR_BIN_OP_FLUSHQ = 0x18,
    MCR_BIN_OP_APPENDQ = 0x19,
    MCR_BIN_OP_PREPENDQ = 0x1a,
    MCR_BIN_OP_VERBOSITY = 0x1b, /* in the protocol's specification; memcached
                                    1.6 answers it with UNKNOWN_COMMAND */
    MCR_BIN_OP_TOUCH = 0x1c,
    MCR_BIN_OP_GAT = 0x1d,
    MCR_BIN_OP_GATQ = 0x1e,
    MCR_BIN_OP_SASL_LIST_MECHS = 0x20,
    MCR_BIN_OP_SASL_AUTH = 0x21,
    MCR_BIN_OP_SASL_STEP = 0x22,
    MCR_BIN_OP_GATK = 0x23,
    MCR_BIN_OP_GATKQ = 0x24,
    /* Range operations: specified, never served by memcached. */
    MCR_BIN_OP_RGET = 0x30,
    MCR_BIN_OP_RSET = 0x31,
    MCR_BIN_OP_RSETQ = 0x32,
    MCR_BIN_OP_RAPPEND = 0x33,
    MCR_BIN_OP_RAPPENDQ = 0x34,
    MCR_BIN_OP_RPREPEND = 0x35,
    MCR_BIN_OP_RPREPENDQ = 0x36,
    MCR_BIN_OP_RDELETE = 0x37,
    MCR_BIN_OP_RDELETEQ = 0x38,
    MCR_BIN_OP_RINCR = 0x39,
    MCR_BIN_OP_RINCRQ = 0x3a,
    MCR_BIN_OP_RDECR = 0x3b,
    MCR_BIN_OP_RDECRQ = 0x3c,
};

/* Response status codes. */
enum mcr_bin_status {
    MCR_BIN_STATUS_SUCCESS = 0x0000,
    MCR_BIN_STATUS_KEY_ENOENT = 0x0001,
    MCR_BIN_STATUS_KEY_EEXISTS = 0x0002,
    MCR_BIN_STATUS_E2BIG = 0x0003,
    MCR_BIN_STATUS_EINVAL = 0x0004,
    MCR_BIN_STATUS_NOT_STORED = 0x0005,
    MCR_BIN_STATUS_DELTA_BADVAL = 0x0006,
    MCR_BIN_STATUS_NOT_MY_VBUCKET = 0x0007,
    MCR_BIN_STATUS_AUTH_ERROR = 0x0020,
    MCR_BIN_STATUS_AUTH_CONTINUE = 0x0021,
    MCR_BIN_STATUS_UNKNOWN_COMMAND = 0x0081,
    MCR_BIN_STATUS_ENOMEM = 0x0082,
    MCR_BIN_STATUS_NOT_SUPPORTED = 0x0083,
    MCR_BIN_STATUS_EINTERNAL = 0x0084,
    MCR_BIN_STATUS_EBUSY = 0x0085,
    MCR_BIN_STATUS_ETMPFAIL = 0x0086,
};

/* Extras layouts (sizes in bytes; fields big-endian, in this order). */
/* SET, ADD, REPLACE (and quiet): flags(4) expiration(4) */
#define MCR_BIN_EXTRAS_STORE_LEN 8u
/* INCREMENT, DECREMENT (and quiet): delta(8) initial(8) expiration(4);
 * expiration 0xffffffff: fail with KEY_ENOENT instead of creating */
#define MCR_BIN_EXTRAS_ARITH_LEN 20u
#define MCR_BIN_ARITH_NO_CREATE 0xffffffffu
/* TOUCH, GAT, GATQ, GATK, GATKQ: expiration(4) */
#define MCR_BIN_EXTRAS_TOUCH_LEN 4u
/* FLUSH (and quiet): optional expiration(4) */
#define MCR_BIN_EXTRAS_FLUSH_LEN 4u
/* VERBOSITY: level(4) */
#define MCR_BIN_EXTRAS_VERBOSITY_LEN 4u
/* Replies to GET/GETK/GAT/GATK and TOUCH: flags(4) */
#define MCR_BIN_EXTRAS_GET_REPLY_LEN 4u
/* Reply body of INCREMENT/DECREMENT: the new value(8), no extras */
#define MCR_BIN_ARITH_REPLY_LEN 8u

/* Decoded header (host byte order). vbucket_or_status is the vbucket id in
 * a request and the status in a response. */
struct mcr_bin_header {
    uint8_t magic;
    uint8_t opcode;
    uint16_t keylen;
    uint8_t extlen;
    uint8_t datatype;
    uint16_t vbucket_or_status;
    uint32_t bodylen;
    uint32_t opaque;
    uint64_t cas;
};

/* ---- the header ------------------------------------------------------------ */
static inline void mcr_bin_header_encode(const struct mcr_bin_header *h, void *wire)
{
    unsigned char *p = wire;
    p[0] = h->magic;
    p[1] = h->opcode;
    mcr_be_put16(p + 2, h->keylen);
    p[4] = h->extlen;
    p[5] = h->datatype;
    mcr_be_put16(p + 6, h->vbucket_or_status);
    mcr_be_put32(p + 8, h->bodylen);
    mcr_be_put32(p + 12, h->opaque);
    mcr_be_put64(p + 16, h->cas);
}

static inline void mcr_bin_header_decode(const void *wire, struct mcr_bin_header *h)
{
    const unsigned char *p = wire;
    h->magic = p[0];
    h->opcode = p[1];
    h->keylen = mcr_be_get16(p + 2);
    h->extlen = p[4];
    h->datatype = p[5];
    h->vbucket_or_status = mcr_be_get16(p + 6);
    h->bodylen = mcr_be_get32(p + 8);
    h->opaque = mcr_be_get32(p + 12);
    h->cas = mcr_be_get64(p + 16);
}

/* A response header: magic 0x81, raw datatype. */
static inline void mcr_bin_response_encode(void *wire, uint8_t opcode, uint16_t status,
                                           uint8_t extlen, uint16_t keylen, uint32_t bodylen,
                                           uint32_t opaque, uint64_t cas)
{
    struct mcr_bin_header h = {MCR_BIN_MAGIC_RESPONSE,
                               opcode,
                               keylen,
                               extlen,
                               MCR_BIN_DATATYPE_RAW,
                               status,
                               bodylen,
                               opaque,
                               cas};
    mcr_bin_header_encode(&h, wire);
}

/* A request header: magic 0x80, raw datatype, vbucket 0. */
static inline void mcr_bin_request_encode(void *wire, uint8_t opcode, uint8_t extlen,
                                          uint16_t keylen, uint32_t bodylen, uint32_t opaque,
                                          uint64_t cas)
{
    struct mcr_bin_header h = {MCR_BIN_MAGIC_REQUEST,
                               opcode,
                               keylen,
                               extlen,
                               MCR_BIN_DATATYPE_RAW,
                               0,
                               bodylen,
                               opaque,
                               cas};
    mcr_bin_header_encode(&h, wire);
}

#endif
