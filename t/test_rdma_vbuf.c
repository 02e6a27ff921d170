/*
 * test_rdma_vbuf.c: unit test of the RDMA value-buffer table
 * (server/net_rdma_vbuf.c): a value goes to the buffer its request
 * advertised only when the header sent ahead of it is that request's GET
 * reply with exactly that value; anything else (another opaque, a key in
 * the reply, an error status, a length that does not match, a buffer too
 * small, a header split across calls) leaves the value to the usual path.
 * Buffers of earlier requests are dropped, the table stays bounded. TAP.
 */
#include <stdio.h>
#include <string.h>

#include "mcr/binary_wire.h"
#include "net_rdma_vbuf.h"
#include "t/rdma/tap.h"

static unsigned char reply[64];
static char value[100000];

/* A GET reply header + flags for `len` bytes of value, in reply[]. */
static size_t get_reply(uint8_t opcode, uint16_t status, uint32_t opaque, size_t len)
{
    mcr_bin_response_encode(reply, opcode, status, 4, 0, (uint32_t)(4 + len), opaque, 7);
    memset(reply + MCR_BIN_HEADER_LEN, 0, 4);
    return MCR_BIN_HEADER_LEN + 4;
}

static struct rdma_vbuf buf(uint32_t opaque, uint32_t len)
{
    struct rdma_vbuf b = {.opaque = opaque, .addr = 0x10000u + opaque, .rkey = 9, .len = len};
    return b;
}

/* Notes a reply (its header in one iovec, after `before` other bytes) and
 * asks for the buffer of its value. */
static bool send_value(struct rdma_vbufs *v, uint32_t opaque, size_t len, struct rdma_vbuf *got)
{
    size_t hl = get_reply(MCR_BIN_OP_GET, 0, opaque, len);
    char other[10] = {0};
    struct iovec iov[3] = {{other, sizeof(other)}, {reply, hl}, {value, len}};
    rdma_vbufs_note_reply(v, iov, 2, value, len);
    return rdma_vbufs_take(v, value, len, got);
}

