/* placement.h: server selection for libmemcached-rdma: which server of a list
 * a key belongs to, for every memcached_server_distribution_t, exactly as
 * libmemcached 1.0.18 chooses. It owns the modula rule and the ketama
 * continuum; it must not know about connections, liveness or I/O. */
#ifndef LMR_PLACEMENT_H
#define LMR_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"

/* One server as the placement sees it. Unix sockets: hostname = path, port 0. */
struct lmr_placement_server {
    const char *hostname;
    unsigned port;
    uint32_t weight;
};

struct lmr_placement_config {
    /* memcached_server_distribution_t value: MODULA=0, CONSISTENT=1,
     * CONSISTENT_KETAMA=2, RANDOM=3, CONSISTENT_KETAMA_SPY=4,
     * CONSISTENT_WEIGHTED=5, VIRTUAL_BUCKET=6 */
    int distribution;
    enum lmr_hash_alg key_hash;    /* MEMCACHED_BEHAVIOR_HASH */
    enum lmr_hash_alg point_hash;  /* hashes the names of unweighted continuum
                                      points: libmemcached uses the key hash as
                                      it was when the continuum was last built
                                      (adding servers, choosing a distribution),
                                      so it can differ from key_hash */
    enum lmr_hash_alg ketama_hash; /* MEMCACHED_BEHAVIOR_KETAMA_HASH: libmemcached
                                      stores it but places keys without it, so
                                      it is accepted and ignored */
    bool ketama_weighted;          /* weighted continuum (always for CONSISTENT_WEIGHTED) */
    /* memcached_set_hashkit with a function of the caller's: it hashes keys
     * and unweighted continuum points in place of key_hash and point_hash
     * (NULL: the algorithms above) */
    uint32_t (*custom_hash)(const char *key, size_t len, void *context);
    void *custom_context;
    /* VIRTUAL_BUCKET with memcached_bucket_set's table: key hash masked by
     * bucket_count - 1 picks an entry, the entry the server (taken modulo
     * the server count); none: the hash masked by n - 1 */
    const uint32_t *buckets;
    uint32_t bucket_count;
};

struct lmr_placement;

/* Builds the placement for servers[0..n). servers is only read during the
 * call (nothing is kept). Returns NULL on ENOMEM. */
struct lmr_placement *lmr_placement_build(const struct lmr_placement_config *cfg,
                                          const struct lmr_placement_server *servers, size_t n);

/* Index in [0,n) of the server that owns key[0..len) (0 when n is 0). */
uint32_t lmr_placement_pick(const struct lmr_placement *p, const char *key, size_t len);

/* The first n distinct servers for key (n <= server count) into out[0..n):
 * the owner, then the servers of the next continuum points (consistent
 * distributions) or the next indices (modula, and in place of RANDOM and
 * virtual buckets, whose owner is not a function of the key). */
void lmr_placement_pick_distinct(const struct lmr_placement *p, const char *key, size_t len,
                                 uint32_t n, uint32_t *out);

void lmr_placement_free(struct lmr_placement *p);

#endif
