/* server.h: one server as the client sees it (memcached_instance_st): its
 * address, its connection, its queue of requests in issue order, its receive
 * buffer and reply parser state, and its failure bookkeeping. The queue
 * discipline lives in io.c, the I/O in io_send.c, io_recv.c and io_wait.c;
 * parsing in proto_*.c. */
#ifndef LMR_SERVER_H
#define LMR_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <libmemcached/memcached.h>

#include "request.h"
#include "transport.h"

struct lmr_fetched; /* fetch.h */

/* A value being received: bytes go to `dest` (NULL: discarded) up to
 * dest_length, then `trailer_length` framing bytes are checked. */
struct lmr_body {
    bool active;
    char *dest;
    size_t value_length;
    size_t received;
    size_t trailer_length; /* text protocol: 2 ("\r\n") */
    char trailer[2];
    struct lmr_fetched *fetched; /* mget: where the value belongs */
    /* a child of a group that places values (group.h): the first
     * prefix_length bytes go to dest, the rest to payload once the group
     * chose it (NULL: to dest too) */
    size_t prefix_length;
    char *payload;
    bool no_memory; /* the rest of a value found no room (io_recv.c) */
};

struct memcached_instance_st {
    struct lmr_client *client;
    uint32_t index;
    char hostname[MEMCACHED_NI_MAXHOST];
    in_port_t port;
    uint32_t weight;
    memcached_connection_t type;

    struct lmr_conn conn;
    bool connecting;             /* connect under way (see transport.h) */
    int64_t connect_deadline_ms; /* CONNECT_TIMEOUT for the attempt */
    /* the last connect failed (refused, timed out) and none succeeded
     * since: reads under a scheme take the server as an erasure and try
     * to connect only as RETRY_TIMEOUT allows, without waiting for it
     * (group.h, lmr_group_issue_read) */
    bool connect_failed;
    int64_t connect_failed_ms; /* when it last failed (lmr_io_now_ms clock) */

    /* requests in issue order; [head, send_next) are sent and await replies */
    memcached_request_st *head, *tail, *send_next;
    uint32_t queued;
    /* requests completed, reads that brought bytes and sends that drained
     * a backlog the socket had refused: progress, as hedged reads and
     * writes see it (a value on its way, either way, counts) */
    uint64_t progress;
    bool send_backlog; /* the last send left bytes the transport refused */
    /* a hedge timer found the server making no progress (group.c): while
     * `progress` stays at stalled_mark, parents do not wait for it, and
     * POLL_TIMEOUT after stalled_since_ms it fails (io_wait.c) */
    bool stalled;
    uint64_t stalled_mark;
    int64_t stalled_since_ms;
    uint32_t in_window; /* reply-expecting requests started on the wire */
    /* requests issued while earlier ones await replies, not yet offered to
     * the transport (io_send.c sends them in one go at the next flush) */
    uint32_t deferred;
    size_t deferred_bytes;
    uint32_t next_opaque;

    char *rbuf;
    size_t rstart, rend, rcapacity;
    /* the latest value announced was large (io_recv.c): the next reply's head is
     * read alone, so that its value is received straight into its place
     * rather than its first bytes through rbuf */
    bool large_values;
    struct lmr_body body;
    /* binary protocol: the header of the frame whose value is arriving */
    uint8_t frame_opcode;
    uint16_t frame_status;
    uint32_t frame_opaque;

    uint32_t failure_count;
    uint32_t timeout_count; /* timeouts and failed connects since a reply */
    time_t next_retry;      /* 0: usable now */
    bool ejected;           /* removed from placement (REMOVE_FAILED_SERVERS) */
    uint8_t major_version, minor_version, micro_version;
    char error_message[256];
    memcached_return_t error_rc; /* the code of the last failure */
};

/* Initializes a server entry (no connection yet). */
void lmr_server_init(memcached_instance_st *srv, struct lmr_client *client, const char *hostname,
                     in_port_t port, uint32_t weight, memcached_connection_t type);
/* Fails every queued request, closes the connection, frees buffers. */
void lmr_server_destroy(memcached_instance_st *srv);

#endif
