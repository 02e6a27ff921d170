/* t/test_placement.c: unit tests (TAP) for libmemcached-rdma's key hashes and
 * server selection: known-answer vectors for every hash (RFC 1321 for MD5,
 * libmemcached's published values for the others) and the properties the
 * placement must keep (range, single server, modula rule, ketama stability
 * and weighting, continuum points hashed with point_hash). Exact agreement
 * with Debian's libmemcached over thousands of keys is
 * t/test_placement_compat's job. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libmemcached-rdma/src/hash_md5.h"
#include "libmemcached-rdma/src/placement.h"
#include "t/rdma/tap.h"

static void test_md5_rfc1321(void)
{
    static const struct {
        const char *input, *hex;
    } vectors[] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "d174ab98d277d9f5a5611c2c9f419d9f"},
        {"1234567890123456789012345678901234567890123456789012345678901234567890123456789"
         "0",
         "57edf4a22be3c955ac49da2e2107b67a"},
    };
    for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        unsigned char digest[LMR_MD5_DIGEST_LEN];
        char hex[2 * LMR_MD5_DIGEST_LEN + 1];
        lmr_md5_digest(vectors[i].input, strlen(vectors[i].input), digest);
        for (int b = 0; b < LMR_MD5_DIGEST_LEN; b++)
            snprintf(hex + 2 * b, 3, "%02x", digest[b]);
        tap_ok(strcmp(hex, vectors[i].hex) == 0, "md5 RFC 1321 vector \"%.20s\"", vectors[i].input);
    }
    /* runs of 'x' across the padding boundaries (one or two final blocks) */
    static const struct {
        size_t len;
        const char *hex;
    } runs[] = {
        {55, "04364420e25c512fd958a70738aa8f72"},  {56, "668a72d5ba17f08e62dabcafad6db14b"},
        {63, "7dc2ca208106a2f703567bdff99d8981"},  {64, "c1bb4f81d892b2d57947682aeb252456"},
        {65, "1bc932052302d074bdec39795fe00cf6"},  {119, "ab347a5f68c8a443cfcddc633f12c24f"},
        {120, "fb98667f98096de92620b64f46e1c5b5"},
    };
    char xs[128];
    memset(xs, 'x', sizeof(xs));
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        unsigned char digest[LMR_MD5_DIGEST_LEN];
        char hex[2 * LMR_MD5_DIGEST_LEN + 1];
        lmr_md5_digest(xs, runs[i].len, digest);
        for (int b = 0; b < LMR_MD5_DIGEST_LEN; b++)
            snprintf(hex + 2 * b, 3, "%02x", digest[b]);
        tap_ok(strcmp(hex, runs[i].hex) == 0, "md5 of %zu bytes (padding boundary)", runs[i].len);
    }
}

