/*
 * net_udp.c: the UDP transport (transport.h) and its sockets.
 *
 * This is a datagram transport (transport.h): conn.c asks for one request
 * message at a time, answers it, drops what stays unparsed (an incomplete
 * command, as memcached resets its read buffer per datagram) and only then
 * asks for the next one, so every reply goes to the right peer with the
 * right request id.
 *
 * Receiving: the 8-byte header is checked (datagrams shorter than 9 bytes,
 * and requests announcing more than one datagram, are dropped silently, as
 * memcached 1.6 does), the sender and request id are kept for the reply,
 * and the payload becomes the request message: a datagram of up to 64 KiB
 * is read whole, as memcached reads it (the connection's read buffer grows
 * to hold it for that message).
 * Each datagram picks the text or binary engine by its first byte (under
 * -B auto), as memcached does for UDP.
 *
 * Sending: each response of the connection's queue (struct resp) is one
 * reply message, as each response object is in memcached 1.6: its bytes
 * are collected, then sent as datagrams of at most UDP_DATAGRAM_MAX bytes
 * (header included) numbered 0..n-1 with the count n in every header.
 * When the socket's send buffer is full the connection waits for it to
 * drain, like a stream connection whose output is blocked.
 *
 * Sharing: every worker has a connection on each UDP socket (through its
 * own duplicate of the descriptor, as memcached does, so "stats conns"
 * lists them apart) with its own level-triggered read event; whichever
 * worker reads a datagram first serves it, the others see EAGAIN. Socket
 * errors never close these connections: they live until the workers stop.
 *
 * Must not parse requests or know a protocol's syntax.
 */
#include "net_udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "items.h"
#include "log.h"
#include "mcr/byteorder.h"
#include "net_sock.h"
#include "portfile.h"
#include "settings.h"
#include "stats.h"
#include "thread.h"

#define UDP_HEADER_SIZE 8
#define UDP_DATAGRAM_MAX 1400 /* memcached's UDP_MAX_PAYLOAD_SIZE, header included */
#define UDP_READ_MAX 65536    /* largest datagram read */
#define UDP_RECV_TRIES 64     /* malformed datagrams skipped per receive call */

/* A worker's share of a bound socket, handed over with worker_call. */
struct udp_handoff {
    int fd;
    char addr[96];
};

/* Per-connection state. */
struct udp_state {
    char addr[96]; /* the socket's address, for "stats conns" */
    struct event *ev;
    short interest;
    /* the datagram being delivered to conn.c */
    size_t dgram_len, dgram_off;
    uint16_t request_id;
    struct sockaddr_storage peer;
    socklen_t peer_len;
    /* bytes of the response being collected for sending */
    char *out;
    size_t out_len, out_cap;
    /* a complete reply message still being sent (the socket was full) */
    char *msg;
    size_t msg_len, msg_cap;
    size_t msg_count, msg_next; /* datagrams in it, next one to send */
    char dgram[UDP_READ_MAX];
};

/* ---- transport ------------------------------------------------------------------------ */
static void udp_event_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    conn_on_ready(arg, (what & EV_READ) != 0, (what & EV_WRITE) != 0);
}

static int udp_attach(struct conn *c, struct event_base *base)
{
    struct udp_state *u = c->tp_data;
    u->ev = event_new(base, c->fd, EV_READ | EV_PERSIST, udp_event_cb, c);
    if (!u->ev)
        return -1;
    u->interest = 0;
    return 0;
}

/* Takes the next well-formed datagram off the socket; false when none. */
static bool next_datagram(struct conn *c, struct udp_state *u)
{
    for (int tries = 0; tries < UDP_RECV_TRIES; tries++) {
        u->peer_len = sizeof(u->peer);
        ssize_t n = recvfrom(c->fd, u->dgram, sizeof(u->dgram), MSG_DONTWAIT | MSG_TRUNC,
                             (struct sockaddr *)&u->peer, &u->peer_len);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                log_msg(LOG_CMDS, "<%d UDP receive: %s", c->fd, strerror(errno));
            return false;
        }
        if ((size_t)n > sizeof(u->dgram)) {
            log_msg(LOG_CMDS, "<%d UDP datagram of %zd bytes dropped", c->fd, n);
            continue;
        }
        if (n <= UDP_HEADER_SIZE)
            continue;
        const unsigned char *h = (const unsigned char *)u->dgram;
        uint16_t total = mcr_be_get16(h + 4);
        /* multi-datagram requests are not supported, as memcached; nor
         * does it look at a lone datagram's sequence number */
        if (total != 1)
            continue;
        u->request_id = mcr_be_get16(h);
        u->dgram_len = (size_t)n;
        u->dgram_off = UDP_HEADER_SIZE;
        return true;
    }
    return false;
}

