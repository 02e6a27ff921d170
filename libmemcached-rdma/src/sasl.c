/* sasl.c: libmemcached's SASL calls and the authentication of new
 * connections with Cyrus SASL over the binary protocol (LIST MECHS, AUTH,
 * then STEP while the server answers AUTH_CONTINUE). The exchange runs on
 * the connection's transport before the pipeline sends anything, and blocks
 * at most the client's connect plus poll timeouts. */
#include "sasl.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sasl/sasl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "io.h"
#include "mcr/binary_wire.h"
#include "transport.h"

struct lmr_sasl_auth {
    char *username;
    sasl_secret_t *secret;
    sasl_callback_t callbacks[4];
};

/* ---- the public calls ------------------------------------------------------------------- */
void memcached_set_sasl_callbacks(memcached_st *ptr, const sasl_callback_t *callbacks)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return;
    memcached_destroy_sasl_auth_data(ptr);
    c->sasl_callbacks = callbacks;
}

sasl_callback_t *memcached_get_sasl_callbacks(memcached_st *ptr)
{
    struct lmr_client *c = lmr_client_of(ptr);
    return c == NULL ? NULL : (sasl_callback_t *)c->sasl_callbacks;
}

static int auth_name_cb(void *context, int id, const char **result, unsigned *len)
{
    const struct lmr_sasl_auth *a = context;
    if (id != SASL_CB_USER && id != SASL_CB_AUTHNAME)
        return SASL_BADPARAM;
    *result = a->username;
    if (len != NULL)
        *len = (unsigned)strlen(a->username);
    return SASL_OK;
}

static int auth_secret_cb(sasl_conn_t *conn, void *context, int id, sasl_secret_t **psecret)
{
    (void)conn;
    struct lmr_sasl_auth *a = context;
    if (id != SASL_CB_PASS)
        return SASL_BADPARAM;
    *psecret = a->secret;
    return SASL_OK;
}

typedef int (*sasl_cb_fn)(void);

memcached_return_t memcached_set_sasl_auth_data(memcached_st *ptr, const char *username,
                                                const char *password)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL || username == NULL || password == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    memcached_return_t rc = memcached_behavior_set(ptr, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    if (rc != MEMCACHED_SUCCESS)
        return rc;
    memcached_destroy_sasl_auth_data(ptr);
    size_t plen = strlen(password);
    struct lmr_sasl_auth *a = calloc(1, sizeof(*a));
    char *name = strdup(username);
    sasl_secret_t *secret = malloc(sizeof(*secret) + plen);
    if (a == NULL || name == NULL || secret == NULL) {
        free(secret);
        free(name);
        free(a);
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    }
    secret->len = plen;
    memcpy(secret->data, password, plen + 1); /* data[1] in the type holds the NUL */
    a->username = name;
    a->secret = secret;
    a->callbacks[0] = (sasl_callback_t){SASL_CB_USER, (sasl_cb_fn)(void (*)(void))auth_name_cb, a};
    a->callbacks[1] =
        (sasl_callback_t){SASL_CB_AUTHNAME, (sasl_cb_fn)(void (*)(void))auth_name_cb, a};
    a->callbacks[2] =
        (sasl_callback_t){SASL_CB_PASS, (sasl_cb_fn)(void (*)(void))auth_secret_cb, a};
    a->callbacks[3] = (sasl_callback_t){SASL_CB_LIST_END, NULL, NULL};
    c->sasl_auth = a;
    c->sasl_callbacks = a->callbacks;
    return MEMCACHED_SUCCESS;
}

void lmr_sasl_release(struct lmr_client *c)
{
    struct lmr_sasl_auth *a = c->sasl_auth;
    if (a != NULL) {
        if (c->sasl_callbacks == a->callbacks)
            c->sasl_callbacks = NULL;
        free(a->secret);
        free(a->username);
        free(a);
        c->sasl_auth = NULL;
    }
}

memcached_return_t memcached_destroy_sasl_auth_data(memcached_st *ptr)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    lmr_sasl_release(c);
    return MEMCACHED_SUCCESS;
}

