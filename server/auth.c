/*
 * auth.c: the credentials of -Y, read at start-up and again on SIGHUP
 * (auth_reload: swapped in whole under a write lock; workers check tokens
 * under the read lock, which only authentication requests take). A token is "user",
 * one or more spaces, "password"; the comparison does not stop at the
 * first differing byte.
 */
#include "auth.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct credential {
    char *user;
    char *password;
};

struct credential_set {
    struct credential *v;
    size_t n;
};

/* Written at start-up and by auth_reload() (SIGHUP, main thread); read by
 * every worker's auth_check(). */
static pthread_rwlock_t credentials_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct credential_set credentials;
static bool enabled;

static bool same(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    unsigned char diff = alen != blen;
    for (size_t i = 0; i < alen && i < blen; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

static void set_free(struct credential_set *set)
{
    for (size_t i = set->n; i-- > 0;) {
        free(set->v[i].password);
        free(set->v[i].user);
    }
    free(set->v);
    set->v = NULL;
    set->n = 0;
}

/* Reads path into *set (empty on failure); 0, or -1 with a message. */
static int set_read(const char *path, struct credential_set *set, char *err, size_t errlen)
{
    set->v = NULL;
    set->n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open the auth file %s", path);
        return -1;
    }
    char line[1024];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0')
            continue;
        char *colon = strchr(line, ':');
        if (!colon || colon == line) {
            snprintf(err, errlen, "bad line in the auth file %s (want user:password)", path);
            rc = -1;
            break;
        }
        *colon = '\0';
        struct credential *more = realloc(set->v, (set->n + 1) * sizeof(*more));
        if (!more) {
            snprintf(err, errlen, "out of memory reading %s", path);
            rc = -1;
            break;
        }
        set->v = more;
        set->v[set->n].user = strdup(line);
        set->v[set->n].password = strdup(colon + 1);
        set->n++;
        if (!set->v[set->n - 1].user || !set->v[set->n - 1].password) {
            snprintf(err, errlen, "out of memory reading %s", path);
            rc = -1;
        }
    }
    fclose(f);
    if (rc != 0)
        set_free(set);
    return rc;
}

int auth_load(const char *path, char *err, size_t errlen)
{
    struct credential_set set;
    if (set_read(path, &set, err, errlen) != 0)
        return -1;
    if (set.n == 0) {
        snprintf(err, errlen, "no user:password line in the auth file %s", path);
        return -1;
    }
    pthread_rwlock_wrlock(&credentials_lock);
    set_free(&credentials);
    credentials = set;
    enabled = true;
    pthread_rwlock_unlock(&credentials_lock);
    return 0;
}

int auth_reload(const char *path, char *err, size_t errlen)
{
    struct credential_set set;
    if (set_read(path, &set, err, errlen) != 0)
        return -1; /* the credentials loaded before stay */
    pthread_rwlock_wrlock(&credentials_lock);
    struct credential_set old = credentials;
    credentials = set; /* an empty file: nobody authenticates, as memcached */
    pthread_rwlock_unlock(&credentials_lock);
    set_free(&old);
    return 0;
}

bool auth_enabled(void)
{
    return enabled;
}

enum auth_result auth_check(const char *token, size_t len)
{
    const char *space = memchr(token, ' ', len);
    if (!space || space == token)
        return AUTH_BAD_FORMAT;
    size_t ulen = (size_t)(space - token);
    const char *pass = space;
    while (pass < token + len && *pass == ' ')
        pass++;
    size_t plen = (size_t)(token + len - pass);
    if (plen == 0)
        return AUTH_BAD_FORMAT;
    bool ok = false;
    pthread_rwlock_rdlock(&credentials_lock);
    for (size_t i = 0; i < credentials.n; i++) {
        bool match =
            same(token, ulen, credentials.v[i].user) & same(pass, plen, credentials.v[i].password);
        ok |= match;
    }
    pthread_rwlock_unlock(&credentials_lock);
    return ok ? AUTH_OK : AUTH_FAILED;
}

void auth_free(void)
{
    pthread_rwlock_wrlock(&credentials_lock);
    set_free(&credentials);
    enabled = false;
    pthread_rwlock_unlock(&credentials_lock);
}