int main(void)
{
    struct rdma_vbufs v;
    struct rdma_vbuf got;

    memset(&v, 0, sizeof(v));
    struct rdma_vbuf b = buf(5, 65536);
    rdma_vbufs_add(&v, &b);
    tap_ok(send_value(&v, 5, 65536, &got) && got.addr == b.addr && got.len == 65536,
           "the value of request 5 goes to the buffer advertised for 5");
    tap_ok(v.count == 0, "a used buffer leaves the table");
    tap_ok(!send_value(&v, 5, 65536, &got), "and is not used twice");

    memset(&v, 0, sizeof(v));
    b = buf(6, 8192);
    rdma_vbufs_add(&v, &b);
    tap_ok(!send_value(&v, 6, 8193, &got), "a value larger than its buffer is not written there");
    b = buf(7, 8192);
    rdma_vbufs_add(&v, &b);
    tap_ok(!send_value(&v, 8, 4096, &got), "a reply with no buffer uses none");
    tap_ok(v.count == 0, "buffers of requests before a reply are dropped");

    memset(&v, 0, sizeof(v));
    b = buf(9, 8192);
    rdma_vbufs_add(&v, &b);
    size_t hl = get_reply(MCR_BIN_OP_GET, 0, 9, 5000);
    struct iovec iov[2] = {{reply, hl}, {value, 5000}};
    rdma_vbufs_note_reply(&v, iov, 1, value, 5000);
    tap_ok(!rdma_vbufs_take(&v, value + 1, 5000, &got), "another start address is not the value");
    tap_ok(!rdma_vbufs_take(&v, value, 5000, &got), "the note is used up by one attempt");
    rdma_vbufs_note_reply(&v, iov, 1, value, 4999);
    tap_ok(!rdma_vbufs_take(&v, value, 4999, &got), "body length not matching the value: no match");

    static const struct {
        uint8_t opcode;
        uint16_t status;
        const char *what;
    } bad[] = {
        {MCR_BIN_OP_SET, 0, "a reply of another command"},
        {MCR_BIN_OP_GET, 1, "an error reply"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hl = get_reply(bad[i].opcode, bad[i].status, 9, 5000);
        rdma_vbufs_note_reply(&v, iov, 1, value, 5000);
        char name[80];
        snprintf(name, sizeof(name), "%s does not match", bad[i].what);
        tap_ok(!rdma_vbufs_take(&v, value, 5000, &got), "%s", name);
    }
    /* a GETK reply: the key sits between header and value */
    mcr_bin_response_encode(reply, MCR_BIN_OP_GETK, 0, 4, 3, 4 + 3 + 5000, 9, 7);
    memcpy(reply + MCR_BIN_HEADER_LEN + 4, "abc", 3);
    iov[0].iov_len = MCR_BIN_HEADER_LEN + 4 + 3;
    rdma_vbufs_note_reply(&v, iov, 1, value, 5000);
    tap_ok(!rdma_vbufs_take(&v, value, 5000, &got), "a reply with a key does not match");
    /* fewer than header + flags bytes ahead of the value */
    hl = get_reply(MCR_BIN_OP_GET, 0, 9, 5000);
    struct iovec part[2] = {{reply + 10, hl - 10}, {value, 5000}};
    rdma_vbufs_note_reply(&v, part, 1, value, 5000);
    tap_ok(!rdma_vbufs_take(&v, value, 5000, &got), "a header sent earlier in part: no match");
    /* the header over several iovecs, as the whole of it */
    struct iovec split[4] = {{reply, 3}, {reply + 3, 20}, {reply + 23, hl - 23}, {value, 5000}};
    rdma_vbufs_note_reply(&v, split, 3, value, 5000);
    tap_ok(rdma_vbufs_take(&v, value, 5000, &got) && got.opaque == 9,
           "a header gathered from several iovecs matches");

    /* the value of request 2 went without its buffer (the note unused),
     * then request 3 gets the same item: same address, same length */
    memset(&v, 0, sizeof(v));
    b = buf(2, 65536);
    rdma_vbufs_add(&v, &b);
    hl = get_reply(MCR_BIN_OP_GET, 0, 2, 8150);
    struct iovec again[2] = {{reply, hl}, {value, 8150}};
    rdma_vbufs_note_reply(&v, again, 1, value, 8150);
    b = buf(3, 65536);
    rdma_vbufs_add(&v, &b);
    hl = get_reply(MCR_BIN_OP_GET, 0, 3, 8150);
    rdma_vbufs_note_reply(&v, again, 1, value, 8150);
    tap_ok(rdma_vbufs_take(&v, value, 8150, &got) && got.opaque == 3,
           "a later reply of the same value goes to its own request's buffer, not to that of an "
           "earlier reply whose note went unused");

    memset(&v, 0, sizeof(v));
    for (uint32_t i = 1; i <= RDMA_VBUFS_MAX + 10; i++) {
        b = buf(i, 8192);
        rdma_vbufs_add(&v, &b);
    }
    tap_ok(v.count == RDMA_VBUFS_MAX, "the table keeps at most RDMA_VBUFS_MAX buffers");
    tap_ok(!send_value(&v, 10, 4096, &got), "the oldest were dropped");
    tap_ok(send_value(&v, 11, 4096, &got) && got.opaque == 11, "the newest are kept");
    b = buf(20, 100);
    rdma_vbufs_add(&v, &b);
    tap_ok(!send_value(&v, 20, 4096, &got), "a buffer advertised again replaces the earlier one");

    memset(&v, 0, sizeof(v));
    b = buf(0xfffffffeu, 8192);
    rdma_vbufs_add(&v, &b);
    b = buf(1, 8192);
    rdma_vbufs_add(&v, &b);
    tap_ok(send_value(&v, 1, 4096, &got) && v.count == 0,
           "opaques compare in serial order across the wrap");

    tap_no_plan_end();
    return tap_exit_status();
}
