/* t/fuzz/config_target.c: the fuzz target for libmemcached-rdma's parsers of
 * configuration strings (libmemcached_check_configuration(), memcached()) and
 * of server lists (memcached_servers_parse()). Each input goes to all three;
 * the servers they build are checked, and a broken invariant aborts.
 *
 * Built two ways: with t/fuzz/replay.c as t/test_fuzz_config (make check
 * replays t/fuzz/config.corpus, no fuzzer needed), or with clang
 * -fsanitize=fuzzer and the library sources for coverage-guided fuzzing.
 * FUZZ_VERBOSE=1 in the environment prints what each input parsed to.
 *
 * No network: this file defines socket(), connect(), getaddrinfo() and
 * ibv_get_device_list() (the RDMA transport's first call), which abort.
 * A program's own definitions take the place of libc's and libibverbs' for
 * the library too, whether it is linked in or a shared library (exported:
 * see t/fuzz/config.am).
 * LLVMFuzzerInitialize checks once that the library's connects reach them. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <libmemcached/memcached.h>

/* memcached_instance_st is opaque in the API; its weight is read here */
#include "libmemcached-rdma/src/server.h"

/* ---- network guards ------------------------------------------------------- */

/* While check_guards_reached runs: the guard it expects to be called, and
 * whether it was. Then a guard refuses its call instead of aborting. */
static const char *probed_guard;
static bool probed_guard_reached;

static void network_call(const char *guard)
{
    if (probed_guard != NULL) {
        if (strcmp(guard, probed_guard) == 0)
            probed_guard_reached = true;
        return;
    }
    fprintf(stderr, "%s() called while parsing a configuration\n", guard);
    abort();
}

int socket(int domain, int type, int protocol)
{
    (void)domain, (void)type, (void)protocol;
    network_call("socket");
    errno = EACCES;
    return -1;
}

/* __CONST_SOCKADDR_ARG: glibc's type of connect's address parameter */
int connect(int fd, __CONST_SOCKADDR_ARG address, socklen_t address_length)
{
    (void)fd, (void)address, (void)address_length;
    network_call("connect");
    errno = EACCES;
    return -1;
}

int getaddrinfo(const char *restrict node, const char *restrict service,
                const struct addrinfo *restrict hints, struct addrinfo **restrict result)
{
    (void)node, (void)service, (void)hints, (void)result;
    network_call("getaddrinfo");
    return EAI_FAIL;
}

struct ibv_device;
struct ibv_device **ibv_get_device_list(int *device_count);

struct ibv_device **ibv_get_device_list(int *device_count)
{
    network_call("ibv_get_device_list");
    if (device_count != NULL)
        *device_count = 0;
    errno = ENOSYS;
    return NULL;
}

/* ---- checks --------------------------------------------------------------- */

static bool verbose;

__attribute__((format(printf, 1, 2), noreturn)) static void broken(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fputc('\n', stderr);
    abort();
}

