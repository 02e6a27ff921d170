/* libmemcached/memcached.h: the public API of libmemcached-rdma, the
 * libmemcached 1.x calls (same names, parameters, return codes) followed by
 * the non-blocking calls (libmemcached/nonblocking.h). A program written for
 * libmemcached compiles unchanged against this header. Declarations only. */
#ifndef LIBMEMCACHED_RDMA_MEMCACHED_H
#define LIBMEMCACHED_RDMA_MEMCACHED_H

#include <libmemcached/constants.h>
#include <libmemcached/types.h>
#include <libmemcached/deprecated_types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- lifecycle ------------------------------------------------------------ */
memcached_st *memcached_create(memcached_st *ptr);
memcached_st *memcached(const char *string, size_t string_length);
void memcached_free(memcached_st *ptr);
memcached_st *memcached_clone(memcached_st *clone, const memcached_st *source);
void memcached_quit(memcached_st *ptr);
memcached_return_t memcached_flush_buffers(memcached_st *ptr);
void *memcached_get_user_data(const memcached_st *ptr);
void *memcached_set_user_data(memcached_st *ptr, void *data);

/* Allocators for the memory handed to the caller (the values of
 * memcached_get and memcached_fetch, memcached_stat_get_value's string,
 * memcached_stat_get_keys' list), which the caller then releases with the
 * free function given. All four, or all NULL for the C library's. */
memcached_return_t memcached_set_memory_allocators(memcached_st *ptr,
                                                   memcached_malloc_fn mem_malloc,
                                                   memcached_free_fn mem_free,
                                                   memcached_realloc_fn mem_realloc,
                                                   memcached_calloc_fn mem_calloc, void *context);
void memcached_get_memory_allocators(const memcached_st *ptr, memcached_malloc_fn *mem_malloc,
                                     memcached_free_fn *mem_free, memcached_realloc_fn *mem_realloc,
                                     memcached_calloc_fn *mem_calloc);
void *memcached_get_memory_allocators_context(const memcached_st *ptr);
/* Back to a new handle's state: no servers, default behaviors, no
 * namespace or callbacks. */
memcached_return_t memcached_reset(memcached_st *ptr);
/* Adds source's servers to destination. */
memcached_return_t memcached_push(memcached_st *destination, const memcached_st *source);
/* How many queries the handle has made (it grows with every call that
 * talks to servers). */
uint64_t memcached_query_id(const memcached_st *ptr);
memcached_return_t libmemcached_check_configuration(const char *option_string, size_t length,
                                                    char *error_buffer, size_t error_buffer_size);

/* ---- servers -------------------------------------------------------------- */
memcached_return_t memcached_server_add(memcached_st *ptr, const char *hostname, in_port_t port);
memcached_return_t memcached_server_add_with_weight(memcached_st *ptr, const char *hostname,
                                                    in_port_t port, uint32_t weight);
memcached_return_t memcached_server_add_unix_socket(memcached_st *ptr, const char *filename);
memcached_return_t memcached_server_add_unix_socket_with_weight(memcached_st *ptr,
                                                                const char *filename,
                                                                uint32_t weight);
memcached_return_t memcached_server_push(memcached_st *ptr, const memcached_server_list_st list);
/* Frees a server list (memcached_server_list_free). */
void memcached_server_free(memcached_server_st *ptr);
/* Server list entries keep no error state here: nothing to clear. */
void memcached_server_error_reset(memcached_server_st *ptr);
/* UDP servers are not supported (MEMCACHED_NOT_SUPPORTED), as USE_UDP. */
memcached_return_t memcached_server_add_udp(memcached_st *ptr, const char *hostname,
                                            in_port_t port);
memcached_return_t memcached_server_add_udp_with_weight(memcached_st *ptr, const char *hostname,
                                                        in_port_t port, uint32_t weight);
uint32_t memcached_server_count(const memcached_st *ptr);
/* libmemcached 1.0's call: brings the key placement up to date now (ejected
 * servers whose dead timeout has passed come back), which every call that
 * places a key also does. */
void memcached_autoeject(memcached_st *ptr);
void memcached_servers_reset(memcached_st *ptr);
const memcached_instance_st *memcached_server_instance_by_position(const memcached_st *ptr,
                                                                   uint32_t server_key);
