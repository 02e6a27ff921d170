/*
 * settings_tls.c: the -o ssl_* suboptions of memcached 1.6.18, with its
 * defaults, value checks and error lines. Parsing only.
 */
#include "settings_tls.h"

#include <errno.h>
#include <limits.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

void settings_tls_init(struct tls_settings *t)
{
    memset(t, 0, sizeof(*t));
    t->keyformat = SSL_FILETYPE_PEM;
    t->verify_mode = SSL_VERIFY_NONE;
    t->wbuf_size = 16 * 1024;
    t->min_version = TLS1_2_VERSION;
}

void settings_tls_free(struct tls_settings *t)
{
    free(t->ca_cert);
    free(t->ciphers);
    free(t->key);
    free(t->chain_cert);
    t->chain_cert = t->key = t->ciphers = t->ca_cert = NULL;
}

const char *settings_tls_version_name(int version)
{
    switch (version) {
    case TLS1_VERSION:
        return "tlsv1.0";
    case TLS1_1_VERSION:
        return "tlsv1.1";
    case TLS1_2_VERSION:
        return "tlsv1.2";
    case TLS1_3_VERSION:
        return "tlsv1.3";
    default:
        return "unknown";
    }
}

/* memcached's safe_strtol/strtoul: whole string, optional trailing blanks. */
static bool whole_long(const char *text, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
        end++;
    if (errno != 0 || end == text || *end != '\0')
        return false;
    *out = v;
    return true;
}

static bool replace(char **slot, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return false;
    free(*slot);
    *slot = copy;
    return true;
}

enum tls_suboption_result settings_tls_suboption(struct tls_settings *t, const char *name,
                                                 const char *value, FILE *errout)
{
    static const char *const string_options[] = {"ssl_chain_cert", "ssl_key", "ssl_ciphers",
                                                 "ssl_ca_cert"};
    char **const string_slots[] = {&t->chain_cert, &t->key, &t->ciphers, &t->ca_cert};
    static const int verify_modes[] = {
        SSL_VERIFY_NONE,
        SSL_VERIFY_PEER,
        SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
        SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT | SSL_VERIFY_CLIENT_ONCE,
    };
    static const int versions[] = {TLS1_VERSION, TLS1_1_VERSION, TLS1_2_VERSION, TLS1_3_VERSION};

    if (strncmp(name, "ssl_", 4) != 0)
        return TLS_SUBOPT_NOT_MINE;
    if (strcmp(name, "ssl_session_cache") == 0) {
        t->session_cache = true;
        return TLS_SUBOPT_OK;
    }
    if (strcmp(name, "ssl_kernel_tls") == 0) {
        t->kernel_tls = true;
        return TLS_SUBOPT_OK;
    }
    bool known = strcmp(name, "ssl_verify_mode") == 0 || strcmp(name, "ssl_keyformat") == 0 ||
                 strcmp(name, "ssl_wbuf_size") == 0 || strcmp(name, "ssl_min_version") == 0;
    for (size_t i = 0; i < sizeof(string_options) / sizeof(string_options[0]); i++) {
        if (strcmp(name, string_options[i]) != 0)
            continue;
        if (value == NULL) {
            fprintf(errout, "Missing %s argument\n", name);
            return TLS_SUBOPT_BAD;
        }
        if (!replace(string_slots[i], value)) {
            fprintf(errout, "out of memory\n");
            return TLS_SUBOPT_BAD;
        }
        return TLS_SUBOPT_OK;
    }
    if (!known)
        return TLS_SUBOPT_NOT_MINE;
    if (value == NULL) {
        fprintf(errout, "Missing %s argument\n", name);
        return TLS_SUBOPT_BAD;
    }
    long v;
    if (!whole_long(value, &v)) {
        fprintf(errout, "could not parse argument to %s\n", name);
        return TLS_SUBOPT_BAD;
    }
    if (strcmp(name, "ssl_verify_mode") == 0 || strcmp(name, "ssl_min_version") == 0) {
        if (v < 0 || v > 3) {
            fprintf(errout, "Invalid %s. Use help to see valid options.\n", name);
            return TLS_SUBOPT_BAD;
        }
        if (name[4] == 'v')
            t->verify_mode = verify_modes[v];
        else
            t->min_version = versions[v];
    } else if (strcmp(name, "ssl_keyformat") == 0) {
        if (v < INT_MIN || v > INT_MAX) {
            fprintf(errout, "could not parse argument to %s\n", name);
            return TLS_SUBOPT_BAD;
        }
        t->keyformat = (int)v; /* checked by OpenSSL when the key loads, as memcached */
    } else {
        if (v < 0 || v > (long)(UINT_MAX / 1024)) {
            fprintf(errout, "could not parse argument to %s\n", name);
            return TLS_SUBOPT_BAD;
        }
        t->wbuf_size = (unsigned)v * 1024; /* kilobytes */
    }
    return TLS_SUBOPT_OK;
}
