/* hash.c: the key hash algorithms of libmemcached-rdma. Each function gives
 * the same 32-bit value as libmemcached for the same bytes, including its
 * quirks: several algorithms widen key bytes through plain (signed on x86)
 * char, CRC keeps only 15 bits of the CRC-32, 64-bit FNV-1a keeps only 32-bit
 * state. Byte order is little-endian throughout, as on the platforms this
 * library targets. This file must not choose servers (placement.c does). */
#include "hash.h"
#include "hash_md5.h"

#include <pthread.h>

#include "mcr/byteorder.h"

/* A key byte widened the way libmemcached widens it: through plain char, so
 * bytes >= 0x80 sign-extend where char is signed. */
static uint32_t char_widened(const char *key, size_t i)
{
    return (uint32_t)key[i];
}

static uint32_t byte_at(const char *key, size_t i)
{
    return (uint32_t)(unsigned char)key[i];
}

static uint32_t rotl32(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32 - n));
}

/* Bob Jenkins' one-at-a-time hash: libmemcached's default. */
static uint32_t hash_one_at_a_time(const char *key, size_t len)
{
    uint32_t h = 0;
    for (size_t i = 0; i < len; i++) {
        h += char_widened(key, i);
        h += h << 10;
        h ^= h >> 6;
    }
    h += h << 3;
    h ^= h >> 11;
    h += h << 15;
    return h;
}

/* First four digest bytes read as a little-endian word. */
static uint32_t hash_md5(const char *key, size_t len)
{
    unsigned char digest[LMR_MD5_DIGEST_LEN];
    lmr_md5_digest(key, len, digest);
    return mcr_le_get32(digest);
}

/* CRC-32 (reflected polynomial 0xEDB88320), table built once. */
static uint32_t crc32_table[256];
static pthread_once_t crc32_table_once = PTHREAD_ONCE_INIT;

static void crc32_table_build(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int bit = 0; bit < 8; bit++)
            c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc32_table[n] = c;
    }
}

/* libmemcached's "CRC" hash: bits 16..30 of the CRC-32. */
static uint32_t hash_crc(const char *key, size_t len)
{
    pthread_once(&crc32_table_once, crc32_table_build);
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < len; i++)
        crc = (crc >> 8) ^ crc32_table[(crc ^ byte_at(key, i)) & 0xff];
    return ((~crc) >> 16) & 0x7fff;
}

enum {
    FNV32_OFFSET_BASIS = 2166136261u,
    FNV32_PRIME = 16777619u,
};
static const uint64_t fnv64_offset_basis = 0xcbf29ce484222325ull;
static const uint64_t fnv64_prime = 0x100000001b3ull;

static uint32_t hash_fnv1_64(const char *key, size_t len)
{
    uint64_t h = fnv64_offset_basis;
    for (size_t i = 0; i < len; i++) {
        h *= fnv64_prime;
        h ^= (uint64_t)key[i]; /* plain char widened to 64 bits, as libmemcached */
    }
    return (uint32_t)h;
}

/* libmemcached's FNV-1a "64" runs on the low 32 bits of the 64-bit constants. */
static uint32_t hash_fnv1a_64(const char *key, size_t len)
{
    uint32_t h = (uint32_t)fnv64_offset_basis;
    for (size_t i = 0; i < len; i++) {
        h ^= char_widened(key, i);
        h *= (uint32_t)fnv64_prime;
    }
    return h;
}

static uint32_t hash_fnv1_32(const char *key, size_t len)
{
    uint32_t h = FNV32_OFFSET_BASIS;
    for (size_t i = 0; i < len; i++) {
        h *= FNV32_PRIME;
        h ^= char_widened(key, i);
    }
    return h;
}

static uint32_t hash_fnv1a_32(const char *key, size_t len)
{
    uint32_t h = FNV32_OFFSET_BASIS;
    for (size_t i = 0; i < len; i++) {
        h ^= char_widened(key, i);
        h *= FNV32_PRIME;
    }
    return h;
}

/* Paul Hsieh's SuperFastHash, started from 0 rather than the key length (as
 * libmemcached does). */
static uint32_t hash_hsieh(const char *key, size_t len)
{
    if (len == 0)
        return 0;
    uint32_t h = 0;
    size_t blocks = len / 4;
    const char *p = key;
    for (size_t i = 0; i < blocks; i++, p += 4) {
        h += mcr_le_get16(p);
        uint32_t mixed = (mcr_le_get16(p + 2) << 11) ^ h;
        h = (h << 16) ^ mixed;
        h += h >> 11;
    }
    switch (len % 4) {
    case 3:
        h += mcr_le_get16(p);
        h ^= h << 16;
        h ^= char_widened(p, 2) << 18;
        h += h >> 11;
        break;
    case 2:
        h += mcr_le_get16(p);
        h ^= h << 11;
        h += h >> 17;
        break;
    case 1:
        h += byte_at(p, 0);
        h ^= h << 10;
        h += h >> 1;
        break;
    default:
        break;
    }
    h ^= h << 3;
    h += h >> 5;
    h ^= h << 4;
    h += h >> 17;
    h ^= h << 25;
    h += h >> 6;
    return h;
}

