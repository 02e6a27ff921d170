/* transport.h: the small interface through which the request pipeline
 * reaches a server: open, gather-send, receive, an fd to poll, close.
 * Sockets (TCP, Unix) implement it in transport_sock.c; RDMA will be one
 * more implementation. Nothing above this interface knows socket calls. */
#ifndef LMR_TRANSPORT_H
#define LMR_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <libmemcached/constants.h>

struct lmr_conn;

/* What a transport needs to reach one server. */
struct lmr_endpoint {
    const char *hostname; /* host name, address, or Unix socket path */
    unsigned port;        /* 0 for Unix sockets */
    bool unix_socket;
    int connect_timeout_ms;
    bool tcp_nodelay;
    bool tcp_keepalive;
    int send_buffer_size; /* 0: system default */
    int recv_buffer_size;
    /* SND_TIMEOUT / RCV_TIMEOUT in microseconds (0: none), set as
     * SO_SNDTIMEO / SO_RCVTIMEO as libmemcached does; the sockets are
     * non-blocking, so waiting stays bounded by POLL_TIMEOUT */
    int snd_timeout_us;
    int rcv_timeout_us;
    /* What a transport shares among one client's connections (RDMA: its
     * substrate contexts): a slot of the client's that the transport
     * owns, NULL until its first connection and again after its last
     * close; shared_peers: the client's servers of this connection's
     * type, to size what is shared. */
    void **shared;
    unsigned shared_peers;
    /* RDMA: the connection follows the server's choice (rdma://) and moves
     * between RC and UD when the server asks (transport_rdma_move.h) */
    bool movable;
};

struct lmr_transport_ops {
    const char *name;
    /* true when send copies the bytes into buffers of its own anyway
     * (RDMA): the pipeline then hands it a request's pieces as they are
     * instead of gathering small ones into one buffer first */
    bool copies_on_send;
    /* true when poll_input is a system call (sockets): a spinning client
     * then reads the clock and yields every few polls from the start, so
     * its budget (conn.spin_us) holds; an RDMA poll reads memory only */
    bool poll_input_is_syscall;
    /* Connects. A transport with finish_open may return
     * MEMCACHED_IN_PROGRESS instead of waiting: poll_fd then turns writable
     * when finish_open has news, and the pipeline enforces
     * connect_timeout_ms. One without finish_open connects before returning,
     * bounded by connect_timeout_ms. On failure returns the libmemcached
     * code, sets *sys_errno and leaves the connection closed. */
    memcached_return_t (*open)(struct lmr_conn *conn, const struct lmr_endpoint *ep,
                               int *sys_errno);
    /* Optional. After poll_fd turned writable during a connect: SUCCESS,
     * IN_PROGRESS (still trying, e.g. another address) or a failure (the
     * connection is then closed). */
    memcached_return_t (*finish_open)(struct lmr_conn *conn, int *sys_errno);
    /* Non-blocking; like writev/recv: -1 with errno (EAGAIN when it would
     * block), recv returns 0 at end of stream. */
    ssize_t (*send)(struct lmr_conn *conn, const struct iovec *iov, int iovcnt);
    ssize_t (*recv)(struct lmr_conn *conn, void *buf, size_t len);
    int (*poll_fd)(const struct lmr_conn *conn);
    void (*close)(struct lmr_conn *conn);
    /* Optional, for transports whose input can be polled without sleeping
     * (RDMA: no system call; sockets: one that does not block): before the
     * pipeline sleeps on poll_fd it calls poll_input
     * repeatedly, for up to conn->spin_us, until one returns true (recv
     * has bytes or end of stream for it); then prepare_sleep, which makes
     * poll_fd signal the next input and returns true if input came
     * meanwhile (the pipeline then does not sleep). */
    bool (*poll_input)(struct lmr_conn *conn);
    bool (*prepare_sleep)(struct lmr_conn *conn);
    /* Optional: true when the peer's replies are produced on the CPU this
     * thread runs on (a server on the same CPU over loopback), where
     * polling would only keep the peer from running: the pipeline then
     * sleeps at once. */
    bool (*peer_shares_cpu)(struct lmr_conn *conn);
    /* Optional, for transports that can place a value straight into a
     * caller's buffer (RDMA): called for a GET (binary protocol, request
     * id `opaque`) into the caller's buf[0, len) before its bytes are
     * sent. true when offered: the value may then arrive in place, and
     * recv into that same buffer returns it without a copy. Each offer
     * is balanced by release_value_buffer once the request completed;
     * closing the connection releases every offer. */
    bool (*offer_value_buffer)(struct lmr_conn *conn, uint32_t opaque, char *buf, size_t len);
    void (*release_value_buffer)(struct lmr_conn *conn, uint32_t opaque);
    /* Optional, for transports that learn some things only from events
     * that recv does not read (RDMA: a closed connection, a landing buffer
     * to advertise again): handles them without sleeping. The pipeline
     * calls it for a caller that polls (memcached_test) and finds its
     * request still in progress; waiting callers get the same through
     * poll_input and prepare_sleep. */
    void (*poll_events)(struct lmr_conn *conn);
    /* Optional, for transports whose send takes bytes before they are on
     * their way (RDMA: kept in order, or waiting in the endpoint for
     * credit): waits up to timeout_ms until every byte send took has
     * reached the server, as a socket's kernel delivers what was written
     * even after close. The pipeline calls it before a close that is not
     * a failure (memcached_quit, memcached_free, a behavior that
     * reconnects) and in memcached_flush_buffers. */
    void (*drain)(struct lmr_conn *conn, int timeout_ms);
    /* Optional, for the same transports: waits until every byte send
     * took is on its way (handed to the device, which delivers it without
     * further calls), not until the server has it. The pipeline calls it
     * before a blocking call that sent requests without replies returns
     * (NOREPLY, replicas), where a socket's kernel would go on sending
     * what the call wrote. *deadline_ms (monotonic milliseconds) bounds
     * the wait; when it is negative, a call that has to wait sets it to
     * timeout_ms from now first, so that one pass over all servers waits
     * one timeout in all and reads the clock only if something waits. */
    void (*push)(struct lmr_conn *conn, int64_t *deadline_ms, int timeout_ms);
    /* Optional, for transports that can move the connection to another
     * one at the server's request (RDMA: between RC and UD): switching
     * is true from the server's request until the move is done; while it
     * is, the pipeline keeps reading (the old transport's last replies),
     * and calls hold_sends between two whole requests before it sends
     * more: true holds them (the first such call ends the request stream
     * on the old transport). recv completes the move when the old stream
     * ends; then sending goes on over the new transport. */
    bool (*switching)(const struct lmr_conn *conn);
    bool (*hold_sends)(struct lmr_conn *conn);
    /* Optional, for transports whose server may forget an idle
     * connection without a word (RDMA UD: the server frees a peer whose
     * keepalive went unanswered, and an idle program answers nothing):
     * the pipeline calls it before a request when no reply is awaited and
     * nothing of the request went yet. True when the transport opened a
     * new server connection: the pipeline authenticates it anew (SASL)
     * before anything goes on it, as after a move. An open that failed
     * ends the stream, and the send that follows fails. */
    bool (*renew)(struct lmr_conn *conn);
    /* Optional: no reply came for a whole poll timeout; what the
     * transport knows of that silence, in words, into buf (RDMA: its
     * messages sent, acknowledged, waiting, received), for the server's
     * error. */
    void (*stall_why)(struct lmr_conn *conn, char *buf, size_t len);
};

