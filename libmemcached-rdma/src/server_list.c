/* server_list.c: memcached_server_st arrays (memcached_server_list_st):
 * append, count, free, and parsing "host:port[:weight], ..." strings
 * (also "host:port weight").
 * The first entry's number_of_hosts holds the array length. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmemcached/memcached.h>

#include "client.h"

uint32_t memcached_server_list_count(const memcached_server_list_st ptr)
{
    return ptr == NULL ? 0 : ptr[0].number_of_hosts;
}

void memcached_server_list_free(memcached_server_list_st ptr)
{
    free(ptr);
}

memcached_server_list_st memcached_server_list_append_with_weight(memcached_server_list_st ptr,
                                                                  const char *hostname,
                                                                  in_port_t port, uint32_t weight,
                                                                  memcached_return_t *error)
{
    memcached_return_t unused;
    if (error == NULL)
        error = &unused;
    if (hostname == NULL)
        hostname = "localhost";
    if (strlen(hostname) >= MEMCACHED_NI_MAXHOST) {
        *error = MEMCACHED_INVALID_ARGUMENTS;
        return NULL;
    }
    bool is_socket = hostname[0] == '/';
    if (port == 0 && !is_socket)
        port = MEMCACHED_DEFAULT_PORT;
    uint32_t count = memcached_server_list_count(ptr);
    memcached_server_list_st grown = realloc(ptr, (count + 1) * sizeof(*grown));
    if (grown == NULL) {
        *error = MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        return NULL;
    }
    memcached_server_st *s = &grown[count];
    memset(s, 0, sizeof(*s));
    snprintf(s->hostname, sizeof(s->hostname), "%s", hostname);
    s->port = port;
    s->weight = weight == 0 ? 1 : weight;
    s->type = is_socket ? MEMCACHED_CONNECTION_UNIX_SOCKET : MEMCACHED_CONNECTION_TCP;
    s->options.is_initialized = true;
    grown[0].number_of_hosts = count + 1;
    *error = MEMCACHED_SUCCESS;
    return grown;
}

memcached_server_list_st memcached_server_list_append(memcached_server_list_st ptr,
                                                      const char *hostname, in_port_t port,
                                                      memcached_return_t *error)
{
    return memcached_server_list_append_with_weight(ptr, hostname, port, 0, error);
}

/* "host", "host:port", "host:port:weight", "[v6]:port", "/path/socket" */
static bool parse_one(const char *item, char *host, size_t host_size, in_port_t *port,
                      uint32_t *weight)
{
    *port = 0;
    *weight = 0;
    const char *rest;
    if (item[0] == '[') {
        const char *close = strchr(item, ']');
        if (close == NULL || close == item + 1 || (size_t)(close - item - 1) >= host_size)
            return false;
        memcpy(host, item + 1, (size_t)(close - item - 1));
        host[close - item - 1] = '\0';
        rest = close + 1;
    } else {
        size_t len = strcspn(item, ":");
        if (len == 0 || len >= host_size)
            return false;
        memcpy(host, item, len);
        host[len] = '\0';
        rest = item + len;
    }
    if (*rest == ':') {
        char *end;
        unsigned long p = strtoul(rest + 1, &end, 10);
        if (end == rest + 1 || p > 65535)
            return false;
        *port = (in_port_t)p;
        rest = end;
        if (*rest == ':' || *rest == ' ' || *rest == '\t') { /* "host:port weight" too */
            unsigned long w = strtoul(rest + 1, &end, 10);
            if (end == rest + 1)
                return false;
            *weight = (uint32_t)w;
            rest = end;
        }
    }
    return *rest == '\0' && lmr_host_name_ok(host);
}

memcached_server_list_st memcached_servers_parse(const char *server_strings)
{
    if (server_strings == NULL)
        return NULL;
    memcached_server_list_st list = NULL;
    const char *p = server_strings;
    while (*p != '\0') {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        if (*p == '\0')
            break;
        /* items end at ',' (as libmemcached reads the list: a blank inside
         * one starts its weight, "host:port weight"); blanks around go */
        size_t len = strcspn(p, ",");
        while (len > 0 && isspace((unsigned char)p[len - 1]))
            len--;
        char item[MEMCACHED_NI_MAXHOST + 32];
        char host[MEMCACHED_NI_MAXHOST];
        in_port_t port;
        uint32_t weight;
        if (len >= sizeof(item)) {
            memcached_server_list_free(list);
            return NULL;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        p += len;
        memcached_connection_t type = lmr_scheme_of(item, &len);
        if (!parse_one(item, host, sizeof(host), &port, &weight) ||
            (type != MEMCACHED_CONNECTION_TCP && host[0] == '/')) { /* a path has no scheme */
            memcached_server_list_free(list);
            return NULL;
        }
        memcached_return_t rc;
        memcached_server_list_st grown =
            memcached_server_list_append_with_weight(list, host, port, weight, &rc);
        if (grown == NULL) {
            memcached_server_list_free(list);
            return NULL;
        }
        list = grown;
        if (type != MEMCACHED_CONNECTION_TCP)
            list[memcached_server_list_count(list) - 1].type = type;
    }
    return list;
}

void memcached_server_free(memcached_server_st *ptr)
{
    memcached_server_list_free(ptr);
}

void memcached_server_error_reset(memcached_server_st *ptr)
{
    (void)ptr; /* list entries carry no error state to clear */
}
