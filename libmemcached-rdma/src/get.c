/* get.c: retrieval: memcached_get (with replica fallback), mget (one
 * request per server carrying all its keys), and draining the results with
 * memcached_fetch_result / memcached_fetch / memcached_fetch_execute. */
#include <stdlib.h>
#include <string.h>

#include <libmemcached/memcached.h>

#include "cipher.h"
#include "io.h"
#include "ops.h"
#include "resilience.h"

/* Under memcached_set_encoding_key, replaces *value (malloc'd, *length
 * bytes) with its decryption; false (value untouched) when it is no
 * ciphertext of the key. Empty values stay empty, as in libmemcached. */
static bool decrypt_value(const struct lmr_client *c, char **value, size_t *length)
{
    if (c->cipher == NULL || *length == 0)
        return true;
    char *plain;
    size_t plain_length;
    if (!lmr_cipher_decrypt(c->cipher, *value, *length, &plain, &plain_length))
        return false;
    free(*value);
    *value = plain;
    *length = plain_length;
    return true;
}

#define DECRYPT_FAILED "the value is no ciphertext of the encoding key"

#define LMR_MGET_CHUNK 100

static void set_outputs(size_t *value_length, uint32_t *flags, size_t length, uint32_t f)
{
    if (value_length != NULL)
        *value_length = length;
    if (flags != NULL)
        *flags = f;
}

/* A miss with a get-failure callback (MEMCACHED_CALLBACK_GET_FAILURE), as
 * libmemcached handles it: the callback fills a result; on SUCCESS (or
 * BUFFERED: the set goes out buffered) the value is set under the key,
 * without expiry, and returned with the set's code. NULL otherwise, with
 * *error still NOTFOUND. */
static char *read_through(memcached_st *ptr, struct lmr_client *c, const char *key,
                          size_t key_length, size_t *value_length, uint32_t *flags,
                          memcached_return_t *error)
{
    memcached_result_st filled;
    memcached_result_create(ptr, &filled);
    char *value = NULL;
    memcached_return_t rc = c->on_get_miss(ptr, key, key_length, &filled);
    if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_BUFFERED) {
        bool was_buffering = c->behaviors.buffer_requests;
        if (rc == MEMCACHED_BUFFERED)
            c->behaviors.buffer_requests = true;
        rc = memcached_set(ptr, key, key_length, memcached_result_value(&filled),
                           memcached_result_length(&filled), 0, memcached_result_flags(&filled));
        c->behaviors.buffer_requests = was_buffering;
        if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_BUFFERED) {
            set_outputs(value_length, flags, memcached_result_length(&filled),
                        memcached_result_flags(&filled));
            size_t length = memcached_result_length(&filled);
            value = memcached_result_take_value(&filled);
            if (value == NULL) /* an empty value still yields a string */
                value = calloc(1, 1);
            value = lmr_caller_buffer(ptr, value, length);
            *error = value != NULL ? rc : MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        }
    }
    memcached_result_free(&filled);
    return value;
}