struct lmr_conn {
    const struct lmr_transport_ops *ops; /* NULL while closed */
    int fd;
    void *transport_state; /* for transports that need more than an fd */
    void *tls;             /* TLS over the socket transport (transport_tls.c) */
    unsigned spin_us;      /* poll_input budget before sleeping (0: none) */
    /* peer_shares_cpu's last answer, for the CPU it was found on, and how
     * many more waits may reuse it before it is asked again; reused only
     * once replies came (before, the kernel knows only the handshake) */
    bool received_any;
    bool cpu_shared;
    int cpu_checked_on;
    unsigned cpu_check_reuses;
    /* Why the connection failed or could not open, in words, when the
     * transport knows more than errno or the end of the stream says (RDMA:
     * a failed work completion, a connection manager event, a silent
     * peer); "" otherwise. The pipeline reports it as the cause in the
     * server's error (memcached_server_error) instead of strerror. Cleared
     * before each open; the first cause recorded stands. */
    char why[128];
};

extern const struct lmr_transport_ops lmr_transport_socket;
extern const struct lmr_transport_ops lmr_transport_tls; /* TLS over TCP */

/* A transport setting from the environment: the number in env_name,
 * 0 .. max; default_value when unset or not such a number. */
unsigned lmr_env_unsigned(const char *env_name, unsigned max, unsigned default_value);

/* Records why conn failed (conn->why), unless a cause is recorded already. */
__attribute__((format(printf, 2, 3))) void lmr_conn_note_why(struct lmr_conn *conn, const char *fmt,
                                                             ...);

/* Largest spin budget (conn->spin_us) a *_SPIN_US variable may ask for. */
#define LMR_SPIN_US_MAX 1000000u

/* The transport that reaches servers of this kind (NULL: none). */
const struct lmr_transport_ops *lmr_transport_for(memcached_connection_t type);

#endif
