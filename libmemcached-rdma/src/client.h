/* client.h: the state behind a memcached_st (struct lmr_client): servers,
 * behaviors, placement, the fetch queue of mget results and the last error.
 * Helpers to pick a server for a key and to record errors. No I/O here. */
#ifndef LMR_CLIENT_H
#define LMR_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "fetch.h"
#include "spare_pool.h"

struct lmr_placement;

struct lmr_behaviors {
    bool binary_protocol;
    bool no_block;
    bool tcp_nodelay;
    bool tcp_keepalive;
    bool support_cas;
    bool noreply;
    bool buffer_requests;
    bool verify_key;
    bool ketama_weighted;
    bool randomize_replica_read;
    bool remove_failed_servers;
    bool hash_with_prefix_key;
    bool sort_hosts;
    memcached_server_distribution_t distribution;
    memcached_hash_t key_hash;
    memcached_hash_t ketama_hash;
    uint32_t number_of_replicas;
    int32_t connect_timeout_ms;
    int32_t poll_timeout_ms;
    int32_t rcv_timeout_us;
    int32_t snd_timeout_us;
    uint32_t retry_timeout_s;
    uint32_t dead_timeout_s;
    uint32_t server_failure_limit;
    uint32_t server_timeout_limit;
    uint32_t tcp_keepidle;
    uint64_t socket_send_size;
    uint64_t socket_recv_size;
    uint64_t io_msg_watermark;
    uint64_t io_bytes_watermark;
    uint64_t io_key_prefetch;
    uint32_t request_window;
    /* resilience (resilience.h): REPLICATION copies (0: off) and mode,
     * ERASURE_CODING data and parity chunks (0: off), and the value size
     * below which erasure coding replicates instead */
    uint32_t replication_copies;
    bool replication_async;
    uint32_t ec_data_chunks;
    uint32_t ec_parity_chunks;
    uint64_t ec_threshold;
    int hedge_timeout_ms; /* RESILIENCE_HEDGE_TIMEOUT; 0: off */
};

/* The allocators of memory handed to the caller (allocators.c). */
struct lmr_allocators {
    memcached_malloc_fn malloc_fn;
    memcached_free_fn free_fn;
    memcached_realloc_fn realloc_fn;
    memcached_calloc_fn calloc_fn;
    void *context;
    bool custom; /* false: the C library's (the functions above wrap it) */
};
/* The C library's allocators, wrapped as libmemcached's function types. */
void lmr_allocators_default(struct lmr_allocators *a);
/* n bytes from ptr's malloc, for memory handed to the caller. */
void *lmr_caller_alloc(const memcached_st *ptr, size_t n);
/* Hands buf (from malloc, length bytes plus a terminating NUL) to the caller:
 * buf itself under the C library's allocators, else a copy from the custom
 * malloc (buf is freed). NULL if that allocation fails. */
char *lmr_caller_buffer(const memcached_st *ptr, char *buf, size_t length);

struct lmr_client {
    memcached_st *root;
    struct lmr_ud_ctx *ud; /* the UD context its rdma+ud:// servers share (transport_ud.c) */
    memcached_instance_st **servers;
    uint32_t server_count;

    struct lmr_placement *placement;
    bool placement_dirty;
    /* The key hash when libmemcached would last have rebuilt its continuum
     * (lmr_client_redistribute): it names unweighted continuum points.
     * Changing HASH alone does not rebuild, in libmemcached or here. */
    memcached_hash_t point_hash;
    uint32_t *placement_map; /* placement index -> server index */
    uint32_t placement_count;
    /* every server, ejected or not: resilience places N servers per key
     * on it, so a dead server is an erasure rather than a remap */
    struct lmr_placement *full_placement;

