/* config_string.c: memcached() and libmemcached_check_configuration():
 * parsing libmemcached configuration strings ("--SERVER=host:port/?weight
 * --BINARY-PROTOCOL --DISTRIBUTION=consistent ...") into servers and
 * behaviors of a new memcached_st. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libmemcached/memcached.h>

#include "client.h"

struct flag_option {
    const char *name;
    memcached_behavior_t behavior;
};

static const struct flag_option flag_options[] = {
    {"BINARY-PROTOCOL", MEMCACHED_BEHAVIOR_BINARY_PROTOCOL},
    {"BUFFER-REQUESTS", MEMCACHED_BEHAVIOR_BUFFER_REQUESTS},
    {"HASH-WITH-NAMESPACE", MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY},
    {"NOREPLY", MEMCACHED_BEHAVIOR_NOREPLY},
    {"RANDOMIZE-REPLICA-READ", MEMCACHED_BEHAVIOR_RANDOMIZE_REPLICA_READ},
    {"SORT-HOSTS", MEMCACHED_BEHAVIOR_SORT_HOSTS},
    {"SUPPORT-CAS", MEMCACHED_BEHAVIOR_SUPPORT_CAS},
    {"TCP-NODELAY", MEMCACHED_BEHAVIOR_TCP_NODELAY},
    {"TCP-KEEPALIVE", MEMCACHED_BEHAVIOR_TCP_KEEPALIVE},
    {"USE-UDP", MEMCACHED_BEHAVIOR_USE_UDP},
    {"VERIFY-KEY", MEMCACHED_BEHAVIOR_VERIFY_KEY},
    {"REMOVE-FAILED-SERVERS", MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS},
};

static const struct flag_option number_options[] = {
    {"CONNECT-TIMEOUT", MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT},
    {"IO-MSG-WATERMARK", MEMCACHED_BEHAVIOR_IO_MSG_WATERMARK},
    {"IO-BYTES-WATERMARK", MEMCACHED_BEHAVIOR_IO_BYTES_WATERMARK},
    {"IO-KEY-PREFETCH", MEMCACHED_BEHAVIOR_IO_KEY_PREFETCH},
    {"NUMBER-OF-REPLICAS", MEMCACHED_BEHAVIOR_NUMBER_OF_REPLICAS},
    {"POLL-TIMEOUT", MEMCACHED_BEHAVIOR_POLL_TIMEOUT},
    {"RCV-TIMEOUT", MEMCACHED_BEHAVIOR_RCV_TIMEOUT},
    {"RETRY-TIMEOUT", MEMCACHED_BEHAVIOR_RETRY_TIMEOUT},
    {"SERVER-FAILURE-LIMIT", MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT},
    {"SND-TIMEOUT", MEMCACHED_BEHAVIOR_SND_TIMEOUT},
    {"SOCKET-RECV-SIZE", MEMCACHED_BEHAVIOR_SOCKET_RECV_SIZE},
    {"SOCKET-SEND-SIZE", MEMCACHED_BEHAVIOR_SOCKET_SEND_SIZE},
    {"DEAD-TIMEOUT", MEMCACHED_BEHAVIOR_DEAD_TIMEOUT},
    {"TCP-KEEPIDLE", MEMCACHED_BEHAVIOR_TCP_KEEPIDLE},
    {"ERASURE-CODING-THRESHOLD", MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD},
    {"RESILIENCE-HEDGE-TIMEOUT", MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT},
};

static const struct {
    const char *name;
    memcached_hash_t hash;
} hash_names[] = {
    {"DEFAULT", MEMCACHED_HASH_DEFAULT},   {"MD5", MEMCACHED_HASH_MD5},
    {"CRC", MEMCACHED_HASH_CRC},           {"FNV1_64", MEMCACHED_HASH_FNV1_64},
    {"FNV1A_64", MEMCACHED_HASH_FNV1A_64}, {"FNV1_32", MEMCACHED_HASH_FNV1_32},
    {"FNV1A_32", MEMCACHED_HASH_FNV1A_32}, {"HSIEH", MEMCACHED_HASH_HSIEH},
    {"MURMUR", MEMCACHED_HASH_MURMUR},     {"JENKINS", MEMCACHED_HASH_JENKINS},
    {"MURMUR3", MEMCACHED_HASH_MURMUR3},
};

static bool parse_hash(const char *s, memcached_hash_t *out)
{
    for (size_t i = 0; i < sizeof(hash_names) / sizeof(hash_names[0]); i++) {
        if (strcasecmp(s, hash_names[i].name) == 0) {
            *out = hash_names[i].hash;
            return true;
        }
    }
    return false;
}

static bool parse_number(const char *s, uint64_t *out)
{
    if (*s == '\0' || !isdigit((unsigned char)*s))
        return false;
    char *end;
    *out = strtoull(s, &end, 10);
    return *end == '\0';
}

/* "host[:port][/?weight]" or a socket path with optional "/?weight". */
static memcached_return_t add_server_spec(memcached_st *memc, char *spec, bool socket)
{
    uint32_t weight = 1;
    char *w = strstr(spec, "/?");
    if (w != NULL) {
        uint64_t v;
        if (!parse_number(w + 2, &v) || v > UINT32_MAX)
            return MEMCACHED_PARSE_ERROR;
        weight = (uint32_t)v;
        *w = '\0';
    }
    if (socket)
        return memcached_server_add_unix_socket_with_weight(memc, spec, weight);
    in_port_t port = MEMCACHED_DEFAULT_PORT;
    size_t spec_len = strlen(spec);
    memcached_connection_t type = lmr_scheme_of(spec, &spec_len);
    char *host = spec;
    char *colon = NULL;
    if (spec[0] == '[') { /* [IPv6 address][:port], nothing else after ']' */
        char *close = strchr(spec, ']');
        if (close == NULL || (close[1] != ':' && close[1] != '\0'))
            return MEMCACHED_PARSE_ERROR;
        *close = '\0';
        host = spec + 1;
        colon = close[1] == ':' ? close + 1 : NULL;
    } else { /* host[:port]: a second ':' is an error (an IPv6 address needs brackets) */
        colon = strchr(spec, ':');
        if (colon != NULL && strchr(colon + 1, ':') != NULL)
            return MEMCACHED_PARSE_ERROR;
    }
    if (colon != NULL) {
        uint64_t v;
        *colon = '\0';
        if (!parse_number(colon + 1, &v) || v > 65535)
            return MEMCACHED_PARSE_ERROR;
        port = (in_port_t)v;
    }
    if (!lmr_host_name_ok(host) || host[0] == '/') /* a path is for --SOCKET */
        return MEMCACHED_PARSE_ERROR;
    if (type != MEMCACHED_CONNECTION_TCP) { /* rdma:// or tls://: a one-entry server list */
        memcached_return_t rc;
        memcached_server_list_st one =
            memcached_server_list_append_with_weight(NULL, host, port, weight, &rc);
        if (one == NULL)
            return rc;
        one[0].type = type;
        rc = memcached_server_push(memc, one);
        memcached_server_list_free(one);
        return rc;
    }
    return memcached_server_add_with_weight(memc, host, port, weight);
}

