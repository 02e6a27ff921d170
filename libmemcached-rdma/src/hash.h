/* hash.h: key hash functions of libmemcached-rdma, numerically identical to
 * libmemcached 1.0.18's memcached_hash_t algorithms. This file owns only the
 * hash algorithms; choosing a server from a hash lives in placement.h. */
#ifndef LMR_HASH_H
#define LMR_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Same numbering as memcached_hash_t. */
enum lmr_hash_alg {
    LMR_HASH_DEFAULT = 0, /* libmemcached's "one at a time" Jenkins hash */
    LMR_HASH_MD5 = 1,
    LMR_HASH_CRC = 2,
    LMR_HASH_FNV1_64 = 3,
    LMR_HASH_FNV1A_64 = 4,
    LMR_HASH_FNV1_32 = 5,
    LMR_HASH_FNV1A_32 = 6,
    LMR_HASH_HSIEH = 7,
    LMR_HASH_MURMUR = 8,
    LMR_HASH_JENKINS = 9,
    LMR_HASH_MURMUR3 = 10,
};

/* Hash of key[0..len) with algorithm alg; unknown values hash as DEFAULT. */
uint32_t lmr_hash(enum lmr_hash_alg alg, const char *key, size_t len);

#endif
