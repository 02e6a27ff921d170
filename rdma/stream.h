/* rdma/stream.h: a byte stream over messages, the one implementation both
 * ends of an RDMA connection use (the daemon's net_rdma_*.c and the client
 * library's transport_rdma.c), written for any endpoint that delivers its
 * messages in order (RC today; a UD endpoint with its own reliability can
 * feed it the same way):
 *  - bytes in, messages out: mcr_rdma_stream_push cuts output held in
 *    iovecs into messages of at most the eager payload and hands each to
 *    the owner's sink, which sends it (or, for a large part, a rendezvous);
 *  - messages in, bytes out: mcr_rdma_stream_classify says what a received
 *    message carries (stream bytes, a region advertised or ended, the
 *    RNDV_DONE payload decoded), and struct mcr_rdma_bytes holds the stream
 *    bytes received and not yet read (or accepted and not yet sent).
 * It knows no memcached protocol and no endpoint: what a region is used for
 * stays with the owner.
 */
#ifndef MCR_RDMA_STREAM_H
#define MCR_RDMA_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "mcr/rdma_wire.h"
#include "rdma/endpoint.h"
#include "rdma/iov_cut.h"

/* ---- a byte queue: bytes [off, off+len) of buf -------------------------------------- */
struct mcr_rdma_bytes {
    char *buf;
    size_t off, len, cap;
};

/* Room for n more bytes at the end (moving the bytes to the front or
 * growing the buffer). false: out of memory, nothing changed. */
bool mcr_rdma_bytes_reserve(struct mcr_rdma_bytes *b, size_t n);
/* Appends n bytes. false: out of memory, nothing appended. */
bool mcr_rdma_bytes_append(struct mcr_rdma_bytes *b, const void *data, size_t n);
/* Takes up to len bytes from the front into out (out NULL: drops them);
 * returns their count. */
size_t mcr_rdma_bytes_take(struct mcr_rdma_bytes *b, void *out, size_t len);
void mcr_rdma_bytes_free(struct mcr_rdma_bytes *b);

/* ---- messages in ---------------------------------------------------------------------- */
enum mcr_rdma_stream_kind {
    MCR_RDMA_IN_BYTES,        /* EAGER: its payload is stream bytes */
    MCR_RDMA_IN_READ_DONE,    /* EAGER + READ_DONE: ends the RNDV_READ region request_id */
    MCR_RDMA_IN_WRITE_DONE,   /* EAGER + RNDV_DONE: done.count bytes of the stream were
                               * written into the landing region request_id */
    MCR_RDMA_IN_VALUE_DONE,   /* EAGER + RNDV_DONE + VALUE: the same, into the value region
                               * of reply request_id */
    MCR_RDMA_IN_LANDING,      /* RNDV_WRITE: a region for large output */
    MCR_RDMA_IN_VALUE_REGION, /* RNDV_WRITE + VALUE: a region for the value of reply
                               * request_id */
    MCR_RDMA_IN_READ_REGION,  /* RNDV_READ: the stream's next bytes are in the region */
    MCR_RDMA_IN_CONTROL,      /* EAGER + CONTROL: bytes is one control record, not stream */
    MCR_RDMA_IN_BAD,          /* nothing a peer sends (or an RNDV_DONE without its count) */
};

struct mcr_rdma_stream_in {
    enum mcr_rdma_stream_kind kind;
    /* stream bytes the message carries, in order before anything its
     * region holds (for the DONE kinds: the bytes before the written ones) */
    const void *bytes;
    uint32_t len;
    struct mcr_rdma_done done; /* the DONE kinds */
};

/* What msg carries (the endpoint validated its header already). */
enum mcr_rdma_stream_kind mcr_rdma_stream_classify(const struct mcr_rdma_msg *msg,
                                                   struct mcr_rdma_stream_in *out);

/* ---- bytes out ------------------------------------------------------------------------ */
/* The output being cut: its iovecs, the position of the message offered
 * to the sink, and the largest eager payload. */
struct mcr_rdma_stream_out {
    const struct iovec *iov;
    int iovcnt;
    struct mcr_rdma_iov_pos at;
    size_t max_payload;
};

/* The owner's handling of the next message cut from the output: msg_iov's
 * n pieces hold msg_len bytes from out->at on; whole: they are all of the
 * output, in the caller's own iovecs (the usual small request or reply).
 * Returns the bytes of the output it took from out->at (msg_len when it
 * sent the message; another count when it sent them otherwise, as by a
 * rendezvous), 0 to stop for now (no send buffer or credit), or -1 when
 * the connection failed. */
typedef ssize_t (*mcr_rdma_stream_sink)(void *owner, const struct mcr_rdma_stream_out *out,
                                        const struct iovec *msg_iov, int n, size_t msg_len,
                                        bool whole);

/* Hands iov's bytes to sink message by message until all went, the sink
 * stops or fails. Returns the bytes taken; *failed says the sink failed. */
size_t mcr_rdma_stream_push(const struct iovec *iov, int iovcnt, size_t max_payload,
                            mcr_rdma_stream_sink sink, void *owner, bool *failed);

#endif
