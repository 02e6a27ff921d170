/*
 * net_sock.c: TCP and Unix stream sockets. Listeners run on the main
 * (listener) thread's event base: each accept is checked against -c, then
 * handed to the next worker with worker_call(); the worker creates the
 * connection over net_sock_transport. The transport keeps one libevent
 * event per connection and changes its read/write interest on request.
 * No protocol parsing here.
 */
#include "net_sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "net_tls.h"
#include "portfile.h"
#include "settings.h"
#include "stats.h"
#include "thread.h"

static const char too_many_conns[] = "ERROR Too many open connections\r\n";

/* ---- per-connection transport state ------------------------------------------------- */
static void sock_event_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    struct conn *c = arg;
    struct sock_state *s = c->tp_data;
    s->on_ready(c, (what & EV_READ) != 0, (what & EV_WRITE) != 0);
}

int net_sock_attach(struct conn *c, struct event_base *base)
{
    struct sock_state *s = c->tp_data;
    s->ev = event_new(base, c->fd, EV_READ | EV_PERSIST, sock_event_cb, c);
    if (!s->ev)
        return -1;
    s->interest = 0;
    return 0;
}

static ssize_t sock_recv(struct conn *c, void *buf, size_t len)
{
    return recv(c->fd, buf, len, 0);
}

static ssize_t sock_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
    if (iovcnt == 1)
        return send(c->fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL);
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = (struct iovec *)iov;
    msg.msg_iovlen = (size_t)iovcnt;
    return sendmsg(c->fd, &msg, MSG_NOSIGNAL);
}

void net_sock_want(struct conn *c, bool readable, bool writable)
{
    struct sock_state *s = c->tp_data;
    short interest = (short)((readable ? EV_READ : 0) | (writable ? EV_WRITE : 0));
    if (interest == s->interest)
        return;
    event_del(s->ev);
    s->interest = interest;
    if (interest == 0)
        return;
    event_assign(s->ev, event_get_base(s->ev), c->fd, (short)(interest | EV_PERSIST), sock_event_cb,
                 c);
    if (event_add(s->ev, NULL) != 0)
        log_msg(LOG_WARN, "<%d event_add failed", c->fd);
}

void net_sock_close(struct conn *c)
{
    struct sock_state *s = c->tp_data;
    if (s) {
        if (s->ev) {
            event_del(s->ev);
            event_free(s->ev);
        }
        free(s);
        c->tp_data = NULL;
    }
    if (c->fd >= 0) {
        close(c->fd);
        stats_conn_closed();
    }
}

static void format_sockaddr(const struct sockaddr *sa, bool is_unix, const char *unix_path,
                            char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (is_unix) {
        snprintf(buf, len, "unix:%s", unix_path ? unix_path : "");
    } else if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        snprintf(buf, len, "tcp:%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "tcp6:[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        snprintf(buf, len, "unknown");
    }
}

void net_sock_describe(struct conn *c, char *buf, size_t len)
{
    struct sock_state *s = c->tp_data;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (s->is_unix) {
        format_sockaddr(NULL, true, settings.socketpath, buf, len);
        return;
    }
    if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) != 0) {
        snprintf(buf, len, "tcp:unknown");
        return;
    }
    format_sockaddr((struct sockaddr *)&ss, false, NULL, buf, len);
}

const struct transport_ops net_unix_transport = {
    .name = "unix",
    .attach = net_sock_attach,
    .recv = sock_recv,
    .sendv = sock_sendv,
    .want = net_sock_want,
    .close = net_sock_close,
    .describe = net_sock_describe,
};

const struct transport_ops net_sock_transport = {
    .name = "tcp",
    .attach = net_sock_attach,
    .recv = sock_recv,
    .sendv = sock_sendv,
    .want = net_sock_want,
    .close = net_sock_close,
    .describe = net_sock_describe,
};

/* ---- listeners ------------------------------------------------------------------------ */
struct listener {
    struct listener *next;
    int fd;
    bool is_unix;
    bool tls; /* -Z, unless the -l entry said notls: */
    struct event *ev;
    char addr[96];
};

static struct listener *listeners; /* newest first */
static unsigned nlisteners;
static struct event *reenable_ev; /* accept paused (EMFILE or -c without maxconns_fast) */

struct handoff {
    int fd;
    bool is_unix;
    bool tls;
    char listen_addr[96];
};

/* On the worker's thread. */
static void adopt_connection(struct worker *w, void *arg)
{
    struct handoff *h = arg;
    int fd = h->fd;
    if (settings.binding_protocol == PROTOCOL_BINARY && !conn_binary_engine) {
        log_msg(LOG_WARN, "<%d binary protocol (-B binary) is not supported yet, closing", fd);
        close(fd);
        stats_conn_closed();
        free(h);
        return;
    }
    struct sock_state *s = h->tls ? net_tls_state_new(fd) : calloc(1, sizeof(*s));
    if (!s) {
        log_msg(LOG_WARN, "<%d out of memory for a new connection, closing", fd);
        close(fd);
        stats_conn_closed();
        free(h);
        return;
    }
    if (!h->tls)
        s->on_ready = conn_on_ready;
    s->is_unix = h->is_unix;
    const struct transport_ops *tp = h->tls       ? &net_tls_transport
                                     : h->is_unix ? &net_unix_transport
                                                  : &net_sock_transport;
    if (!conn_new(w, tp, fd, s, conn_engine_for_new(), h->listen_addr)) {
        struct conn tmp; /* conn_new leaves the endpoint to us on failure */
        memset(&tmp, 0, sizeof(tmp));
        tmp.fd = fd;
        tmp.tp_data = s;
        tp->close(&tmp);
    }
    free(h);
}

