/*
 * auth.c: the credentials of -Y, read once at start-up, then only read
 * (workers check tokens concurrently without locks). A token is "user",
 * one or more spaces, "password"; the comparison does not stop at the
 * first differing byte.
 */
#include "auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct credential {
    char *user;
    char *password;
};

static struct credential *credentials;
static size_t ncredentials;
static bool enabled;

static bool same(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    unsigned char diff = alen != blen;
    for (size_t i = 0; i < alen && i < blen; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

int auth_load(const char *path, char *err, size_t errlen)
{
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
        struct credential *more = realloc(credentials, (ncredentials + 1) * sizeof(*more));
        if (!more) {
            snprintf(err, errlen, "out of memory reading %s", path);
            rc = -1;
            break;
        }
        credentials = more;
        credentials[ncredentials].user = strdup(line);
        credentials[ncredentials].password = strdup(colon + 1);
        ncredentials++;
        if (!credentials[ncredentials - 1].user || !credentials[ncredentials - 1].password) {
            snprintf(err, errlen, "out of memory reading %s", path);
            rc = -1;
        }
    }
    fclose(f);
    if (rc == 0 && ncredentials == 0) {
        snprintf(err, errlen, "no user:password line in the auth file %s", path);
        rc = -1;
    }
    if (rc != 0)
        auth_free();
    else
        enabled = true;
    return rc;
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
    for (size_t i = 0; i < ncredentials; i++) {
        bool match =
            same(token, ulen, credentials[i].user) & same(pass, plen, credentials[i].password);
        ok |= match;
    }
    return ok ? AUTH_OK : AUTH_FAILED;
}

void auth_free(void)
{
    for (size_t i = ncredentials; i-- > 0;) {
        free(credentials[i].password);
        free(credentials[i].user);
    }
    free(credentials);
    credentials = NULL;
    ncredentials = 0;
    enabled = false;
}
