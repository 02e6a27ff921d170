/* hash_md5.c: MD5 (RFC 1321) as a one-shot function. Owns the compression
 * function, padding and length encoding; it must not keep any state between
 * calls. */
#include "hash_md5.h"

#include <stdint.h>
#include <string.h>

#include "mcr/byteorder.h"
/* Per-round left-rotation amounts, four per round. */
static const unsigned md5_shift[4][4] = {
    {7, 12, 17, 22},
    {5, 9, 14, 20},
    {4, 11, 16, 23},
    {6, 10, 15, 21},
};

/* md5_sine[i] = floor(abs(sin(i + 1)) * 2^32), as RFC 1321 defines it. */
static const uint32_t md5_sine[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

static uint32_t rotate_left(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32 - n));
}

/* Mixes one 64-byte block into the four state words. */
static void md5_compress(uint32_t state[4], const unsigned char block[64])
{
    uint32_t words[16];
    for (unsigned i = 0; i < 16; i++)
        words[i] = mcr_le_get32(block + 4 * i);

    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    for (unsigned step = 0; step < 64; step++) {
        unsigned round = step / 16;
        uint32_t mixed;
        unsigned word;
        switch (round) {
        case 0:
            mixed = (b & c) | (~b & d);
            word = step;
            break;
        case 1:
            mixed = (d & b) | (~d & c);
            word = (5 * step + 1) % 16;
            break;
        case 2:
            mixed = b ^ c ^ d;
            word = (3 * step + 5) % 16;
            break;
        default:
            mixed = c ^ (b | ~d);
            word = (7 * step) % 16;
            break;
        }
        uint32_t next_b =
            b + rotate_left(a + mixed + md5_sine[step] + words[word], md5_shift[round][step % 4]);
        a = d;
        d = c;
        c = b;
        b = next_b;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
}

void lmr_md5_digest(const void *data, size_t len, unsigned char digest[LMR_MD5_DIGEST_LEN])
{
    uint32_t state[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    const unsigned char *bytes = data;
    size_t remaining = len;

    while (remaining >= 64) {
        md5_compress(state, bytes);
        bytes += 64;
        remaining -= 64;
    }

    /* Final one or two blocks: the tail, a 0x80 byte, zeros, the bit length. */
    unsigned char tail[128];
    memset(tail, 0, sizeof(tail));
    if (remaining > 0)
        memcpy(tail, bytes, remaining);
    tail[remaining] = 0x80;
    size_t tail_len = remaining + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bit_len = (uint64_t)len * 8;
    for (unsigned i = 0; i < 8; i++)
        tail[tail_len - 8 + i] = (unsigned char)(bit_len >> (8 * i));
    md5_compress(state, tail);
    if (tail_len == 128)
        md5_compress(state, tail + 64);

    for (unsigned i = 0; i < 4; i++)
        mcr_le_put32(digest + 4 * i, state[i]);
}
