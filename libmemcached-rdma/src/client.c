/* client.c: memcached_st lifecycle (create, free, clone), default
 * behaviors, error recording, key validation and the key -> server mapping
 * through the placement (rebuilt whenever servers are added or ejected). */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cipher.h"
#include "io.h"
#include "placement.h"
#include "sasl.h"
#include "transport_ud.h"

void lmr_behaviors_defaults(struct lmr_behaviors *b)
{
    memset(b, 0, sizeof(*b));
    b->distribution = MEMCACHED_DISTRIBUTION_MODULA;
    b->key_hash = MEMCACHED_HASH_DEFAULT;
    b->ketama_hash = MEMCACHED_HASH_DEFAULT;
    b->connect_timeout_ms = MEMCACHED_DEFAULT_CONNECT_TIMEOUT;
    b->poll_timeout_ms = MEMCACHED_DEFAULT_TIMEOUT;
    b->retry_timeout_s = MEMCACHED_SERVER_FAILURE_RETRY_TIMEOUT;
    b->dead_timeout_s = MEMCACHED_SERVER_FAILURE_DEAD_TIMEOUT;
    b->server_failure_limit = MEMCACHED_SERVER_FAILURE_LIMIT;
    b->server_timeout_limit = MEMCACHED_SERVER_TIMEOUT_LIMIT;
    b->request_window = MEMCACHED_DEFAULT_REQUEST_WINDOW;
    b->ec_threshold = MEMCACHED_DEFAULT_ERASURE_CODING_THRESHOLD;
    b->hedge_timeout_ms = MEMCACHED_DEFAULT_RESILIENCE_HEDGE_TIMEOUT;
    b->io_msg_watermark = 500; /* libmemcached's defaults; no meaning here */
    b->io_bytes_watermark = 65 * 1024;
}

memcached_return_t lmr_client_result(struct lmr_client *c, memcached_return_t rc,
                                     const char *message)
{
    if (c == NULL)
        return rc;
    /* a buffered request is not an error: nothing to report */
    c->last_rc = rc == MEMCACHED_BUFFERED ? MEMCACHED_SUCCESS : rc;
    if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_END || rc == MEMCACHED_BUFFERED) {
        c->last_message[0] = '\0';
        c->last_errno = 0;
    } else {
        snprintf(c->last_message, sizeof(c->last_message), "%s%s%s",
                 memcached_strerror(c->root, rc), message ? ": " : "", message ? message : "");
    }
    return rc;
}

memcached_return_t lmr_client_check_key(const struct lmr_client *c, const char *key,
                                        size_t key_length)
{
    if (key == NULL || key_length == 0 || key_length + c->namespace_length >= MEMCACHED_MAX_KEY)
        return MEMCACHED_BAD_KEY_PROVIDED;
    if (!c->behaviors.binary_protocol) {
        /* the text protocol cannot frame keys with spaces or control bytes */
        for (size_t i = 0; i < key_length; i++) {
            unsigned char ch = (unsigned char)key[i];
            if (ch <= ' ' || ch == 0x7f)
                return MEMCACHED_BAD_KEY_PROVIDED;
        }
    }
    return MEMCACHED_SUCCESS;
}

/* The servers as the placement sees them, ejected ones too when
 * with_ejected; map (if not NULL) gets each entry's server index. */
static uint32_t placement_list(const struct lmr_client *c, bool with_ejected,
                               struct lmr_placement_server *list, uint32_t *map)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->server_count; i++) {
        const memcached_instance_st *srv = c->servers[i];
        if (srv->ejected && !with_ejected)
            continue;
        list[n].hostname = srv->hostname;
        list[n].port = srv->port;
        list[n].weight = srv->weight;
        if (map != NULL)
            map[n] = i;
        n++;
    }
    return n;
}

