/* libmemcached/types.h: the structures and callback types of the
 * libmemcached 1.x API. memcached_st, memcached_result_st, memcached_stat_st
 * and memcached_server_st are complete types because libmemcached programs
 * declare them on the stack or index arrays of them; everything a program
 * must not touch lives behind the `impl` pointers. No functions here. */
#ifndef LIBMEMCACHED_RDMA_TYPES_H
#define LIBMEMCACHED_RDMA_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <netinet/in.h>
#include <time.h>

#include <libmemcached/constants.h>

typedef struct memcached_st memcached_st;
typedef struct memcached_result_st memcached_result_st;
typedef struct memcached_stat_st memcached_stat_st;
typedef struct memcached_server_st memcached_server_st;
typedef struct memcached_server_st *memcached_server_list_st;
typedef struct memcached_instance_st memcached_instance_st; /* opaque: one server */
typedef const struct memcached_instance_st *memcached_server_instance_st;
typedef struct memcached_request_st memcached_request_st; /* opaque: one request */
typedef struct memcached_analysis_st memcached_analysis_st;

struct lmr_client; /* the library's private state behind a memcached_st */

/* libhashkit's hash object, in its layout (libmemcached's hash calls take
 * and give it; libhashkit's own calls are not part of this library). */
#ifndef LMR_HASHKIT_DEFINED
#define LMR_HASHKIT_DEFINED
typedef uint32_t (*hashkit_hash_fn)(const char *key, size_t key_length, void *context);
typedef struct hashkit_st hashkit_st;
struct hashkit_st {
    struct hashkit_function_st {
        hashkit_hash_fn function;
        void *context;
    } base_hash, distribution_hash;
    struct {
        bool is_base_same_distributed : 1;
    } flags;
    struct {
        bool is_allocated : 1;
    } options;
    void *_key;
};
#endif

struct memcached_st {
    struct {
        bool is_allocated;
    } options;
    struct lmr_client *impl;
};

/* One fetched item. value is owned by the result (memcached_result_free). */
struct memcached_result_st {
    uint32_t item_flags;
    time_t item_expiration;
    size_t key_length;
    uint64_t item_cas;
    memcached_st *root;
    char *value;
    size_t value_length;
    size_t value_capacity;
    uint64_t numeric_value;
    char item_key[MEMCACHED_MAX_KEY];
    uint32_t fetched_count; /* hits fetched into it since its fetch began */
    struct {
        bool is_allocated;
        bool is_initialized;
    } options;
};

/* An entry of a server list (memcached_server_list_st is an array of them;
 * the first entry's number_of_hosts counts the array). */
struct memcached_server_st {
    struct {
        bool is_allocated;
        bool is_initialized;
    } options;
    uint32_t number_of_hosts;
    in_port_t port;
    uint32_t weight;
    memcached_connection_t type;
    char hostname[MEMCACHED_NI_MAXHOST];
};

/* What memcached_analyze draws from memcached_stat's array: the server
 * (by position) using the most bytes, up the longest and with the least
 * room left, the average item size and the pool's get hit ratio (%). */
struct memcached_analysis_st {
    memcached_st *root;
    uint32_t average_item_size;
    uint32_t longest_uptime;
    uint32_t least_free_server;
    uint32_t most_consumed_server;
    uint32_t oldest_server;
    double pool_hit_ratio;
    uint64_t most_used_bytes;
    uint64_t least_remaining_bytes;
};

/* Statistics of one server, as memcached_stat() fills them. */
struct memcached_stat_st {
    unsigned long connection_structures;
    unsigned long curr_connections;
    unsigned long curr_items;
    pid_t pid;
    unsigned long pointer_size;
    unsigned long rusage_system_microseconds;
    unsigned long rusage_system_seconds;
    unsigned long rusage_user_microseconds;
    unsigned long rusage_user_seconds;
    unsigned long threads;
    unsigned long time;
    unsigned long total_connections;
    unsigned long total_items;
    unsigned long uptime;
    unsigned long long bytes;
    unsigned long long bytes_read;
    unsigned long long bytes_written;
    unsigned long long cmd_get;
    unsigned long long cmd_set;
    unsigned long long evictions;
    unsigned long long get_hits;
    unsigned long long get_misses;
    unsigned long long limit_maxbytes;
    char version[MEMCACHED_VERSION_STRING_LENGTH];
    void *impl; /* every "STAT name value" pair, for memcached_stat_get_value */
    memcached_st *root;
};

typedef memcached_return_t (*memcached_execute_fn)(const memcached_st *ptr,
                                                   memcached_result_st *result, void *context);
typedef memcached_return_t (*memcached_server_fn)(const memcached_st *ptr,
                                                  const memcached_instance_st *server,
                                                  void *context);
typedef memcached_return_t (*memcached_stat_fn)(const memcached_instance_st *server,
                                                const char *key, size_t key_length,
                                                const char *value, size_t value_length,
                                                void *context);

/* memcached_dump's callbacks: one call per key */
typedef memcached_return_t (*memcached_dump_fn)(const memcached_st *ptr, const char *key,
                                                size_t key_length, void *context);

/* memcached_set_memory_allocators' functions (each gets the context given) */
typedef void (*memcached_free_fn)(const memcached_st *ptr, void *mem, void *context);
typedef void *(*memcached_malloc_fn)(const memcached_st *ptr, const size_t size, void *context);
typedef void *(*memcached_realloc_fn)(const memcached_st *ptr, void *mem, const size_t size,
                                      void *context);
typedef void *(*memcached_calloc_fn)(const memcached_st *ptr, size_t nelem, const size_t elsize,
                                     void *context);

/* memcached_callback_set's function callbacks */
typedef memcached_return_t (*memcached_clone_fn)(memcached_st *destination,
                                                 const memcached_st *source);
typedef memcached_return_t (*memcached_cleanup_fn)(const memcached_st *ptr);
typedef memcached_return_t (*memcached_trigger_key_fn)(const memcached_st *ptr, const char *key,
                                                       size_t key_length,
                                                       memcached_result_st *result);
typedef memcached_return_t (*memcached_trigger_delete_key_fn)(const memcached_st *ptr,
                                                              const char *key, size_t key_length);

#endif
