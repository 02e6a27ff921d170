/*
 * net_tls.h: TLS (-Z) as a transport over TCP sockets. One process-wide
 * OpenSSL context built from settings.tls; each TLS connection wraps its
 * socket's state (net_sock.h) with an SSL object. Protocol engines do not
 * know whether their bytes are encrypted.
 */
#ifndef MCR_NET_TLS_H
#define MCR_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "stats.h"
#include "transport.h"

struct sock_state;

extern const struct transport_ops net_tls_transport;

/* Builds the context (certificates, key, CA, ciphers, versions, session
 * cache). 0, or -1 after printing memcached's error lines to stderr. */
int net_tls_init(void);
void net_tls_shutdown(void);
/* A TLS connection's transport state for an accepted socket (the
 * handshake runs on its first reads). NULL when out of memory. */
struct sock_state *net_tls_state_new(int fd);
/* "refresh_certs": reloads certificate, key and CA for new connections.
 * true, or false with memcached's error text (ending in "\r\n") in err. */
bool net_tls_refresh_certs(char *err, size_t errlen);
/* ssl_* lines of "stats" and "stats settings", as memcached names them. */
void net_tls_stats(stat_emit_fn emit, void *ctx);
void net_tls_settings_stats(stat_emit_fn emit, void *ctx);

#endif
