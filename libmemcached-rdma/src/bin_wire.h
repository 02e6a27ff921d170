/* bin_wire.h: the memcached binary protocol frame as this client sends and
 * receives it: the 24-byte header, magic bytes, opcodes and status codes,
 * and big-endian field helpers. Layout only; no I/O, no policy. */
#ifndef LMR_BIN_WIRE_H
#define LMR_BIN_WIRE_H

#include <stdint.h>
#include <string.h>

#define LMR_BIN_HEADER_SIZE 24
#define LMR_BIN_MAGIC_REQUEST 0x80
#define LMR_BIN_MAGIC_RESPONSE 0x81

enum lmr_bin_opcode {
    LMR_BIN_GET = 0x00,
    LMR_BIN_SET = 0x01,
    LMR_BIN_ADD = 0x02,
    LMR_BIN_REPLACE = 0x03,
    LMR_BIN_DELETE = 0x04,
    LMR_BIN_INCREMENT = 0x05,
    LMR_BIN_DECREMENT = 0x06,
    LMR_BIN_QUIT = 0x07,
    LMR_BIN_FLUSH = 0x08,
    LMR_BIN_GETQ = 0x09,
    LMR_BIN_NOOP = 0x0a,
    LMR_BIN_VERSION = 0x0b,
    LMR_BIN_GETK = 0x0c,
    LMR_BIN_GETKQ = 0x0d,
    LMR_BIN_APPEND = 0x0e,
    LMR_BIN_PREPEND = 0x0f,
    LMR_BIN_STAT = 0x10,
    LMR_BIN_SETQ = 0x11,
    LMR_BIN_ADDQ = 0x12,
    LMR_BIN_REPLACEQ = 0x13,
    LMR_BIN_DELETEQ = 0x14,
    LMR_BIN_INCREMENTQ = 0x15,
    LMR_BIN_DECREMENTQ = 0x16,
    LMR_BIN_QUITQ = 0x17,
    LMR_BIN_FLUSHQ = 0x18,
    LMR_BIN_APPENDQ = 0x19,
    LMR_BIN_PREPENDQ = 0x1a,
    LMR_BIN_VERBOSITY = 0x1b,
    LMR_BIN_TOUCH = 0x1c,
};

enum lmr_bin_status {
    LMR_BIN_STATUS_SUCCESS = 0x00,
    LMR_BIN_STATUS_KEY_ENOENT = 0x01,
    LMR_BIN_STATUS_KEY_EEXISTS = 0x02,
    LMR_BIN_STATUS_E2BIG = 0x03,
    LMR_BIN_STATUS_EINVAL = 0x04,
    LMR_BIN_STATUS_NOT_STORED = 0x05,
    LMR_BIN_STATUS_DELTA_BADVAL = 0x06,
    LMR_BIN_STATUS_AUTH_ERROR = 0x20,
    LMR_BIN_STATUS_AUTH_CONTINUE = 0x21,
    LMR_BIN_STATUS_UNKNOWN_COMMAND = 0x81,
    LMR_BIN_STATUS_ENOMEM = 0x82,
    LMR_BIN_STATUS_NOT_SUPPORTED = 0x83,
    LMR_BIN_STATUS_EINTERNAL = 0x84,
    LMR_BIN_STATUS_EBUSY = 0x85,
    LMR_BIN_STATUS_ETMPFAIL = 0x86,
};

static inline void lmr_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void lmr_put32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static inline void lmr_put64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static inline uint16_t lmr_get16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t lmr_get32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t lmr_get64(const uint8_t *p)
{
    return ((uint64_t)lmr_get32(p) << 32) | lmr_get32(p + 4);
}

#endif
