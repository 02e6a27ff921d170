/* include/mcr/byteorder.h: reading and writing 16-, 32- and 64-bit integers
 * at any byte address in little-endian (the RDMA and UD wire headers, the
 * erasure-coded chunk trailer, MD5 words) or big-endian order (memcached's
 * binary protocol and UDP frame header). The one implementation of these
 * for the server, the client library and the tests; p need not be aligned.
 */
#ifndef MCR_BYTEORDER_H
#define MCR_BYTEORDER_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

/* mcr_ORDER_putBITS(p, v) writes v at p; mcr_ORDER_getBITS(p) reads it, for
 * ORDER le (least significant byte first) or be (most significant first)
 * and BITS 16, 32 or 64. */
#define MCR_BYTEORDER_DEFINE(order, bits)                                                          \
    static inline void mcr_##order##_put##bits(void *p, uint##bits##_t v)                          \
    {                                                                                              \
        v = hto##order##bits(v);                                                                   \
        memcpy(p, &v, sizeof(v));                                                                  \
    }                                                                                              \
    static inline uint##bits##_t mcr_##order##_get##bits(const void *p)                            \
    {                                                                                              \
        uint##bits##_t v;                                                                          \
        memcpy(&v, p, sizeof(v));                                                                  \
        return order##bits##toh(v);                                                                \
    }

MCR_BYTEORDER_DEFINE(le, 16)
MCR_BYTEORDER_DEFINE(le, 32)
MCR_BYTEORDER_DEFINE(le, 64)
MCR_BYTEORDER_DEFINE(be, 16)
MCR_BYTEORDER_DEFINE(be, 32)
MCR_BYTEORDER_DEFINE(be, 64)

#undef MCR_BYTEORDER_DEFINE

#endif