/* Known answers for three keys under every algorithm (libmemcached's values). */
static void test_hash_vectors(void)
{
    static const char *keys[] = {"apple", "mushrooms",
                                 "The quick brown fox jumps over the lazy dog"};
    static const struct {
        enum lmr_hash_alg alg;
        const char *name;
        uint32_t expect[3];
    } vectors[] = {
        {LMR_HASH_DEFAULT, "one-at-a-time", {2297466611u, 384136800u, 1369346549u}},
        {LMR_HASH_MD5, "md5", {3195025439u, 1451250070u, 2642219166u}},
        {LMR_HASH_CRC, "crc", {10542u, 11313u, 16719u}},
        {LMR_HASH_FNV1_64, "fnv1_64", {473199127u, 2345265314u, 2112060110u}},
        {LMR_HASH_FNV1A_64, "fnv1a_64", {1488911807u, 561034892u, 3890508048u}},
        {LMR_HASH_FNV1_32, "fnv1_32", {67176023u, 510234242u, 3922226286u}},
        {LMR_HASH_FNV1A_32, "fnv1a_32", {280767167u, 3654473228u, 76545936u}},
        {LMR_HASH_HSIEH, "hsieh", {3738850110u, 2265380744u, 471461527u}},
        {LMR_HASH_MURMUR, "murmur", {4142305122u, 2321988328u, 818385189u}},
        {LMR_HASH_JENKINS, "jenkins", {1442444624u, 2415988847u, 314054204u}},
        {LMR_HASH_MURMUR3, "murmur3", {1120212521u, 732888124u, 2603515018u}},
    };
    for (size_t v = 0; v < sizeof(vectors) / sizeof(vectors[0]); v++) {
        int all = 1;
        for (int k = 0; k < 3; k++) {
            uint32_t got = lmr_hash(vectors[v].alg, keys[k], strlen(keys[k]));
            if (got != vectors[v].expect[k]) {
                printf("# %s(\"%s\") = %u, expected %u\n", vectors[v].name, keys[k], got,
                       vectors[v].expect[k]);
                all = 0;
            }
        }
        tap_ok(all, "hash %s known answers", vectors[v].name);
    }
    /* Hsieh is absent from Debian's libmemcached, so the comparison test
     * cannot cover it: known answers for every tail length (len % 4). */
    static const struct {
        const char *key;
        uint32_t expect;
    } hsieh[] = {
        {"beat", 3636226060u}, {"apple", 3738850110u}, {"carrot", 3821074029u},
        {"ick", 409795758u},   {"up", 2777873870u},    {"strawberry", 4220749037u},
    };
    int hsieh_ok = 1;
    for (size_t i = 0; i < sizeof(hsieh) / sizeof(hsieh[0]); i++)
        if (lmr_hash(LMR_HASH_HSIEH, hsieh[i].key, strlen(hsieh[i].key)) != hsieh[i].expect)
            hsieh_ok = 0;
    tap_ok(hsieh_ok && lmr_hash(LMR_HASH_HSIEH, "", 0) == 0,
           "hsieh known answers, every tail length");
    tap_ok(lmr_hash((enum lmr_hash_alg)99, "apple", 5) == lmr_hash(LMR_HASH_DEFAULT, "apple", 5),
           "unknown algorithm hashes as default");
    /* Jenkins reads keys in 12-byte blocks: every length up to 40 must be
     * stable whatever the alignment of the buffer. */
    char buf[64];
    int stable = 1;
    for (size_t len = 0; len <= 40; len++)
        for (size_t off = 1; off < 4; off++) {
            memset(buf, 0, sizeof(buf));
            memcpy(buf + off, "0123456789abcdefghijklmnopqrstuvwxyz!@#$", len);
            if (lmr_hash(LMR_HASH_JENKINS, buf + off, len) !=
                lmr_hash(LMR_HASH_JENKINS, "0123456789abcdefghijklmnopqrstuvwxyz!@#$", len))
                stable = 0;
        }
    tap_ok(stable, "jenkins does not depend on buffer alignment");
}

static struct lmr_placement *build(int dist, enum lmr_hash_alg hash, bool weighted,
                                   const struct lmr_placement_server *servers, size_t n)
{
    struct lmr_placement_config cfg = {.distribution = dist,
                                       .key_hash = hash,
                                       .point_hash = hash,
                                       .ketama_hash = LMR_HASH_MD5,
                                       .ketama_weighted = weighted};
    struct lmr_placement *p = lmr_placement_build(&cfg, servers, n);
    if (p == NULL) {
        printf("Bail out! lmr_placement_build returned NULL\n");
        exit(1);
    }
    return p;
}

static char key_buf[64];
static size_t key_of(unsigned i)
{
    return (size_t)snprintf(key_buf, sizeof(key_buf), "key:%u:%u", i, i * 2654435761u);
}

