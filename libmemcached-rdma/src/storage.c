/* storage.c: the blocking storage calls (set, add, replace, append,
 * prepend, cas and their _by_key forms): argument checks, the value
 * encrypted under memcached_set_encoding_key's key, then one request
 * through ops.c. */
#include <stdlib.h>

#include <libmemcached/memcached.h>

#include "cipher.h"
#include "ops.h"

static memcached_return_t store(memcached_st *ptr, enum lmr_store_verb verb, const char *group_key,
                                size_t group_key_length, const char *key, size_t key_length,
                                const char *value, size_t value_length, time_t expiration,
                                uint32_t flags, uint64_t cas)
{
    if (lmr_client_of(ptr) == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    struct lmr_client *c = lmr_client_of(ptr);
    if (value == NULL && value_length > 0)
        return lmr_client_result(c, MEMCACHED_INVALID_ARGUMENTS, NULL);
    char *encrypted = NULL;
    if (c->cipher != NULL) {
        /* a suffix or prefix cannot join a value encrypted as a whole */
        if (verb == LMR_APPEND || verb == LMR_PREPEND)
            return lmr_client_result(c, MEMCACHED_NOT_SUPPORTED,
                                     "append and prepend cannot encrypt (encoding key set)");
        if (!lmr_cipher_encrypt(c->cipher, value, value_length, &encrypted, &value_length))
            return lmr_client_result(c, MEMCACHED_MEMORY_ALLOCATION_FAILURE,
                                     "the value could not be encrypted");
        value = encrypted;
    }
    struct lmr_op_args args = {
        .key = key,
        .key_length = key_length,
        .value = value,
        .value_length = value_length,
        .expiration = expiration,
        .flags = flags,
        .cas = cas,
        .verb = verb,
    };
    memcached_request_st req;
    lmr_request_init(&req);
    memcached_return_t rc =
        lmr_op_blocking(ptr, &req, LMR_OP_STORE, group_key, group_key_length, &args);
    lmr_request_release(&req);
    free(encrypted);
    return rc;
}

#define STORE_CALLS(name, verb)                                                                    \
    memcached_return_t memcached_##name(memcached_st *ptr, const char *key, size_t key_length,     \
                                        const char *value, size_t value_length, time_t expiration, \
                                        uint32_t flags)                                            \
    {                                                                                              \
        return store(ptr, verb, NULL, 0, key, key_length, value, value_length, expiration, flags,  \
                     0);                                                                           \
    }                                                                                              \
    memcached_return_t memcached_##name##_by_key(                                                  \
        memcached_st *ptr, const char *group_key, size_t group_key_length, const char *key,        \
        size_t key_length, const char *value, size_t value_length, time_t expiration,              \
        uint32_t flags)                                                                            \
    {                                                                                              \
        return store(ptr, verb, group_key, group_key_length, key, key_length, value, value_length, \
                     expiration, flags, 0);                                                        \
    }

STORE_CALLS(set, LMR_SET)
STORE_CALLS(add, LMR_ADD)
STORE_CALLS(replace, LMR_REPLACE)
STORE_CALLS(append, LMR_APPEND)
STORE_CALLS(prepend, LMR_PREPEND)

memcached_return_t memcached_cas(memcached_st *ptr, const char *key, size_t key_length,
                                 const char *value, size_t value_length, time_t expiration,
                                 uint32_t flags, uint64_t cas)
{
    return store(ptr, LMR_CAS, NULL, 0, key, key_length, value, value_length, expiration, flags,
                 cas);
}

memcached_return_t memcached_cas_by_key(memcached_st *ptr, const char *group_key,
                                        size_t group_key_length, const char *key, size_t key_length,
                                        const char *value, size_t value_length, time_t expiration,
                                        uint32_t flags, uint64_t cas)
{
    return store(ptr, LMR_CAS, group_key, group_key_length, key, key_length, value, value_length,
                 expiration, flags, cas);
}