char *memcached_get_by_key(memcached_st *ptr, const char *group_key, size_t group_key_length,
                           const char *key, size_t key_length, size_t *value_length,
                           uint32_t *flags, memcached_return_t *error)
{
    memcached_return_t unused;
    if (error == NULL)
        error = &unused;
    set_outputs(value_length, flags, 0, 0);
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL) {
        *error = MEMCACHED_INVALID_ARGUMENTS;
        return NULL;
    }
    struct lmr_op_args args = {.key = key, .key_length = key_length, .sink = LMR_SINK_LIBRARY};
    memcached_request_st req;
    lmr_request_init(&req);
    memcached_return_t rc =
        lmr_op_blocking(ptr, &req, LMR_OP_GET, group_key, group_key_length, &args);

    /* with replicas, a miss or a failed primary falls back to the copies
     * (not under REPLICATION or ERASURE_CODING, which read their own) */
    uint32_t replicas = lmr_resilience_active(c) ? 0 : c->behaviors.number_of_replicas;
    if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_BAD_KEY_PROVIDED && replicas > 0 &&
        c->server_count > 1) {
        const char *gk = group_key ? group_key : key;
        size_t gkl = group_key ? group_key_length : key_length;
        uint32_t primary = lmr_client_pick_index(c, gk, gkl);
        if (replicas >= c->server_count)
            replicas = c->server_count - 1;
        /* RANDOMIZE_REPLICA_READ: start at a random replica, then go round */
        uint32_t first = c->behaviors.randomize_replica_read ? (uint32_t)random() % replicas : 0;
        for (uint32_t n = 0; primary != UINT32_MAX && n < replicas; n++) {
            uint32_t i = 1 + (first + n) % replicas;
            memcached_instance_st *srv = c->servers[(primary + i) % c->server_count];
            if (lmr_op_issue_to(srv, &req, LMR_OP_GET, &args, false) != MEMCACHED_SUCCESS)
                continue;
            if (lmr_io_wait(c, &req) == MEMCACHED_SUCCESS) {
                rc = lmr_client_result(c, MEMCACHED_SUCCESS, NULL);
                break;
            }
        }
    }
    *error = rc;
    if (rc != MEMCACHED_SUCCESS) {
        lmr_request_release(&req);
        if (rc == MEMCACHED_NOTFOUND && c->on_get_miss != NULL)
            return read_through(ptr, c, key, key_length, value_length, flags, error);
        return NULL;
    }
    char *value = req.lib_buffer;
    size_t length = req.value_length;
    uint32_t item_flags = req.flags;
    req.lib_buffer = NULL;
    req.lib_capacity = 0;
    lmr_request_release(&req);
    if (value != NULL && !decrypt_value(c, &value, &length)) {
        free(value);
        *error = lmr_client_result(c, MEMCACHED_FAILURE, DECRYPT_FAILED);
        return NULL;
    }
    set_outputs(value_length, flags, length, item_flags);
    if (value == NULL) /* an empty value still yields a string */
        value = calloc(1, 1);
    value = lmr_caller_buffer(ptr, value, value ? length : 0);
    if (value == NULL)
        *error = lmr_client_result(c, MEMCACHED_MEMORY_ALLOCATION_FAILURE, NULL);
    return value;
}

char *memcached_get(memcached_st *ptr, const char *key, size_t key_length, size_t *value_length,
                    uint32_t *flags, memcached_return_t *error)
{
    return memcached_get_by_key(ptr, NULL, 0, key, key_length, value_length, flags, error);
}

/* Issues one mget request to srv for keys[0..n). */
static memcached_return_t mget_to(memcached_instance_st *srv, const char *const *keys,
                                  const size_t *lengths, size_t n)
{
    memcached_request_st *req = lmr_request_new_detached(srv->client, LMR_OP_MGET);
    if (req == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    struct lmr_op_args args = {.keys = keys, .key_lengths = lengths, .key_count = n};
    return lmr_op_issue_to(srv, req, LMR_OP_MGET, &args, false);
}

memcached_return_t memcached_mget_by_key(memcached_st *ptr, const char *group_key,
                                         size_t group_key_length, const char *const *keys,
                                         const size_t *key_length, size_t number_of_keys)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    /* results of an earlier mget that were never fetched are dropped */
    while (c->fetch.pending_requests > 0)
        lmr_io_wait_all(c);
    lmr_fetch_clear(&c->fetch);
    c->query_id++;
    if (number_of_keys == 0) /* as libmemcached */
        return lmr_client_result(c, MEMCACHED_INVALID_ARGUMENTS, "no keys given");
    if (keys == NULL || key_length == NULL)
        return lmr_client_result(c, MEMCACHED_BAD_KEY_PROVIDED, NULL);
    if (c->server_count == 0)
        return lmr_client_result(c, MEMCACHED_NO_SERVERS, NULL);
    for (size_t i = 0; i < number_of_keys; i++) {
        memcached_return_t rc = lmr_client_check_key(c, keys[i], key_length[i]);
        if (rc != MEMCACHED_SUCCESS)
            return lmr_client_result(c, rc, NULL);
    }
    if (group_key != NULL) {
        memcached_return_t rc = lmr_client_check_key(c, group_key, group_key_length);
        if (rc != MEMCACHED_SUCCESS)
            return lmr_client_result(c, rc, NULL);
    }
    if (lmr_resilience_active(c))
        return lmr_client_result(
            c,
            lmr_resilience_mget(c, group_key, group_key_length, keys, key_length, number_of_keys),
            NULL);

    uint32_t *where = malloc(number_of_keys * sizeof(*where));
    bool *issued = calloc(number_of_keys, sizeof(*issued));
    const char **batch = malloc(LMR_MGET_CHUNK * sizeof(*batch));
    size_t *batch_lengths = malloc(LMR_MGET_CHUNK * sizeof(*batch_lengths));
    if (where == NULL || issued == NULL || batch == NULL || batch_lengths == NULL) {
        free(batch_lengths);
        free(batch);
        free(issued);
        free(where);
        return lmr_client_result(c, MEMCACHED_MEMORY_ALLOCATION_FAILURE, NULL);
    }
    uint32_t fixed = group_key ? lmr_client_pick_index(c, group_key, group_key_length) : 0;
    for (size_t i = 0; i < number_of_keys; i++)
        where[i] = group_key ? fixed : lmr_client_pick_index(c, keys[i], key_length[i]);

    /* round 0 asks each key's server; with NUMBER_OF_REPLICAS, keys whose
     * server could not take the request go to the next servers in turn */
    uint32_t rounds = 1 + c->behaviors.number_of_replicas;
    if (rounds > c->server_count)
        rounds = c->server_count;
    memcached_return_t last_failure = MEMCACHED_SUCCESS;
    for (uint32_t round = 0; round < rounds; round++) {
        for (uint32_t s = 0; s < c->server_count; s++) {
            size_t n = 0;
            size_t members[LMR_MGET_CHUNK];
            for (size_t i = 0; i <= number_of_keys; i++) {
                bool flush = i == number_of_keys || n == LMR_MGET_CHUNK;
                if (flush && n > 0) {
                    memcached_return_t rc = mget_to(c->servers[s], batch, batch_lengths, n);
                    for (size_t m = 0; m < n; m++)
                        issued[members[m]] = rc == MEMCACHED_SUCCESS;
                    if (rc != MEMCACHED_SUCCESS)
                        last_failure = rc;
                    n = 0;
                }
                if (i < number_of_keys && !issued[i] && where[i] != UINT32_MAX &&
                    (where[i] + round) % c->server_count == s) {
                    members[n] = i;
                    batch[n] = keys[i];
                    batch_lengths[n] = key_length[i];
                    n++;
                }
            }
        }
    }
    size_t done = 0;
    for (size_t i = 0; i < number_of_keys; i++) {
        done += issued[i];
        if (where[i] == UINT32_MAX)
            last_failure = MEMCACHED_SERVER_MARKED_DEAD;
    }
    free(batch_lengths);
    free(batch);
    free(issued);
    free(where);
    if (done == number_of_keys)
        return lmr_client_result(c, MEMCACHED_SUCCESS, NULL);
    if (done == 0)
        return lmr_client_result(c, last_failure, NULL);
    return lmr_client_result(c, MEMCACHED_SOME_ERRORS, NULL);
}

