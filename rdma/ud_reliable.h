/* rdma/ud_reliable.h: software reliability for UD, one peer at a time, with
 * no verbs, clocks or threads inside (rdma/ud_reliable.c).
 *
 * A UD queue pair delivers datagrams of at most one path MTU, may lose,
 * duplicate or reorder them, and serves many peers. A struct udr_peer turns
 * that into an ordered, reliable channel of whole messages between two
 * peers: it cuts messages into numbered datagrams (header:
 * include/mcr/ud_wire.h), keeps each until acknowledged, retransmits on a
 * timer with exponential backoff and on selective acks, suppresses
 * duplicates, reassembles messages and delivers them in order, limits the
 * datagrams in flight to a window, and reports the peer dead when it stops
 * answering.
 *
 * The caller owns the I/O and the time:
 *   - udr_send() queues a message (copied); datagrams leave through the
 *     emit callback when the window allows;
 *   - a received datagram goes through udr_parse() (checks that need no
 *     peer, and yields conn_id, by which the caller finds the peer together
 *     with the source QP and GID), then udr_input(), which may call deliver
 *     for each message completed in order, and emit for acks;
 *   - udr_tick() runs the timers (retransmission, delayed ack, keepalive,
 *     dead peer) at or after udr_next_deadline().
 * Every call takes "now" in microseconds from any monotonic clock.
 * The callbacks may call udr_send() on the same peer (a reply sent from
 * deliver carries the ack), never udr_close().
 *
 * Memory per peer: the messages queued for sending (at most sendq_max
 * bytes, udr_send() says -EAGAIN beyond; each in a buffer rounded up to
 * 128 bytes, one of at most 512 kept for the next message once
 * acknowledged), at most `window` datagram
 * payloads received out of order, and one message being reassembled (at
 * most max_msg bytes). udr_close() frees everything.
 */
#ifndef MCR_RDMA_UD_RELIABLE_H
#define MCR_RDMA_UD_RELIABLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "mcr/ud_wire.h"

#define UDR_WINDOW_MAX 64u /* what the 64-bit sack can describe */

struct udr_peer;
struct udr_stats;

struct udr_ops {
    /* Post one datagram: hdr (MCR_UD_HDR_LEN bytes) then payload (may be
     * NULL when len is 0). Both are valid only during the call. A datagram
     * the caller cannot post may be dropped: it is retransmitted. */
    void (*emit)(void *arg, const uint8_t *hdr, const uint8_t *payload, size_t len);
    /* One whole message, in order; valid only during the call (never
     * NULL, also when len is 0). */
    void (*deliver)(void *arg, const uint8_t *msg, size_t len);
};

struct udr_config {
    uint32_t mtu;           /* path MTU: datagram bytes after the GRH (256..4096) */
    uint32_t window;        /* datagrams in flight / held out of order (1..64) */
    uint32_t max_msg;       /* largest message sent or accepted, bytes */
    size_t sendq_max;       /* bytes of messages queued for sending */
    uint32_t rto_init_us;   /* first retransmission timeout */
    uint32_t rto_min_us;    /* the timeout never goes below ... */
    uint32_t rto_max_us;    /* ... or, after backoff, above */
    uint32_t ack_delay_us;  /* longest an ack waits for data to ride on */
    uint32_t ack_every;     /* ack at once after this many unacked datagrams */
    uint32_t dead_us;       /* peer dead after this long unanswered */
    uint32_t keepalive_us;  /* probe an idle peer after this long silent; 0: never */
    uint32_t local_conn_id; /* our id for this peer: the peer puts it in every datagram */
    uint32_t peer_conn_id;  /* the peer's id for us: we put it in every datagram */
    uint32_t peer_window;   /* the peer's window if known at setup; 0: 1 until it says */
    uint32_t tx_isn;        /* first sequence number we send */
    uint32_t rx_isn;        /* first sequence number the peer sends */
    /* Optional (NULL: none): every counter of udr_stats() is also added
     * here, so an owner of many peers keeps their sum without visiting
     * each (it must outlive the peer). */
    struct udr_stats *sum;
};