const memcached_instance_st *memcached_server_by_key(memcached_st *ptr, const char *key,
                                                     size_t key_length, memcached_return_t *error);
memcached_return_t memcached_server_cursor(const memcached_st *ptr,
                                           const memcached_server_fn *callback, void *context,
                                           uint32_t number_of_callbacks);
const char *memcached_server_name(const memcached_instance_st *self);
in_port_t memcached_server_port(const memcached_instance_st *self);
/* The local port of the server's connection (0 when not connected over
 * TCP). */
in_port_t memcached_server_srcport(const memcached_instance_st *self);
/* Makes a failed server usable again from absolute_time (unix seconds). */
void memcached_instance_next_retry(const memcached_instance_st *self, const time_t absolute_time);
const char *memcached_server_type(const memcached_instance_st *self);
uint8_t memcached_server_major_version(const memcached_instance_st *self);
uint8_t memcached_server_minor_version(const memcached_instance_st *self);
uint8_t memcached_server_micro_version(const memcached_instance_st *self);
uint32_t memcached_server_response_count(const memcached_instance_st *self);
const char *memcached_server_error(const memcached_instance_st *self);
memcached_return_t memcached_server_error_return(const memcached_instance_st *self);
const memcached_instance_st *memcached_server_get_last_disconnect(const memcached_st *ptr);
void memcached_reset_last_disconnected_server(memcached_st *ptr);
uint32_t memcached_generate_hash(const memcached_st *ptr, const char *key, size_t key_length);
/* The key hash as a libhashkit object (hashkit_st, types.h): its
 * base_hash.function(key, length, base_hash.context) is the hash that places
 * keys. memcached_set_hashkit copies one in: a function of the caller's
 * then places keys (MEMCACHED_BEHAVIOR_HASH reads MEMCACHED_HASH_CUSTOM)
 * until MEMCACHED_BEHAVIOR_HASH is set; NULL restores the default hash. */
const hashkit_st *memcached_get_hashkit(const memcached_st *ptr);
memcached_return_t memcached_set_hashkit(memcached_st *ptr, hashkit_st *hashk);
/* Virtual buckets: the key hash masked by buckets - 1 picks host_map's
 * entry, the index of the server that holds the key; the distribution
 * becomes MEMCACHED_DISTRIBUTION_VIRTUAL_BUCKET. forward_map (may be NULL)
 * and replicas are kept as libmemcached keeps them, unused. */
memcached_return_t memcached_bucket_set(memcached_st *self, const uint32_t *host_map,
                                        const uint32_t *forward_map, const uint32_t buckets,
                                        const uint32_t replicas);
/* Values are stored encrypted with AES-256-CBC under this key and
 * decrypted when read, as libmemcached 1.1 with OpenSSL does (same bytes
 * for keys of 32 bytes or more, see doc/libmemcached-rdma.md); append and
 * prepend are then MEMCACHED_NOT_SUPPORTED. A NULL or empty key turns
 * encryption off. */
memcached_return_t memcached_set_encoding_key(memcached_st *ptr, const char *str, size_t length);
uint32_t memcached_generate_hash_value(const char *key, size_t key_length,
                                       memcached_hash_t hash_algorithm);

/* server lists (memcached_server_st arrays) */
memcached_server_list_st memcached_servers_parse(const char *server_strings);
memcached_server_list_st memcached_server_list_append(memcached_server_list_st ptr,
                                                      const char *hostname, in_port_t port,
                                                      memcached_return_t *error);
memcached_server_list_st memcached_server_list_append_with_weight(memcached_server_list_st ptr,
                                                                  const char *hostname,
                                                                  in_port_t port, uint32_t weight,
                                                                  memcached_return_t *error);
uint32_t memcached_server_list_count(const memcached_server_list_st ptr);
void memcached_server_list_free(memcached_server_list_st ptr);

/* ---- storage -------------------------------------------------------------- */
memcached_return_t memcached_set(memcached_st *ptr, const char *key, size_t key_length,
                                 const char *value, size_t value_length, time_t expiration,
                                 uint32_t flags);
memcached_return_t memcached_add(memcached_st *ptr, const char *key, size_t key_length,
                                 const char *value, size_t value_length, time_t expiration,
                                 uint32_t flags);
memcached_return_t memcached_replace(memcached_st *ptr, const char *key, size_t key_length,
                                     const char *value, size_t value_length, time_t expiration,
                                     uint32_t flags);