memcached_return_t memcached_mget(memcached_st *ptr, const char *const *keys,
                                  const size_t *key_length, size_t number_of_keys)
{
    return memcached_mget_by_key(ptr, NULL, 0, keys, key_length, number_of_keys);
}

/* The next fetched item, waiting for the servers if needed. */
static struct lmr_fetched *next_item(struct lmr_client *c)
{
    struct lmr_fetched *f = lmr_fetch_pop(&c->fetch);
    if (f == NULL && c->fetch.pending_requests > 0) {
        lmr_io_wait_fetch(c);
        f = lmr_fetch_pop(&c->fetch);
    }
    return f;
}

memcached_result_st *memcached_fetch_result(memcached_st *ptr, memcached_result_st *result,
                                            memcached_return_t *error)
{
    memcached_return_t unused;
    if (error == NULL)
        error = &unused;
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL) {
        *error = MEMCACHED_INVALID_ARGUMENTS;
        return NULL;
    }
    struct lmr_fetched *f = next_item(c);
    if (f == NULL) {
        /* As libmemcached: the end is MEMCACHED_END when this result took
         * hits, NOTFOUND otherwise (so always NOTFOUND for a NULL result),
         * and a result the caller allocated is freed here. */
        bool took_hits =
            result != NULL && result->options.is_initialized && result->fetched_count > 0;
        *error = lmr_client_result(c, took_hits ? MEMCACHED_END : MEMCACHED_NOTFOUND, NULL);
        if (result != NULL && result->options.is_initialized) {
            if (result->options.is_allocated) {
                memcached_result_free(result);
            } else {
                result->fetched_count = 0;
                result->value_length = 0;
            }
        }
        return NULL;
    }
    if (f->value != NULL && !decrypt_value(c, &f->value, &f->value_length)) {
        lmr_fetched_free(f);
        *error = lmr_client_result(c, MEMCACHED_FAILURE, DECRYPT_FAILED);
        return NULL;
    }
    if (result == NULL) {
        result = memcached_result_create(ptr, NULL);
        if (result == NULL) {
            lmr_fetched_free(f);
            *error = lmr_client_result(c, MEMCACHED_MEMORY_ALLOCATION_FAILURE, NULL);
            return NULL;
        }
    } else if (!result->options.is_initialized) {
        memcached_result_create(ptr, result);
    }
    free(result->value);
    result->value = f->value;
    result->value_length = f->value_length;
    result->value_capacity = f->value_length + 1;
    memcpy(result->item_key, f->key, f->key_length + 1);
    result->key_length = f->key_length;
    result->item_flags = f->flags;
    result->item_cas = f->cas;
    result->fetched_count++;
    f->value = NULL;
    lmr_fetched_free(f);
    *error = lmr_client_result(c, MEMCACHED_SUCCESS, NULL);
    return result;
}

