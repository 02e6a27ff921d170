/* rdma/ud_ep.h: the UD endpoint: one unreliable-datagram queue pair per
 * context shared by all its peers, made reliable per peer by
 * rdma/ud_reliable.c (rdma/ud_ep.c).
 *
 * A context owns the device found through the RDMA CM from an address, a
 * protection domain, one completion queue, one UD queue pair (qkey
 * RDMA_UDP_QKEY), a registered ring of receive buffers (path MTU + the
 * 40-byte GRH each), registered send buffers of one MTU, and the RDMA CM
 * event channel. Peers are set up with the RDMA CM in the UDP port space:
 * the client resolves the server and connects (its QPN, id and window in the
 * private data), the server answers with its own; the client's address
 * handle comes from the CM's answer, the server's from the client's first
 * datagram. Every arrival is sorted to its peer by the connection id of its
 * header, and taken only when its source QP and GID are that peer's; every
 * datagram is validated (GRH, length, header: udr_parse) before use.
 *
 * Driving it: mcr_udep_poll() in the owner's loop handles RDMA CM events,
 * completions and the peers' timers (retransmission, acks, dead peers).
 * One thread per context; nothing here is thread-safe.
 */
#ifndef MCR_RDMA_UD_EP_H
#define MCR_RDMA_UD_EP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct udr_stats; /* ud_reliable.h */

struct mcr_udep_ctx;
struct mcr_udep_peer;

struct mcr_udep_callbacks {
    /* A server's client asks to connect: false refuses it at once (its
     * connect fails with the refusal, not at its dead timeout). NULL
     * admits every client. */
    bool (*admit)(void *user);
    /* A server accepted a new peer (it may send to it from now on). */
    void (*on_peer)(struct mcr_udep_peer *peer, void *user);
    /* One whole message from the peer, in order; valid during the call. */
    void (*on_message)(struct mcr_udep_peer *peer, const void *msg, size_t len, void *user);
    /* The peer is gone (reason -ETIMEDOUT: it stopped answering for the
     * dead timeout) and is freed when this returns. Not called for
     * mcr_udep_peer_close(). */
    void (*on_dead)(struct mcr_udep_peer *peer, int reason, void *user);
};

struct mcr_udep_opts {
    const char *addr;      /* local address of the RDMA interface (server) or the
                              server's address (client); selects the device */
    uint16_t port;         /* server: port to listen on; 0 for a client */
    uint32_t recv_bufs;    /* receive ring; default 512 */
    uint32_t send_bufs;    /* send buffers; default 256 */
    uint32_t max_peers;    /* default 4096 */
    uint32_t poll_max;     /* completions handled per call of mcr_udep_poll,
                              mcr_udep_poll_cq or mcr_udep_arm at most;
                              default (and 0) 64 */
    uint32_t window;       /* datagrams in flight per peer; 0: the layer's default */
    uint32_t dead_ms;      /* 0: the layer's default (5 s) */
    uint32_t max_msg;      /* 0: the layer's default (2 MiB) */
    uint32_t keepalive_ms; /* probe a peer silent this long (0: off); with
                              dead_ms, a server finds clients that vanished */
    /* Testing only: drop, duplicate or hold back this many receives in a
     * million before the checks, as a lossy network would (defaults from
     * MCR_UD_TEST_NETWORK="DROP,DUP,DELAY", else 0). */
    uint32_t test_drop_ppm, test_dup_ppm, test_delay_ppm;
};

void mcr_udep_opts_default(struct mcr_udep_opts *opts);
struct mcr_udep_ctx *mcr_udep_open(const struct mcr_udep_opts *opts,
                                   const struct mcr_udep_callbacks *cb, void *user, char *err,
                                   size_t errlen);
/* Frees every peer (no callbacks) and the context, in reverse order. */
void mcr_udep_close(struct mcr_udep_ctx *ctx);

/* Client: resolves host:port and sets up a peer, waiting up to timeout_ms.
 * NULL and a reason in err on failure. */
struct mcr_udep_peer *mcr_udep_connect(struct mcr_udep_ctx *ctx, const char *host, uint16_t port,
                                       int timeout_ms, char *err, size_t errlen);

/* Queues a message (copied): 0, -EMSGSIZE, -EAGAIN (the peer's send queue
 * is full: poll and try again), -EPIPE (dead). */
int mcr_udep_send(struct mcr_udep_peer *peer, const void *msg, size_t len);
/* The same, the message being the iovcnt pieces of iov (gathered into the
 * send queue: one copy). */
