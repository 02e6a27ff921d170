/* sasl.h: SASL authentication of new connections (libmemcached's
 * memcached_set_sasl_auth_data / memcached_set_sasl_callbacks). The
 * client keeps the callbacks; lmr_sasl_authenticate runs the binary
 * protocol's LIST MECHS / AUTH / STEP exchange on a freshly connected
 * server before any request goes out. */
#ifndef LMR_SASL_H
#define LMR_SASL_H

#include <libmemcached/memcached.h>

struct lmr_client;

/* The credentials memcached_set_sasl_auth_data stores (owned). */
struct lmr_sasl_auth;

/* True when new connections must authenticate. */
bool lmr_sasl_wanted(const struct lmr_client *c);
/* Authenticates srv's new connection, blocking up to the client's connect
 * plus poll timeouts. SUCCESS, or the failure (AUTH_FAILURE when the server
 * refused the credentials). A server without SASL (UNKNOWN_COMMAND to LIST
 * MECHS) gives UNKNOWN_READ_FAILURE, as in libmemcached. */
memcached_return_t lmr_sasl_authenticate(memcached_instance_st *srv);
/* memcached_clone and memcached_free. */
memcached_return_t lmr_sasl_copy(memcached_st *dst, const memcached_st *src);
void lmr_sasl_release(struct lmr_client *c);

#endif