static void test_placement_basics(void)
{
    static const struct lmr_placement_server servers[] = {
        {"10.0.0.1", 11211, 1}, {"10.0.0.2", 11211, 1},     {"10.0.0.3", 11212, 1},
        {"10.0.0.4", 11211, 1}, {"/var/run/mc.sock", 0, 1},
    };
    const size_t n = sizeof(servers) / sizeof(servers[0]);
    static const int dists[] = {0, 1, 2, 3, 4, 5};
    for (size_t d = 0; d < sizeof(dists) / sizeof(dists[0]); d++) {
        struct lmr_placement *p = build(dists[d], LMR_HASH_DEFAULT, false, servers, n);
        int in_range = 1;
        unsigned seen = 0;
        for (unsigned i = 0; i < 2000; i++) {
            uint32_t s = lmr_placement_pick(p, key_buf, key_of(i));
            if (s >= n)
                in_range = 0;
            else
                seen |= 1u << s;
        }
        tap_ok(in_range && seen == (1u << n) - 1,
               "distribution %d: picks stay in range and reach every server", dists[d]);
        lmr_placement_free(p);
    }

    struct lmr_placement *one = build(2, LMR_HASH_MD5, false, servers, 1);
    struct lmr_placement *none = build(0, LMR_HASH_MD5, false, servers, 0);
    int zero = 1;
    for (unsigned i = 0; i < 200; i++)
        if (lmr_placement_pick(one, key_buf, key_of(i)) != 0 ||
            lmr_placement_pick(none, key_buf, key_of(i)) != 0)
            zero = 0;
    tap_ok(zero, "one server (or none) takes every key");
    lmr_placement_free(one);
    lmr_placement_free(none);
    lmr_placement_free(NULL);

    struct lmr_placement *modula = build(0, LMR_HASH_FNV1A_32, false, servers, n);
    int rule = 1;
    for (unsigned i = 0; i < 2000; i++) {
        size_t len = key_of(i);
        if (lmr_placement_pick(modula, key_buf, len) !=
            lmr_hash(LMR_HASH_FNV1A_32, key_buf, len) % n)
            rule = 0;
    }
    tap_ok(rule, "modula picks hash %% server count");
    lmr_placement_free(modula);

    struct lmr_placement *buckets = build(6, LMR_HASH_CRC, false, servers, n);
    rule = 1;
    for (unsigned i = 0; i < 2000; i++) {
        size_t len = key_of(i);
        if (lmr_placement_pick(buckets, key_buf, len) !=
            (lmr_hash(LMR_HASH_CRC, key_buf, len) & (n - 1)))
            rule = 0;
    }
    tap_ok(rule, "virtual buckets without a table pick hash & (n - 1)");
    lmr_placement_free(buckets);
}

/* Ketama: adding a server moves only keys that now belong to it, about 1/n. */
static void test_ketama_stability(void)
{
    struct lmr_placement_server servers[9];
    char names[9][32];
    for (int i = 0; i < 9; i++) {
        snprintf(names[i], sizeof(names[i]), "192.168.7.%d", i + 1);
        servers[i] = (struct lmr_placement_server){names[i], 11211, 1};
    }
    static const int dists[] = {1, 2, 4, 5};
    for (size_t d = 0; d < sizeof(dists) / sizeof(dists[0]); d++) {
        struct lmr_placement *before = build(dists[d], LMR_HASH_MD5, false, servers, 8);
        struct lmr_placement *after = build(dists[d], LMR_HASH_MD5, false, servers, 9);
        const unsigned keys = 20000;
        unsigned moved = 0, moved_elsewhere = 0;
        for (unsigned i = 0; i < keys; i++) {
            size_t len = key_of(i);
            uint32_t a = lmr_placement_pick(before, key_buf, len);
            uint32_t b = lmr_placement_pick(after, key_buf, len);
            if (a != b) {
                moved++;
                if (b != 8)
                    moved_elsewhere++;
            }
        }
        printf("# distribution %d: %u of %u keys moved to the new server\n", dists[d], moved, keys);
        tap_ok(moved_elsewhere == 0 && moved > keys / 9 / 2 && moved < keys / 9 * 2,
               "distribution %d: adding a 9th server moves about 1/9 of keys, all to it", dists[d]);
        lmr_placement_free(before);
        lmr_placement_free(after);
    }
}

/* The owner of hash h on an unweighted continuum, found the slow way: the
 * point with the smallest value >= h (lowest server on a tie), else the
 * smallest point. Points are "host:port-i" (or "host-i" on port 11211). */
static uint32_t brute_force_owner(const struct lmr_placement_server *servers, size_t n,
                                  enum lmr_hash_alg point_hash, uint32_t h)
{
    uint32_t best = 0, best_value = 0, low = 0, low_value = UINT32_MAX;
    int found = 0;
    for (uint32_t s = 0; s < n; s++)
        for (unsigned i = 0; i < 100; i++) {
            char name[96];
            int len = servers[s].port == 11211
                          ? snprintf(name, sizeof(name), "%s-%u", servers[s].hostname, i)
                          : snprintf(name, sizeof(name), "%s:%u-%u", servers[s].hostname,
                                     servers[s].port, i);
            uint32_t v = lmr_hash(point_hash, name, (size_t)len);
            if (v >= h && (!found || v < best_value)) {
                found = 1;
                best = s;
                best_value = v;
            }
            if (v < low_value) {
                low = s;
                low_value = v;
            }
        }
    return found ? best : low;
}