memcached_return_t memcached_append(memcached_st *ptr, const char *key, size_t key_length,
                                    const char *value, size_t value_length, time_t expiration,
                                    uint32_t flags);
memcached_return_t memcached_prepend(memcached_st *ptr, const char *key, size_t key_length,
                                     const char *value, size_t value_length, time_t expiration,
                                     uint32_t flags);
memcached_return_t memcached_cas(memcached_st *ptr, const char *key, size_t key_length,
                                 const char *value, size_t value_length, time_t expiration,
                                 uint32_t flags, uint64_t cas);
memcached_return_t memcached_set_by_key(memcached_st *ptr, const char *group_key,
                                        size_t group_key_length, const char *key, size_t key_length,
                                        const char *value, size_t value_length, time_t expiration,
                                        uint32_t flags);
memcached_return_t memcached_add_by_key(memcached_st *ptr, const char *group_key,
                                        size_t group_key_length, const char *key, size_t key_length,
                                        const char *value, size_t value_length, time_t expiration,
                                        uint32_t flags);
memcached_return_t memcached_replace_by_key(memcached_st *ptr, const char *group_key,
                                            size_t group_key_length, const char *key,
                                            size_t key_length, const char *value,
                                            size_t value_length, time_t expiration, uint32_t flags);
memcached_return_t memcached_append_by_key(memcached_st *ptr, const char *group_key,
                                           size_t group_key_length, const char *key,
                                           size_t key_length, const char *value,
                                           size_t value_length, time_t expiration, uint32_t flags);
memcached_return_t memcached_prepend_by_key(memcached_st *ptr, const char *group_key,
                                            size_t group_key_length, const char *key,
                                            size_t key_length, const char *value,
                                            size_t value_length, time_t expiration, uint32_t flags);
memcached_return_t memcached_cas_by_key(memcached_st *ptr, const char *group_key,
                                        size_t group_key_length, const char *key, size_t key_length,
                                        const char *value, size_t value_length, time_t expiration,
                                        uint32_t flags, uint64_t cas);

/* ---- retrieval ------------------------------------------------------------ */
char *memcached_get(memcached_st *ptr, const char *key, size_t key_length, size_t *value_length,
                    uint32_t *flags, memcached_return_t *error);
char *memcached_get_by_key(memcached_st *ptr, const char *group_key, size_t group_key_length,
                           const char *key, size_t key_length, size_t *value_length,
                           uint32_t *flags, memcached_return_t *error);
memcached_return_t memcached_mget(memcached_st *ptr, const char *const *keys,
                                  const size_t *key_length, size_t number_of_keys);
memcached_return_t memcached_mget_by_key(memcached_st *ptr, const char *group_key,
                                         size_t group_key_length, const char *const *keys,
                                         const size_t *key_length, size_t number_of_keys);
char *memcached_fetch(memcached_st *ptr, char *key, size_t *key_length, size_t *value_length,
                      uint32_t *flags, memcached_return_t *error);
memcached_result_st *memcached_fetch_result(memcached_st *ptr, memcached_result_st *result,
                                            memcached_return_t *error);
memcached_return_t memcached_fetch_execute(memcached_st *ptr, memcached_execute_fn *callback,
                                           void *context, uint32_t number_of_callbacks);
/* memcached_mget for callers of memcached_fetch_execute (binary protocol
 * only, as libmemcached). libmemcached may hand results to the callbacks
 * while it sends, to keep a huge mget from filling the sockets; here the
 * requests go out in bounded chunks and every result waits for
 * memcached_fetch_execute. */
memcached_return_t memcached_mget_execute(memcached_st *ptr, const char *const *keys,
                                          const size_t *key_length, const size_t number_of_keys,
                                          memcached_execute_fn *callback, void *context,
                                          const uint32_t number_of_callbacks);
memcached_return_t memcached_mget_execute_by_key(memcached_st *ptr, const char *group_key,
                                                 size_t group_key_length, const char *const *keys,
                                                 const size_t *key_length, size_t number_of_keys,
                                                 memcached_execute_fn *callback, void *context,
                                                 const uint32_t number_of_callbacks);

