/* callback.c: memcached_callback_set/get: the namespace
 * (MEMCACHED_CALLBACK_PREFIX_KEY / _NAMESPACE), put in front of every key on
 * the wire and removed from fetched keys, MEMCACHED_CALLBACK_USER_DATA, and
 * the function callbacks, kept here and called where libmemcached calls
 * them: clone (client.c), cleanup (client.c), get failure (get.c) and
 * delete trigger (keyops.c). */
#include <string.h>

#include <libmemcached/memcached.h>

#include "client.h"
#include "io.h"

static memcached_return_t set_namespace(struct lmr_client *c, const char *prefix)
{
    size_t len = prefix != NULL ? strlen(prefix) : 0;
    if (len >= MEMCACHED_MAX_NAMESPACE)
        return MEMCACHED_KEY_TOO_BIG;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)prefix[i];
        if (ch <= ' ' || ch == 0x7f)
            return MEMCACHED_BAD_KEY_PROVIDED;
    }
    /* requests already queued were encoded with the old namespace */
    lmr_io_wait_all(c);
    memmove(c->namespace_prefix, prefix != NULL ? prefix : "", len);
    c->namespace_prefix[len] = '\0';
    c->namespace_length = len;
    c->placement_dirty = true;
    return MEMCACHED_SUCCESS;
}

/* The API passes function callbacks as data pointers; C converts between
 * the two only through their bytes. */
#define FN_FROM_DATA(fn, data) memcpy(&(fn), &(data), sizeof(fn))

memcached_return_t memcached_callback_set(memcached_st *ptr, const memcached_callback_t flag,
                                          const void *data)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    switch (flag) {
    case MEMCACHED_CALLBACK_PREFIX_KEY:
        return lmr_client_result(c, set_namespace(c, data), NULL);
    case MEMCACHED_CALLBACK_USER_DATA:
        c->user_data = (void *)data;
        return MEMCACHED_SUCCESS;
    case MEMCACHED_CALLBACK_CLONE_FUNCTION:
        FN_FROM_DATA(c->on_clone, data);
        return MEMCACHED_SUCCESS;
    case MEMCACHED_CALLBACK_CLEANUP_FUNCTION:
        FN_FROM_DATA(c->on_cleanup, data);
        return MEMCACHED_SUCCESS;
    case MEMCACHED_CALLBACK_GET_FAILURE:
        FN_FROM_DATA(c->on_get_miss, data);
        return MEMCACHED_SUCCESS;
    case MEMCACHED_CALLBACK_DELETE_TRIGGER:
        if (data != NULL && lmr_client_check_replies_for_trigger(c) != MEMCACHED_SUCCESS)
            return MEMCACHED_INVALID_ARGUMENTS;
        FN_FROM_DATA(c->on_delete, data);
        return MEMCACHED_SUCCESS;
    default:
        return lmr_client_result(c, MEMCACHED_INVALID_ARGUMENTS, "no such callback");
    }
}

/* A function callback handed back as data, with SUCCESS when set. */
#define DATA_FROM_FN(fn, error)                                                                    \
    do {                                                                                           \
        void *data_ = NULL;                                                                        \
        memcpy(&data_, &(fn), sizeof(data_));                                                      \
        *(error) = data_ != NULL ? MEMCACHED_SUCCESS : MEMCACHED_FAILURE;                          \
        return data_;                                                                              \
    } while (0)

void *memcached_callback_get(memcached_st *ptr, const memcached_callback_t flag,
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
    switch (flag) {
    case MEMCACHED_CALLBACK_PREFIX_KEY:
        *error = c->namespace_length > 0 ? MEMCACHED_SUCCESS : MEMCACHED_FAILURE;
        return c->namespace_length > 0 ? c->namespace_prefix : NULL;
    case MEMCACHED_CALLBACK_USER_DATA:
        *error = c->user_data != NULL ? MEMCACHED_SUCCESS : MEMCACHED_FAILURE;
        return c->user_data;
    case MEMCACHED_CALLBACK_CLONE_FUNCTION:
        DATA_FROM_FN(c->on_clone, error);
    case MEMCACHED_CALLBACK_CLEANUP_FUNCTION:
        DATA_FROM_FN(c->on_cleanup, error);
    case MEMCACHED_CALLBACK_GET_FAILURE:
        DATA_FROM_FN(c->on_get_miss, error);
    case MEMCACHED_CALLBACK_DELETE_TRIGGER:
        DATA_FROM_FN(c->on_delete, error);
    default:
        *error = MEMCACHED_FAILURE;
        return NULL;
    }
}