    struct lmr_behaviors behaviors;
    struct lmr_fetch_queue fetch;
    /* the RDMA transport's contexts shared by this client's connections
     * (lmr_endpoint.shared); NULL while no RDMA connection is open */
    void *rdma_shared;
    uint64_t query_id;     /* calls that talked to servers (memcached_query_id) */
    uint32_t quiet_unread; /* quiet requests sent since replies were last read */
    /* memcached_callback_set's function callbacks (NULL: none) */
    memcached_clone_fn on_clone;               /* after memcached_clone */
    memcached_cleanup_fn on_cleanup;           /* in memcached_free */
    memcached_trigger_key_fn on_get_miss;      /* a memcached_get miss: read-through */
    memcached_trigger_delete_key_fn on_delete; /* after a delete that deleted */
    void *user_data;
    /* SASL (sasl.c): the callbacks new connections authenticate with, and
     * the credentials behind them when memcached_set_sasl_auth_data made them */
    const sasl_callback_t *sasl_callbacks;
    struct lmr_sasl_auth *sasl_auth;
    struct lmr_allocators allocators;               /* memcached_set_memory_allocators */
    char namespace_prefix[MEMCACHED_MAX_NAMESPACE]; /* MEMCACHED_CALLBACK_PREFIX_KEY */
    size_t namespace_length;
    uint32_t next_opaque;                     /* binary protocol request ids */
    memcached_instance_st *last_disconnected; /* the last server that failed */
    /* when the last connect or handshake returned to the caller
     * (lmr_io_now_ms clock): one that blocks (RDMA's connect, TLS, SASL)
     * may take CONNECT_TIMEOUT, time in which the servers asked are not
     * silent (io_wait.c, run_until) */
    int64_t connect_returned_ms;

    /* resilience: parents whose children completed (group.h), copies and
     * chunks that failed (MEMCACHED_BEHAVIOR_RESILIENCE_FAILURES), the
     * erasure code's matrix for ec_matrix_k/m (erasure.h), write stamps */
    struct lmr_group *pending_groups;
    struct lmr_group *timed_groups; /* groups with a timer (lmr_group_wake_after) */
    uint64_t resilience_failures;
    int *ec_matrix;
    uint32_t ec_matrix_k, ec_matrix_m;
    uint64_t stamp_next;
    /* erasure-coded gets with a threshold: how many of the latest found a
     * coded value, counted up on one and down on a whole copy, between 0
     * and LMR_EC_CODED_RECENT_MAX; from LMR_EC_CODED_RECENT_ALL on a get
     * asks all K data chunks at once (resilience_ec.c, coded_read) */
#define LMR_EC_CODED_RECENT_MAX 3
#define LMR_EC_CODED_RECENT_ALL 2
    uint8_t ec_coded_recent;
    /* value buffers of freed child requests, for the next children (a
     * coded get's chunks would otherwise take fresh memory every time) */
#define LMR_SPARE_BUFFERS 16
    struct lmr_spare_pool spare_buffers;
    /* blocks of freed groups (group.h), each with its size, for the next
     * groups: a get then neither allocates nor clears its children anew */
#define LMR_SPARE_GROUPS 64
#define LMR_SPARE_GROUP_MAX 8192 /* larger blocks are freed (at most 512 KiB kept) */
    struct lmr_spare_pool spare_groups;

    /* keyspace.c: memcached_set_hashkit's function (NULL: behaviors.key_hash),
     * what memcached_get_hashkit hands out, memcached_bucket_set's table */
    hashkit_hash_fn custom_hash;
    void *custom_hash_context;
    hashkit_st hashkit_view;
    uint32_t *bucket_hosts;
    uint32_t *bucket_forward; /* NULL when none was given */
    uint32_t bucket_count;
    uint32_t bucket_replicas;
    struct lmr_cipher *cipher; /* memcached_set_encoding_key (cipher.c), NULL: off */

    memcached_return_t last_rc;
    int last_errno;
    char last_message[512];
};

/* Default behaviors, as libmemcached sets them. */
void lmr_behaviors_defaults(struct lmr_behaviors *b);

/* Records the outcome of an API call and returns rc. */
memcached_return_t lmr_client_result(struct lmr_client *c, memcached_return_t rc,
                                     const char *message);
/* A delete trigger needs each delete's reply: INVALID_ARGUMENTS (recorded)
 * while buffering or NOREPLY is on, SUCCESS otherwise. */
memcached_return_t lmr_client_check_replies_for_trigger(struct lmr_client *c);
/* Validates a key for the active protocol. */
memcached_return_t lmr_client_check_key(const struct lmr_client *c, const char *key,
                                        size_t key_length);
