/* placement.c: which server owns a key, computed exactly as libmemcached does
 * for the same server list, distribution and hash settings.
 *
 * Modula: key hash modulo the server count. Consistent distributions build a
 * ketama continuum: a sorted ring of 32-bit points, each tagged with a server
 * index; a key goes to the first point at or after its hash (wrapping to the
 * start). Points come from names "host:port-N" ("host-N" when the port is
 * 11211, "/host:port-N" for the SPY variant):
 *   - unweighted: 100 names per server, each hashed with point_hash (the key
 *     hash when the caller last rebuilt, in libmemcached's terms);
 *   - weighted: 160 * weight share * server count points per server (rounded
 *     down to a multiple of 4, in single precision as libmemcached does), four
 *     points per name taken from the four little-endian words of its MD5.
 * Virtual buckets mask the hash with the bucket count - 1 and take the
 * server from memcached_bucket_set's table; without a table they mask it
 * with n - 1, as libmemcached does; RANDOM uses random(). A single
 * server takes every key without hashing. This file must not know
 * about connections, liveness or retries: the caller rebuilds the placement
 * when its server list changes. */
#include "placement.h"
#include "hash_md5.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcr/byteorder.h"
enum {
    DIST_MODULA = 0,
    DIST_CONSISTENT = 1,
    DIST_CONSISTENT_KETAMA = 2,
    DIST_RANDOM = 3,
    DIST_CONSISTENT_KETAMA_SPY = 4,
    DIST_CONSISTENT_WEIGHTED = 5,
    DIST_VIRTUAL_BUCKET = 6,
};

enum {
    POINTS_PER_SERVER = 100,          /* unweighted continuum */
    POINTS_PER_SERVER_WEIGHTED = 160, /* weighted continuum, at equal weights */
    POINTS_PER_MD5 = 4,               /* weighted: points taken from one digest */
    DEFAULT_PORT = 11211,             /* left out of point names */
};

struct continuum_point {
    uint32_t value;
    uint32_t server;
};

struct lmr_placement {
    int distribution;
    enum lmr_hash_alg key_hash;
    uint32_t (*custom_hash)(const char *key, size_t len, void *context);
    void *custom_context;
    uint32_t *buckets; /* copy of the bucket table, or NULL */
    uint32_t bucket_count;
    uint32_t server_count;
    bool consistent;
    uint32_t point_count;
    struct continuum_point *points; /* sorted by value, then server */
};

static bool is_consistent(int distribution)
{
    return distribution == DIST_CONSISTENT || distribution == DIST_CONSISTENT_KETAMA ||
           distribution == DIST_CONSISTENT_KETAMA_SPY || distribution == DIST_CONSISTENT_WEIGHTED;
}

static const char *host_of(const struct lmr_placement_server *s)
{
    return s->hostname ? s->hostname : "";
}

static uint32_t effective_weight(const struct lmr_placement_server *s)
{
    return s->weight ? s->weight : 1;
}

/* Points a server gets on a weighted continuum. The float arithmetic is
 * deliberate: it reproduces libmemcached's rounding (equal weights can give
 * 156 points rather than 160). */
static uint32_t weighted_points(uint32_t weight, uint64_t total_weight, size_t server_count)
{
    float share = (float)weight / (float)total_weight;
    float quarter_points =
        share * (float)POINTS_PER_SERVER_WEIGHTED / (float)POINTS_PER_MD5 * (float)server_count +
        0.0000000001f;
    /* quarter_points >= 0, so truncation is floor */
    return (uint32_t)quarter_points * POINTS_PER_MD5;
}

static int point_name(char *buf, size_t size, int distribution,
                      const struct lmr_placement_server *s, uint32_t index)
{
    if (distribution == DIST_CONSISTENT_KETAMA_SPY)
        return snprintf(buf, size, "/%s:%u-%u", host_of(s), s->port, index);
    if (s->port == DEFAULT_PORT)
        return snprintf(buf, size, "%s-%u", host_of(s), index);
    return snprintf(buf, size, "%s:%u-%u", host_of(s), s->port, index);
}

static int compare_points(const void *a, const void *b)
{
    const struct continuum_point *pa = a, *pb = b;
    if (pa->value != pb->value)
        return pa->value < pb->value ? -1 : 1;
    if (pa->server != pb->server)
        return pa->server < pb->server ? -1 : 1;
    return 0;
}

/* The hash that places key: the caller's function, else the algorithm. */
static uint32_t hash_of(uint32_t (*custom)(const char *, size_t, void *), void *context,
                        enum lmr_hash_alg alg, const char *key, size_t len)
{
    return custom ? custom(key, len, context) : lmr_hash(alg, key, len);
}

