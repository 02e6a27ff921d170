/*
 * net_tls.c: the TLS transport (-Z). Owns the OpenSSL context, the
 * per-connection SSL objects, the handshake, "refresh_certs" and the ssl_*
 * stats. Socket events come from net_sock.c; this file translates between
 * what the connection wants (read / write) and what OpenSSL needs from the
 * socket (a read may need the socket writable during a handshake, and the
 * other way round).
 *
 * Counting: every handshake that fails (a plain-text client, a wrong CA, a
 * missing client certificate, garbage or a connection cut mid-handshake)
 * adds one to ssl_handshake_errors and closes only that connection; a
 * client that closes before sending a byte (a port probe) is not counted.
 * memcached counts only failures it sees in its first SSL_accept call on
 * the listener thread, which usually comes before the client's first byte.
 */
#include "net_tls.h"

#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "conn.h"
#include "log.h"
#include "mcr/iov_gather.h"
#include "net_sock.h"
#include "settings.h"
#include "settings_tls.h"

#define SESSION_ID_CONTEXT "memcached"
#define TLS_RECORD_MAX 16384

static SSL_CTX *tls_ctx;
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER; /* refresh vs SSL_new */
static rel_time_t last_cert_refresh;
static uint64_t handshake_errors, new_sessions; /* atomics */

struct tls_state {
    struct sock_state sock; /* first: net_sock.c's functions take the same pointer */
    SSL *ssl;
    bool handshake_done;
    bool read_needs_write;      /* the last SSL read blocked on socket writability */
    bool write_needs_read;      /* the last SSL write blocked on socket readability */
    bool conn_read, conn_write; /* what the connection asked for last */
    char *wbuf;                 /* gathers small iovecs into one record */
};

/* ---- context ------------------------------------------------------------------------- */
static void ssl_error_text(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();
    buf[0] = '\0';
    if (e != 0)
        ERR_error_string_n(e, buf, len);
}

/* Loads certificate chain, key and CA into ctx (under ctx_lock). */
static bool load_certificates(char *err, size_t errlen)
{
    char ssl_err[256];
    const struct tls_settings *t = &settings.tls;
    bool ok = false;
    pthread_mutex_lock(&ctx_lock);
    if (!SSL_CTX_use_certificate_chain_file(tls_ctx, t->chain_cert)) {
        ssl_error_text(ssl_err, sizeof(ssl_err));
        snprintf(err, errlen, "Error loading the certificate chain: %s : %s\r\n",
                 t->chain_cert ? t->chain_cert : "(null)", ssl_err);
    } else if (!SSL_CTX_use_PrivateKey_file(tls_ctx, t->key, t->keyformat)) {
        ssl_error_text(ssl_err, sizeof(ssl_err));
        snprintf(err, errlen, "Error loading the key: %s : %s\r\n", t->key ? t->key : "(null)",
                 ssl_err);
    } else if (!SSL_CTX_check_private_key(tls_ctx)) {
        ssl_error_text(ssl_err, sizeof(ssl_err));
        snprintf(err, errlen, "Error validating the certificate: %s\r\n", ssl_err);
    } else if (t->ca_cert && !SSL_CTX_load_verify_locations(tls_ctx, t->ca_cert, NULL)) {
        ssl_error_text(ssl_err, sizeof(ssl_err));
        snprintf(err, errlen, "Error loading the CA certificate: %s : %s\r\n", t->ca_cert, ssl_err);
    } else {
        if (t->ca_cert) {
            STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(t->ca_cert);
            if (names)
                SSL_CTX_set_client_CA_list(tls_ctx, names);
        }
        ok = true;
    }
    ERR_clear_error();
    pthread_mutex_unlock(&ctx_lock);
    if (ok)
        last_cert_refresh = clock_now();
    return ok;
}

static int new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
    (void)ssl;
    (void)sess;
    __atomic_add_fetch(&new_sessions, 1, __ATOMIC_RELAXED);
    return 0; /* OpenSSL keeps its reference */
}