/* Counters of one peer (monotonic). */
struct udr_stats {
    uint64_t msgs_sent, msgs_delivered;
    uint64_t data_sent;       /* DATA datagrams emitted, first transmissions */
    uint64_t retransmits;     /* DATA datagrams emitted again */
    uint64_t acks_sent;       /* standalone ACK/PROBE datagrams emitted */
    uint64_t dgrams_received; /* datagrams passed to udr_input */
    uint64_t duplicates;      /* DATA datagrams dropped as already received */
    uint64_t malformed;       /* datagrams dropped as invalid (any reason below) */
    uint64_t bad_peer;        /*   of which: wrong conn_id */
    uint64_t out_of_window;   /*   of which: seq or ack outside the windows */
    uint64_t bad_sack;        /* selective acks of datagrams never sent, ignored */
    uint64_t timeouts;        /* retransmission timer expiries */
};

/* Outcome of udr_parse()/udr_input(). */
enum udr_verdict {
    UDR_OK = 0,       /* accepted */
    UDR_DUPLICATE,    /* already received: dropped, acked again */
    UDR_MALFORMED,    /* header, check, type or lengths wrong */
    UDR_BAD_PEER,     /* conn_id is not this peer's */
    UDR_OUT_OF_WINDOW /* seq or ack outside what can be true */
};

/* udr_config with the defaults (doc/rdma-ud.md, "UD reliability") for a path
 * MTU; the caller then sets the ids and, if it wants, sequence numbers. */
void udr_config_defaults(struct udr_config *cfg, uint32_t mtu);

/* NULL on a bad configuration (errno EINVAL) or without memory (ENOMEM). */
struct udr_peer *udr_open(const struct udr_config *cfg, const struct udr_ops *ops, void *arg,
                          uint64_t now_us);
void udr_close(struct udr_peer *peer);

/* Queues a message of len bytes (copied). 0, or -EMSGSIZE (len > max_msg),
 * -EAGAIN (the send queue is full: try after acks arrive), -EPIPE (dead). */
int udr_send(struct udr_peer *peer, const void *msg, size_t len, uint64_t now_us);
/* The same, the message being the iovcnt pieces of iov in order (gathered
 * into the send queue: one copy). */
int udr_sendv(struct udr_peer *peer, const struct iovec *iov, int iovcnt, uint64_t now_us);

/* Checks what needs no peer state: the length against the header, version,
 * type, check, segment bounds. On UDR_OK fills *hdr; conn_id then names
 * the peer (the caller also matches the source QP and GID). */
enum udr_verdict udr_parse(const uint8_t *dgram, size_t len, struct mcr_ud_hdr *hdr);

/* One received datagram that udr_parse() accepted (payload: its seg_len
 * bytes after the header). Checks the peer's id and the windows, counts
 * what it drops. */
enum udr_verdict udr_input(struct udr_peer *peer, const struct mcr_ud_hdr *hdr,
                           const uint8_t *payload, uint64_t now_us);

/* udr_parse() then udr_input(), counting a datagram udr_parse() refuses
 * against this peer. */
enum udr_verdict udr_receive(struct udr_peer *peer, const uint8_t *dgram, size_t len,
                             uint64_t now_us);

/* Runs the timers due at now_us. Returns 0, or -EPIPE once the peer is
 * dead (then the caller fails its requests and closes the peer). */
int udr_tick(struct udr_peer *peer, uint64_t now_us);

/* When udr_tick() has work next (UINT64_MAX: nothing pending). */
uint64_t udr_next_deadline(const struct udr_peer *peer);

int udr_is_dead(const struct udr_peer *peer);
/* Nothing queued or unacknowledged in either direction. */
int udr_is_idle(const struct udr_peer *peer);
/* Every message queued for sending was acknowledged (the receiving side
 * may still owe acks). */
int udr_sent_all(const struct udr_peer *peer);
const struct udr_stats *udr_stats(const struct udr_peer *peer);
/* Message bytes the peer holds: queued for sending, received out of
 * order, being reassembled. At most sendq_max + window * udr_seg_max() +
 * max_msg. */
size_t udr_buffered_bytes(const struct udr_peer *peer);
/* Largest payload of one datagram at this peer's MTU. */
uint32_t udr_seg_max(const struct udr_peer *peer);
/* The sequence number of the next DATA datagram sent, and of the next one
 * expected from the peer (testing: hostile senders replay datagrams). */
void udr_seqs(const struct udr_peer *peer, uint32_t *next_send, uint32_t *next_recv);

#endif
