/* erasure.c: the erasure code and chunk headers (see erasure.h). */
#include "config.h"

#include "erasure.h"

#include <pthread.h>
#include <string.h>

#include "mcr/byteorder.h"

#ifdef HAVE_JERASURE
#include <jerasure.h>
#include <jerasure/reed_sol.h>
#endif

#define EC_WORD_BITS 8
static const char ec_magic[4] = {'R', 'S', 'c', '1'};
enum { EC_VERSION = 1 };

bool lmr_ec_available(void)
{
#ifdef HAVE_JERASURE
    return true;
#else
    return false;
#endif
}

size_t lmr_ec_chunk_size(uint64_t value_length, uint32_t k)
{
    uint64_t per = (value_length + k - 1) / k;
    per = (per + 15) & ~(uint64_t)15;
    return per < 16 ? 16 : (size_t)per;
}

size_t lmr_ec_payload_length(const struct lmr_ec_header *h)
{
    if (h->k == 1)
        return (size_t)h->value_length;
    size_t cs = lmr_ec_chunk_size(h->value_length, h->k);
    if (h->index >= h->k)
        return cs;
    uint64_t start = (uint64_t)h->index * cs;
    if (start >= h->value_length)
        return 0;
    uint64_t left = h->value_length - start;
    return left < cs ? (size_t)left : cs;
}

/* A Fletcher-style sum over 64-bit words (two running sums, so the order
 * of words counts), fast enough to run over every chunk: it tells a chunk
 * from bytes someone else stored under its key, it is not cryptographic.
 * The payload's part is summed from zero (lmr_ec_payload_sum) and joined
 * to the header's here: words w1..wn run from sums (a0, b0) end at
 * (a0 + a, b0 + n * a0 + b), where (a, b) are the words' own sums, so one
 * payload sum serves several headers (the copies of one value). */
void lmr_ec_payload_sum(const char *payload, size_t length, struct lmr_ec_payload_sum *sum)
{
    uint64_t a = 0, b = 0, words = 0, word;
    size_t i = 0;
    /* four words at a time, the same sums: after w0..w3, a grew by
     * w0 + w1 + w2 + w3 and b by 4a + 4w0 + 3w1 + 2w2 + w3 (a before
     * them), so the chain from one word to the next no longer bounds the
     * loop (1 MiB: 26 us instead of 38 here) */
    for (; i + 32 <= length; i += 32) {
        uint64_t w0, w1, w2, w3;
        memcpy(&w0, payload + i, 8);
        memcpy(&w1, payload + i + 8, 8);
        memcpy(&w2, payload + i + 16, 8);
        memcpy(&w3, payload + i + 24, 8);
        b += 4 * a + 4 * w0 + 3 * w1 + 2 * w2 + w3;
        a += w0 + w1 + w2 + w3;
        words += 4;
    }
    for (; i + 8 <= length; i += 8) {
        memcpy(&word, payload + i, 8);
        a += word;
        b += a;
        words++;
    }
    if (i < length) {
        word = 0;
        memcpy(&word, payload + i, length - i);
        a += word;
        b += a;
        words++;
    }
    *sum = (struct lmr_ec_payload_sum){.a = a, .b = b, .words = words, .length = length};
}

static uint32_t checksum(const char *header, const struct lmr_ec_payload_sum *payload)
{
    uint64_t a = 0x9e3779b97f4a7c15u, b = payload->length;
    uint64_t word;
    for (size_t i = 0; i + 8 <= 28; i += 8) {
        memcpy(&word, header + i, 8);
        a += word;
        b += a;
    }
    a += mcr_le_get32(header + 24);
    b += a;
    b += payload->words * a + payload->b;
    a += payload->a;
    uint64_t mixed = (a ^ (b * 0xff51afd7ed558ccdu)) * 0xc4ceb9fe1a85ec53u;
    return (uint32_t)(mixed ^ mixed >> 32);
}

void lmr_ec_header_write_summed(char out[LMR_EC_HEADER_LENGTH], const struct lmr_ec_header *h,
                                const struct lmr_ec_payload_sum *payload)
{
    memcpy(out, ec_magic, 4);
    out[4] = EC_VERSION;
    out[5] = (char)h->index;
    out[6] = (char)h->k;
    out[7] = (char)h->m;
    mcr_le_put64(out + 8, h->value_length);
    mcr_le_put64(out + 16, h->stamp);
    mcr_le_put32(out + 24, h->flags);
    mcr_le_put32(out + 28, checksum(out, payload));
}

