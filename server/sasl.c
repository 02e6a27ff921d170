/*
 * sasl.c: Cyrus SASL for -S: library set-up, per-connection exchanges,
 * logging through log.c. No protocol framing here (proto_bin.c).
 */
#include "sasl.h"

#include <sasl/sasl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

struct sasl_session {
    sasl_conn_t *conn;
    bool started; /* STEP is valid only after a successful start */
};

static char hostname[256];

static int sasl_log_cb(void *context, int level, const char *message)
{
    (void)context;
    int verbosity;
    switch (level) {
    case SASL_LOG_NONE:
        return SASL_OK;
    case SASL_LOG_PASS:
    case SASL_LOG_TRACE:
    case SASL_LOG_DEBUG:
    case SASL_LOG_NOTE:
        verbosity = LOG_CMDS;
        break;
    case SASL_LOG_WARN:
    case SASL_LOG_FAIL:
        verbosity = LOG_WARN;
        break;
    default:
        verbosity = LOG_ALWAYS;
        break;
    }
    log_msg(verbosity, "SASL (severity %d): %s", level, message);
    return SASL_OK;
}

/* Where memcached.conf is: $SASL_CONF_PATH, or the first system directory
 * that has one. */
static int sasl_confpath_cb(void *context, char **path)
{
    (void)context;
    static char *const dirs[] = {"/etc/sasl", "/etc/sasl2"};
    *path = getenv("SASL_CONF_PATH");
    for (size_t i = 0; *path == NULL && i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        char file[64];
        snprintf(file, sizeof(file), "%s/memcached.conf", dirs[i]);
        if (access(file, F_OK) == 0)
            *path = dirs[i];
    }
    if (*path)
        log_msg(LOG_WARN, "Reading configuration from: <%s>", *path);
    else
        log_msg(LOG_WARN, "Failed to locate a config path");
    return *path ? SASL_OK : SASL_FAIL;
}

typedef int (*sasl_cb_fn)(void);

static sasl_callback_t callbacks[] = {
    {SASL_CB_LOG, (sasl_cb_fn)(void (*)(void))sasl_log_cb, NULL},
    {SASL_CB_GETCONFPATH, (sasl_cb_fn)(void (*)(void))sasl_confpath_cb, NULL},
    {SASL_CB_LIST_END, NULL, NULL},
};

int sasl_setup(void)
{
    if (gethostname(hostname, sizeof(hostname) - 1) != 0)
        hostname[0] = '\0';
    if (sasl_server_init(callbacks, "memcached") != SASL_OK) {
        fprintf(stderr, "Error initializing sasl.\n");
        return -1;
    }
    log_msg(LOG_WARN, "Initialized SASL.");
    return 0;
}

void sasl_teardown(void)
{
    sasl_server_done();
}

struct sasl_session *sasl_session_new(void)
{
    struct sasl_session *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (sasl_server_new("memcached", NULL, hostname[0] ? hostname : NULL, NULL, NULL, NULL, 0,
                        &s->conn) != SASL_OK) {
        log_msg(LOG_WARN, "Failed to initialize SASL conn.");
        s->conn = NULL;
    }
    return s;
}

void sasl_session_free(struct sasl_session *s)
{
    if (!s)
        return;
    if (s->conn)
        sasl_dispose(&s->conn);
    free(s);
}

bool sasl_session_mechs(struct sasl_session *s, const char **out, unsigned *outlen)
{
    if (!s || !s->conn)
        return false;
    return sasl_listmech(s->conn, NULL, "", " ", "", out, outlen, NULL) == SASL_OK;
}

static enum sasl_step_result result_of(int rc)
{
    if (rc == SASL_OK)
        return SASL_STEP_OK;
    if (rc == SASL_CONTINUE)
        return SASL_STEP_CONTINUE;
    log_msg(LOG_WARN, "SASL authentication failed: %s", sasl_errstring(rc, NULL, NULL));
    return SASL_STEP_FAILED;
}

enum sasl_step_result sasl_session_start(struct sasl_session *s, const char *mech, const char *data,
                                         unsigned len, const char **out, unsigned *outlen)
{
    *out = NULL;
    *outlen = 0;
    if (!s || !s->conn)
        return SASL_STEP_FAILED;
    int rc = sasl_server_start(s->conn, mech, len ? data : NULL, len, out, outlen);
    s->started = rc == SASL_OK || rc == SASL_CONTINUE;
    return result_of(rc);
}

enum sasl_step_result sasl_session_step(struct sasl_session *s, const char *data, unsigned len,
                                        const char **out, unsigned *outlen)
{
    *out = NULL;
    *outlen = 0;
    if (!s || !s->conn || !s->started) {
        log_msg(LOG_WARN, "SASL_STEP called but sasl_server_start not called for this connection");
        return SASL_STEP_FAILED;
    }
    return result_of(sasl_server_step(s->conn, len ? data : NULL, len, out, outlen));
}