/* results */
memcached_result_st *memcached_result_create(const memcached_st *ptr, memcached_result_st *result);
void memcached_result_free(memcached_result_st *result);
void memcached_result_reset(memcached_result_st *result);
const char *memcached_result_key_value(const memcached_result_st *self);
size_t memcached_result_key_length(const memcached_result_st *self);
const char *memcached_result_value(const memcached_result_st *self);
char *memcached_result_take_value(memcached_result_st *self);
size_t memcached_result_length(const memcached_result_st *self);
uint32_t memcached_result_flags(const memcached_result_st *self);
uint64_t memcached_result_cas(const memcached_result_st *self);
memcached_return_t memcached_result_set_value(memcached_result_st *ptr, const char *value,
                                              size_t length);
void memcached_result_set_flags(memcached_result_st *self, uint32_t flags);
void memcached_result_set_expiration(memcached_result_st *self, time_t expiration);

/* ---- other key operations --------------------------------------------------- */
memcached_return_t memcached_delete(memcached_st *ptr, const char *key, size_t key_length,
                                    time_t expiration);
memcached_return_t memcached_delete_by_key(memcached_st *ptr, const char *group_key,
                                           size_t group_key_length, const char *key,
                                           size_t key_length, time_t expiration);
memcached_return_t memcached_touch(memcached_st *ptr, const char *key, size_t key_length,
                                   time_t expiration);
memcached_return_t memcached_touch_by_key(memcached_st *ptr, const char *group_key,
                                          size_t group_key_length, const char *key,
                                          size_t key_length, time_t expiration);
memcached_return_t memcached_exist(memcached_st *ptr, const char *key, size_t key_length);
memcached_return_t memcached_exist_by_key(memcached_st *ptr, const char *group_key,
                                          size_t group_key_length, const char *key,
                                          size_t key_length);
memcached_return_t memcached_increment(memcached_st *ptr, const char *key, size_t key_length,
                                       uint32_t offset, uint64_t *value);
memcached_return_t memcached_decrement(memcached_st *ptr, const char *key, size_t key_length,
                                       uint32_t offset, uint64_t *value);
memcached_return_t memcached_increment_by_key(memcached_st *ptr, const char *group_key,
                                              size_t group_key_length, const char *key,
                                              size_t key_length, uint64_t offset, uint64_t *value);
memcached_return_t memcached_decrement_by_key(memcached_st *ptr, const char *group_key,
                                              size_t group_key_length, const char *key,
                                              size_t key_length, uint64_t offset, uint64_t *value);
memcached_return_t memcached_increment_with_initial(memcached_st *ptr, const char *key,
                                                    size_t key_length, uint64_t offset,
                                                    uint64_t initial, time_t expiration,
                                                    uint64_t *value);
memcached_return_t memcached_decrement_with_initial(memcached_st *ptr, const char *key,
                                                    size_t key_length, uint64_t offset,
                                                    uint64_t initial, time_t expiration,
                                                    uint64_t *value);
memcached_return_t memcached_increment_with_initial_by_key(memcached_st *ptr, const char *group_key,
                                                           size_t group_key_length, const char *key,
                                                           size_t key_length, uint64_t offset,
                                                           uint64_t initial, time_t expiration,
                                                           uint64_t *value);
memcached_return_t memcached_decrement_with_initial_by_key(memcached_st *ptr, const char *group_key,
                                                           size_t group_key_length, const char *key,
                                                           size_t key_length, uint64_t offset,
                                                           uint64_t initial, time_t expiration,
                                                           uint64_t *value);

/* ---- whole-server operations --------------------------------------------------- */
memcached_return_t memcached_flush(memcached_st *ptr, time_t expiration);
memcached_return_t memcached_version(memcached_st *ptr);
memcached_return_t memcached_verbosity(memcached_st *ptr, uint32_t verbosity);
memcached_stat_st *memcached_stat(memcached_st *ptr, char *args, memcached_return_t *error);
char *memcached_stat_get_value(const memcached_st *ptr, memcached_stat_st *memc_stat,
                               const char *key, memcached_return_t *error);
char **memcached_stat_get_keys(memcached_st *ptr, memcached_stat_st *memc_stat,
                               memcached_return_t *error);
void memcached_stat_free(const memcached_st *ptr, memcached_stat_st *memc_stat);
memcached_return_t memcached_stat_execute(memcached_st *memc, const char *args,
                                          memcached_stat_fn func, void *context);