static bool flush_message(struct conn *c, struct udp_state *u);

/* Each datagram picks its protocol as a new stream connection would under
 * -B: memcached 1.6 answers binary requests over UDP too. */
static const struct proto_engine *engine_for_message(unsigned char first_byte)
{
    switch (settings.binding_protocol) {
    case PROTOCOL_ASCII:
        return conn_text_engine;
    case PROTOCOL_BINARY:
        return conn_binary_engine ? conn_binary_engine : conn_text_engine;
    case PROTOCOL_AUTO:
        break;
    }
    return first_byte == 0x80 && conn_binary_engine ? conn_binary_engine : conn_text_engine;
}

static bool message_pending(const struct udp_state *u)
{
    return u->msg_next < u->msg_count;
}

/* One request message per call (conn.c asks for the next one only after
 * answering this one). A payload larger than the read buffer grows it. */
static ssize_t udp_recv(struct conn *c, void *buf, size_t len)
{
    struct udp_state *u = c->tp_data;
    /* the previous reply must be out first: it needs the previous peer */
    if ((message_pending(u) && !flush_message(c, u)) || u->out_len > 0 || !next_datagram(c, u)) {
        errno = EAGAIN;
        return -1;
    }
    size_t n = u->dgram_len - u->dgram_off;
    c->engine = engine_for_message((unsigned char)u->dgram[u->dgram_off]);
    char *at = buf;
    if (n > len && c->rbuf && at >= c->rbuf && at + len == c->rbuf + c->rsize) {
        /* memcached reads a whole datagram (up to 64 KiB): the message
         * gets a read buffer that holds it, grown as conn.c grows one
         * (conn.c frees it once the message is answered) */
        size_t off = (size_t)(at - c->rbuf), size = off + n;
        char *bigger = NULL;
        if (worker_mem_charge(c->worker, size - c->rsize)) { /* -o read_buf_mem_limit */
            bigger = realloc(c->rbuf, size);
            if (!bigger)
                worker_mem_uncharge(c->worker, size - c->rsize);
        }
        if (bigger) {
            STAT_ADD(&c->worker->stats, read_buf_bytes, size - c->rsize);
            c->rbuf = bigger;
            c->rsize = size;
            buf = bigger + off;
            len = n;
        }
    }
    if (n > len) {
        log_msg(LOG_CMDS, "<%d UDP request of %zu bytes cut to %zu", c->fd, n, len);
        n = len;
    }
    memcpy(buf, u->dgram + u->dgram_off, n);
    u->dgram_off = u->dgram_len;
    return (ssize_t)n;
}

/* Bytes a response writes in total (conn.c writes exactly these). */
static size_t resp_bytes(const struct resp *r)
{
    size_t n = r->head_len + r->heap_len + r->tail_len;
    if (r->it)
        n += item_nbytes(r->it) + r->it_trailer;
    return n;
}

static bool out_reserve(struct udp_state *u, size_t more)
{
    if (u->out_len + more <= u->out_cap)
        return true;
    size_t cap = u->out_cap ? u->out_cap : 4096;
    while (cap < u->out_len + more)
        cap *= 2;
    char *bigger = realloc(u->out, cap);
    if (!bigger)
        return false;
    u->out = bigger;
    u->out_cap = cap;
    return true;
}

/* Sends the datagrams of the current message from msg_next on; false
 * when the socket is full (the rest goes when it is writable). */