memcached_return_t lmr_sasl_copy(memcached_st *dst, const memcached_st *src)
{
    const struct lmr_client *s = lmr_client_of(src);
    struct lmr_client *d = lmr_client_of(dst);
    if (s == NULL || d == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (s->sasl_auth == NULL) {
        d->sasl_callbacks = s->sasl_callbacks;
        return MEMCACHED_SUCCESS;
    }
    return memcached_set_sasl_auth_data(dst, s->sasl_auth->username,
                                        (const char *)s->sasl_auth->secret->data);
}

bool lmr_sasl_wanted(const struct lmr_client *c)
{
    return c->sasl_callbacks != NULL;
}

/* ---- the exchange ------------------------------------------------------------------------ */
static pthread_once_t client_init_once = PTHREAD_ONCE_INIT;
static int client_init_result;

static void client_init(void)
{
    client_init_result = sasl_client_init(NULL);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until the connection is readable or writable (events), or the
 * deadline passes. A transport with poll_input and prepare_sleep (RDMA)
 * is polled and armed first, as the pipeline does (transport.h): its
 * poll_fd signals only what comes after prepare_sleep, and over UD
 * nothing moves (no acknowledgement, no retransmission) unless polled. */
static bool wait_for(struct lmr_conn *conn, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return false;
        if (conn->ops->poll_input != NULL && conn->ops->poll_input(conn))
            return true;
        if (conn->ops->prepare_sleep != NULL && conn->ops->prepare_sleep(conn))
            return true;
        struct pollfd pfd = {.fd = conn->ops->poll_fd(conn), .events = events};
        int n = poll(&pfd, 1, (int)left);
        if (n > 0)
            return true;
        if (n < 0 && errno != EINTR)
            return false;
    }
}

static memcached_return_t send_all(struct lmr_conn *conn, const void *data, size_t len,
                                   int64_t deadline)
{
    const char *p = data;
    while (len > 0) {
        struct iovec iov = {(void *)p, len};
        ssize_t n = conn->ops->send(conn, &iov, 1);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (!wait_for(conn, POLLOUT, deadline))
                return MEMCACHED_TIMEOUT;
        } else {
            return MEMCACHED_WRITE_FAILURE;
        }
    }
    return MEMCACHED_SUCCESS;
}

static memcached_return_t recv_all(struct lmr_conn *conn, void *data, size_t len, int64_t deadline)
{
    char *p = data;
    while (len > 0) {
        ssize_t n = conn->ops->recv(conn, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n == 0) {
            return MEMCACHED_CONNECTION_FAILURE;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            if (!wait_for(conn, POLLIN, deadline))
                return MEMCACHED_TIMEOUT;
        } else {
            return MEMCACHED_READ_FAILURE;
        }
    }
    return MEMCACHED_SUCCESS;
}

/* Largest SASL reply body taken (mechanism lists and challenges are small). */
#define SASL_REPLY_MAX 4096

/* One request (key, value) and its reply: status and body (NUL-ended). */
static memcached_return_t round_trip(struct lmr_conn *conn, uint8_t opcode, const char *key,
                                     const char *value, unsigned value_len, uint16_t *status,
                                     char *body, size_t body_size, unsigned *body_len,
                                     int64_t deadline)
{
    size_t klen = key ? strlen(key) : 0;
    unsigned char head[MCR_BIN_HEADER_LEN];
    mcr_bin_request_encode(head, opcode, 0, (uint16_t)klen, (uint32_t)(klen + value_len), 0, 0);
    memcached_return_t rc = send_all(conn, head, sizeof(head), deadline);
    if (rc == MEMCACHED_SUCCESS && klen > 0)
        rc = send_all(conn, key, klen, deadline);
    if (rc == MEMCACHED_SUCCESS && value_len > 0)
        rc = send_all(conn, value, value_len, deadline);
    if (rc == MEMCACHED_SUCCESS)
        rc = recv_all(conn, head, sizeof(head), deadline);
    if (rc != MEMCACHED_SUCCESS)
        return rc;
    struct mcr_bin_header h;
    mcr_bin_header_decode(head, &h);
    if (h.magic != MCR_BIN_MAGIC_RESPONSE || h.opcode != opcode || h.bodylen >= body_size ||
        h.bodylen > SASL_REPLY_MAX)
        return MEMCACHED_PROTOCOL_ERROR;
    rc = recv_all(conn, body, h.bodylen, deadline);
    if (rc != MEMCACHED_SUCCESS)
        return rc;
    /* extras and key come first in a reply; SASL replies carry neither */
    size_t skip = (size_t)h.extlen + h.keylen;
    if (skip > h.bodylen)
        return MEMCACHED_PROTOCOL_ERROR;
    memmove(body, body + skip, h.bodylen - skip);
    *body_len = (unsigned)(h.bodylen - skip);
    body[*body_len] = '\0';
    *status = h.vbucket_or_status;
    return MEMCACHED_SUCCESS;
}