/* The server that holds `key` (placement rebuilt first if needed).
 * NULL with *rc set when there is no usable server. */
memcached_instance_st *lmr_client_pick(struct lmr_client *c, const char *key, size_t key_length,
                                       memcached_return_t *rc);
/* Index of the server that holds key, or UINT32_MAX; rebuilds placement. */
uint32_t lmr_client_pick_index(struct lmr_client *c, const char *key, size_t key_length);
/* The first n distinct servers for key among all servers, ejected or not
 * (resilience: a dead server is an erasure, keys never move). False on
 * ENOMEM or fewer servers than n. */
bool lmr_client_pick_servers(struct lmr_client *c, const char *key, size_t key_length, uint32_t n,
                             uint32_t *out);
memcached_return_t lmr_client_rebuild_placement(struct lmr_client *c);
/* keyspace.c: copies src's custom hash and bucket table into dst (false on
 * ENOMEM); frees c's bucket table. */
bool lmr_keyspace_copy(struct lmr_client *dst, const struct lmr_client *src);
void lmr_keyspace_release(struct lmr_client *c);
/* The ketama distributions (libmemcached's memcached_is_consistent_distribution). */
static inline bool lmr_distribution_is_consistent(memcached_server_distribution_t d)
{
    return d == MEMCACHED_DISTRIBUTION_CONSISTENT ||
           d == MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA ||
           d == MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY ||
           d == MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED;
}

/* A change after which libmemcached rebuilds its continuum (servers added,
 * a distribution or SORT_HOSTS set, a server ejected or back): the placement
 * is rebuilt, its points hashed with the key hash of this moment. */
static inline void lmr_client_redistribute(struct lmr_client *c)
{
    c->placement_dirty = true;
    c->point_hash = c->behaviors.key_hash;
}
/* Orders the servers by host name, then port (SORT_HOSTS), as libmemcached
 * does; the caller marks the placement for rebuilding. */
void lmr_client_sort_servers(struct lmr_client *c);
memcached_return_t lmr_client_add_server(struct lmr_client *c, const char *hostname, in_port_t port,
                                         uint32_t weight, memcached_connection_t type);

/* A host name or address as a configuration string or server list gives
 * it: not empty, no blank, control character or ',' (a list separator). */
/* A server entry's scheme: "rdma://" (RC, or UD when the server refuses RC), "rdma+rc://" (RC
 * only), "rdma+ud://" (UD only) or "tls://" is removed from
 * spec (of *len bytes, NUL-ended; *len shrinks) and names the connection type; without one, TCP. */
static inline memcached_connection_t lmr_scheme_of(char *spec, size_t *len)
{
    static const struct {
        const char *prefix;
        memcached_connection_t type;
    } schemes[] = {{"rdma://", MEMCACHED_CONNECTION_RDMA},
                   {"rdma+rc://", MEMCACHED_CONNECTION_RDMA_RC},
                   {"rdma+ud://", MEMCACHED_CONNECTION_RDMA_UD},
                   {"tls://", MEMCACHED_CONNECTION_TLS}};
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        size_t n = strlen(schemes[i].prefix);
        if (strncmp(spec, schemes[i].prefix, n) == 0) {
            memmove(spec, spec + n, *len - n + 1);
            *len -= n;
            return schemes[i].type;
        }
    }
    return MEMCACHED_CONNECTION_TCP;
}

static inline bool lmr_host_name_ok(const char *host)
{
    if (host[0] == '\0')
        return false;
    for (const unsigned char *p = (const unsigned char *)host; *p; p++)
        if (*p <= ' ' || *p == 0x7f || *p == ',')
            return false;
    return true;
}

/* Keys come back from servers with the namespace in front: drop it. */
static inline void lmr_client_strip_namespace(const struct lmr_client *c, const char **key,
                                              size_t *key_length)
{
    if (c->namespace_length > 0 && *key_length >= c->namespace_length &&
        memcmp(*key, c->namespace_prefix, c->namespace_length) == 0) {
        *key += c->namespace_length;
        *key_length -= c->namespace_length;
    }
}

static inline struct lmr_client *lmr_client_of(const memcached_st *memc)
{
    return memc == NULL ? NULL : memc->impl;
}

#endif
