/* transport_sock.c: the socket transport (TCP over IPv4/IPv6 and Unix
 * domain sockets). Owns socket creation, the bounded non-blocking connect
 * and socket options. Knows nothing of memcached protocols or requests. */
#include "transport.h"

#include "config.h"
#include "transport_rdma.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int set_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Waits for a non-blocking connect to finish; returns 0 or an errno. */
static int finish_connect(int fd, int timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    for (;;) {
        int n = poll(&pfd, 1, timeout_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return ETIMEDOUT;
        break;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        return errno;
    return err;
}

static void apply_options(int fd, const struct lmr_endpoint *ep, bool tcp)
{
    int one = 1;
    if (tcp && ep->tcp_nodelay)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (tcp && ep->tcp_keepalive)
        (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    if (ep->send_buffer_size > 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &ep->send_buffer_size, sizeof(int));
    if (ep->recv_buffer_size > 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &ep->recv_buffer_size, sizeof(int));
}

/* Creates a non-blocking socket and connects it; returns fd or -1 (errno). */
static int connect_addr(const struct sockaddr *sa, socklen_t salen, int family,
                        const struct lmr_endpoint *ep)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    apply_options(fd, ep, family != AF_UNIX);
    if (set_nonblocking(fd) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    if (connect(fd, sa, salen) == 0)
        return fd;
    int err = errno;
    if (err == EINPROGRESS || err == EAGAIN)
        err = finish_connect(fd, ep->connect_timeout_ms);
    if (err == 0)
        return fd;
    close(fd);
    errno = err;
    return -1;
}

const struct lmr_transport_ops lmr_transport_socket;

static memcached_return_t sock_open(struct lmr_conn *conn, const struct lmr_endpoint *ep,
                                    int *sys_errno)
{
    *sys_errno = 0;
    if (ep->unix_socket) {
        struct sockaddr_un sun;
        memset(&sun, 0, sizeof(sun));
        sun.sun_family = AF_UNIX;
        if (strlen(ep->hostname) >= sizeof(sun.sun_path))
            return MEMCACHED_INVALID_ARGUMENTS;
        strcpy(sun.sun_path, ep->hostname);
        int fd = connect_addr((struct sockaddr *)&sun, sizeof(sun), AF_UNIX, ep);
        if (fd < 0) {
            *sys_errno = errno;
            return errno == ETIMEDOUT ? MEMCACHED_TIMEOUT : MEMCACHED_CONNECTION_FAILURE;
        }
        conn->fd = fd;
        conn->ops = &lmr_transport_socket;
        return MEMCACHED_SUCCESS;
    }

    char port_text[16];
    snprintf(port_text, sizeof(port_text), "%u", ep->port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP};
    struct addrinfo *list = NULL;
    if (getaddrinfo(ep->hostname, port_text, &hints, &list) != 0 || list == NULL)
        return MEMCACHED_HOST_LOOKUP_FAILURE;
    memcached_return_t rc = MEMCACHED_CONNECTION_FAILURE;
    for (struct addrinfo *ai = list; ai != NULL; ai = ai->ai_next) {
        int fd = connect_addr(ai->ai_addr, ai->ai_addrlen, ai->ai_family, ep);
        if (fd >= 0) {
            conn->fd = fd;
            conn->ops = &lmr_transport_socket;
            rc = MEMCACHED_SUCCESS;
            break;
        }
        *sys_errno = errno;
        rc = errno == ETIMEDOUT ? MEMCACHED_TIMEOUT : MEMCACHED_CONNECTION_FAILURE;
    }
    freeaddrinfo(list);
    return rc;
}

static ssize_t sock_send(struct lmr_conn *conn, const struct iovec *iov, int iovcnt)
{
    struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
    ssize_t n;
    do {
        n = sendmsg(conn->fd, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
}

static ssize_t sock_recv(struct lmr_conn *conn, void *buf, size_t len)
{
    ssize_t n;
    do {
        n = recv(conn->fd, buf, len, 0);
    } while (n < 0 && errno == EINTR);
    return n;
}

static int sock_poll_fd(const struct lmr_conn *conn)
{
    return conn->fd;
}

static void sock_close(struct lmr_conn *conn)
{
    if (conn->fd >= 0)
        close(conn->fd);
    conn->fd = -1;
    conn->ops = NULL;
}

const struct lmr_transport_ops *lmr_transport_for(memcached_connection_t type)
{
    switch (type) {
    case MEMCACHED_CONNECTION_TCP:
    case MEMCACHED_CONNECTION_UNIX_SOCKET:
        return &lmr_transport_socket;
#ifdef HAVE_RDMA
    case MEMCACHED_CONNECTION_RDMA:
        return &lmr_transport_rdma;
#endif
    default:
        return NULL;
    }
}

const struct lmr_transport_ops lmr_transport_socket = {
    .name = "socket",
    .open = sock_open,
    .send = sock_send,
    .recv = sock_recv,
    .poll_fd = sock_poll_fd,
    .close = sock_close,
};