/* has_hash: --HASH was given already (libmemcached accepts it once) */
static memcached_return_t apply_option(memcached_st *memc, char *opt, bool *has_hash, char *err,
                                       size_t errlen)
{
    if (strncmp(opt, "--", 2) != 0) {
        snprintf(err, errlen, "expected an option starting with --: %s", opt);
        return MEMCACHED_PARSE_ERROR;
    }
    char *name = opt + 2;
    char *value = strchr(name, '=');
    if (value != NULL)
        *value++ = '\0';
    for (char *p = name; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    if (value != NULL && value[0] == '"') {
        size_t vl = strlen(value);
        if (vl < 2 || value[vl - 1] != '"')
            return MEMCACHED_PARSE_ERROR;
        value[vl - 1] = '\0';
        value++;
    }

    if (strcmp(name, "SERVER") == 0 || strcmp(name, "SOCKET") == 0) {
        if (value == NULL)
            return MEMCACHED_PARSE_ERROR;
        return add_server_spec(memc, value, name[1] == 'O');
    }
    for (size_t i = 0; i < sizeof(flag_options) / sizeof(flag_options[0]); i++) {
        if (strcmp(name, flag_options[i].name) == 0) {
            if (value != NULL)
                return MEMCACHED_PARSE_ERROR;
            return memcached_behavior_set(memc, flag_options[i].behavior, 1);
        }
    }
    for (size_t i = 0; i < sizeof(number_options) / sizeof(number_options[0]); i++) {
        if (strcmp(name, number_options[i].name) == 0) {
            uint64_t v;
            if (value == NULL || !parse_number(value, &v))
                return MEMCACHED_PARSE_ERROR;
            return memcached_behavior_set(memc, number_options[i].behavior, v);
        }
    }
    if (strcmp(name, "NAMESPACE") == 0) {
        if (value == NULL)
            return MEMCACHED_PARSE_ERROR;
        return memcached_callback_set(memc, MEMCACHED_CALLBACK_PREFIX_KEY, value);
    }
    if (strcmp(name, "HASH") == 0) {
        memcached_hash_t h;
        if (value == NULL || !parse_hash(value, &h))
            return MEMCACHED_PARSE_ERROR;
        if (*has_hash) {
            snprintf(err, errlen, "--HASH can only be set once");
            return MEMCACHED_PARSE_ERROR;
        }
        *has_hash = true;
        return memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_HASH, h);
    }
    if (strcmp(name, "DISTRIBUTION") == 0) {
        if (value == NULL)
            return MEMCACHED_PARSE_ERROR;
        char *comma = strchr(value, ',');
        if (comma != NULL)
            *comma++ = '\0';
        memcached_server_distribution_t d;
        if (strcasecmp(value, "modula") == 0)
            d = MEMCACHED_DISTRIBUTION_MODULA;
        else if (strcasecmp(value, "consistent") == 0)
            d = MEMCACHED_DISTRIBUTION_CONSISTENT;
        else if (strcasecmp(value, "random") == 0)
            d = MEMCACHED_DISTRIBUTION_RANDOM;
        else
            return MEMCACHED_PARSE_ERROR;
        memcached_return_t rc = memcached_behavior_set_distribution(memc, d);
        if (rc == MEMCACHED_SUCCESS && comma != NULL) {
            memcached_hash_t h;
            if (!parse_hash(comma, &h))
                return MEMCACHED_PARSE_ERROR;
            rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_HASH, h);
        }
        return rc;
    }
    if (strcmp(name, "REPLICATION") == 0) { /* sync:F or async:F */
        uint64_t copies;
        bool async = value != NULL && strncasecmp(value, "async:", 6) == 0;
        if (value == NULL || (!async && strncasecmp(value, "sync:", 5) != 0) ||
            !parse_number(value + (async ? 6 : 5), &copies) || copies < 2)
            return MEMCACHED_PARSE_ERROR;
        return memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REPLICATION,
                                      async ? MEMCACHED_REPLICATION_ASYNC(copies)
                                            : MEMCACHED_REPLICATION_SYNC(copies));
    }
    if (strcmp(name, "ERASURE-CODING") == 0) { /* K,M */
        char *comma = value != NULL ? strchr(value, ',') : NULL;
        uint64_t k, m;
        if (comma == NULL)
            return MEMCACHED_PARSE_ERROR;
        *comma = '\0';
        if (!parse_number(value, &k) || !parse_number(comma + 1, &m) || k > 255 || m > 255)
            return MEMCACHED_PARSE_ERROR;
        return memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING,
                                      MEMCACHED_ERASURE_CODING(k, m));
    }
    snprintf(err, errlen, "unknown option --%s", name);
    return MEMCACHED_PARSE_ERROR;
}

