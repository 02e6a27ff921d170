/* t/rdma/rdma_test_wire.c: the RDMA message header: encoding round trip and
 * byte layout, and every rule of the receive-side validation. Pure code: runs
 * anywhere. */
#include <stdint.h>
#include <string.h>

#include "mcr/rdma_wire.h"
#include "rdma/wire.h"
#include "t/rdma/tap.h"

static const struct mcr_rdma_wire_limits limits = {
    .max_payload = 8192 - MCR_RDMA_HDR_MAX, .max_credits = 32, .max_rndv_len = 1u << 20};

static struct mcr_rdma_hdr good_eager(uint32_t payload_len)
{
    return (struct mcr_rdma_hdr){.magic = MCR_RDMA_MAGIC,
                                 .version = MCR_RDMA_VERSION,
                                 .type = MCR_RDMA_MSG_EAGER,
                                 .credits = 3,
                                 .request_id = 77,
                                 .payload_len = payload_len};
}

#define BASE MCR_RDMA_HDR_BASE
#define RNDV MCR_RDMA_HDR_RNDV

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
    tap_plan(30);
    struct mcr_rdma_hdr h = {.magic = MCR_RDMA_MAGIC,
                             .version = MCR_RDMA_VERSION,
                             .type = MCR_RDMA_MSG_RNDV_WRITE,
                             .credits = 0x1234,
                             .flags = MCR_RDMA_F_RNDV_DONE,
                             .request_id = 0xdeadbeef,
                             .payload_len = 100,
                             .rndv_addr = 0x1122334455667788ull,
                             .rndv_rkey = 0xcafef00d,
                             .rndv_len = 0x0a0b0c0d};
    unsigned char wire[MCR_RDMA_HDR_MAX + 100];
    size_t len = mcr_rdma_hdr_encode(&h, wire);
    struct mcr_rdma_hdr back;
    mcr_rdma_hdr_decode(wire, len + 100, &back);
    tap_ok(len == RNDV && memcmp(&h, &back, sizeof(h)) == 0,
           "rendezvous header: 28 bytes, encode/decode round trip, payload length from the "
           "received length");
    tap_ok(wire[0] == 0x52 && wire[1] == 0x4d && wire[2] == 3 && wire[3] == 4,
           "magic, version, type at offsets 0..3");
    tap_ok(wire[8] == 0xef && wire[11] == 0xde && wire[12] == 0x88 && wire[19] == 0x11 &&
               wire[20] == 0x0d && wire[24] == 0x0d && wire[27] == 0x0a,
           "little-endian fields at their offsets");
    struct mcr_rdma_hdr e = good_eager(7);
    memset(wire, 0xa5, sizeof(wire));
    len = mcr_rdma_hdr_encode(&e, wire);
    mcr_rdma_hdr_decode(wire, len + 7, &back);
    tap_ok(len == BASE && wire[BASE] == 0xa5 && memcmp(&e, &back, sizeof(e)) == 0,
           "eager header: 12 bytes, nothing written past them, round trip");

    tap_ok(check(&e, BASE + 100) == NULL, "valid eager message accepted");
    tap_ok(check(&e, BASE) == NULL, "eager message without payload accepted");
    tap_ok(check(&e, BASE - 1) != NULL, "short message rejected");
    e.magic ^= 1;
    tap_ok(check(&e, BASE + 100) != NULL, "bad magic rejected");
    e = good_eager(100);
    e.version = 1;
    tap_ok(check(&e, BASE + 100) != NULL, "the 32-byte header's version rejected");
    e.version = 2;
    tap_ok(check(&e, BASE + 100) != NULL, "version 2 (no READ_DONE) rejected");
    e = good_eager(100);
    e.type = 9;
    tap_ok(check(&e, BASE + 100) != NULL, "unknown type rejected");
    e = good_eager(100);
    e.flags = 0x8000;
    tap_ok(check(&e, BASE + 100) != NULL, "unknown flag rejected");
    e = good_eager(100);
    e.flags = MCR_RDMA_F_READ_DONE;
    tap_ok(check(&e, BASE + 100) == NULL && check(&e, BASE) == NULL,
           "READ_DONE on an eager message, with or without payload, accepted");
    e.flags = MCR_RDMA_F_READ_DONE | MCR_RDMA_F_RNDV_DONE;
    tap_ok(check(&e, BASE + 100) != NULL, "READ_DONE with another flag rejected");
    e.flags = MCR_RDMA_F_READ_DONE;
    e.type = MCR_RDMA_MSG_CREDIT;
    tap_ok(check(&e, BASE) != NULL, "READ_DONE on a credit message rejected");
    e = good_eager(2);
    e.flags = MCR_RDMA_F_CONTROL;
    tap_ok(check(&e, BASE + 2) == NULL, "CONTROL on an eager message with a record accepted");
    tap_ok(check(&e, BASE) != NULL, "CONTROL without a record rejected");
    e.flags = MCR_RDMA_F_CONTROL | MCR_RDMA_F_READ_DONE;
    tap_ok(check(&e, BASE + 2) != NULL, "CONTROL with another flag rejected");
    e.flags = MCR_RDMA_F_CONTROL;
    e.type = MCR_RDMA_MSG_CREDIT;
    tap_ok(check(&e, BASE + 2) != NULL, "CONTROL on a credit message rejected");
    e = good_eager(0);
    tap_ok(check(&e, BASE + limits.max_payload + 1) != NULL, "payload beyond a buffer rejected");
    e = good_eager(0);
    e.credits = 33;
    tap_ok(check(&e, BASE) != NULL, "more credits than granted rejected");
    e = good_eager(4);
    e.type = MCR_RDMA_MSG_CREDIT;
    tap_ok(check(&e, BASE + 4) != NULL, "credit message with payload rejected");
    e.type = MCR_RDMA_MSG_CREDIT;
    tap_ok(check(&e, BASE) == NULL, "credit message accepted");

    struct mcr_rdma_hdr r = good_eager(10);
    r.type = MCR_RDMA_MSG_RNDV_READ;
    r.rndv_addr = 0x10000;
    r.rndv_rkey = 42;
    r.rndv_len = 4096;
    tap_ok(check(&r, RNDV + 10) == NULL, "valid rendezvous accepted");
    tap_ok(check(&r, RNDV - 1) != NULL, "rendezvous cut inside its descriptor rejected");
    r.rndv_len = 0;
    tap_ok(check(&r, RNDV + 10) != NULL, "empty rendezvous region rejected");
    r.rndv_len = limits.max_rndv_len + 1;
    tap_ok(check(&r, RNDV + 10) != NULL, "oversized rendezvous region rejected");
    r.rndv_len = 4096;
    r.rndv_addr = UINT64_MAX - 100;
    tap_ok(check(&r, RNDV + 10) != NULL, "wrapping rendezvous address rejected");
    r.rndv_addr = 0;
    tap_ok(check(&r, RNDV + 10) != NULL, "null rendezvous address rejected");
    r.rndv_addr = 0x10000;
    tap_ok(check(&r, RNDV + limits.max_payload) == NULL,
           "rendezvous filling a whole buffer accepted");
    return tap_exit_status();
}