/* MurmurHash2 with libmemcached's seed (0xdeadbeef times the length). */
static uint32_t hash_murmur(const char *key, size_t len)
{
    const uint32_t m = 0x5bd1e995;
    const uint32_t seed = 0xdeadbeefu * (uint32_t)len;
    uint32_t h = seed ^ (uint32_t)len;
    const char *p = key;
    size_t left = len;
    for (; left >= 4; left -= 4, p += 4) {
        uint32_t k = mcr_le_get32(p);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (left) {
    case 3:
        h ^= byte_at(p, 2) << 16;
        /* fall through */
    case 2:
        h ^= byte_at(p, 1) << 8;
        /* fall through */
    case 1:
        h ^= byte_at(p, 0);
        h *= m;
        break;
    default:
        break;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* Bob Jenkins' lookup3 "hashlittle" with initval 13. */
#define JENKINS_MIX(a, b, c)                                                                       \
    do {                                                                                           \
        a -= c, a ^= rotl32(c, 4), c += b;                                                         \
        b -= a, b ^= rotl32(a, 6), a += c;                                                         \
        c -= b, c ^= rotl32(b, 8), b += a;                                                         \
        a -= c, a ^= rotl32(c, 16), c += b;                                                        \
        b -= a, b ^= rotl32(a, 19), a += c;                                                        \
        c -= b, c ^= rotl32(b, 4), b += a;                                                         \
    } while (0)

#define JENKINS_FINAL(a, b, c)                                                                     \
    do {                                                                                           \
        c ^= b, c -= rotl32(b, 14);                                                                \
        a ^= c, a -= rotl32(c, 11);                                                                \
        b ^= a, b -= rotl32(a, 25);                                                                \
        c ^= b, c -= rotl32(b, 16);                                                                \
        a ^= c, a -= rotl32(c, 4);                                                                 \
        b ^= a, b -= rotl32(a, 14);                                                                \
        c ^= b, c -= rotl32(b, 24);                                                                \
    } while (0)

/* Little-endian word of the n (0..4) bytes at p, missing bytes zero. */
static uint32_t load_partial_le32(const char *p, size_t n)
{
    uint32_t w = 0;
    for (size_t i = 0; i < n && i < 4; i++)
        w |= byte_at(p, i) << (8 * i);
    return w;
}

static uint32_t hash_jenkins(const char *key, size_t len)
{
    uint32_t a, b, c;
    a = b = c = 0xdeadbeefu + (uint32_t)len + 13u;
    const char *p = key;
    size_t left = len;
    while (left > 12) {
        a += mcr_le_get32(p);
        b += mcr_le_get32(p + 4);
        c += mcr_le_get32(p + 8);
        JENKINS_MIX(a, b, c);
        left -= 12;
        p += 12;
    }
    if (left == 0)
        return c;
    a += load_partial_le32(p, left);
    if (left > 4)
        b += load_partial_le32(p + 4, left - 4);
    if (left > 8)
        c += load_partial_le32(p + 8, left - 8);
    JENKINS_FINAL(a, b, c);
    return c;
}

/* MurmurHash3 x86_32 with libmemcached's seed (0xdeadbeef times the length). */
static uint32_t hash_murmur3(const char *key, size_t len)
{
    const uint32_t c1 = 0xcc9e2d51, c2 = 0x1b873593;
    uint32_t h = 0xdeadbeefu * (uint32_t)len;
    size_t blocks = len / 4;
    for (size_t i = 0; i < blocks; i++) {
        uint32_t k = mcr_le_get32(key + 4 * i);
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = rotl32(h, 13);
        h = h * 5 + 0xe6546b64;
    }
    const char *tail = key + 4 * blocks;
    size_t tail_len = len & 3;
    if (tail_len > 0) {
        uint32_t k = load_partial_le32(tail, tail_len);
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
    }
    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= 0x85ebca6b;
    h ^= h >> 13;
    h *= 0xc2b2ae35;
    h ^= h >> 16;
    return h;
}

uint32_t lmr_hash(enum lmr_hash_alg alg, const char *key, size_t len)
{
    switch (alg) {
    case LMR_HASH_MD5:
        return hash_md5(key, len);
    case LMR_HASH_CRC:
        return hash_crc(key, len);
    case LMR_HASH_FNV1_64:
        return hash_fnv1_64(key, len);
    case LMR_HASH_FNV1A_64:
        return hash_fnv1a_64(key, len);
    case LMR_HASH_FNV1_32:
        return hash_fnv1_32(key, len);
    case LMR_HASH_FNV1A_32:
        return hash_fnv1a_32(key, len);
    case LMR_HASH_HSIEH:
        return hash_hsieh(key, len);
    case LMR_HASH_MURMUR:
        return hash_murmur(key, len);
    case LMR_HASH_JENKINS:
        return hash_jenkins(key, len);
    case LMR_HASH_MURMUR3:
        return hash_murmur3(key, len);
    case LMR_HASH_DEFAULT:
    default:
        return hash_one_at_a_time(key, len);
    }
}