/* the separators of options in a configuration string */
static bool is_option_blank(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static size_t count_options(const uint8_t *data, size_t size)
{
    size_t options = 0;
    for (size_t i = 0; i < size; i++)
        if (!is_option_blank(data[i]) && (i == 0 || is_option_blank(data[i - 1])))
            options++;
    return options;
}

/* Whether `text` occurs in data where an option starts and, unless it may
 * have been cut short (long texts), where that option ends. */
static bool names_an_option(const uint8_t *data, size_t size, const char *text)
{
    size_t text_length = strlen(text);
    for (size_t at = 0; text_length > 0 && at + text_length <= size; at++) {
        if (at > 0 && !is_option_blank(data[at - 1]))
            continue;
        if (memcmp(data + at, text, text_length) != 0)
            continue;
        size_t end = at + text_length;
        if (end == size || is_option_blank(data[end]) || text_length >= 100)
            return true;
    }
    return false;
}

static bool contains(const uint8_t *data, size_t size, const char *text)
{
    return memmem(data, size, text, strlen(text)) != NULL;
}

/* "[text]" in data: how an address with ':' in it must be written */
static bool contains_bracketed(const uint8_t *data, size_t size, const char *text)
{
    size_t text_length = strlen(text);
    for (const uint8_t *at = data;
         (at = memmem(at, size - (size_t)(at - data), text, text_length)) != NULL; at++) {
        const uint8_t *end = at + text_length;
        if (at > data && at[-1] == '[' && end < data + size && *end == ']')
            return true;
    }
    return false;
}

static bool contains_ignoring_case(const uint8_t *data, size_t size, const char *text)
{
    size_t text_length = strlen(text);
    for (size_t at = 0; at + text_length <= size; at++)
        if (strncasecmp((const char *)data + at, text, text_length) == 0)
            return true;
    return false;
}

/* a host as written in a configuration string or server list: not empty,
 * no blank, control character or ',' */
static bool host_chars_ok(const char *host)
{
    if (host[0] == '\0')
        return false;
    for (const unsigned char *c = (const unsigned char *)host; *c != '\0'; c++)
        if (*c <= ' ' || *c == 0x7f || *c == ',')
            return false;
    return true;
}

/* Checks a server of a memcached_st that `data` configured. */
static void check_instance(const memcached_instance_st *server, const uint8_t *data, size_t size,
                           const char *where)
{
    const char *name = memcached_server_name(server);
    in_port_t port = memcached_server_port(server);
    const char *type = memcached_server_type(server);
    if (name == NULL || name[0] == '\0' ||
        strnlen(name, MEMCACHED_NI_MAXHOST) >= MEMCACHED_NI_MAXHOST)
        broken("%s: server without a proper name", where);
    if (!contains(data, size, name))
        broken("%s: server name [%s] is not in the configuration", where, name);
    if (server->weight == 0)
        broken("%s: [%s] has weight 0", where, name);
    if (strcmp(type, "UNKNOWN") == 0)
        broken("%s: [%s] has an unknown type", where, name);
    if (strcmp(type, "SOCKET") != 0) {
        if (port == 0 || name[0] == '/')
            broken("%s: [%s] is %s on port %u", where, name, type, port);
        if (!host_chars_ok(name))
            broken("%s: host [%s] has a blank, control character or ','", where, name);
        if (strchr(name, ':') != NULL && !contains_bracketed(data, size, name))
            broken("%s: host [%s] has a ':' but was not written in brackets", where, name);
    }
    if (verbose)
        printf("  %s: [%s] port=%u weight=%u type=%s\n", where, name, port, server->weight, type);
}

struct cursor_walk {
    const uint8_t *data;
    size_t size;
    uint32_t servers_seen;
};

static memcached_return_t check_cursor_instance(const memcached_st *memc,
                                                const memcached_instance_st *server, void *context)
{
    (void)memc;
    struct cursor_walk *walk = context;
    walk->servers_seen++;
    check_instance(server, walk->data, walk->size, "cursor");
    return MEMCACHED_SUCCESS;
}

static void check_configuration(const uint8_t *data, size_t size)
{
    char error_text[512] = "";
    memcached_return_t rc =
        libmemcached_check_configuration((const char *)data, size, error_text, sizeof(error_text));
    if (verbose)
        printf("check_configuration: %s, error text '%s'\n", memcached_strerror(NULL, rc),
               error_text);
    if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_PARSE_ERROR &&
        rc != MEMCACHED_MEMORY_ALLOCATION_FAILURE)
        broken("check_configuration returned %d (%s)", rc, memcached_strerror(NULL, rc));
    if (rc == MEMCACHED_SUCCESS && error_text[0] != '\0')
        broken("check_configuration succeeded with error text '%s'", error_text);
    if (rc == MEMCACHED_PARSE_ERROR && error_text[0] == '\0')
        broken("check_configuration failed without error text");
    /* an error naming an option names it whole, as written */
    static const char *const naming_errors[] = {"invalid option: ",
                                                "expected an option starting with --: "};
    for (size_t i = 0; i < sizeof(naming_errors) / sizeof(naming_errors[0]); i++) {
        size_t prefix_length = strlen(naming_errors[i]);
        if (strncmp(error_text, naming_errors[i], prefix_length) == 0 &&
            !names_an_option(data, size, error_text + prefix_length))
            broken("error text '%s' does not name an option of the configuration", error_text);
    }

    memcached_st *memc = memcached((const char *)data, size);
    if (verbose)
        printf("memcached(): %s\n", memc != NULL ? "a memcached_st" : "NULL");
    if ((memc != NULL) != (rc == MEMCACHED_SUCCESS))
        broken("memcached() %s but check_configuration returned %s",
               memc != NULL ? "succeeded" : "failed", memcached_strerror(NULL, rc));
    if (memc == NULL)
        return;
    uint32_t servers = memcached_server_count(memc);
    if (servers > count_options(data, size))
        broken("%u servers from %zu options", servers, count_options(data, size));
    for (uint32_t i = 0; i < servers; i++) {
        const memcached_instance_st *server = memcached_server_instance_by_position(memc, i);
        if (server == NULL)
            broken("no server at position %u of %u", i, servers);
        check_instance(server, data, size, "position");
    }
    if (memcached_server_instance_by_position(memc, servers) != NULL)
        broken("a server at position %u of %u", servers, servers);
    struct cursor_walk walk = {.data = data, .size = size};
    memcached_server_fn check_each[1] = {check_cursor_instance};
    memcached_server_cursor(memc, check_each, &walk, 1);
    if (walk.servers_seen != servers)
        broken("the cursor saw %u of %u servers", walk.servers_seen, servers);
    if (servers > 0) {
        memcached_return_t key_rc;
        if (memcached_server_by_key(memc, "k", 1, &key_rc) == NULL)
            broken("no server for a key among %u (%s)", servers, memcached_strerror(NULL, key_rc));
    }
    memcached_free(memc);
}