static void set_listeners_enabled(bool enabled)
{
    for (struct listener *l = listeners; l; l = l->next) {
        if (enabled)
            event_add(l->ev, NULL);
        else
            event_del(l->ev);
    }
    stats_set_accepting(enabled);
}

static void reenable_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (!settings.maxconns_fast && stats_curr_conns() >= (uint64_t)settings.maxconns) {
        struct timeval later = {0, 10000};
        event_add(reenable_ev, &later);
        return;
    }
    stats_listen_enabled();
    set_listeners_enabled(true);
}

static void pause_accepting(void)
{
    stats_listen_disabled();
    set_listeners_enabled(false);
    struct timeval later = {0, 10000};
    event_add(reenable_ev, &later);
}

static void accept_cb(evutil_socket_t lfd, short what, void *arg)
{
    (void)what;
    struct listener *l = arg;
    for (int burst = 0; burst < 64; burst++) {
        if (!settings.maxconns_fast && stats_curr_conns() >= (uint64_t)settings.maxconns) {
            /* leave new connections in the backlog until one closes */
            pause_accepting();
            return;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                log_msg(LOG_WARN, "Too many open connections");
                pause_accepting();
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                       errno != ECONNABORTED) {
                log_msg(LOG_WARN, "accept(): %s", strerror(errno));
            }
            return;
        }
        if (stats_curr_conns() >= (uint64_t)settings.maxconns) {
            ssize_t n = send(fd, too_many_conns, sizeof(too_many_conns) - 1, MSG_NOSIGNAL);
            (void)n;
            close(fd);
            stats_conn_rejected();
            log_msg(LOG_WARN, "Too many open connections");
            continue;
        }
        if (!l->is_unix) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        struct handoff *h = malloc(sizeof(*h));
        if (!h) {
            close(fd);
            continue;
        }
        h->fd = fd;
        h->is_unix = l->is_unix;
        h->tls = l->tls;
        memcpy(h->listen_addr, l->addr, sizeof(h->listen_addr));
        stats_conn_opened();
        if (worker_call(workers_next(), adopt_connection, h) != 0) {
            close(fd);
            stats_conn_closed();
            free(h);
        }
    }
}

static int add_listener(struct event_base *base, int fd, bool is_unix, bool tls, const char *addr)
{
    struct listener *l = calloc(1, sizeof(*l));
    if (!l)
        return -1;
    l->fd = fd;
    l->is_unix = is_unix;
    l->tls = tls;
    snprintf(l->addr, sizeof(l->addr), "%s", addr);
    l->ev = event_new(base, fd, EV_READ | EV_PERSIST, accept_cb, l);
    if (!l->ev || event_add(l->ev, NULL) != 0) {
        if (l->ev)
            event_free(l->ev);
        free(l);
        return -1;
    }
    l->next = listeners;
    listeners = l;
    nlisteners++;
    stats_conn_opened(); /* memcached counts listening sockets as connections */
    return 0;
}

/* Optional port file (MEMCACHED_PORT_FILENAME, as memcached) for port 0. */
static void note_port(FILE *portfile, const struct sockaddr *sa)
{
    if (!portfile)
        return;
    if (sa->sa_family == AF_INET)
        fprintf(portfile, "TCP INET: %u\n", ntohs(((const struct sockaddr_in *)sa)->sin_port));
    else if (sa->sa_family == AF_INET6)
        fprintf(portfile, "TCP INET6: %u\n", ntohs(((const struct sockaddr_in6 *)sa)->sin6_port));
}

const char *net_sock_strip_notls(const char *spec, bool *notls)
{
    *notls = strncmp(spec, "notls:", 6) == 0;
    return *notls ? spec + 6 : spec;
}