int net_tls_init(void)
{
    const struct tls_settings *t = &settings.tls;
    char err[1024];
    if (!t->enabled)
        return 0;
    tls_ctx = SSL_CTX_new(TLS_server_method());
    if (!tls_ctx) {
        fprintf(stderr, "Failed to create the TLS context\n");
        return -1;
    }
    SSL_CTX_set_min_proto_version(tls_ctx, t->min_version);
    if (!load_certificates(err, sizeof(err))) {
        err[strcspn(err, "\r")] = '\0';
        fprintf(stderr, "%s\n", err);
        goto fail;
    }
    SSL_CTX_set_verify(tls_ctx, t->verify_mode, NULL);
    if (t->ciphers && !SSL_CTX_set_cipher_list(tls_ctx, t->ciphers)) {
        fprintf(stderr, "Error setting the provided cipher(s): %s\n", t->ciphers);
        goto fail;
    }
    if (t->session_cache) {
        SSL_CTX_sess_set_new_cb(tls_ctx, new_session_cb);
        SSL_CTX_set_session_cache_mode(tls_ctx, SSL_SESS_CACHE_SERVER);
        SSL_CTX_set_session_id_context(tls_ctx, (const unsigned char *)SESSION_ID_CONTEXT,
                                       strlen(SESSION_ID_CONTEXT));
    } else {
        SSL_CTX_set_session_cache_mode(tls_ctx, SSL_SESS_CACHE_OFF);
    }
    if (t->kernel_tls)
        SSL_CTX_set_options(tls_ctx, SSL_OP_ENABLE_KTLS);
    SSL_CTX_set_options(tls_ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(tls_ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                                  SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    ERR_clear_error();
    return 0;
fail:
    ERR_clear_error();
    SSL_CTX_free(tls_ctx);
    tls_ctx = NULL;
    return -1;
}

void net_tls_shutdown(void)
{
    if (tls_ctx) {
        SSL_CTX_free(tls_ctx);
        tls_ctx = NULL;
    }
}

bool net_tls_refresh_certs(char *err, size_t errlen)
{
    if (!tls_ctx) {
        snprintf(err, errlen, "Error TLS not enabled\r\n");
        return false;
    }
    return load_certificates(err, errlen);
}

/* ---- readiness translation ----------------------------------------------------------------- */
static void update_interest(struct conn *c)
{
    struct tls_state *t = c->tp_data;
    bool sock_read =
        (t->conn_read && !t->read_needs_write) || (t->conn_write && t->write_needs_read);
    bool sock_write =
        (t->conn_write && !t->write_needs_read) || (t->conn_read && t->read_needs_write);
    net_sock_want(c, sock_read, sock_write);
}

static void tls_on_socket_ready(struct conn *c, bool readable, bool writable)
{
    struct tls_state *t = c->tp_data;
    bool conn_readable = t->conn_read && (t->read_needs_write ? writable : readable);
    bool conn_writable = t->conn_write && (t->write_needs_read ? readable : writable);
    if (conn_readable || conn_writable)
        conn_on_ready(c, conn_readable, conn_writable);
}

static void tls_want(struct conn *c, bool readable, bool writable)
{
    struct tls_state *t = c->tp_data;
    t->conn_read = readable;
    t->conn_write = writable;
    update_interest(c);
}

/* ---- handshake, reads and writes ---------------------------------------------------------- */
/* What the last SSL call's failure means: -1 with errno EAGAIN when it must
 * wait for the socket (noting which direction), -1 with another errno on a
 * failure. */
static ssize_t blocked_or_failed(struct conn *c, int rc, bool reading)
{
    struct tls_state *t = c->tp_data;
    int err = SSL_get_error(t->ssl, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        if (reading)
            t->read_needs_write = err == SSL_ERROR_WANT_WRITE;
        else
            t->write_needs_read = err == SSL_ERROR_WANT_READ;
        errno = EAGAIN;
        return -1;
    }
    char why[256];
    int saved = errno;
    ssl_error_text(why, sizeof(why));
    ERR_clear_error();
    if (!t->handshake_done && BIO_number_read(SSL_get_rbio(t->ssl)) == 0) {
        /* a port probe: connected and closed without a byte */
        log_msg(LOG_CMDS, "<%d closed before the TLS handshake", c->fd);
    } else if (!t->handshake_done) {
        __atomic_add_fetch(&handshake_errors, 1, __ATOMIC_RELAXED);
        log_msg(LOG_WARN, "<%d TLS handshake failed: %s", c->fd,
                why[0] ? why : (err == SSL_ERROR_SYSCALL && saved ? strerror(saved) : "closed"));
    } else {
        log_msg(LOG_WARN, "<%d TLS error: %s", c->fd, why[0] ? why : "connection lost");
    }
    errno = ECONNRESET;
    return -1;
}

static ssize_t handshake(struct conn *c, bool reading)
{
    struct tls_state *t = c->tp_data;
    ERR_clear_error();
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1) {
        t->handshake_done = true;
        t->read_needs_write = t->write_needs_read = false;
        return 0;
    }
    return blocked_or_failed(c, rc, reading);
}

/* Reads until len bytes or until OpenSSL has nothing more: the connection
 * waits for the socket once a read comes back short, and OpenSSL may hold
 * decrypted bytes the socket no longer signals. */
static ssize_t tls_recv(struct conn *c, void *buf, size_t len)
{
    struct tls_state *t = c->tp_data;
    if (!t->handshake_done && handshake(c, true) < 0)
        return -1;
    size_t total = 0;
    while (total < len) {
        size_t want = len - total;
        ERR_clear_error();
        int n = SSL_read(t->ssl, (char *)buf + total, want > INT_MAX ? INT_MAX : (int)want);
        if (n > 0) {
            total += (size_t)n;
            t->read_needs_write = false;
            continue;
        }
        if (total > 0)
            break; /* report what arrived; the condition returns on the next call */
        if (SSL_get_error(t->ssl, n) == SSL_ERROR_ZERO_RETURN)
            return 0;
        return blocked_or_failed(c, n, true);
    }
    return (ssize_t)total;
}

static ssize_t tls_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
    struct tls_state *t = c->tp_data;
    if (!t->handshake_done && handshake(c, false) < 0)
        return -1;
    /* A retry after a blocked write must offer at least the bytes of the
     * record OpenSSL holds (one TLS record at most), so never fewer. */
    size_t cap = settings.tls.wbuf_size > TLS_RECORD_MAX ? settings.tls.wbuf_size : TLS_RECORD_MAX;
    const void *data;
    size_t len;
    if (iovcnt == 1 || iov[0].iov_len >= cap) {
        data = iov[0].iov_base;
        len = iov[0].iov_len;
    } else {
        if (!t->wbuf && !(t->wbuf = malloc(cap))) {
            errno = ENOMEM;
            return -1;
        }
        len = mcr_iov_gather(iov, iovcnt, t->wbuf, cap);
        data = t->wbuf;
    }
    if (len == 0)
        return 0;
    ERR_clear_error();
    int n = SSL_write(t->ssl, data, len > INT_MAX ? INT_MAX : (int)len);
    if (n > 0) {
        t->write_needs_read = false;
        return n;
    }
    return blocked_or_failed(c, n, false);
}