static bool is_option_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The next option of the string at *cursor, NUL-terminated in place:
 * options are separated by blanks, except blanks between double quotes
 * (--SOCKET="/tmp/a b", as libmemcached reads it). NULL at the end. */
static char *next_option(char **cursor)
{
    char *p = *cursor;
    while (is_option_blank(*p))
        p++;
    if (*p == '\0')
        return NULL;
    char *start = p;
    /* only a value that starts with a quote ("=\"") is quoted */
    bool quoted = false;
    for (; *p != '\0' && (quoted || !is_option_blank(*p)); p++)
        if (*p == '"' && (quoted || (p > start && p[-1] == '=')))
            quoted = !quoted;
    if (*p != '\0')
        *p++ = '\0';
    *cursor = p;
    return start;
}

static memcached_return_t apply_string(memcached_st *memc, const char *string, size_t length,
                                       char *err, size_t errlen)
{
    if (memchr(string, '\0', length) != NULL) { /* the length says the string goes on */
        snprintf(err, errlen, "a NUL byte inside the configuration string");
        return MEMCACHED_PARSE_ERROR;
    }
    char *copy = malloc(length + 1);
    if (copy == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    memcpy(copy, string, length);
    copy[length] = '\0';
    memcached_return_t rc = MEMCACHED_SUCCESS;
    bool has_hash = false;
    char *cursor = copy;
    for (char *tok = next_option(&cursor); tok != NULL; tok = next_option(&cursor)) {
        char shown[128]; /* apply_option cuts the token at '=' */
        snprintf(shown, sizeof(shown), "%s", tok);
        rc = apply_option(memc, tok, &has_hash, err, errlen);
        if (rc != MEMCACHED_SUCCESS) {
            if (err[0] == '\0')
                snprintf(err, errlen, "invalid option: %s", shown);
            rc = MEMCACHED_PARSE_ERROR;
            break;
        }
    }
    free(copy);
    return rc;
}

memcached_st *memcached(const char *string, size_t string_length)
{
    memcached_st *memc = memcached_create(NULL);
    if (memc == NULL || string == NULL || string_length == 0)
        return memc;
    char err[256] = "";
    if (apply_string(memc, string, string_length, err, sizeof(err)) != MEMCACHED_SUCCESS) {
        memcached_free(memc);
        return NULL;
    }
    return memc;
}

memcached_return_t libmemcached_check_configuration(const char *option_string, size_t length,
                                                    char *error_buffer, size_t error_buffer_size)
{
    memcached_st *memc = memcached_create(NULL);
    if (memc == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    char err[256] = "";
    memcached_return_t rc = option_string == NULL
                                ? MEMCACHED_INVALID_ARGUMENTS
                                : apply_string(memc, option_string, length, err, sizeof(err));
    if (rc != MEMCACHED_SUCCESS && error_buffer != NULL && error_buffer_size > 0)
        snprintf(error_buffer, error_buffer_size, "%s", err);
    memcached_free(memc);
    return rc;
}
