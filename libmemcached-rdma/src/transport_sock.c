/* transport_sock.c: the socket transport (TCP over IPv4/IPv6 and Unix
 * domain sockets). Owns socket creation, the non-blocking connect (trying
 * each resolved address in turn; the pipeline enforces CONNECT_TIMEOUT) and
 * socket options. Knows nothing of memcached protocols or requests. */
#include "transport.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

static int set_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
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
    if (ep->snd_timeout_us > 0) {
        struct timeval tv = {ep->snd_timeout_us / 1000000, ep->snd_timeout_us % 1000000};
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
    if (ep->rcv_timeout_us > 0) {
        struct timeval tv = {ep->rcv_timeout_us / 1000000, ep->rcv_timeout_us % 1000000};
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
}

/* Creates a non-blocking socket and starts connecting it. Returns the fd
 * (*in_progress tells whether the connect is still under way) or -1 with
 * errno set. */
static int start_connect(const struct sockaddr *sa, socklen_t salen, int family,
                         const struct lmr_endpoint *ep, bool *in_progress)
{
    *in_progress = false;
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
    if (err == EINPROGRESS && family != AF_UNIX) {
        *in_progress = true;
        return fd;
    }
    close(fd);
    errno = err;
    return -1;
}

/* A TCP connect under way: the resolved addresses not tried yet. */
struct pending_connect {
    struct addrinfo *list;
    struct addrinfo *next;
    struct lmr_endpoint ep;
};

const struct lmr_transport_ops lmr_transport_socket;

static void drop_pending(struct lmr_conn *conn)
{
    struct pending_connect *p = conn->transport_state;
    if (p != NULL) {
        freeaddrinfo(p->list);
        free(p);
    }
    conn->transport_state = NULL;
}

/* A waiting client checks its socket for a reply for this long before it
 * sleeps in poll(): sleeping and being woken costs more than a loopback or
 * data-center round trip on many machines (virtual ones above all). */
#define SOCKET_SPIN_US_DEFAULT 100

/* The connection is now this transport's: its polling state starts afresh. */
static void adopt(struct lmr_conn *conn)
{
    conn->ops = &lmr_transport_socket;
    conn->spin_us =
        lmr_env_unsigned("LIBMEMCACHED_SOCKET_SPIN_US", LMR_SPIN_US_MAX, SOCKET_SPIN_US_DEFAULT);
    conn->received_any = false;
    conn->cpu_check_reuses = 0;
}

static void mark_closed(struct lmr_conn *conn)
{
    drop_pending(conn);
    conn->fd = -1;
    conn->ops = NULL;
}

/* Tries the remaining addresses until one connects or is in progress. */
static memcached_return_t try_next_address(struct lmr_conn *conn, int *sys_errno)
{
    struct pending_connect *p = conn->transport_state;
    while (p->next != NULL) {
        struct addrinfo *ai = p->next;
        p->next = ai->ai_next;
        bool in_progress;
        int fd = start_connect(ai->ai_addr, ai->ai_addrlen, ai->ai_family, &p->ep, &in_progress);
        if (fd < 0) {
            *sys_errno = errno;
            continue;
        }
        conn->fd = fd;
        if (in_progress)
            return MEMCACHED_IN_PROGRESS;
        drop_pending(conn);
        return MEMCACHED_SUCCESS;
    }
    mark_closed(conn);
    return MEMCACHED_CONNECTION_FAILURE;
}

static memcached_return_t sock_open(struct lmr_conn *conn, const struct lmr_endpoint *ep,
                                    int *sys_errno)
{
    *sys_errno = 0;
    conn->transport_state = NULL;
    if (ep->unix_socket) {
        struct sockaddr_un sun;
        memset(&sun, 0, sizeof(sun));
        sun.sun_family = AF_UNIX;
        if (strlen(ep->hostname) >= sizeof(sun.sun_path))
            return MEMCACHED_INVALID_ARGUMENTS;
        strcpy(sun.sun_path, ep->hostname);
        bool in_progress;
        int fd = start_connect((struct sockaddr *)&sun, sizeof(sun), AF_UNIX, ep, &in_progress);
        if (fd < 0) {
            *sys_errno = errno;
            return MEMCACHED_CONNECTION_FAILURE;
        }
        conn->fd = fd;
        adopt(conn);
        return MEMCACHED_SUCCESS;
    }

    char port_text[16];
    snprintf(port_text, sizeof(port_text), "%u", ep->port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP};
    struct addrinfo *list = NULL;
    if (getaddrinfo(ep->hostname, port_text, &hints, &list) != 0 || list == NULL)
        return MEMCACHED_HOST_LOOKUP_FAILURE;
    struct pending_connect *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        freeaddrinfo(list);
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    }
    p->list = list;
    p->next = list;
    p->ep = *ep;
    conn->transport_state = p;
    adopt(conn);
    conn->fd = -1;
    return try_next_address(conn, sys_errno);
}