static int tls_attach(struct conn *c, struct event_base *base)
{
    return net_sock_attach(c, base);
}

static void tls_close(struct conn *c)
{
    struct tls_state *t = c->tp_data;
    if (t) {
        if (t->ssl) {
            if (t->handshake_done)
                SSL_shutdown(t->ssl); /* one close_notify, no wait for the peer's */
            SSL_free(t->ssl);
            ERR_clear_error();
        }
        free(t->wbuf);
    }
    net_sock_close(c); /* frees t (its first member) and closes the socket */
}

struct sock_state *net_tls_state_new(int fd)
{
    struct tls_state *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    pthread_mutex_lock(&ctx_lock);
    t->ssl = tls_ctx ? SSL_new(tls_ctx) : NULL;
    pthread_mutex_unlock(&ctx_lock);
    if (!t->ssl || !SSL_set_fd(t->ssl, fd)) {
        log_msg(LOG_WARN, "<%d failed to create the TLS session, closing", fd);
        if (t->ssl)
            SSL_free(t->ssl);
        ERR_clear_error();
        free(t);
        return NULL;
    }
    SSL_set_accept_state(t->ssl);
    t->sock.on_ready = tls_on_socket_ready;
    return &t->sock;
}

const struct transport_ops net_tls_transport = {
    .name = "tls",
    .attach = tls_attach,
    .recv = tls_recv,
    .sendv = tls_sendv,
    .want = tls_want,
    .close = tls_close,
    .describe = net_sock_describe,
};

/* ---- stats ------------------------------------------------------------------------------- */
void net_tls_stats(stat_emit_fn emit, void *ctx)
{
    char buf[32];
    if (!settings.tls.enabled)
        return;
    if (settings.tls.session_cache) {
        snprintf(buf, sizeof(buf), "%llu",
                 (unsigned long long)__atomic_load_n(&new_sessions, __ATOMIC_RELAXED));
        emit(ctx, "ssl_new_sessions", buf);
    }
    snprintf(buf, sizeof(buf), "%llu",
             (unsigned long long)__atomic_load_n(&handshake_errors, __ATOMIC_RELAXED));
    emit(ctx, "ssl_handshake_errors", buf);
    snprintf(buf, sizeof(buf), "%u", (unsigned)(clock_now() - last_cert_refresh));
    emit(ctx, "time_since_server_cert_refresh", buf);
}

void net_tls_settings_stats(stat_emit_fn emit, void *ctx)
{
    const struct tls_settings *t = &settings.tls;
    char buf[32];
    emit(ctx, "ssl_enabled", t->enabled ? "yes" : "no");
    emit(ctx, "ssl_chain_cert", t->chain_cert ? t->chain_cert : "(null)");
    emit(ctx, "ssl_key", t->key ? t->key : "(null)");
    snprintf(buf, sizeof(buf), "%d", t->verify_mode);
    emit(ctx, "ssl_verify_mode", buf);
    snprintf(buf, sizeof(buf), "%d", t->keyformat);
    emit(ctx, "ssl_keyformat", buf);
    emit(ctx, "ssl_ciphers", t->ciphers ? t->ciphers : "NULL");
    emit(ctx, "ssl_ca_cert", t->ca_cert ? t->ca_cert : "NULL");
    snprintf(buf, sizeof(buf), "%u", t->wbuf_size);
    emit(ctx, "ssl_wbuf_size", buf);
    emit(ctx, "ssl_session_cache", t->session_cache ? "yes" : "no");
    emit(ctx, "ssl_kernel_tls", t->kernel_tls ? "yes" : "no");
    emit(ctx, "ssl_min_version", settings_tls_version_name(t->min_version));
}
