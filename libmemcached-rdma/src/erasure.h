/* erasure.h: the erasure code and the chunk format, without I/O. A value
 * coded RS(K,M) becomes K data chunks (the value cut in K pieces of
 * chunk_size bytes, the last ones shorter or empty) and M parity chunks of
 * chunk_size bytes (Reed-Solomon over GF(2^8), Vandermonde matrix, through
 * jerasure and gf-complete). Every chunk is stored as an item whose value is
 * a 32-byte header followed by its payload (doc/resilience.md):
 *
 *   0  magic "RSc1"        16  stamp (u64, little-endian): one per write
 *   4  version (1)         24  flags (u32): the value's item flags
 *   5  index, 6 K, 7 M     28  checksum (u32) of header bytes 0-27 + payload
 *   8  value length (u64)
 *
 * K = 1 marks a whole copy (values below the threshold are replicated on
 * M + 1 servers in this same format, and REPLICATION's F copies are stored
 * as whole copies 0..F-1 with M = F - 1). */
#ifndef LMR_ERASURE_H
#define LMR_ERASURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LMR_EC_HEADER_LENGTH 32
#define LMR_EC_MAX_CHUNKS 32 /* K + M */

struct lmr_ec_header {
    uint32_t index, k, m;
    uint64_t value_length;
    uint64_t stamp;
    uint32_t flags;
};

/* Whether the library was built with jerasure (erasure coding available). */
bool lmr_ec_available(void);

/* Bytes in each data chunk's slot (and each parity chunk): the value length
 * over k, rounded up to a multiple of 16 (at least 16). gf-complete wants
 * the chunks it combines at the same address modulo 16, which cutting a
 * value into such pieces gives. */
size_t lmr_ec_chunk_size(uint64_t value_length, uint32_t k);
/* The payload length of chunk h->index as written for its header. */
size_t lmr_ec_payload_length(const struct lmr_ec_header *h);

/* Writes the header for payload[0..payload_length) into out. */
void lmr_ec_header_write(char out[LMR_EC_HEADER_LENGTH], const struct lmr_ec_header *h,
                         const char *payload, size_t payload_length);
/* The payload's part of the checksum, to write several headers for one
 * payload (the copies of a value) with one pass over it. */
struct lmr_ec_payload_sum {
    uint64_t a, b, words;
    size_t length;
};
void lmr_ec_payload_sum(const char *payload, size_t length, struct lmr_ec_payload_sum *sum);
void lmr_ec_header_write_summed(char out[LMR_EC_HEADER_LENGTH], const struct lmr_ec_header *h,
                                const struct lmr_ec_payload_sum *payload);
/* Parses a stored chunk. False unless the magic, version, geometry, payload
 * length and checksum all agree. */
bool lmr_ec_header_read(const char *chunk, size_t chunk_length, struct lmr_ec_header *h);
/* The same with the payload elsewhere (a chunk received in two places). */
bool lmr_ec_header_read_split(const char *header, const char *payload, size_t chunk_length,
                              struct lmr_ec_header *h);
/* The header's fields and geometry, checked against chunk_length, without
 * the checksum (the payload may not have arrived yet). */
bool lmr_ec_header_parse(const char *chunk, size_t chunk_length, struct lmr_ec_header *h);

/* The coding matrix for RS(k, m), w = 8 (malloc'd; NULL without jerasure
 * or memory). */
int *lmr_ec_matrix(uint32_t k, uint32_t m);
/* Parity: coding[0..m) from data[0..k), each chunk_size bytes. */
void lmr_ec_encode(uint32_t k, uint32_t m, const int *matrix, char **data, char **coding,
                   size_t chunk_size);
/* Rebuilds the chunks listed in erasures (indices, -1 terminated; data
 * 0..k-1, parity k..k+m-1) from the others. False when it cannot. */
bool lmr_ec_decode(uint32_t k, uint32_t m, const int *matrix, int *erasures, char **data,
                   char **coding, size_t chunk_size);

#endif