memcached_return_t lmr_client_rebuild_placement(struct lmr_client *c)
{
    lmr_placement_free(c->full_placement);
    c->full_placement = NULL;
    lmr_placement_free(c->placement);
    c->placement = NULL;
    free(c->placement_map);
    c->placement_map = NULL;
    c->placement_count = 0;
    c->placement_dirty = false;
    if (c->server_count == 0)
        return MEMCACHED_SUCCESS;
    struct lmr_placement_server *list = calloc(c->server_count, sizeof(*list));
    c->placement_map = calloc(c->server_count, sizeof(*c->placement_map));
    if (list == NULL || c->placement_map == NULL) {
        free(list);
        c->placement_dirty = true;
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    }
    struct lmr_placement_config cfg = {
        .distribution = (int)c->behaviors.distribution,
        .key_hash = (enum lmr_hash_alg)c->behaviors.key_hash,
        .point_hash = (enum lmr_hash_alg)c->point_hash,
        .ketama_hash = (enum lmr_hash_alg)c->behaviors.ketama_hash,
        .ketama_weighted = c->behaviors.ketama_weighted,
        .custom_hash = c->custom_hash,
        .custom_context = c->custom_hash_context,
        .buckets = c->bucket_hosts,
        .bucket_count = c->bucket_count,
    };
    /* every server, for resilience (a dead server is an erasure there) */
    uint32_t all = placement_list(c, true, list, NULL);
    c->full_placement = lmr_placement_build(&cfg, list, all);
    /* the live servers, for the placement libmemcached would use */
    uint32_t n = placement_list(c, false, list, c->placement_map);
    c->placement_count = n;
    if (n > 0 && c->full_placement != NULL)
        c->placement = lmr_placement_build(&cfg, list, n);
    free(list);
    if (c->full_placement == NULL || (n > 0 && c->placement == NULL)) {
        c->placement_dirty = true;
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    }
    return MEMCACHED_SUCCESS;
}

/* Servers ejected with a dead timeout come back once it has passed. */
static void revive_servers(struct lmr_client *c)
{
    if (c->behaviors.dead_timeout_s == 0)
        return;
    time_t now = 0;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        if (!srv->ejected)
            continue;
        if (now == 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            now = ts.tv_sec;
        }
        if (now >= srv->next_retry) {
            srv->ejected = false;
            srv->failure_count = 0;
            srv->next_retry = 0;
            lmr_client_redistribute(c);
        }
    }
}

/* The bytes placement hashes for key: with HASH_WITH_PREFIX_KEY, the
 * namespace and the key (in full, which must hold MEMCACHED_MAX_NAMESPACE +
 * MEMCACHED_MAX_KEY bytes). */
static const char *placement_key(const struct lmr_client *c, const char *key, size_t *key_length,
                                 char *full)
{
    if (!c->behaviors.hash_with_prefix_key || c->namespace_length == 0 ||
        *key_length >= MEMCACHED_MAX_KEY)
        return key;
    memcpy(full, c->namespace_prefix, c->namespace_length);
    memcpy(full + c->namespace_length, key, *key_length);
    *key_length += c->namespace_length;
    return full;
}

static bool placement_ready(struct lmr_client *c)
{
    revive_servers(c);
    if (c->placement_dirty || (c->placement == NULL && c->server_count > 0))
        if (lmr_client_rebuild_placement(c) != MEMCACHED_SUCCESS)
            return false;
    return true;
}

void memcached_autoeject(memcached_st *ptr)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c != NULL)
        (void)placement_ready(c);
}

uint32_t lmr_client_pick_index(struct lmr_client *c, const char *key, size_t key_length)
{
    if (!placement_ready(c) || c->placement_count == 0)
        return UINT32_MAX;
    if (c->placement_count == 1)
        return c->placement_map[0];
    char full[MEMCACHED_MAX_NAMESPACE + MEMCACHED_MAX_KEY];
    const char *hashed = placement_key(c, key, &key_length, full);
    uint32_t p = lmr_placement_pick(c->placement, hashed, key_length);
    if (p >= c->placement_count)
        return UINT32_MAX;
    return c->placement_map[p];
}

bool lmr_client_pick_servers(struct lmr_client *c, const char *key, size_t key_length, uint32_t n,
                             uint32_t *out)
{
    if (!placement_ready(c) || c->full_placement == NULL || n > c->server_count)
        return false;
    char full[MEMCACHED_MAX_NAMESPACE + MEMCACHED_MAX_KEY];
    const char *hashed = placement_key(c, key, &key_length, full);
    lmr_placement_pick_distinct(c->full_placement, hashed, key_length, n, out);
    return true;
}

memcached_instance_st *lmr_client_pick(struct lmr_client *c, const char *key, size_t key_length,
                                       memcached_return_t *rc)
{
    if (c->server_count == 0) {
        *rc = MEMCACHED_NO_SERVERS;
        return NULL;
    }
    uint32_t i = lmr_client_pick_index(c, key, key_length);
    if (i == UINT32_MAX) {
        /* every server was ejected, or the placement could not be built */
        *rc = c->placement_count == 0 ? MEMCACHED_SERVER_MARKED_DEAD
                                      : MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        return NULL;
    }
    *rc = MEMCACHED_SUCCESS;
    return c->servers[i];
}

