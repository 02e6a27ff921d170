/* keyspace.c: how keys map to servers beyond the behaviors: hashkit
 * objects (memcached_get_hashkit / memcached_set_hashkit, a hash function
 * of the caller's) and virtual buckets (memcached_bucket_set). The
 * placement (placement.c) applies both; this file keeps them per client. */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "hash.h"

/* The built-in algorithms as hashkit functions: the context names one. */
static const enum lmr_hash_alg builtin_algorithms[] = {
    LMR_HASH_DEFAULT,  LMR_HASH_MD5,     LMR_HASH_CRC,      LMR_HASH_FNV1_64,
    LMR_HASH_FNV1A_64, LMR_HASH_FNV1_32, LMR_HASH_FNV1A_32, LMR_HASH_HSIEH,
    LMR_HASH_MURMUR,   LMR_HASH_JENKINS, LMR_HASH_MURMUR3,
};
#define BUILTIN_COUNT (sizeof(builtin_algorithms) / sizeof(builtin_algorithms[0]))

static uint32_t builtin_hash(const char *key, size_t key_length, void *context)
{
    return lmr_hash(*(const enum lmr_hash_alg *)context, key, key_length);
}

/* The built-in algorithm a hashkit function stands for, or -1. */
static int builtin_of(const struct hashkit_function_st *f)
{
    if (f->function != builtin_hash)
        return -1;
    for (size_t i = 0; i < BUILTIN_COUNT; i++)
        if (f->context == &builtin_algorithms[i])
            return (int)i;
    return -1;
}

const hashkit_st *memcached_get_hashkit(const memcached_st *ptr)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return NULL;
    hashkit_st *view = &c->hashkit_view;
    memset(view, 0, sizeof(*view));
    if (c->custom_hash != NULL) {
        view->base_hash.function = c->custom_hash;
        view->base_hash.context = c->custom_hash_context;
    } else {
        size_t alg = (size_t)c->behaviors.key_hash < BUILTIN_COUNT ? c->behaviors.key_hash : 0;
        view->base_hash.function = builtin_hash;
        view->base_hash.context = (void *)&builtin_algorithms[alg];
    }
    view->distribution_hash = view->base_hash;
    view->flags.is_base_same_distributed = true;
    return view;
}

memcached_return_t memcached_set_hashkit(memcached_st *ptr, hashkit_st *hashk)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    int builtin = hashk != NULL ? builtin_of(&hashk->base_hash) : (int)LMR_HASH_DEFAULT;
    if (builtin >= 0) {
        c->behaviors.key_hash = (memcached_hash_t)builtin;
        c->custom_hash = NULL;
        c->custom_hash_context = NULL;
    } else if (hashk->base_hash.function == NULL) {
        return lmr_client_result(c, MEMCACHED_INVALID_ARGUMENTS, "the hashkit has no function");
    } else {
        c->custom_hash = hashk->base_hash.function;
        c->custom_hash_context = hashk->base_hash.context;
    }
    c->placement_dirty = true;
    return lmr_client_result(c, MEMCACHED_SUCCESS, NULL);
}

/* A copy of n entries of map (NULL for NULL), *ok false on ENOMEM. */
static uint32_t *copy_map(const uint32_t *map, uint32_t n, bool *ok)
{
    if (map == NULL || n == 0)
        return NULL;
    uint32_t *copy = malloc(n * sizeof(*copy));
    if (copy == NULL)
        *ok = false;
    else
        memcpy(copy, map, n * sizeof(*copy));
    return copy;
}

memcached_return_t memcached_bucket_set(memcached_st *self, const uint32_t *host_map,
                                        const uint32_t *forward_map, const uint32_t buckets,
                                        const uint32_t replicas)
{
    struct lmr_client *c = lmr_client_of(self);
    if (c == NULL || host_map == NULL || buckets == 0)
        return MEMCACHED_INVALID_ARGUMENTS;
    bool ok = true;
    uint32_t *hosts = copy_map(host_map, buckets, &ok);
    uint32_t *forward = copy_map(forward_map, buckets, &ok);
    if (!ok) {
        free(forward);
        free(hosts);
        return lmr_client_result(c, MEMCACHED_MEMORY_ALLOCATION_FAILURE, NULL);
    }
    lmr_keyspace_release(c);
    c->bucket_hosts = hosts;
    c->bucket_forward = forward;
    c->bucket_count = buckets;
    c->bucket_replicas = replicas;
    return memcached_behavior_set(self, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                  MEMCACHED_DISTRIBUTION_VIRTUAL_BUCKET);
}

bool lmr_keyspace_copy(struct lmr_client *dst, const struct lmr_client *src)
{
    dst->custom_hash = src->custom_hash;
    dst->custom_hash_context = src->custom_hash_context;
    bool ok = true;
    dst->bucket_hosts = copy_map(src->bucket_hosts, src->bucket_count, &ok);
    dst->bucket_forward = copy_map(src->bucket_forward, src->bucket_count, &ok);
    dst->bucket_count = ok ? src->bucket_count : 0;
    dst->bucket_replicas = src->bucket_replicas;
    return ok;
}

void lmr_keyspace_release(struct lmr_client *c)
{
    free(c->bucket_forward);
    c->bucket_forward = NULL;
    free(c->bucket_hosts);
    c->bucket_hosts = NULL;
    c->bucket_count = 0;
    c->bucket_replicas = 0;
}
