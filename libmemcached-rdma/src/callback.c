/* callback.c: memcached_callback_set/get. Supported: the namespace
 * (MEMCACHED_CALLBACK_PREFIX_KEY / _NAMESPACE), put in front of every key on
 * the wire and removed from fetched keys, and MEMCACHED_CALLBACK_USER_DATA.
 * The function callbacks (clone, cleanup, get failure, delete trigger) are
 * not supported and say so with MEMCACHED_NOT_SUPPORTED. */
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
    default:
        return lmr_client_result(c, MEMCACHED_NOT_SUPPORTED, "callback not supported");
    }
}

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
    default:
        *error = MEMCACHED_NOT_SUPPORTED;
        return NULL;
    }
}