memcached_return_t lmr_client_add_server(struct lmr_client *c, const char *hostname, in_port_t port,
                                         uint32_t weight, memcached_connection_t type)
{
    if (hostname == NULL || hostname[0] == '\0' || strlen(hostname) >= MEMCACHED_NI_MAXHOST)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (type == MEMCACHED_CONNECTION_UDP)
        return MEMCACHED_NOT_SUPPORTED;
    memcached_instance_st **grown =
        realloc(c->servers, (c->server_count + 1) * sizeof(*c->servers));
    if (grown == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    c->servers = grown;
    memcached_instance_st *srv = calloc(1, sizeof(*srv));
    if (srv == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    if ((type == MEMCACHED_CONNECTION_TCP || type == MEMCACHED_CONNECTION_RDMA ||
         type == MEMCACHED_CONNECTION_RDMA_UD || type == MEMCACHED_CONNECTION_RDMA_RC ||
         type == MEMCACHED_CONNECTION_TLS) &&
        port == 0)
        port = MEMCACHED_DEFAULT_PORT;
    lmr_server_init(srv, c, hostname, port, weight == 0 ? 1 : weight, type);
    srv->index = c->server_count;
    c->servers[c->server_count++] = srv;
    if (c->behaviors.sort_hosts)
        lmr_client_sort_servers(c);
    lmr_client_redistribute(c);
    return MEMCACHED_SUCCESS;
}

/* strcmp of the host names, then the ports; equal entries keep their order */
static int by_host_and_port(const void *a, const void *b)
{
    const memcached_instance_st *x = *(memcached_instance_st *const *)a;
    const memcached_instance_st *y = *(memcached_instance_st *const *)b;
    int order = strcmp(x->hostname, y->hostname);
    if (order == 0)
        order = (int)x->port - (int)y->port;
    if (order == 0)
        order = x->index < y->index ? -1 : x->index > y->index;
    return order;
}

void lmr_client_sort_servers(struct lmr_client *c)
{
    if (c->server_count > 1)
        qsort(c->servers, c->server_count, sizeof(*c->servers), by_host_and_port);
    for (uint32_t i = 0; i < c->server_count; i++)
        c->servers[i]->index = i;
}

static struct lmr_client *client_new(memcached_st *root)
{
    struct lmr_client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->root = root;
    lmr_behaviors_defaults(&c->behaviors);
    lmr_allocators_default(&c->allocators);
    c->point_hash = c->behaviors.key_hash;
    lmr_spare_pool_init(&c->spare_buffers, LMR_SPARE_BUFFERS, SIZE_MAX);
    lmr_spare_pool_init(&c->spare_groups, LMR_SPARE_GROUPS, LMR_SPARE_GROUP_MAX);
    return c;
}

memcached_st *memcached_create(memcached_st *ptr)
{
    bool allocated = false;
    if (ptr == NULL) {
        ptr = calloc(1, sizeof(*ptr));
        if (ptr == NULL)
            return NULL;
        allocated = true;
    } else {
        memset(ptr, 0, sizeof(*ptr));
    }
    ptr->options.is_allocated = allocated;
    ptr->impl = client_new(ptr);
    if (ptr->impl == NULL) {
        if (allocated)
            free(ptr);
        return NULL;
    }
    return ptr;
}

void memcached_servers_reset(memcached_st *ptr)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return;
    lmr_io_wait_all(c);
    lmr_io_drain_all(c);
    for (uint32_t i = c->server_count; i > 0; i--) {
        lmr_server_destroy(c->servers[i - 1]);
        free(c->servers[i - 1]);
    }
    free(c->servers);
    c->servers = NULL;
    c->server_count = 0;
    c->last_disconnected = NULL;
    lmr_placement_free(c->full_placement);
    c->full_placement = NULL;
    lmr_placement_free(c->placement);
    c->placement = NULL;
    free(c->placement_map);
    c->placement_map = NULL;
    c->placement_count = 0;
    c->placement_dirty = false;
}

void memcached_free(memcached_st *ptr)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c != NULL) {
        if (c->on_cleanup != NULL)
            c->on_cleanup(ptr);
        memcached_servers_reset(ptr);
        lmr_transport_ud_release(c); /* after its servers' connections */
        lmr_fetch_clear(&c->fetch);
        lmr_spare_pool_release(&c->spare_groups);
        lmr_spare_pool_release(&c->spare_buffers);
        free(c->ec_matrix);
        lmr_cipher_free(c->cipher);
        lmr_keyspace_release(c);
        lmr_sasl_release(c);
        free(c);
        ptr->impl = NULL;
    }
    if (ptr != NULL && ptr->options.is_allocated)
        free(ptr);
}