static bool flush_message(struct conn *c, struct udp_state *u)
{
    const size_t room = UDP_DATAGRAM_MAX - UDP_HEADER_SIZE;
    for (; u->msg_next < u->msg_count; u->msg_next++) {
        size_t i = u->msg_next;
        unsigned char h[UDP_HEADER_SIZE] = {0};
        mcr_be_put16(h, u->request_id);
        mcr_be_put16(h + 2, (uint16_t)i);
        mcr_be_put16(h + 4, (uint16_t)u->msg_count);
        size_t off = i * room;
        size_t n = u->msg_len - off < room ? u->msg_len - off : room;
        struct iovec iov[2] = {{h, sizeof(h)}, {u->msg + off, n}};
        struct msghdr msg;
        memset(&msg, 0, sizeof(msg));
        msg.msg_name = &u->peer;
        msg.msg_namelen = u->peer_len;
        msg.msg_iov = iov;
        msg.msg_iovlen = 2;
        if (sendmsg(c->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
                return false;
            /* the peer is gone or unreachable: drop the rest */
            log_msg(LOG_CMDS, "<%d UDP send: %s", c->fd, strerror(errno));
            u->msg_next = u->msg_count;
            break;
        }
    }
    return true;
}

/* The collected response becomes the message being sent; false when the
 * socket filled up before its last datagram. */
static bool send_message(struct conn *c, struct udp_state *u)
{
    const size_t room = UDP_DATAGRAM_MAX - UDP_HEADER_SIZE;
    char *tmp = u->msg;
    size_t tmp_cap = u->msg_cap;
    u->msg = u->out;
    u->msg_cap = u->out_cap;
    u->msg_len = u->out_len;
    u->out = tmp;
    u->out_cap = tmp_cap;
    u->out_len = 0;
    u->msg_next = 0;
    u->msg_count = (u->msg_len + room - 1) / room;
    if (u->msg_count > 0xffff) {
        log_msg(LOG_WARN, "<%d UDP reply of %zu bytes is too large, dropped", c->fd, u->msg_len);
        u->msg_count = 0;
        return true;
    }
    return flush_message(c, u);
}

/* conn.c hands over the bytes of its queued responses, in order, possibly
 * ending inside one. Completed responses are sent at once; the bytes of an
 * unfinished one wait here (its r->sent equals out_len next time). When
 * the socket is full, the bytes taken so far are reported (a short write)
 * and the next call says EAGAIN until the message is out, so conn.c waits
 * for writability. */
static ssize_t udp_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
    struct udp_state *u = c->tp_data;
    if (message_pending(u) && !flush_message(c, u)) {
        errno = EAGAIN;
        return -1;
    }
    struct resp *r = c->resp_head;
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++) {
        const char *p = iov[i].iov_base;
        size_t left = iov[i].iov_len;
        while (left > 0 && r) {
            size_t need = resp_bytes(r) - u->out_len;
            if (need == 0) { /* an empty response (nothing to say) */
                r = r->next;
                continue;
            }
            size_t take = left < need ? left : need;
            if (!out_reserve(u, take)) {
                errno = ENOMEM;
                return -1;
            }
            memcpy(u->out + u->out_len, p, take);
            u->out_len += take;
            p += take;
            left -= take;
            total += take;
            if (take == need) {
                r = r->next;
                if (!send_message(c, u))
                    return (ssize_t)total;
            }
        }
    }
    return (ssize_t)total;
}

static void udp_want(struct conn *c, bool readable, bool writable)
{
    struct udp_state *u = c->tp_data;
    /* while a reply message waits for room, only writability matters */
    short interest = message_pending(u)
                         ? EV_WRITE
                         : (short)((readable ? EV_READ : 0) | (writable ? EV_WRITE : 0));
    if (interest == u->interest)
        return;
    event_del(u->ev);
    u->interest = interest;
    if (interest == 0)
        return;
    event_assign(u->ev, event_get_base(u->ev), c->fd, (short)(interest | EV_PERSIST), udp_event_cb,
                 c);
    if (event_add(u->ev, NULL) != 0)
        log_msg(LOG_WARN, "<%d event_add failed", c->fd);
}

static void state_free(struct udp_state *u)
{
    if (u->ev) {
        event_del(u->ev);
        event_free(u->ev);
    }
    free(u->msg);
    free(u->out);
    free(u);
}

static void udp_close(struct conn *c)
{
    struct udp_state *u = c->tp_data;
    c->tp_data = NULL;
    if (u)
        state_free(u);
    if (c->fd >= 0) {
        close(c->fd);
        stats_conn_closed();
    }
}

static void udp_describe(struct conn *c, char *buf, size_t len)
{
    struct udp_state *u = c->tp_data;
    snprintf(buf, len, "%s", u->addr);
}

const struct transport_ops net_udp_transport = {
    .name = "udp",
    .datagram = true,
    .attach = udp_attach,
    .recv = udp_recv,
    .sendv = udp_sendv,
    .want = udp_want,
    .close = udp_close,
    .describe = udp_describe,
};

/* ---- sockets ---------------------------------------------------------------------------- */
/* On a worker's thread: its connection on the socket. */
static void adopt_socket(struct worker *w, void *arg)
{
    struct udp_handoff *h = arg;
    struct udp_state *u = calloc(1, sizeof(*u));
    if (!u) {
        log_msg(LOG_WARN, "out of memory for a UDP connection");
        close(h->fd);
        free(h);
        return;
    }
    memcpy(u->addr, h->addr, sizeof(u->addr));
    stats_conn_opened(); /* each worker's UDP connection counts, as in memcached */
    if (!conn_new(w, &net_udp_transport, h->fd, u, conn_text_engine, h->addr)) {
        state_free(u);
        close(h->fd);
        stats_conn_closed();
    }
    free(h);
}

