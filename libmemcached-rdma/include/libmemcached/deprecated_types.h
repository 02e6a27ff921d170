/*
 * libmemcached/deprecated_types.h: libmemcached 1.0's older type names,
 * which programs written for libmemcached 1.x (pylibmc among them) still
 * use. Each is another name for the type in constants.h or types.h.
 */
#ifndef LIBMEMCACHED_RDMA_DEPRECATED_TYPES_H
#define LIBMEMCACHED_RDMA_DEPRECATED_TYPES_H

#include <libmemcached/constants.h>
#include <libmemcached/types.h>

typedef memcached_return_t memcached_return;
typedef memcached_server_distribution_t memcached_server_distribution;
typedef memcached_behavior_t memcached_behavior;
typedef memcached_callback_t memcached_callback;
typedef memcached_hash_t memcached_hash;
typedef memcached_connection_t memcached_connection;
typedef memcached_clone_fn memcached_clone_func;
typedef memcached_cleanup_fn memcached_cleanup_func;
typedef memcached_execute_fn memcached_execute_function;
typedef memcached_server_fn memcached_server_function;
typedef memcached_trigger_key_fn memcached_trigger_key;
typedef memcached_trigger_delete_key_fn memcached_trigger_delete_key;
typedef memcached_dump_fn memcached_dump_func;
/* memcached_server_instance_st is in types.h (a pointer to a const
 * memcached_instance_st, what memcached_server_instance_by_position returns) */

#endif
