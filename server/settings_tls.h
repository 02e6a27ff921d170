/*
 * settings_tls.h: memcached 1.6.18's TLS settings (-o ssl_*): defaults,
 * parsing of one suboption and the name of a protocol version. Parsing
 * only; net_tls.c builds the TLS context from the result.
 */
#ifndef MCR_SETTINGS_TLS_H
#define MCR_SETTINGS_TLS_H

#include <stdbool.h>
#include <stdio.h>

#include "settings.h"

enum tls_suboption_result {
    TLS_SUBOPT_NOT_MINE, /* not an ssl_* suboption */
    TLS_SUBOPT_OK,
    TLS_SUBOPT_BAD, /* message written to errout */
};

void settings_tls_init(struct tls_settings *t);
void settings_tls_free(struct tls_settings *t);
/* One "-o name[=value]" entry (value NULL when no '=' was given). */
enum tls_suboption_result settings_tls_suboption(struct tls_settings *t, const char *name,
                                                 const char *value, FILE *errout);
/* "tlsv1.2" for TLS1_2_VERSION, as memcached names versions. */
const char *settings_tls_version_name(int version);

#endif