void memcached_quit(memcached_st *ptr)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return;
    lmr_io_wait_all(c);
    lmr_io_drain_all(c);
    for (uint32_t i = 0; i < c->server_count; i++)
        lmr_io_close(c->servers[i]);
}

memcached_return_t memcached_flush_buffers(memcached_st *ptr)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    lmr_io_wait_all(c);
    lmr_io_drain_all(c);
    return MEMCACHED_SUCCESS;
}

memcached_st *memcached_clone(memcached_st *clone, const memcached_st *source)
{
    if (source == NULL)
        return memcached_create(clone);
    const struct lmr_client *src = lmr_client_of(source);
    memcached_st *copy = memcached_create(clone);
    if (copy == NULL)
        return NULL;
    struct lmr_client *c = copy->impl;
    c->behaviors = src->behaviors;
    c->user_data = src->user_data;
    c->allocators = src->allocators;
    c->on_clone = src->on_clone;
    c->on_cleanup = src->on_cleanup;
    c->on_get_miss = src->on_get_miss;
    c->on_delete = src->on_delete;
    memcpy(c->namespace_prefix, src->namespace_prefix, sizeof(c->namespace_prefix));
    c->namespace_length = src->namespace_length;
    if (src->cipher != NULL)
        c->cipher = lmr_cipher_copy(src->cipher);
    if ((src->cipher != NULL && c->cipher == NULL) || !lmr_keyspace_copy(c, src) ||
        lmr_sasl_copy(copy, source) != MEMCACHED_SUCCESS) {
        memcached_free(copy);
        return NULL;
    }
    for (uint32_t i = 0; i < src->server_count; i++) {
        const memcached_instance_st *s = src->servers[i];
        if (lmr_client_add_server(c, s->hostname, s->port, s->weight, s->type) !=
            MEMCACHED_SUCCESS) {
            memcached_free(copy);
            return NULL;
        }
        if (s->weight > 1) /* libmemcached pushes the servers into the clone */
            c->behaviors.ketama_weighted = true;
    }
    if (src->on_clone != NULL) /* its return is not looked at, as libmemcached */
        src->on_clone(copy, source);
    return copy;
}

void *memcached_get_user_data(const memcached_st *ptr)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    return c ? c->user_data : NULL;
}

void *memcached_set_user_data(memcached_st *ptr, void *data)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return NULL;
    void *old = c->user_data;
    c->user_data = data;
    return old;
}

const char *memcached_last_error_message(const memcached_st *ptr)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return memcached_strerror(NULL, MEMCACHED_INVALID_ARGUMENTS);
    if (c->last_message[0] == '\0')
        return memcached_strerror(ptr, c->last_rc);
    return c->last_message;
}

memcached_return_t memcached_last_error(const memcached_st *ptr)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    return c ? c->last_rc : MEMCACHED_INVALID_ARGUMENTS;
}

int memcached_last_error_errno(const memcached_st *ptr)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    return c ? c->last_errno : 0;
}

memcached_return_t memcached_reset(memcached_st *ptr)
{
    if (lmr_client_of(ptr) == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    bool allocated = ptr->options.is_allocated;
    ptr->options.is_allocated = false; /* free the insides only */
    memcached_free(ptr);
    if (memcached_create(ptr) == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    ptr->options.is_allocated = allocated;
    return MEMCACHED_SUCCESS;
}

memcached_return_t memcached_push(memcached_st *destination, const memcached_st *source)
{
    struct lmr_client *c = lmr_client_of(destination);
    const struct lmr_client *src = lmr_client_of(source);
    if (c == NULL || src == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    for (uint32_t i = 0; i < src->server_count; i++) {
        const memcached_instance_st *s = src->servers[i];
        memcached_return_t rc = lmr_client_add_server(c, s->hostname, s->port, s->weight, s->type);
        if (rc != MEMCACHED_SUCCESS)
            return lmr_client_result(c, rc, NULL);
    }
    return MEMCACHED_SUCCESS;
}

uint64_t memcached_query_id(const memcached_st *ptr)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    return c ? c->query_id : 0;
}

const char *memcached_error(const memcached_st *ptr)
{
    return memcached_last_error_message(ptr);
}

void memcached_error_print(const memcached_st *ptr)
{
    fprintf(stderr, "%s\n", memcached_last_error_message(ptr));
}

memcached_return_t lmr_client_check_replies_for_trigger(struct lmr_client *c)
{
    if (c->behaviors.buffer_requests || c->behaviors.noreply)
        return lmr_client_result(c, MEMCACHED_INVALID_ARGUMENTS,
                                 "a delete trigger needs replies: no buffering, no noreply");
    return MEMCACHED_SUCCESS;
}
