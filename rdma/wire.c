/* rdma/wire.c: validation of received RDMA message headers (see wire.h).
 * Must stay free of side effects: it only reads the message bytes. */
#include "rdma/wire.h"

const char *mcr_rdma_wire_check(const void *wire, size_t byte_len,
                                const struct mcr_rdma_wire_limits *limits, struct mcr_rdma_hdr *out)
{
    struct mcr_rdma_hdr h;
    if (byte_len < MCR_RDMA_HDR_BASE ||
        byte_len < mcr_rdma_hdr_len(((const unsigned char *)wire)[3]))
        return "message shorter than the header";
    mcr_rdma_hdr_decode(wire, byte_len, &h);
    if (h.magic != MCR_RDMA_MAGIC)
        return "bad magic";
    if (h.version != MCR_RDMA_VERSION)
        return "unsupported version";
    if (h.type == 0 || h.type > MCR_RDMA_MSG_TYPE_MAX)
        return "unknown message type";
    if (h.flags & ~MCR_RDMA_F_ALL)
        return "unknown flags";
    if ((h.flags & MCR_RDMA_F_READ_DONE) &&
        (h.type != MCR_RDMA_MSG_EAGER || h.flags != MCR_RDMA_F_READ_DONE))
        return "READ_DONE on a message other than a plain EAGER";
    if ((h.flags & MCR_RDMA_F_CONTROL) &&
        (h.type != MCR_RDMA_MSG_EAGER || h.flags != MCR_RDMA_F_CONTROL || h.payload_len == 0))
        return "CONTROL on a message other than a plain EAGER with a record";
    if (h.payload_len > limits->max_payload)
        return "payload longer than a buffer";
    if (h.credits > limits->max_credits)
        return "more credits than ever granted";
    if (h.type == MCR_RDMA_MSG_CREDIT && h.payload_len != 0)
        return "credit message with payload";
    if (h.type == MCR_RDMA_MSG_RNDV_READ || h.type == MCR_RDMA_MSG_RNDV_WRITE) {
        if (h.rndv_len == 0 || h.rndv_len > limits->max_rndv_len)
            return "rendezvous length out of range";
        if (h.rndv_addr == 0 || h.rndv_addr > UINT64_MAX - h.rndv_len)
            return "rendezvous address out of range";
    }
    *out = h;
    return NULL;
}