char *memcached_fetch(memcached_st *ptr, char *key, size_t *key_length, size_t *value_length,
                      uint32_t *flags, memcached_return_t *error)
{
    memcached_return_t unused;
    if (error == NULL)
        error = &unused;
    set_outputs(value_length, flags, 0, 0);
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL) {
        *error = MEMCACHED_INVALID_ARGUMENTS;
        return NULL;
    }
    struct lmr_fetched *f = next_item(c);
    if (f == NULL) { /* END after hits, as libmemcached's memcached_fetch */
        bool took_hits = c->fetch.fetched_count > 0;
        c->fetch.fetched_count = 0;
        *error = lmr_client_result(c, took_hits ? MEMCACHED_END : MEMCACHED_NOTFOUND, NULL);
        return NULL;
    }
    if (f->value != NULL && !decrypt_value(c, &f->value, &f->value_length)) {
        lmr_fetched_free(f);
        *error = lmr_client_result(c, MEMCACHED_FAILURE, DECRYPT_FAILED);
        return NULL;
    }
    c->fetch.fetched_count++;
    if (key != NULL)
        memcpy(key, f->key, f->key_length + 1);
    if (key_length != NULL)
        *key_length = f->key_length;
    set_outputs(value_length, flags, f->value_length, f->flags);
    char *value = lmr_caller_buffer(ptr, f->value, f->value_length);
    f->value = NULL;
    lmr_fetched_free(f);
    *error = lmr_client_result(
        c, value != NULL ? MEMCACHED_SUCCESS : MEMCACHED_MEMORY_ALLOCATION_FAILURE, NULL);
    return value;
}

memcached_return_t memcached_fetch_execute(memcached_st *ptr, memcached_execute_fn *callback,
                                           void *context, uint32_t number_of_callbacks)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL || (callback == NULL && number_of_callbacks > 0))
        return MEMCACHED_INVALID_ARGUMENTS;
    memcached_result_st result;
    if (memcached_result_create(ptr, &result) == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    memcached_return_t rc;
    while (memcached_fetch_result(ptr, &result, &rc) != NULL) {
        for (uint32_t i = 0; i < number_of_callbacks; i++) {
            if (callback[i](ptr, &result, context) != MEMCACHED_SUCCESS)
                break;
        }
    }
    memcached_result_free(&result);
    return lmr_client_result(c, MEMCACHED_SUCCESS, NULL);
}

/* Requests go out in bounded chunks (memcached_mget_by_key), so the kernel
 * buffers never fill and nothing needs taking while sending: every result
 * waits for memcached_fetch_execute, which libmemcached's callers call
 * next. Binary protocol only, as in libmemcached. */
memcached_return_t memcached_mget_execute_by_key(memcached_st *ptr, const char *group_key,
                                                 size_t group_key_length, const char *const *keys,
                                                 const size_t *key_length, size_t number_of_keys,
                                                 memcached_execute_fn *callback, void *context,
                                                 const uint32_t number_of_callbacks)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (!c->behaviors.binary_protocol)
        return lmr_client_result(c, MEMCACHED_NOT_SUPPORTED,
                                 "memcached_mget_execute needs the binary protocol");
    (void)callback;
    (void)context;
    (void)number_of_callbacks;
    return memcached_mget_by_key(ptr, group_key, group_key_length, keys, key_length,
                                 number_of_keys);
}

memcached_return_t memcached_mget_execute(memcached_st *ptr, const char *const *keys,
                                          const size_t *key_length, const size_t number_of_keys,
                                          memcached_execute_fn *callback, void *context,
                                          const uint32_t number_of_callbacks)
{
    return memcached_mget_execute_by_key(ptr, NULL, 0, keys, key_length, number_of_keys, callback,
                                         context, number_of_callbacks);
}
