/* server.c: server entries of a memcached_st: adding them (TCP, Unix
 * socket, weights, pushing a server list), looking them up (by position, by
 * key, cursor) and the instance accessors. The connection itself is io.c's. */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "client.h"
#include "hash.h"
#include "io.h"

void lmr_server_init(memcached_instance_st *srv, struct lmr_client *client, const char *hostname,
                     in_port_t port, uint32_t weight, memcached_connection_t type)
{
    memset(srv, 0, sizeof(*srv));
    srv->client = client;
    snprintf(srv->hostname, sizeof(srv->hostname), "%s", hostname);
    srv->port = port;
    srv->weight = weight;
    srv->type = type;
    srv->conn.fd = -1;
    /* not known before the server said (memcached_version), as libmemcached */
    srv->major_version = srv->minor_version = srv->micro_version = UINT8_MAX;
}

void lmr_server_destroy(memcached_instance_st *srv)
{
    lmr_io_close(srv);
    while (srv->head != NULL) /* callers drain first; never lose a request */
        lmr_io_complete_head(srv, MEMCACHED_CONNECTION_FAILURE);
    free(srv->rbuf);
    srv->rbuf = NULL;
    srv->rcapacity = 0;
}

static memcached_return_t add_server(memcached_st *ptr, const char *hostname, in_port_t port,
                                     uint32_t weight, memcached_connection_t type)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (hostname == NULL)
        hostname = "localhost";
    memcached_return_t rc = lmr_client_add_server(c, hostname, port, weight, type);
    /* as libmemcached: a weight above 1 turns weighting on for a consistent
     * distribution (memcached_server_push does it for any distribution) */
    if (rc == MEMCACHED_SUCCESS && weight > 1 &&
        lmr_distribution_is_consistent(c->behaviors.distribution))
        c->behaviors.ketama_weighted = true;
    return lmr_client_result(c, rc, NULL);
}

memcached_return_t memcached_server_add(memcached_st *ptr, const char *hostname, in_port_t port)
{
    return add_server(ptr, hostname, port, 1, MEMCACHED_CONNECTION_TCP);
}

memcached_return_t memcached_server_add_with_weight(memcached_st *ptr, const char *hostname,
                                                    in_port_t port, uint32_t weight)
{
    return add_server(ptr, hostname, port, weight, MEMCACHED_CONNECTION_TCP);
}

memcached_return_t memcached_server_add_unix_socket(memcached_st *ptr, const char *filename)
{
    if (filename == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    return add_server(ptr, filename, 0, 1, MEMCACHED_CONNECTION_UNIX_SOCKET);
}

memcached_return_t memcached_server_add_unix_socket_with_weight(memcached_st *ptr,
                                                                const char *filename,
                                                                uint32_t weight)
{
    if (filename == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    return add_server(ptr, filename, 0, weight, MEMCACHED_CONNECTION_UNIX_SOCKET);
}

memcached_return_t memcached_server_push(memcached_st *ptr, const memcached_server_list_st list)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (list == NULL)
        return MEMCACHED_SUCCESS;
    uint32_t count = memcached_server_list_count(list);
    for (uint32_t i = 0; i < count; i++) {
        memcached_return_t rc =
            lmr_client_add_server(c, list[i].hostname, list[i].port, list[i].weight, list[i].type);
        if (rc != MEMCACHED_SUCCESS)
            return lmr_client_result(c, rc, NULL);
        if (list[i].weight > 1)
            c->behaviors.ketama_weighted = true;
    }
    return lmr_client_result(c, MEMCACHED_SUCCESS, NULL);
}

uint32_t memcached_server_count(const memcached_st *ptr)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    return c ? c->server_count : 0;
}

const memcached_instance_st *memcached_server_instance_by_position(const memcached_st *ptr,
                                                                   uint32_t server_key)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL || server_key >= c->server_count)
        return NULL;
    return c->servers[server_key];
}

const memcached_instance_st *memcached_server_by_key(memcached_st *ptr, const char *key,
                                                     size_t key_length, memcached_return_t *error)
{
    memcached_return_t unused;
    if (error == NULL)
        error = &unused;
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL) {
        *error = MEMCACHED_INVALID_ARGUMENTS;
        return NULL;
    }
    *error = lmr_client_check_key(c, key, key_length);
    if (*error != MEMCACHED_SUCCESS)
        return NULL;
    memcached_instance_st *srv = lmr_client_pick(c, key, key_length, error);
    lmr_client_result(c, *error, NULL);
    return srv;
}

