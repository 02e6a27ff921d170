/* result.c: memcached_result_st creation, accessors and ownership of the
 * value buffer. No I/O. */
#include <stdlib.h>
#include <string.h>

#include <libmemcached/memcached.h>

memcached_result_st *memcached_result_create(const memcached_st *ptr, memcached_result_st *result)
{
    bool allocated = false;
    if (result == NULL) {
        result = calloc(1, sizeof(*result));
        if (result == NULL)
            return NULL;
        allocated = true;
    } else {
        memset(result, 0, sizeof(*result));
    }
    result->root = (memcached_st *)ptr;
    result->options.is_allocated = allocated;
    result->options.is_initialized = true;
    return result;
}

void memcached_result_reset(memcached_result_st *result)
{
    if (result == NULL)
        return;
    result->key_length = 0;
    result->item_key[0] = '\0';
    result->value_length = 0;
    result->item_flags = 0;
    result->item_cas = 0;
    result->item_expiration = 0;
    result->numeric_value = 0;
}

void memcached_result_free(memcached_result_st *result)
{
    if (result == NULL)
        return;
    free(result->value);
    result->value = NULL;
    result->value_length = result->value_capacity = 0;
    result->options.is_initialized = false;
    if (result->options.is_allocated)
        free(result);
}

const char *memcached_result_key_value(const memcached_result_st *self)
{
    return self && self->key_length ? self->item_key : NULL;
}

size_t memcached_result_key_length(const memcached_result_st *self)
{
    return self ? self->key_length : 0;
}

const char *memcached_result_value(const memcached_result_st *self)
{
    return self ? self->value : NULL;
}

char *memcached_result_take_value(memcached_result_st *self)
{
    if (self == NULL)
        return NULL;
    char *value = self->value;
    self->value = NULL;
    self->value_length = self->value_capacity = 0;
    return value;
}

size_t memcached_result_length(const memcached_result_st *self)
{
    return self ? self->value_length : 0;
}

uint32_t memcached_result_flags(const memcached_result_st *self)
{
    return self ? self->item_flags : 0;
}

uint64_t memcached_result_cas(const memcached_result_st *self)
{
    return self ? self->item_cas : 0;
}

memcached_return_t memcached_result_set_value(memcached_result_st *ptr, const char *value,
                                              size_t length)
{
    if (ptr == NULL || (value == NULL && length > 0))
        return MEMCACHED_INVALID_ARGUMENTS;
    if (ptr->value_capacity < length + 1) {
        char *nb = realloc(ptr->value, length + 1);
        if (nb == NULL)
            return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        ptr->value = nb;
        ptr->value_capacity = length + 1;
    }
    if (length > 0)
        memcpy(ptr->value, value, length);
    ptr->value[length] = '\0';
    ptr->value_length = length;
    return MEMCACHED_SUCCESS;
}

void memcached_result_set_flags(memcached_result_st *self, uint32_t flags)
{
    if (self != NULL)
        self->item_flags = flags;
}

void memcached_result_set_expiration(memcached_result_st *self, time_t expiration)
{
    if (self != NULL)
        self->item_expiration = expiration;
}