/* A summary of memcached_stat's array for memc's servers (NULL without
 * either); freed with memcached_analyze_free. */
memcached_analysis_st *memcached_analyze(memcached_st *memc, memcached_stat_st *memc_stat,
                                         memcached_return_t *error);
void memcached_analyze_free(memcached_analysis_st *analysis);
/* Calls the callbacks for every key the servers list in "stats cachedump"
 * (text protocol only, as libmemcached: NOT_SUPPORTED in binary). */
memcached_return_t memcached_dump(memcached_st *ptr, memcached_dump_fn *callback, void *context,
                                  uint32_t number_of_callbacks);
/* The stats of one server named by host and port, into memc_stat. */
memcached_return_t memcached_stat_servername(memcached_stat_st *memc_stat, char *args,
                                             const char *hostname, in_port_t port);

/* ---- behaviors ------------------------------------------------------------- */
memcached_return_t memcached_behavior_set(memcached_st *ptr, const memcached_behavior_t flag,
                                          uint64_t data);
uint64_t memcached_behavior_get(memcached_st *ptr, const memcached_behavior_t flag);
memcached_return_t memcached_behavior_set_distribution(memcached_st *ptr,
                                                       memcached_server_distribution_t type);
memcached_server_distribution_t memcached_behavior_get_distribution(memcached_st *ptr);
memcached_return_t memcached_behavior_set_key_hash(memcached_st *ptr, memcached_hash_t type);
memcached_hash_t memcached_behavior_get_key_hash(memcached_st *ptr);
memcached_return_t memcached_behavior_set_distribution_hash(memcached_st *ptr,
                                                            memcached_hash_t type);
memcached_hash_t memcached_behavior_get_distribution_hash(memcached_st *ptr);
memcached_return_t memcached_callback_set(memcached_st *ptr, const memcached_callback_t flag,
                                          const void *data);
void *memcached_callback_get(memcached_st *ptr, const memcached_callback_t flag,
                             memcached_return_t *error);

/* ---- SASL (binary protocol; Cyrus SASL) ------------------------------------- */
/* As in libmemcached, sasl_callback_t comes from <sasl/sasl.h> when it is
 * installed and stands for void otherwise. */
#if defined(__has_include)
#if __has_include(<sasl/sasl.h>)
#include <sasl/sasl.h>
#define LIBMEMCACHED_RDMA_HAVE_SASL_H 1
#endif
#endif
#ifndef LIBMEMCACHED_RDMA_HAVE_SASL_H
#define sasl_callback_t void
#endif
/* Every new connection authenticates with these Cyrus SASL callbacks
 * (owned by the caller; NULL: no authentication). */
void memcached_set_sasl_callbacks(memcached_st *ptr, const sasl_callback_t *callbacks);
sasl_callback_t *memcached_get_sasl_callbacks(memcached_st *ptr);
/* Authenticates new connections as username/password (copied); turns the
 * binary protocol on, as SASL needs it. */
memcached_return_t memcached_set_sasl_auth_data(memcached_st *ptr, const char *username,
                                                const char *password);
/* Forgets what memcached_set_sasl_auth_data stored. */
memcached_return_t memcached_destroy_sasl_auth_data(memcached_st *ptr);

/* ---- errors and strings ----------------------------------------------------- */
const char *memcached_strerror(const memcached_st *ptr, memcached_return_t rc);
const char *memcached_last_error_message(const memcached_st *ptr);
/* The last error message (memcached_last_error_message), and the same
 * printed to stderr. */
const char *memcached_error(const memcached_st *ptr);
void memcached_error_print(const memcached_st *ptr);
memcached_return_t memcached_last_error(const memcached_st *ptr);
int memcached_last_error_errno(const memcached_st *ptr);
const char *memcached_lib_version(void);
const char *libmemcached_string_behavior(const memcached_behavior_t flag);
const char *libmemcached_string_distribution(const memcached_server_distribution_t flag);
const char *libmemcached_string_hash(memcached_hash_t type);

#define memcached_success(__rc) ((__rc) == MEMCACHED_SUCCESS || (__rc) == MEMCACHED_END)
#define memcached_failed(__rc) ((__rc) != MEMCACHED_SUCCESS && (__rc) != MEMCACHED_END)

#ifdef __cplusplus
}
#endif

#include <libmemcached/nonblocking.h>

#endif
