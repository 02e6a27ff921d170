/* t/libmc/deprecated_types.c: a program written with libmemcached 1.0's
 * older type names (deprecated_types.h) compiles against the library's
 * headers and the names mean the same types. Built against
 * libmemcached-rdma and, as deprecated_types_ref, against Debian's
 * libmemcached: compiling is most of the test; the checks below run without
 * a server. */
#include <string.h>

#include "tap.h"

static int server_calls, dump_calls;

static memcached_return count_server(const memcached_st *ptr, const memcached_instance_st *server,
                                     void *context)
{
    (void)ptr;
    (void)server;
    (void)context;
    server_calls++;
    return MEMCACHED_SUCCESS;
}

static memcached_return on_clone(memcached_st *destination, const memcached_st *source)
{
    (void)destination;
    (void)source;
    return MEMCACHED_SUCCESS;
}

static memcached_return on_cleanup(const memcached_st *ptr)
{
    (void)ptr;
    return MEMCACHED_SUCCESS;
}

static memcached_return on_fetch(const memcached_st *ptr, memcached_result_st *result,
                                 void *context)
{
    (void)ptr;
    (void)result;
    (void)context;
    return MEMCACHED_SUCCESS;
}

static memcached_return on_dump(const memcached_st *ptr, const char *key, size_t key_length,
                                void *context)
{
    (void)ptr;
    (void)key;
    (void)key_length;
    (void)context;
    dump_calls++;
    return MEMCACHED_SUCCESS;
}

static memcached_return on_miss(const memcached_st *ptr, const char *key, size_t key_length,
                                memcached_result_st *result)
{
    (void)ptr;
    (void)key;
    (void)key_length;
    (void)result;
    return MEMCACHED_NOTFOUND;
}

static memcached_return on_delete(const memcached_st *ptr, const char *key, size_t key_length)
{
    (void)ptr;
    (void)key;
    (void)key_length;
    return MEMCACHED_SUCCESS;
}

int main(void)
{
    memcached_st *mc = memcached_create(NULL);
    ok(mc != NULL, "memcached_create");

    memcached_behavior behavior = MEMCACHED_BEHAVIOR_NO_BLOCK;
    memcached_return rc = memcached_behavior_set(mc, behavior, 1);
    ok(rc == MEMCACHED_SUCCESS && memcached_behavior_get(mc, behavior) == 1,
       "memcached_behavior and memcached_return name the behavior and return types");

    memcached_hash hash = MEMCACHED_HASH_FNV1A_32;
    rc = memcached_behavior_set_key_hash(mc, hash);
    ok(rc == MEMCACHED_SUCCESS && memcached_behavior_get_key_hash(mc) == hash,
       "memcached_hash is memcached_hash_t");

    memcached_server_distribution dist = MEMCACHED_DISTRIBUTION_CONSISTENT;
    rc = memcached_behavior_set_distribution(mc, dist);
    ok(rc == MEMCACHED_SUCCESS && memcached_behavior_get_distribution(mc) == dist,
       "memcached_server_distribution is memcached_server_distribution_t");

    memcached_connection connection = MEMCACHED_CONNECTION_TCP;
    ok(connection == MEMCACHED_CONNECTION_TCP, "memcached_connection is memcached_connection_t");

    rc = memcached_server_add(mc, "127.0.0.1", 1);
    memcached_server_function callbacks[1] = {count_server};
    rc = memcached_server_cursor(mc, callbacks, NULL, 1);
    ok(rc == MEMCACHED_SUCCESS && server_calls == 1,
       "memcached_server_function is memcached_server_fn (the cursor calls it)");

    memcached_callback which = MEMCACHED_CALLBACK_CLONE_FUNCTION;
    memcached_clone_func clone_fn = on_clone;
    memcached_cleanup_func cleanup_fn = on_cleanup;
    memcached_trigger_key miss_fn = on_miss;
    memcached_trigger_delete_key delete_fn = on_delete;
    ok(memcached_callback_set(mc, which, (void *)clone_fn) == MEMCACHED_SUCCESS &&
           memcached_callback_set(mc, MEMCACHED_CALLBACK_CLEANUP_FUNCTION, (void *)cleanup_fn) ==
               MEMCACHED_SUCCESS &&
           memcached_callback_set(mc, MEMCACHED_CALLBACK_GET_FAILURE, (void *)miss_fn) ==
               MEMCACHED_SUCCESS,
       "memcached_callback, _clone_func, _cleanup_func and _trigger_key set callbacks");
    (void)delete_fn;

    memcached_execute_function fetchers[1] = {on_fetch};
    memcached_dump_func dumpers[1] = {on_dump};
    ok(fetchers[0] == on_fetch && dumpers[0] == on_dump,
       "memcached_execute_function and memcached_dump_func hold callbacks");

    /* a const pointer in libmemcached-rdma, not in libmemcached 1.1: the cast
     * suits both */
    memcached_server_instance_st instance =
        (memcached_server_instance_st)memcached_server_instance_by_position(mc, 0);
    ok(instance != NULL && strcmp(memcached_server_name(instance), "127.0.0.1") == 0,
       "memcached_server_instance_st holds a server");

    memcached_free(mc);
    return done_testing();
}
