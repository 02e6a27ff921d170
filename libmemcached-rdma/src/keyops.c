/* keyops.c: the blocking single-key calls that are not storage or
 * retrieval: delete, touch, exist, increment/decrement (with and without
 * an initial value) and their _by_key forms. */
#include <libmemcached/memcached.h>

#include "ops.h"

static memcached_return_t run(memcached_st *ptr, enum lmr_op_kind kind, const char *group_key,
                              size_t group_key_length, struct lmr_op_args *args, uint64_t *number)
{
    memcached_request_st req;
    lmr_request_init(&req);
    memcached_return_t rc = lmr_op_blocking(ptr, &req, kind, group_key, group_key_length, args);
    if (number != NULL && rc == MEMCACHED_SUCCESS)
        *number = req.number;
    lmr_request_release(&req);
    return rc;
}

memcached_return_t memcached_delete_by_key(memcached_st *ptr, const char *group_key,
                                           size_t group_key_length, const char *key,
                                           size_t key_length, time_t expiration)
{
    if (lmr_client_of(ptr) == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (expiration != 0) /* memcached no longer supports delayed deletes */
        return lmr_client_result(lmr_client_of(ptr), MEMCACHED_INVALID_ARGUMENTS,
                                 "delete with an expiration is not supported");
    struct lmr_client *c = lmr_client_of(ptr);
    if (c->on_delete != NULL && lmr_client_check_replies_for_trigger(c) != MEMCACHED_SUCCESS)
        return MEMCACHED_INVALID_ARGUMENTS;
    struct lmr_op_args args = {.key = key, .key_length = key_length};
    memcached_return_t rc = run(ptr, LMR_OP_DELETE, group_key, group_key_length, &args, NULL);
    if (rc == MEMCACHED_SUCCESS && c->on_delete != NULL)
        c->on_delete(ptr, key, key_length);
    return rc;
}

memcached_return_t memcached_delete(memcached_st *ptr, const char *key, size_t key_length,
                                    time_t expiration)
{
    return memcached_delete_by_key(ptr, NULL, 0, key, key_length, expiration);
}

memcached_return_t memcached_touch_by_key(memcached_st *ptr, const char *group_key,
                                          size_t group_key_length, const char *key,
                                          size_t key_length, time_t expiration)
{
    struct lmr_op_args args = {.key = key, .key_length = key_length, .expiration = expiration};
    return run(ptr, LMR_OP_TOUCH, group_key, group_key_length, &args, NULL);
}

memcached_return_t memcached_touch(memcached_st *ptr, const char *key, size_t key_length,
                                   time_t expiration)
{
    return memcached_touch_by_key(ptr, NULL, 0, key, key_length, expiration);
}

memcached_return_t memcached_exist_by_key(memcached_st *ptr, const char *group_key,
                                          size_t group_key_length, const char *key,
                                          size_t key_length)
{
    struct lmr_op_args args = {.key = key, .key_length = key_length};
    return run(ptr, LMR_OP_EXIST, group_key, group_key_length, &args, NULL);
}

memcached_return_t memcached_exist(memcached_st *ptr, const char *key, size_t key_length)
{
    return memcached_exist_by_key(ptr, NULL, 0, key, key_length);
}

static memcached_return_t arith(memcached_st *ptr, bool increment, const char *group_key,
                                size_t group_key_length, const char *key, size_t key_length,
                                uint64_t delta, bool with_initial, uint64_t initial,
                                time_t expiration, uint64_t *value)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (with_initial && !c->behaviors.binary_protocol)
        return lmr_client_result(c, MEMCACHED_INVALID_ARGUMENTS,
                                 "an initial value needs the binary protocol");
    struct lmr_op_args args = {
        .key = key,
        .key_length = key_length,
        .increment = increment,
        .with_initial = with_initial,
        .delta = delta,
        .initial = initial,
        .expiration = expiration,
    };
    uint64_t result = UINT64_MAX;
    memcached_return_t rc = run(ptr, LMR_OP_ARITH, group_key, group_key_length, &args, &result);
    if (value != NULL) /* with NOREPLY no value comes back */
        *value = rc == MEMCACHED_SUCCESS && !c->behaviors.noreply ? result : UINT64_MAX;
    return rc;
}

memcached_return_t memcached_increment(memcached_st *ptr, const char *key, size_t key_length,
                                       uint32_t offset, uint64_t *value)
{
    return arith(ptr, true, NULL, 0, key, key_length, offset, false, 0, 0, value);
}

memcached_return_t memcached_decrement(memcached_st *ptr, const char *key, size_t key_length,
                                       uint32_t offset, uint64_t *value)
{
    return arith(ptr, false, NULL, 0, key, key_length, offset, false, 0, 0, value);
}

memcached_return_t memcached_increment_by_key(memcached_st *ptr, const char *group_key,
                                              size_t group_key_length, const char *key,
                                              size_t key_length, uint64_t offset, uint64_t *value)
{
    return arith(ptr, true, group_key, group_key_length, key, key_length, offset, false, 0, 0,
                 value);
}

memcached_return_t memcached_decrement_by_key(memcached_st *ptr, const char *group_key,
                                              size_t group_key_length, const char *key,
                                              size_t key_length, uint64_t offset, uint64_t *value)
{
    return arith(ptr, false, group_key, group_key_length, key, key_length, offset, false, 0, 0,
                 value);
}

memcached_return_t memcached_increment_with_initial(memcached_st *ptr, const char *key,
                                                    size_t key_length, uint64_t offset,
                                                    uint64_t initial, time_t expiration,
                                                    uint64_t *value)
{
    return arith(ptr, true, NULL, 0, key, key_length, offset, true, initial, expiration, value);
}

memcached_return_t memcached_decrement_with_initial(memcached_st *ptr, const char *key,
                                                    size_t key_length, uint64_t offset,
                                                    uint64_t initial, time_t expiration,
                                                    uint64_t *value)
{
    return arith(ptr, false, NULL, 0, key, key_length, offset, true, initial, expiration, value);
}

memcached_return_t memcached_increment_with_initial_by_key(memcached_st *ptr, const char *group_key,
                                                           size_t group_key_length, const char *key,
                                                           size_t key_length, uint64_t offset,
                                                           uint64_t initial, time_t expiration,
                                                           uint64_t *value)
{
    return arith(ptr, true, group_key, group_key_length, key, key_length, offset, true, initial,
                 expiration, value);
}

memcached_return_t memcached_decrement_with_initial_by_key(memcached_st *ptr, const char *group_key,
                                                           size_t group_key_length, const char *key,
                                                           size_t key_length, uint64_t offset,
                                                           uint64_t initial, time_t expiration,
                                                           uint64_t *value)
{
    return arith(ptr, false, group_key, group_key_length, key, key_length, offset, true, initial,
                 expiration, value);
}
