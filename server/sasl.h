/*
 * sasl.h: memcached's binary-protocol SASL authentication (-S) over Cyrus
 * SASL. Owns the library's set-up (configuration path as memcached finds
 * it: $SASL_CONF_PATH, else /etc/sasl/memcached.conf or
 * /etc/sasl2/memcached.conf) and one SASL exchange per connection. The
 * binary engine decides when to call it; the text protocol's -Y is auth.c.
 */
#ifndef MCR_SASL_H
#define MCR_SASL_H

#include <stdbool.h>
#include <stddef.h>

struct sasl_session;

/* memcached refuses mechanism names longer than this (EINVAL). */
#define SASL_MECH_NAME_MAX 32

enum sasl_step_result { SASL_STEP_OK, SASL_STEP_CONTINUE, SASL_STEP_FAILED };

/* 0, or -1 after printing memcached's error line. */
int sasl_setup(void);
void sasl_teardown(void);

/* A connection's exchange; NULL when the library refuses one (each call
 * below then fails, as memcached's do). */
struct sasl_session *sasl_session_new(void);
void sasl_session_free(struct sasl_session *s);
/* Space-separated mechanism names; false on failure. */
bool sasl_session_mechs(struct sasl_session *s, const char **out, unsigned *outlen);
/* SASL AUTH (start) and SASL STEP; out/outlen: the server's challenge. */
enum sasl_step_result sasl_session_start(struct sasl_session *s, const char *mech, const char *data,
                                         unsigned len, const char **out, unsigned *outlen);
enum sasl_step_result sasl_session_step(struct sasl_session *s, const char *data, unsigned len,
                                        const char **out, unsigned *outlen);

#endif
