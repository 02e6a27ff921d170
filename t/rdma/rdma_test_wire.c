/* t/rdma/rdma_test_wire.c: the RDMA message header: encoding round trip and
 * byte layout, and every rule of the receive-side validation. Pure code: runs
 * anywhere. */
#include <stdint.h>
#include <string.h>

#include "mcr/rdma_wire.h"
#include "rdma/wire.h"
#include "t/rdma/tap.h"

static const struct mcr_rdma_wire_limits limits = {
    .max_payload = 8192 - MCR_RDMA_HDR_SIZE, .max_credits = 32, .max_rndv_len = 1u << 20};

static struct mcr_rdma_hdr good_eager(uint32_t payload_len)
{
    return (struct mcr_rdma_hdr){.magic = MCR_RDMA_MAGIC,
                                 .version = MCR_RDMA_VERSION,
                                 .type = MCR_RDMA_MSG_EAGER,
                                 .credits = 3,
                                 .request_id = 77,
                                 .payload_len = payload_len};
}

/* Encodes h into buf, checks bytes of length total; returns the reason. */
static const char *check(const struct mcr_rdma_hdr *h, size_t total)
{
    static unsigned char buf[8192];
    memset(buf, 0xa5, sizeof(buf));
    mcr_rdma_hdr_encode(h, buf);
    struct mcr_rdma_hdr out;
    return mcr_rdma_wire_check(buf, total, &limits, &out);
}

int main(void)
{
    tap_plan(20);
    struct mcr_rdma_hdr h = {.magic = MCR_RDMA_MAGIC,
                             .version = MCR_RDMA_VERSION,
                             .type = MCR_RDMA_MSG_RNDV_WRITE,
                             .credits = 0x1234,
                             .flags = MCR_RDMA_F_RNDV_DONE,
                             .request_id = 0xdeadbeef,
                             .payload_len = 0x01020304,
                             .rndv_addr = 0x1122334455667788ull,
                             .rndv_rkey = 0xcafef00d,
                             .rndv_len = 0x0a0b0c0d};
    unsigned char wire[MCR_RDMA_HDR_SIZE];
    mcr_rdma_hdr_encode(&h, wire);
    struct mcr_rdma_hdr back;
    mcr_rdma_hdr_decode(wire, &back);
    tap_ok(memcmp(&h, &back, sizeof(h)) == 0, "encode/decode round trip");
    tap_ok(wire[0] == 0x52 && wire[1] == 0x4d && wire[2] == 1 && wire[3] == 4,
           "magic, version, type at offsets 0..3");
    tap_ok(wire[8] == 0xef && wire[11] == 0xde && wire[16] == 0x88 && wire[23] == 0x11 &&
               wire[28] == 0x0d,
           "little-endian fields at their offsets");

    struct mcr_rdma_hdr e = good_eager(100);
    tap_ok(check(&e, MCR_RDMA_HDR_SIZE + 100) == NULL, "valid eager message accepted");
    tap_ok(check(&e, MCR_RDMA_HDR_SIZE - 1) != NULL, "short message rejected");
    e.magic ^= 1;
    tap_ok(check(&e, MCR_RDMA_HDR_SIZE + 100) != NULL, "bad magic rejected");
    e = good_eager(100);
    e.version = 2;
    tap_ok(check(&e, MCR_RDMA_HDR_SIZE + 100) != NULL, "unknown version rejected");
    e = good_eager(100);
    e.type = 9;
    tap_ok(check(&e, MCR_RDMA_HDR_SIZE + 100) != NULL, "unknown type rejected");
    e = good_eager(100);
    e.flags = 0x8000;
    tap_ok(check(&e, MCR_RDMA_HDR_SIZE + 100) != NULL, "unknown flag rejected");
    e = good_eager(101);
    tap_ok(check(&e, MCR_RDMA_HDR_SIZE + 100) != NULL, "payload length above received rejected");
    e = good_eager(99);
    tap_ok(check(&e, MCR_RDMA_HDR_SIZE + 100) != NULL, "payload length below received rejected");
    e = good_eager(limits.max_payload + 1);
    tap_ok(check(&e, 8192) != NULL, "payload beyond a buffer rejected");
    e = good_eager(0);
    e.credits = 33;
    tap_ok(check(&e, MCR_RDMA_HDR_SIZE) != NULL, "more credits than granted rejected");
    e = good_eager(0);
    e.rndv_rkey = 5;
    tap_ok(check(&e, MCR_RDMA_HDR_SIZE) != NULL, "descriptor on an eager message rejected");
    e = good_eager(4);
    e.type = MCR_RDMA_MSG_CREDIT;
    tap_ok(check(&e, MCR_RDMA_HDR_SIZE + 4) != NULL, "credit message with payload rejected");

    struct mcr_rdma_hdr r = good_eager(10);
    r.type = MCR_RDMA_MSG_RNDV_READ;
    r.rndv_addr = 0x10000;
    r.rndv_rkey = 42;
    r.rndv_len = 4096;
    tap_ok(check(&r, MCR_RDMA_HDR_SIZE + 10) == NULL, "valid rendezvous accepted");
    r.rndv_len = 0;
    tap_ok(check(&r, MCR_RDMA_HDR_SIZE + 10) != NULL, "empty rendezvous region rejected");
    r.rndv_len = limits.max_rndv_len + 1;
    tap_ok(check(&r, MCR_RDMA_HDR_SIZE + 10) != NULL, "oversized rendezvous region rejected");
    r.rndv_len = 4096;
    r.rndv_addr = UINT64_MAX - 100;
    tap_ok(check(&r, MCR_RDMA_HDR_SIZE + 10) != NULL, "wrapping rendezvous address rejected");
    r.rndv_addr = 0;
    tap_ok(check(&r, MCR_RDMA_HDR_SIZE + 10) != NULL, "null rendezvous address rejected");
    return tap_exit_status();
}