static int open_tcp(struct event_base *base, const char *spec, FILE *portfile)
{
    bool notls;
    spec = net_sock_strip_notls(spec, &notls);
    if (notls && !settings.tls.enabled) {
        log_msg(LOG_ALWAYS, "'notls' option is valid only when SSL is enabled");
        return -1;
    }
    bool tls = settings.tls.enabled && !notls;
    char host[256];
    char port[16];
    snprintf(port, sizeof(port), "%d", settings.port == -1 ? 0 : settings.port); /* -1: any */
    const char *h = spec;
    size_t hlen = strlen(spec);
    if (spec[0] == '[') { /* [v6] or [v6]:port */
        const char *close_br = strchr(spec, ']');
        if (!close_br) {
            log_msg(LOG_ALWAYS, "bad listen address \"%s\"", spec);
            return -1;
        }
        h = spec + 1;
        hlen = (size_t)(close_br - h);
        if (close_br[1] == ':')
            snprintf(port, sizeof(port), "%s", close_br + 2);
    } else {
        const char *colon = strchr(spec, ':');
        if (colon && strchr(colon + 1, ':') == NULL) { /* host:port, not bare IPv6 */
            hlen = (size_t)(colon - spec);
            snprintf(port, sizeof(port), "%s", colon + 1);
        }
    }
    if (hlen >= sizeof(host)) {
        log_msg(LOG_ALWAYS, "listen address too long: \"%s\"", spec);
        return -1;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';

    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_flags = AI_PASSIVE;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc =
        getaddrinfo(strcmp(host, "*") == 0 || host[0] == '\0' ? NULL : host, port, &hints, &ai);
    if (rc != 0) {
        log_msg(LOG_ALWAYS, "getaddrinfo(\"%s\"): %s", spec, gai_strerror(rc));
        return -1;
    }
    int bound = 0;
    for (struct addrinfo *p = ai; p; p = p->ai_next) {
        int fd =
            socket(p->ai_family, p->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, p->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (p->ai_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, p->ai_addr, p->ai_addrlen) != 0 || listen(fd, settings.backlog) != 0) {
            log_msg(LOG_ALWAYS, "failed to listen on %s port %s: %s", host[0] ? host : "*", port,
                    strerror(errno));
            close(fd);
            freeaddrinfo(ai);
            return -1;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char addr[96];
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        format_sockaddr((struct sockaddr *)&ss, false, NULL, addr, sizeof(addr));
        note_port(portfile, (struct sockaddr *)&ss);
        if (add_listener(base, fd, false, tls, addr) != 0) {
            close(fd);
            freeaddrinfo(ai);
            return -1;
        }
        log_msg(LOG_WARN, "listening on %s%s", addr, tls ? " (TLS)" : "");
        bound++;
    }
    freeaddrinfo(ai);
    if (bound == 0) {
        log_msg(LOG_ALWAYS, "failed to listen on \"%s\"", spec);
        return -1;
    }
    return 0;
}

static int open_unix(struct event_base *base)
{
    const char *path = settings.socketpath;
    struct sockaddr_un sun;
    if (strlen(path) >= sizeof(sun.sun_path)) {
        log_msg(LOG_ALWAYS, "unix socket path too long: %s", path);
        return -1;
    }
    /* a stale socket file from an earlier run is replaced, as memcached does */
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        log_msg(LOG_ALWAYS, "socket(): %s", strerror(errno));
        return -1;
    }
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, path, strlen(path) + 1);
    mode_t old_umask = umask((mode_t)(~settings.access & 0777));
    int rc = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
    umask(old_umask);
    if (rc != 0 || listen(fd, settings.backlog) != 0) {
        log_msg(LOG_ALWAYS, "failed to listen on unix socket %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    char addr[96];
    format_sockaddr(NULL, true, path, addr, sizeof(addr));
    if (add_listener(base, fd, true, false, addr) != 0) {
        close(fd);
        unlink(path);
        return -1;
    }
    log_msg(LOG_WARN, "listening on %s", addr);
    return 0;
}

int listeners_open(struct event_base *base)
{
    reenable_ev = evtimer_new(base, reenable_cb, NULL);
    if (!reenable_ev)
        return -1;
    stats_set_accepting(1);
    if (settings.socketpath)
        return open_unix(base);

    /* the port file exists even with nothing to list in it (memcached's) */
    struct portfile portfile;
    portfile_open(&portfile);
    int rc = 0;
    if (settings.port == 0) {
        log_msg(LOG_WARN, "TCP disabled (-p 0)"); /* as memcached: port 0 is off */
    } else {
        const char *list = settings.inter ? settings.inter : "127.0.0.1";
        if (!settings.inter)
            log_msg(LOG_ALWAYS, "no -l given: listening on 127.0.0.1 only (memcached listens on "
                                "every interface; use -l 0.0.0.0 for that)");
        char *copy = strdup(list);
        rc = copy ? 0 : -1;
        char *save = NULL;
        for (char *spec = copy ? strtok_r(copy, ",; ", &save) : NULL; spec && rc == 0;
             spec = strtok_r(NULL, ",; ", &save))
            rc = open_tcp(base, spec, portfile.f);
        free(copy);
    }
    /* with UDP on, udp_open adds its lines, then renames */
    portfile_close(&portfile, settings.udpport == 0);
    return rc;
}

void listeners_close(void)
{
    while (listeners) {
        struct listener *l = listeners;
        listeners = l->next;
        event_free(l->ev);
        close(l->fd);
        if (l->is_unix && settings.socketpath)
            unlink(settings.socketpath);
        stats_conn_closed();
        free(l);
    }
    nlisteners = 0;
    if (reenable_ev) {
        event_free(reenable_ev);
        reenable_ev = NULL;
    }
}

void listeners_visit(conn_visit_fn fn, void *ctx)
{
    for (struct listener *l = listeners; l; l = l->next)
        fn(ctx, l->fd, l->addr, NULL, "conn_listening", 0);
}

unsigned listeners_count(void)
{
    return nlisteners;
}