memcached_return_t lmr_sasl_authenticate(memcached_instance_st *srv)
{
    struct lmr_client *c = srv->client;
    struct lmr_conn *conn = &srv->conn;
    if (srv->type == MEMCACHED_CONNECTION_UDP)
        return MEMCACHED_NOT_SUPPORTED;
    pthread_once(&client_init_once, client_init);
    if (client_init_result != SASL_OK)
        return MEMCACHED_AUTH_PROBLEM;
    int64_t deadline = now_ms() + c->behaviors.connect_timeout_ms + c->behaviors.poll_timeout_ms;
    char mechs[SASL_REPLY_MAX + 1], reply[SASL_REPLY_MAX + 1];
    unsigned mechs_len = 0, reply_len = 0;
    uint16_t status = 0;
    memcached_return_t rc = round_trip(conn, MCR_BIN_OP_SASL_LIST_MECHS, NULL, NULL, 0, &status,
                                       mechs, sizeof(mechs), &mechs_len, deadline);
    if (rc != MEMCACHED_SUCCESS)
        return rc;
    if (status == MCR_BIN_STATUS_UNKNOWN_COMMAND)
        return MEMCACHED_UNKNOWN_READ_FAILURE; /* a server without SASL, as libmemcached says */
    if (status == MCR_BIN_STATUS_AUTH_ERROR)
        return MEMCACHED_AUTH_FAILURE;
    if (status != MCR_BIN_STATUS_SUCCESS)
        return MEMCACHED_AUTH_PROBLEM;

    sasl_conn_t *sc = NULL;
    if (sasl_client_new("memcached", srv->hostname, NULL, NULL, c->sasl_callbacks, 0, &sc) !=
        SASL_OK)
        return MEMCACHED_AUTH_PROBLEM;
    const char *out = NULL, *mech = NULL;
    unsigned outlen = 0;
    int src = sasl_client_start(sc, mechs, NULL, &out, &outlen, &mech);
    if (src != SASL_OK && src != SASL_CONTINUE) {
        sasl_dispose(&sc);
        return MEMCACHED_AUTH_PROBLEM;
    }
    uint8_t opcode = MCR_BIN_OP_SASL_AUTH;
    for (int round = 0; round < 16; round++) {
        rc = round_trip(conn, opcode, mech, out, outlen, &status, reply, sizeof(reply), &reply_len,
                        deadline);
        if (rc != MEMCACHED_SUCCESS)
            break;
        if (status == MCR_BIN_STATUS_SUCCESS)
            break;
        if (status != MCR_BIN_STATUS_AUTH_CONTINUE) {
            rc = status == MCR_BIN_STATUS_AUTH_ERROR ? MEMCACHED_AUTH_FAILURE
                                                     : MEMCACHED_AUTH_PROBLEM;
            break;
        }
        src = sasl_client_step(sc, reply, reply_len, NULL, &out, &outlen);
        if (src != SASL_OK && src != SASL_CONTINUE) {
            rc = MEMCACHED_AUTH_PROBLEM;
            break;
        }
        opcode = MCR_BIN_OP_SASL_STEP;
        rc = MEMCACHED_AUTH_PROBLEM; /* unless a later round succeeds */
    }
    sasl_dispose(&sc);
    return rc;
}
