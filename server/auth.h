/*
 * auth.h: memcached's ASCII authentication (-Y <file>). The file holds
 * "user:password" lines; a connection authenticates by sending a "set" whose
 * value is "user password". Owns the loaded credentials and the check;
 * the text engine decides when to ask.
 */
#ifndef MCR_AUTH_H
#define MCR_AUTH_H

#include <stdbool.h>
#include <stddef.h>

enum auth_result { AUTH_OK, AUTH_FAILED, AUTH_BAD_FORMAT };

/* Loads the file; 0, or -1 with a message in err. */
int auth_load(const char *path, char *err, size_t errlen);
/* SIGHUP: reads the file again and replaces the credentials; a file that
 * cannot be read or has a bad line leaves the old ones (-1, message in
 * err); an empty one leaves none, so nobody can authenticate, as
 * memcached. Connections already authenticated stay so. */
int auth_reload(const char *path, char *err, size_t errlen);
/* True once a file is loaded: every text connection must authenticate. */
bool auth_enabled(void);
/* Checks a "user password" token. */
enum auth_result auth_check(const char *token, size_t len);
void auth_free(void);

#endif