/* Fills p->points; returns false on ENOMEM. */
static bool build_continuum(struct lmr_placement *p, const struct lmr_placement_config *cfg,
                            const struct lmr_placement_server *servers, size_t n)
{
    bool weighted = cfg->ketama_weighted || cfg->distribution == DIST_CONSISTENT_WEIGHTED;
    uint64_t total_weight = 0;
    size_t longest_host = 0;
    for (size_t i = 0; i < n; i++) {
        total_weight += effective_weight(&servers[i]);
        size_t host_len = strlen(host_of(&servers[i]));
        if (host_len > longest_host)
            longest_host = host_len;
    }

    uint32_t *server_points = calloc(n, sizeof(*server_points));
    if (server_points == NULL)
        return false;
    size_t total_points = 0;
    for (size_t i = 0; i < n; i++) {
        server_points[i] = weighted
                               ? weighted_points(effective_weight(&servers[i]), total_weight, n)
                               : POINTS_PER_SERVER;
        total_points += server_points[i];
    }

    /* "/" host ":" port "-" index and the terminator */
    size_t name_size = longest_host + 32;
    char *name = malloc(name_size);
    p->points = malloc((total_points ? total_points : 1) * sizeof(*p->points));
    if (name == NULL || p->points == NULL) {
        free(p->points);
        p->points = NULL;
        free(name);
        free(server_points);
        return false;
    }

    size_t next = 0;
    uint32_t points_per_name = weighted ? POINTS_PER_MD5 : 1;
    for (size_t i = 0; i < n; i++) {
        for (uint32_t index = 0; index < server_points[i] / points_per_name; index++) {
            int len = point_name(name, name_size, cfg->distribution, &servers[i], index);
            if (weighted) {
                unsigned char digest[LMR_MD5_DIGEST_LEN];
                lmr_md5_digest(name, (size_t)len, digest);
                for (uint32_t word = 0; word < POINTS_PER_MD5; word++) {
                    p->points[next].value = mcr_le_get32(digest + 4 * word);
                    p->points[next++].server = (uint32_t)i;
                }
            } else {
                p->points[next].value = hash_of(cfg->custom_hash, cfg->custom_context,
                                                cfg->point_hash, name, (size_t)len);
                p->points[next++].server = (uint32_t)i;
            }
        }
    }
    p->point_count = (uint32_t)next;
    qsort(p->points, next, sizeof(*p->points), compare_points);

    free(name);
    free(server_points);
    return true;
}

struct lmr_placement *lmr_placement_build(const struct lmr_placement_config *cfg,
                                          const struct lmr_placement_server *servers, size_t n)
{
    struct lmr_placement *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->distribution = cfg->distribution;
    p->key_hash = cfg->key_hash;
    p->custom_hash = cfg->custom_hash;
    p->custom_context = cfg->custom_context;
    if (cfg->buckets != NULL && cfg->bucket_count > 0) {
        p->buckets = malloc(cfg->bucket_count * sizeof(*p->buckets));
        if (p->buckets == NULL) {
            free(p);
            return NULL;
        }
        memcpy(p->buckets, cfg->buckets, cfg->bucket_count * sizeof(*p->buckets));
        p->bucket_count = cfg->bucket_count;
    }
    p->server_count = (uint32_t)n;
    p->consistent = is_consistent(cfg->distribution);
    if (p->consistent && n > 1 && !build_continuum(p, cfg, servers, n)) {
        free(p->buckets);
        free(p);
        return NULL;
    }
    return p;
}

/* Index of the first point at or after hash (wrapping). */
static uint32_t continuum_position(const struct lmr_placement *p, uint32_t hash)
{
    /* first point whose value is >= hash */
    uint32_t lo = 0, hi = p->point_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->points[mid].value < hash)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == p->point_count ? 0 : lo;
}

static uint32_t continuum_lookup(const struct lmr_placement *p, uint32_t hash)
{
    if (p->point_count == 0)
        return 0;
    return p->points[continuum_position(p, hash)].server;
}

uint32_t lmr_placement_pick(const struct lmr_placement *p, const char *key, size_t len)
{
    if (p->server_count <= 1)
        return 0;
    if (p->distribution == DIST_RANDOM)
        return (uint32_t)random() % p->server_count;
    uint32_t hash = hash_of(p->custom_hash, p->custom_context, p->key_hash, key, len);
    if (p->consistent)
        return continuum_lookup(p, hash);
    if (p->distribution == DIST_VIRTUAL_BUCKET && p->buckets != NULL)
        return p->buckets[hash & (p->bucket_count - 1)] % p->server_count;
    if (p->distribution == DIST_VIRTUAL_BUCKET)
        return hash & (p->server_count - 1); /* libmemcached without a bucket table */
    return hash % p->server_count;
}

void lmr_placement_pick_distinct(const struct lmr_placement *p, const char *key, size_t len,
                                 uint32_t n, uint32_t *out)
{
    uint32_t count = p->server_count;
    if (n > count)
        n = count;
    if (n == 0)
        return;
    uint32_t hash =
        count > 1 ? hash_of(p->custom_hash, p->custom_context, p->key_hash, key, len) : 0;
    uint32_t found = 0;
    if (p->consistent && p->point_count > 0) {
        uint32_t at = continuum_position(p, hash);
        for (uint32_t step = 0; step < p->point_count && found < n; step++) {
            uint32_t server = p->points[(at + step) % p->point_count].server;
            bool seen = false;
            for (uint32_t i = 0; i < found && !seen; i++)
                seen = out[i] == server;
            if (!seen)
                out[found++] = server;
        }
    }
    /* modula, or servers without points on the continuum (weight 0) */
    uint32_t start = count > 1 ? hash % count : 0;
    for (uint32_t step = 0; step < count && found < n; step++) {
        uint32_t server = (start + step) % count;
        bool seen = false;
        for (uint32_t i = 0; i < found && !seen; i++)
            seen = out[i] == server;
        if (!seen)
            out[found++] = server;
    }
}

void lmr_placement_free(struct lmr_placement *p)
{
    if (p == NULL)
        return;
    free(p->points);
    free(p->buckets);
    free(p);
}