uint32_t memcached_generate_hash(const memcached_st *ptr, const char *key, size_t key_length)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return 0;
    uint32_t i = lmr_client_pick_index(c, key, key_length);
    return i == UINT32_MAX ? 0 : i;
}

uint32_t memcached_generate_hash_value(const char *key, size_t key_length,
                                       memcached_hash_t hash_algorithm)
{
    if (hash_algorithm >= MEMCACHED_HASH_CUSTOM)
        return 0;
    return lmr_hash((enum lmr_hash_alg)hash_algorithm, key, key_length);
}

memcached_return_t memcached_server_cursor(const memcached_st *ptr,
                                           const memcached_server_fn *callback, void *context,
                                           uint32_t number_of_callbacks)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL || (callback == NULL && number_of_callbacks > 0))
        return MEMCACHED_INVALID_ARGUMENTS;
    for (uint32_t i = 0; i < c->server_count; i++) {
        for (uint32_t f = 0; f < number_of_callbacks; f++) {
            memcached_return_t rc = callback[f](ptr, c->servers[i], context);
            if (rc != MEMCACHED_SUCCESS)
                return rc;
        }
    }
    return MEMCACHED_SUCCESS;
}

const char *memcached_server_name(const memcached_instance_st *self)
{
    return self ? self->hostname : NULL;
}

in_port_t memcached_server_port(const memcached_instance_st *self)
{
    return self ? self->port : 0;
}

const char *memcached_server_type(const memcached_instance_st *self)
{
    if (self == NULL)
        return "UNKNOWN";
    switch (self->type) {
    case MEMCACHED_CONNECTION_TCP:
        return "TCP";
    case MEMCACHED_CONNECTION_UDP:
        return "UDP";
    case MEMCACHED_CONNECTION_UNIX_SOCKET:
        return "SOCKET";
    case MEMCACHED_CONNECTION_RDMA:
        return "RDMA";
    case MEMCACHED_CONNECTION_RDMA_UD:
        return "RDMA+UD";
    case MEMCACHED_CONNECTION_RDMA_RC:
        return "RDMA+RC";
    case MEMCACHED_CONNECTION_TLS:
        return "TLS";
    }
    return "UNKNOWN";
}

uint8_t memcached_server_major_version(const memcached_instance_st *self)
{
    return self ? self->major_version : 0;
}

uint8_t memcached_server_minor_version(const memcached_instance_st *self)
{
    return self ? self->minor_version : 0;
}

uint8_t memcached_server_micro_version(const memcached_instance_st *self)
{
    return self ? self->micro_version : 0;
}

uint32_t memcached_server_response_count(const memcached_instance_st *self)
{
    return self ? self->in_window : 0;
}

memcached_return_t memcached_server_error_return(const memcached_instance_st *self)
{
    return self ? self->error_rc : MEMCACHED_INVALID_ARGUMENTS;
}

const memcached_instance_st *memcached_server_get_last_disconnect(const memcached_st *ptr)
{
    const struct lmr_client *c = lmr_client_of(ptr);
    return c ? c->last_disconnected : NULL;
}

void memcached_reset_last_disconnected_server(memcached_st *ptr)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c != NULL)
        c->last_disconnected = NULL;
}

const char *memcached_server_error(const memcached_instance_st *self)
{
    if (self == NULL || self->error_message[0] == '\0')
        return NULL;
    return self->error_message;
}

memcached_return_t memcached_server_add_udp(memcached_st *ptr, const char *hostname, in_port_t port)
{
    return memcached_server_add_udp_with_weight(ptr, hostname, port, 0);
}

memcached_return_t memcached_server_add_udp_with_weight(memcached_st *ptr, const char *hostname,
                                                        in_port_t port, uint32_t weight)
{
    (void)hostname;
    (void)port;
    (void)weight;
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    return lmr_client_result(c, MEMCACHED_NOT_SUPPORTED, "UDP servers are not supported");
}

in_port_t memcached_server_srcport(const memcached_instance_st *self)
{
    if (self == NULL || self->type != MEMCACHED_CONNECTION_TCP || self->conn.ops == NULL ||
        self->conn.fd < 0)
        return 0;
    struct sockaddr_storage local;
    socklen_t len = sizeof(local);
    if (getsockname(self->conn.fd, (struct sockaddr *)&local, &len) != 0)
        return 0;
    if (local.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&local)->sin_port);
    if (local.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)&local)->sin6_port);
    return 0;
}

void memcached_instance_next_retry(const memcached_instance_st *self, const time_t absolute_time)
{
    if (self != NULL) /* the handle's own server entry: writable, as libmemcached treats it */
        ((memcached_instance_st *)self)->next_retry = absolute_time;
}