static void format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "udp6:[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        snprintf(buf, len, "udp:%s:%u", host, ntohs(in->sin_port));
    }
}

/* Binds one socket and hands it to every worker; notes its port in the
 * port file (MEMCACHED_PORT_FILENAME) as memcached does. */
static int open_one(const struct addrinfo *p, FILE *portfile)
{
    int fd = socket(p->ai_family, p->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, p->ai_protocol);
    if (fd < 0) {
        log_msg(LOG_ALWAYS, "UDP socket(): %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (p->ai_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, p->ai_addr, p->ai_addrlen) != 0) {
        log_msg(LOG_ALWAYS, "failed to listen on UDP port %d: %s", settings.udpport,
                strerror(errno));
        close(fd);
        return -1;
    }
    char addr[96];
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    format_addr((struct sockaddr *)&ss, addr, sizeof(addr));
    if (portfile && ss.ss_family == AF_INET)
        fprintf(portfile, "UDP INET: %u\n", ntohs(((struct sockaddr_in *)&ss)->sin_port));
    else if (portfile && ss.ss_family == AF_INET6)
        fprintf(portfile, "UDP INET6: %u\n", ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    /* one descriptor per worker; the last worker takes the original */
    unsigned n = workers_count();
    for (unsigned i = 0; i < n; i++) {
        struct udp_handoff *h = malloc(sizeof(*h));
        int wfd = i + 1 < n ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : fd;
        if (!h || wfd < 0) {
            log_msg(LOG_ALWAYS, "failed to set up UDP for worker %u", i);
            free(h);
            if (wfd >= 0 && wfd != fd)
                close(wfd);
            if (wfd != fd)
                close(fd);
            return -1;
        }
        h->fd = wfd;
        memcpy(h->addr, addr, sizeof(addr));
        if (worker_call(worker_at(i), adopt_socket, h) != 0) {
            close(wfd);
            free(h);
        }
    }
    log_msg(LOG_WARN, "listening on %s", addr);
    return 0;
}

/* One -l entry: "host", "host:port" (the port is TCP's; UDP uses -U),
 * "[v6]" or "[v6]:port". */
static int open_spec(const char *spec, FILE *portfile)
{
    bool notls; /* TLS is for TCP; UDP listens on the address all the same */
    spec = net_sock_strip_notls(spec, &notls);
    char host[256];
    const char *h = spec;
    size_t hlen = strlen(spec);
    if (spec[0] == '[') {
        const char *close_br = strchr(spec, ']');
        if (!close_br) {
            log_msg(LOG_ALWAYS, "bad listen address \"%s\"", spec);
            return -1;
        }
        h = spec + 1;
        hlen = (size_t)(close_br - h);
    } else {
        const char *colon = strchr(spec, ':');
        if (colon && strchr(colon + 1, ':') == NULL)
            hlen = (size_t)(colon - spec);
    }
    if (hlen >= sizeof(host)) {
        log_msg(LOG_ALWAYS, "listen address too long: \"%s\"", spec);
        return -1;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    char port[16];
    snprintf(port, sizeof(port), "%d", settings.udpport == -1 ? 0 : settings.udpport); /* -1: any */

    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_flags = AI_PASSIVE;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    int rc =
        getaddrinfo(strcmp(host, "*") == 0 || host[0] == '\0' ? NULL : host, port, &hints, &ai);
    if (rc != 0) {
        log_msg(LOG_ALWAYS, "getaddrinfo(\"%s\"): %s", spec, gai_strerror(rc));
        return -1;
    }
    int result = 0;
    for (struct addrinfo *p = ai; p && result == 0; p = p->ai_next)
        result = open_one(p, portfile);
    freeaddrinfo(ai);
    return result;
}

int udp_open(void)
{
    if (settings.udpport == 0 || settings.socketpath)
        return 0; /* off by default; -s turns off TCP and UDP, as in memcached */
    char *copy = strdup(settings.inter ? settings.inter : "127.0.0.1");
    if (!copy)
        return -1;
    /* the TCP listeners left their lines in <name>.lck: add ours, then
     * rename it, so the file appears complete (memcached's order) */
    struct portfile portfile;
    portfile_open(&portfile);
    int rc = 0;
    char *save = NULL;
    for (char *spec = strtok_r(copy, ",; ", &save); spec && rc == 0;
         spec = strtok_r(NULL, ",; ", &save))
        rc = open_spec(spec, portfile.f);
    free(copy);
    portfile_close(&portfile, true);
    return rc;
}