static memcached_return_t sock_finish_open(struct lmr_conn *conn, int *sys_errno)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err == 0) {
        drop_pending(conn);
        return MEMCACHED_SUCCESS;
    }
    *sys_errno = err;
    close(conn->fd);
    conn->fd = -1;
    if (conn->transport_state == NULL) {
        mark_closed(conn);
        return MEMCACHED_CONNECTION_FAILURE;
    }
    return try_next_address(conn, sys_errno);
}

static ssize_t sock_send(struct lmr_conn *conn, const struct iovec *iov, int iovcnt)
{
    struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
    ssize_t n;
    do {
        /* one piece (a get, a small command): send() skips the iovec copy */
        n = iovcnt == 1 ? send(conn->fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL)
                        : sendmsg(conn->fd, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
}

static ssize_t sock_recv(struct lmr_conn *conn, void *buf, size_t len)
{
    ssize_t n;
    do {
        n = recv(conn->fd, buf, len, 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0)
        conn->received_any = true;
    return n;
}

/* One look for input without reading it (a system call, but no sleep):
 * true when recv has bytes, end of stream or an error to report. */
static bool sock_poll_input(struct lmr_conn *conn)
{
    char byte;
    ssize_t n = recv(conn->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* The CPU that processed the last bytes received (SO_INCOMING_CPU: for a
 * server over loopback, the CPU its thread sent from) is this thread's:
 * the server runs here. Unknown (Unix sockets, older kernels): false. The
 * answer is asked of the kernel again after SOCKET_CPU_CHECK_REUSES waits,
 * or at once when this thread moved to another CPU, so a wait that sleeps
 * costs no extra system call most of the time. */
#define SOCKET_CPU_CHECK_REUSES 31

static bool sock_peer_shares_cpu(struct lmr_conn *conn)
{
#ifdef SO_INCOMING_CPU
    int here = sched_getcpu();
    if (here == conn->cpu_checked_on && conn->cpu_check_reuses > 0) {
        conn->cpu_check_reuses--;
        return conn->cpu_shared;
    }
    int cpu = -1;
    socklen_t len = sizeof(cpu);
    if (getsockopt(conn->fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, &len) != 0)
        cpu = -1;
    conn->cpu_shared = cpu >= 0 && cpu == here;
    conn->cpu_checked_on = here;
    conn->cpu_check_reuses = conn->received_any ? SOCKET_CPU_CHECK_REUSES : 0;
    return conn->cpu_shared;
#else
    (void)conn;
    return false;
#endif
}

static int sock_poll_fd(const struct lmr_conn *conn)
{
    return conn->fd;
}

static void sock_close(struct lmr_conn *conn)
{
    if (conn->fd >= 0)
        close(conn->fd);
    mark_closed(conn);
}

const struct lmr_transport_ops lmr_transport_socket = {
    .name = "socket",
    .poll_input_is_syscall = true,
    .open = sock_open,
    .finish_open = sock_finish_open,
    .send = sock_send,
    .recv = sock_recv,
    .poll_input = sock_poll_input,
    .peer_shares_cpu = sock_peer_shares_cpu,
    .poll_fd = sock_poll_fd,
    .close = sock_close,
};