/* the items of a server list: ','-separated, not only blanks */
static uint32_t count_list_items(const char *list)
{
    uint32_t items = 0;
    bool in_item = false;
    for (const unsigned char *c = (const unsigned char *)list; *c != '\0'; c++) {
        if (*c == ',')
            in_item = false;
        else if (!isspace(*c) && !in_item) {
            in_item = true;
            items++;
        }
    }
    return items;
}

static void check_server_list(const uint8_t *data, size_t size)
{
    /* memcached_servers_parse reads a C string: up to the first NUL */
    char *text = malloc(size + 1);
    if (text == NULL)
        return;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t text_length = strlen(text);
    const uint8_t *text_bytes = (const uint8_t *)text;

    memcached_server_list_st list = memcached_servers_parse(text);
    uint32_t entries = memcached_server_list_count(list);
    if (verbose)
        printf("servers_parse: %u entries\n", entries);
    if (list != NULL && entries != count_list_items(text))
        broken("a list of %u items parsed to %u entries", count_list_items(text), entries);
    for (uint32_t i = 0; i < entries; i++) {
        const memcached_server_st *entry = &list[i];
        const char *host = entry->hostname;
        if (strnlen(host, MEMCACHED_NI_MAXHOST) >= MEMCACHED_NI_MAXHOST)
            broken("list: host name not terminated");
        if (!host_chars_ok(host))
            broken("list: host [%s] is empty or has a blank, control character or ','", host);
        if (!contains(text_bytes, text_length, host))
            broken("list: host [%s] is not in the list", host);
        if (strchr(host, ':') != NULL && !contains_bracketed(text_bytes, text_length, host))
            broken("list: host [%s] has a ':' but was not written in brackets", host);
        if (entry->weight == 0)
            broken("list: [%s] has weight 0", host);
        bool path = host[0] == '/';
        switch (entry->type) {
        case MEMCACHED_CONNECTION_TCP:
        case MEMCACHED_CONNECTION_UNIX_SOCKET:
            if (path != (entry->type == MEMCACHED_CONNECTION_UNIX_SOCKET))
                broken("list: [%s] has type %d", host, entry->type);
            break;
        case MEMCACHED_CONNECTION_RDMA:
            if (!contains(text_bytes, text_length, "rdma://"))
                broken("list: [%s] is RDMA without rdma://", host);
            break;
        case MEMCACHED_CONNECTION_RDMA_RC:
            if (!contains(text_bytes, text_length, "rdma+rc://"))
                broken("list: [%s] is RDMA+RC without rdma+rc://", host);
            break;
        default:
            broken("list: [%s] has type %d", host, entry->type);
        }
        if (entry->type != MEMCACHED_CONNECTION_UNIX_SOCKET && (path || entry->port == 0))
            broken("list: [%s] is type %d on port %u", host, entry->type, entry->port);
        if (verbose)
            printf("  list: [%s] port=%u weight=%u type=%d\n", host, entry->port, entry->weight,
                   entry->type);
    }
    memcached_server_list_free(list);
    free(text);
}

/* ---- libFuzzer entry points ----------------------------------------------- */

/* Makes the library connect through each guard, with the guards refusing
 * the calls, and aborts unless each was reached: if they were not, the
 * library's calls would go to the network. */
static void check_guards_reached(void)
{
    static const struct {
        const char *configuration;
        const char *guard;
    } probes[] = {
        {"--SERVER=127.0.0.1:9", "getaddrinfo"},
        {"--SOCKET=/nonexistent/t-fuzz-config.sock", "socket"},
#ifdef HAVE_RDMA
        {"--SERVER=rdma://127.0.0.1:9", "ibv_get_device_list"},
#endif
    };
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        memcached_st *memc = memcached(probes[i].configuration, strlen(probes[i].configuration));
        if (memc == NULL)
            broken("guard check: memcached(\"%s\") failed", probes[i].configuration);
        probed_guard = probes[i].guard;
        probed_guard_reached = false;
        memcached_return_t rc = memcached_version(memc);
        probed_guard = NULL;
        if (!probed_guard_reached)
            broken("guard check: connecting to %s did not reach %s() (%s): the guards do not "
                   "replace the library's calls",
                   probes[i].configuration, probes[i].guard, memcached_strerror(memc, rc));
        memcached_free(memc);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    verbose = getenv("FUZZ_VERBOSE") != NULL;
    check_guards_reached();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* no option reads a file today; should one come, inputs naming it are
     * not run (the fuzzer would choose which files to open) */
    if (contains_ignoring_case(data, size, "file"))
        return 0;
    check_configuration(data, size);
    check_server_list(data, size);
    return 0;
}