void lmr_ec_header_write(char out[LMR_EC_HEADER_LENGTH], const struct lmr_ec_header *h,
                         const char *payload, size_t payload_length)
{
    struct lmr_ec_payload_sum sum;
    lmr_ec_payload_sum(payload, payload_length, &sum);
    lmr_ec_header_write_summed(out, h, &sum);
}

bool lmr_ec_header_parse(const char *chunk, size_t chunk_length, struct lmr_ec_header *h)
{
    if (chunk == NULL || chunk_length < LMR_EC_HEADER_LENGTH || memcmp(chunk, ec_magic, 4) != 0 ||
        chunk[4] != EC_VERSION)
        return false;
    h->index = (unsigned char)chunk[5];
    h->k = (unsigned char)chunk[6];
    h->m = (unsigned char)chunk[7];
    h->value_length = mcr_le_get64(chunk + 8);
    h->stamp = mcr_le_get64(chunk + 16);
    h->flags = mcr_le_get32(chunk + 24);
    if (h->k == 0 || h->m == 0 || h->k + h->m > LMR_EC_MAX_CHUNKS)
        return false;
    if (h->k == 1 ? h->index > h->m : h->index >= h->k + h->m)
        return false;
    size_t payload = chunk_length - LMR_EC_HEADER_LENGTH;
    return h->value_length <= (uint64_t)SIZE_MAX / 2 && payload == lmr_ec_payload_length(h);
}

bool lmr_ec_header_read_split(const char *header, const char *payload, size_t chunk_length,
                              struct lmr_ec_header *h)
{
    if (!lmr_ec_header_parse(header, chunk_length, h))
        return false;
    struct lmr_ec_payload_sum sum;
    lmr_ec_payload_sum(payload, chunk_length - LMR_EC_HEADER_LENGTH, &sum);
    return mcr_le_get32(header + 28) == checksum(header, &sum);
}

bool lmr_ec_header_read(const char *chunk, size_t chunk_length, struct lmr_ec_header *h)
{
    return lmr_ec_header_read_split(chunk, chunk == NULL ? NULL : chunk + LMR_EC_HEADER_LENGTH,
                                    chunk_length, h);
}

#ifdef HAVE_JERASURE
/* jerasure builds its field tables on first use into global memory without
 * a lock, publishing the field before filling it in: build them once, here,
 * for every thread. Two fields: GF(2^8) for the multiplications, and the
 * w = 32 one, through which jerasure XORs whole regions (matrix entries
 * equal to 1, whatever w the code uses); a thread finding either half
 * built calls through a pointer not yet set (t/test_erasure_threads). */
static pthread_once_t field_once = PTHREAD_ONCE_INIT;

static void field_init(void)
{
    galois_init_default_field(EC_WORD_BITS);
    galois_init_default_field(32);
}

int *lmr_ec_matrix(uint32_t k, uint32_t m)
{
    pthread_once(&field_once, field_init);
    return reed_sol_vandermonde_coding_matrix((int)k, (int)m, EC_WORD_BITS);
}

void lmr_ec_encode(uint32_t k, uint32_t m, const int *matrix, char **data, char **coding,
                   size_t chunk_size)
{
    jerasure_matrix_encode((int)k, (int)m, EC_WORD_BITS, (int *)matrix, data, coding,
                           (int)chunk_size);
}

bool lmr_ec_decode(uint32_t k, uint32_t m, const int *matrix, int *erasures, char **data,
                   char **coding, size_t chunk_size)
{
    /* the Vandermonde matrix's first row is all ones (row_k_ones = 1) */
    return jerasure_matrix_decode((int)k, (int)m, EC_WORD_BITS, (int *)matrix, 1, erasures, data,
                                  coding, (int)chunk_size) == 0;
}
#else
int *lmr_ec_matrix(uint32_t k, uint32_t m)
{
    (void)k;
    (void)m;
    return NULL;
}

void lmr_ec_encode(uint32_t k, uint32_t m, const int *matrix, char **data, char **coding,
                   size_t chunk_size)
{
    (void)k, (void)m, (void)matrix, (void)data, (void)coding, (void)chunk_size;
}

bool lmr_ec_decode(uint32_t k, uint32_t m, const int *matrix, int *erasures, char **data,
                   char **coding, size_t chunk_size)
{
    (void)k, (void)m, (void)matrix, (void)erasures, (void)data, (void)coding, (void)chunk_size;
    return false;
}
#endif