int mcr_udep_sendv(struct mcr_udep_peer *peer, const struct iovec *iov, int iovcnt);
/* Waits up to timeout_ms (0: not at all) for work, then handles RDMA CM
 * events, completions (at most opts.poll_max: call again while it returns
 * more than 0) and due timers. Returns events handled or -errno. */
int mcr_udep_poll(struct mcr_udep_ctx *ctx, int timeout_ms);
/* For an owner with an event loop of its own (instead of sleeping in
 * mcr_udep_poll): the descriptors to watch for readability, the
 * completion channel's and the RDMA CM's (both non-blocking). */
void mcr_udep_fds(const struct mcr_udep_ctx *ctx, int fds[2]);
/* Before such an owner sleeps: arms completion events (the next
 * mcr_udep_poll acknowledges them) and sets *timeout_ms to the time until
 * the next timer of a peer (-1: none). Returns 1 when work came in
 * meanwhile (poll again instead of sleeping), 0, or -errno. */
int mcr_udep_arm(struct mcr_udep_ctx *ctx, int *timeout_ms);
/* When the earliest timer of a peer is due, on mcr_udep_now_us()'s clock
 * (UINT64_MAX: none): an owner that armed its own timer after
 * mcr_udep_arm re-arms it earlier when a send brought a deadline forward. */
uint64_t mcr_udep_next_deadline(const struct mcr_udep_ctx *ctx);
/* The context's clock: CLOCK_MONOTONIC in microseconds. */
uint64_t mcr_udep_now_us(void);
/* Completions and due timers only, without a system call (no RDMA CM
 * events, no completion event taken): for a caller polling for input in a
 * loop. Returns completions handled or -errno. */
int mcr_udep_poll_cq(struct mcr_udep_ctx *ctx);
/* Frees the peer at once (what it had not sent is dropped). */
void mcr_udep_peer_close(struct mcr_udep_peer *peer);
/* Nothing queued or unacknowledged either way. */
int mcr_udep_peer_idle(const struct mcr_udep_peer *peer);
/* Every message sent to the peer was acknowledged (udr_sent_all). */
int mcr_udep_peer_sent_all(const struct mcr_udep_peer *peer);
/* The peer's reliability counters (struct udr_stats in ud_reliable.h). */
const struct udr_stats *mcr_udep_peer_stats(const struct mcr_udep_peer *peer);
void mcr_udep_peer_set_user(struct mcr_udep_peer *peer, void *user);
void *mcr_udep_peer_user(const struct mcr_udep_peer *peer);

/* Testing only (hostile senders): posts dgram as it is to the peer's
 * address, QP and qkey, bypassing the reliability layer. */
int mcr_udep_send_raw(struct mcr_udep_peer *peer, const void *dgram, size_t len);
/* Testing only: udr_seqs() of the peer (the next sequence number sent, and
 * the next one expected from it). */
void mcr_udep_peer_seqs(const struct mcr_udep_peer *peer, uint32_t *next_send, uint32_t *next_recv);
/* The id the peer gave us for itself (its datagrams' conn_id to us is ours). */
uint32_t mcr_udep_peer_remote_id(const struct mcr_udep_peer *peer);
/* Server: the client's address and port as its RDMA CM request named them
 * ("host:port"); "" on a client or when unknown. */
const char *mcr_udep_peer_name(const struct mcr_udep_peer *peer);

struct mcr_udep_stats {
    uint32_t peers, mtu;
    /* summed over live and freed peers (struct udr_stats) */
    uint64_t msgs_sent, msgs_delivered, data_sent, retransmits, acks_sent, duplicates, malformed,
        timeouts;
    /* drops before a peer was found */
    uint64_t bad_grh;      /* no GRH, or one of neither IPv4 nor IPv6 */
    uint64_t bad_length;   /* shorter than GRH + header */
    uint64_t bad_header;   /* udr_parse refused it */
    uint64_t unknown_peer; /* no peer with that connection id */
    uint64_t bad_source;   /* the peer's id from another QP or GID */
    uint64_t send_drops;   /* datagrams not posted (no send buffer): resent later */
    uint64_t dead_peers;
    uint64_t connect_resends; /* client: connect requests sent again, unanswered */
    uint64_t test_dropped, test_duplicated, test_delayed;
    /* verbs work */
    uint64_t send_wrs, recv_wrs, post_send_calls, post_recv_calls;
    size_t registered_bytes; /* receive ring and send buffers */
};
void mcr_udep_stats(const struct mcr_udep_ctx *ctx, struct mcr_udep_stats *out);
/* Bytes of our own structures per peer (not counting buffered messages). */
size_t mcr_udep_peer_struct_bytes(void);

#endif
