/* transport_tls.c: TLS over the socket transport (servers given as
 * tls://host:port). The socket transport connects; this file then runs the
 * TLS handshake (blocking, bounded by CONNECT_TIMEOUT) and encrypts what
 * the pipeline sends and receives. One OpenSSL context per process, made
 * at the first TLS connection from the environment:
 *   LIBMEMCACHED_TLS_CA_FILE    PEM file of CAs the server certificate must
 *                               chain to (default: the system's CAs)
 *   LIBMEMCACHED_TLS_VERIFY     0: do not verify the server (default 1:
 *                               verify the chain and the server's name)
 *   LIBMEMCACHED_TLS_CERT_FILE, LIBMEMCACHED_TLS_KEY_FILE
 *                               client certificate and key (PEM), for
 *                               servers that require one
 * Knows nothing of memcached protocols. */
#include "transport.h"

#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcr/iov_gather.h"

/* Small pieces are gathered into one record up to this size. */
#define TLS_GATHER_MAX 16384

struct tls_session {
    SSL *ssl;
    char host[256]; /* for name verification once the connect is done */
    int connect_timeout_ms;
    char gather[TLS_GATHER_MAX];
};

static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
static SSL_CTX *tls_ctx;
static bool tls_verify;

static void ctx_init(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL)
        return;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    const char *ca = getenv("LIBMEMCACHED_TLS_CA_FILE");
    const char *verify = getenv("LIBMEMCACHED_TLS_VERIFY");
    const char *cert = getenv("LIBMEMCACHED_TLS_CERT_FILE");
    const char *key = getenv("LIBMEMCACHED_TLS_KEY_FILE");
    tls_verify = verify == NULL || strcmp(verify, "0") != 0;
    bool ok = ca != NULL && *ca != '\0' ? SSL_CTX_load_verify_locations(ctx, ca, NULL) == 1
                                        : SSL_CTX_set_default_verify_paths(ctx) == 1;
    if (ok && cert != NULL && *cert != '\0')
        ok = SSL_CTX_use_certificate_chain_file(ctx, cert) == 1 &&
             SSL_CTX_use_PrivateKey_file(ctx, key != NULL && *key != '\0' ? key : cert,
                                         SSL_FILETYPE_PEM) == 1;
    ERR_clear_error();
    if (!ok) {
        SSL_CTX_free(ctx);
        return; /* every TLS connect then fails */
    }
    SSL_CTX_set_verify(ctx, tls_verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    tls_ctx = ctx;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void free_session(struct lmr_conn *conn)
{
    struct tls_session *t = conn->tls;
    if (t != NULL) {
        if (t->ssl != NULL)
            SSL_free(t->ssl);
        ERR_clear_error();
        free(t);
        conn->tls = NULL;
    }
}

static void tls_close(struct lmr_conn *conn)
{
    struct tls_session *t = conn->tls;
    if (t != NULL && t->ssl != NULL && SSL_is_init_finished(t->ssl))
        SSL_shutdown(t->ssl); /* one close_notify; no wait for the server's */
    free_session(conn);
    lmr_transport_socket.close(conn);
}

/* The TCP connection is up: the handshake, within the connect timeout. */
static memcached_return_t handshake(struct lmr_conn *conn, int *sys_errno)
{
    struct tls_session *t = conn->tls;
    t->ssl = tls_ctx != NULL ? SSL_new(tls_ctx) : NULL;
    if (t->ssl == NULL || SSL_set_fd(t->ssl, conn->fd) != 1) {
        tls_close(conn);
        *sys_errno = EPROTO;
        return MEMCACHED_CONNECTION_FAILURE;
    }
    SSL_set_tlsext_host_name(t->ssl, t->host);
    if (tls_verify) {
        X509_VERIFY_PARAM *param = SSL_get0_param(t->ssl);
        if (X509_VERIFY_PARAM_set1_ip_asc(param, t->host) != 1)
            X509_VERIFY_PARAM_set1_host(param, t->host, 0);
    }
    int64_t deadline = now_ms() + (t->connect_timeout_ms > 0 ? t->connect_timeout_ms : 4000);
    for (;;) {
        ERR_clear_error();
        int rc = SSL_connect(t->ssl);
        if (rc == 1)
            break;
        int err = SSL_get_error(t->ssl, rc);
        int64_t left = deadline - now_ms();
        if ((err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) || left <= 0) {
            *sys_errno = left <= 0 ? ETIMEDOUT : EPROTO;
            tls_close(conn);
            return left <= 0 ? MEMCACHED_TIMEOUT : MEMCACHED_CONNECTION_FAILURE;
        }
        struct pollfd pfd = {conn->fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, 0};
        if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR) {
            *sys_errno = errno;
            tls_close(conn);
            return MEMCACHED_CONNECTION_FAILURE;
        }
    }
    conn->ops = &lmr_transport_tls;
    return MEMCACHED_SUCCESS;
}

