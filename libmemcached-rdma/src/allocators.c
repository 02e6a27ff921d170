/* allocators.c: memcached_set_memory_allocators and friends. The library's
 * own buffers come from the C library; what it hands to the caller (values,
 * stats strings, name lists) comes from the allocators set here, so the
 * caller can release it with the matching free function. */
#include <stdlib.h>
#include <string.h>

#include "client.h"

static void *default_malloc(const memcached_st *ptr, const size_t size, void *context)
{
    (void)ptr;
    (void)context;
    return malloc(size);
}

static void default_free(const memcached_st *ptr, void *mem, void *context)
{
    (void)ptr;
    (void)context;
    free(mem);
}

static void *default_realloc(const memcached_st *ptr, void *mem, const size_t size, void *context)
{
    (void)ptr;
    (void)context;
    return realloc(mem, size);
}

static void *default_calloc(const memcached_st *ptr, size_t nelem, const size_t elsize,
                            void *context)
{
    (void)ptr;
    (void)context;
    return calloc(nelem, elsize);
}

void lmr_allocators_default(struct lmr_allocators *a)
{
    *a = (struct lmr_allocators){default_malloc, default_free, default_realloc,
                                 default_calloc, NULL,         false};
}

memcached_return_t memcached_set_memory_allocators(memcached_st *ptr,
                                                   memcached_malloc_fn mem_malloc,
                                                   memcached_free_fn mem_free,
                                                   memcached_realloc_fn mem_realloc,
                                                   memcached_calloc_fn mem_calloc, void *context)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (!mem_malloc && !mem_free && !mem_realloc && !mem_calloc) {
        lmr_allocators_default(&c->allocators);
        return lmr_client_result(c, MEMCACHED_SUCCESS, NULL);
    }
    if (!mem_malloc || !mem_free || !mem_realloc || !mem_calloc) /* all or none, as libmemcached */
        return lmr_client_result(c, MEMCACHED_INVALID_ARGUMENTS,
                                 "set all four allocators, or none");
    c->allocators =
        (struct lmr_allocators){mem_malloc, mem_free, mem_realloc, mem_calloc, context, true};
    return lmr_client_result(c, MEMCACHED_SUCCESS, NULL);
}

void memcached_get_memory_allocators(const memcached_st *ptr, memcached_malloc_fn *mem_malloc,
                                     memcached_free_fn *mem_free, memcached_realloc_fn *mem_realloc,
                                     memcached_calloc_fn *mem_calloc)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return;
    if (mem_malloc)
        *mem_malloc = c->allocators.malloc_fn;
    if (mem_free)
        *mem_free = c->allocators.free_fn;
    if (mem_realloc)
        *mem_realloc = c->allocators.realloc_fn;
    if (mem_calloc)
        *mem_calloc = c->allocators.calloc_fn;
}

void *memcached_get_memory_allocators_context(const memcached_st *ptr)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    return c ? c->allocators.context : NULL;
}

void *lmr_caller_alloc(const memcached_st *ptr, size_t n)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL || !c->allocators.custom)
        return malloc(n);
    return c->allocators.malloc_fn(ptr, n, c->allocators.context);
}

char *lmr_caller_buffer(const memcached_st *ptr, char *buf, size_t length)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    if (buf == NULL || c == NULL || !c->allocators.custom)
        return buf;
    char *copy = c->allocators.malloc_fn(ptr, length + 1, c->allocators.context);
    if (copy != NULL)
        memcpy(copy, buf, length + 1);
    free(buf);
    return copy;
}