/* point_hash names the continuum's points; key_hash still hashes keys. */
static void test_point_hash(void)
{
    static const struct lmr_placement_server servers[] = {
        {"10.2.0.1", 11211, 1},
        {"10.2.0.2", 11300, 1},
        {"cache.example", 11211, 1},
    };
    struct lmr_placement_config cfg = {.distribution = 2,
                                       .key_hash = LMR_HASH_MD5,
                                       .point_hash = LMR_HASH_DEFAULT,
                                       .ketama_hash = LMR_HASH_DEFAULT};
    struct lmr_placement *mixed = lmr_placement_build(&cfg, servers, 3);
    cfg.point_hash = LMR_HASH_MD5;
    struct lmr_placement *same = lmr_placement_build(&cfg, servers, 3);
    if (mixed == NULL || same == NULL) {
        printf("Bail out! lmr_placement_build returned NULL\n");
        exit(1);
    }
    int agree = 1;
    unsigned differ = 0;
    for (unsigned i = 0; i < 3000; i++) {
        size_t len = key_of(i);
        uint32_t h = lmr_hash(LMR_HASH_MD5, key_buf, len);
        uint32_t got = lmr_placement_pick(mixed, key_buf, len);
        if (got != brute_force_owner(servers, 3, LMR_HASH_DEFAULT, h))
            agree = 0;
        differ += got != lmr_placement_pick(same, key_buf, len);
    }
    tap_ok(agree, "unweighted points hashed with point_hash, keys with key_hash");
    printf("# %u of 3000 keys move when point_hash changes\n", differ);
    tap_ok(differ > 3000 / 3, "point_hash changes the placement");
    lmr_placement_free(mixed);
    lmr_placement_free(same);

    /* weighted points come from MD5 whatever point_hash says */
    cfg.distribution = 5;
    cfg.ketama_weighted = true;
    cfg.point_hash = LMR_HASH_CRC;
    struct lmr_placement *w1 = lmr_placement_build(&cfg, servers, 3);
    cfg.point_hash = LMR_HASH_MURMUR;
    struct lmr_placement *w2 = lmr_placement_build(&cfg, servers, 3);
    if (w1 == NULL || w2 == NULL) {
        printf("Bail out! lmr_placement_build returned NULL\n");
        exit(1);
    }
    int weighted_same = 1;
    for (unsigned i = 0; i < 3000; i++) {
        size_t len = key_of(i);
        if (lmr_placement_pick(w1, key_buf, len) != lmr_placement_pick(w2, key_buf, len))
            weighted_same = 0;
    }
    tap_ok(weighted_same, "a weighted continuum ignores point_hash");
    lmr_placement_free(w1);
    lmr_placement_free(w2);
}

/* Weighted ketama: a server's share of keys follows its weight. */
static void test_ketama_weights(void)
{
    static const struct lmr_placement_server servers[] = {
        {"10.1.0.1", 11211, 1},
        {"10.1.0.2", 11211, 2},
        {"10.1.0.3", 11211, 5},
    };
    struct lmr_placement *p = build(5, LMR_HASH_MD5, true, servers, 3);
    unsigned counts[3] = {0, 0, 0};
    const unsigned keys = 40000;
    for (unsigned i = 0; i < keys; i++)
        counts[lmr_placement_pick(p, key_buf, key_of(i))]++;
    printf("# weights 1:2:5 got %u:%u:%u of %u keys\n", counts[0], counts[1], counts[2], keys);
    double share0 = (double)counts[0] / keys, share2 = (double)counts[2] / keys;
    tap_ok(share0 > 0.125 * 0.6 && share0 < 0.125 * 1.4 && share2 > 0.625 * 0.8 &&
               share2 < 0.625 * 1.2,
           "weighted ketama: key shares follow weights 1:2:5");
    lmr_placement_free(p);
}

int main(void)
{
    test_md5_rfc1321();
    test_hash_vectors();
    test_placement_basics();
    test_ketama_stability();
    test_ketama_weights();
    test_point_hash();
    tap_no_plan_end();
    return tap_exit_status();
}