static memcached_return_t tls_open(struct lmr_conn *conn, const struct lmr_endpoint *ep,
                                   int *sys_errno)
{
    pthread_once(&ctx_once, ctx_init);
    conn->tls = NULL;
    if (ep->unix_socket || strlen(ep->hostname) >= sizeof(((struct tls_session *)0)->host))
        return MEMCACHED_INVALID_ARGUMENTS;
    struct tls_session *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    strcpy(t->host, ep->hostname);
    t->connect_timeout_ms = ep->connect_timeout_ms;
    memcached_return_t rc = lmr_transport_socket.open(conn, ep, sys_errno);
    if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_IN_PROGRESS) {
        free(t);
        return rc;
    }
    conn->tls = t;
    conn->ops = &lmr_transport_tls; /* finish_open comes here */
    return rc == MEMCACHED_SUCCESS ? handshake(conn, sys_errno) : rc;
}

static memcached_return_t tls_finish_open(struct lmr_conn *conn, int *sys_errno)
{
    memcached_return_t rc = lmr_transport_socket.finish_open(conn, sys_errno);
    if (rc == MEMCACHED_SUCCESS)
        return handshake(conn, sys_errno);
    if (rc != MEMCACHED_IN_PROGRESS)
        free_session(conn); /* the socket transport closed the connection */
    else
        conn->ops = &lmr_transport_tls;
    return rc;
}

/* errno for an SSL call that did not move bytes. */
static ssize_t ssl_failure(struct lmr_conn *conn, int rc)
{
    struct tls_session *t = conn->tls;
    int err = SSL_get_error(t->ssl, rc);
    ERR_clear_error();
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        errno = EAGAIN;
        return -1;
    }
    if (err == SSL_ERROR_ZERO_RETURN)
        return 0;
    if (err != SSL_ERROR_SYSCALL || errno == 0)
        errno = ECONNRESET;
    return -1;
}

static ssize_t tls_send(struct lmr_conn *conn, const struct iovec *iov, int iovcnt)
{
    struct tls_session *t = conn->tls;
    const void *data = iov[0].iov_base;
    size_t len = iov[0].iov_len;
    /* a blocked write is retried with at least the bytes it had (the
     * pipeline resends from the first unsent byte), as OpenSSL requires */
    if (iovcnt > 1 && len < TLS_GATHER_MAX) {
        len = mcr_iov_gather(iov, iovcnt, t->gather, TLS_GATHER_MAX);
        data = t->gather;
    }
    if (len == 0)
        return 0;
    ERR_clear_error();
    int n = SSL_write(t->ssl, data, len > INT_MAX ? INT_MAX : (int)len);
    return n > 0 ? n : ssl_failure(conn, n);
}

/* Reads until len bytes or until nothing more is there, so no decrypted
 * byte waits in OpenSSL while the pipeline sleeps on the socket. */
static ssize_t tls_recv(struct lmr_conn *conn, void *buf, size_t len)
{
    struct tls_session *t = conn->tls;
    size_t total = 0;
    while (total < len) {
        size_t want = len - total;
        ERR_clear_error();
        int n = SSL_read(t->ssl, (char *)buf + total, want > INT_MAX ? INT_MAX : (int)want);
        if (n <= 0) {
            if (total > 0)
                break;
            return ssl_failure(conn, n);
        }
        total += (size_t)n;
    }
    conn->received_any = true;
    return (ssize_t)total;
}

/* Decrypted bytes waiting, or something on the socket. */
static bool tls_poll_input(struct lmr_conn *conn)
{
    struct tls_session *t = conn->tls;
    return SSL_pending(t->ssl) > 0 || lmr_transport_socket.poll_input(conn);
}

static bool tls_prepare_sleep(struct lmr_conn *conn)
{
    struct tls_session *t = conn->tls;
    return SSL_pending(t->ssl) > 0;
}

static int tls_poll_fd(const struct lmr_conn *conn)
{
    return conn->fd;
}

const struct lmr_transport_ops lmr_transport_tls = {
    .name = "tls",
    .poll_input_is_syscall = true,
    .open = tls_open,
    .finish_open = tls_finish_open,
    .send = tls_send,
    .recv = tls_recv,
    .poll_input = tls_poll_input,
    .prepare_sleep = tls_prepare_sleep,
    .poll_fd = tls_poll_fd,
    .close = tls_close,
};
