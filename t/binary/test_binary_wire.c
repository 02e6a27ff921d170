/*
 * t/binary/test_binary_wire.c: unit test of include/mcr/binary_wire.h, the
 * binary protocol's one shared definition: header fields at the byte
 * offsets and in the big-endian order the protocol specifies, encode and
 * decode as inverses, the opcode and status numbers and extras sizes that
 * server and client both rely on. TAP on stdout; touches no network.
 */
#include <stdio.h>
#include <string.h>

#include "mcr/binary_wire.h"

static int test_count, failures;

static void ok(int cond, const char *name)
{
    test_count++;
    if (!cond)
        failures++;
    printf("%s %d - %s\n", cond ? "ok" : "not ok", test_count, name);
}

int main(void)
{
    /* a GETK request for "key" with opaque 0x01020304 and cas 5, as the
     * protocol's specification lays it out byte by byte */
    static const unsigned char getk_wire[MCR_BIN_HEADER_LEN] = {
        0x80, 0x0c, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03,
        0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05,
    };
    unsigned char wire[MCR_BIN_HEADER_LEN];
    mcr_bin_request_encode(wire, MCR_BIN_OP_GETK, 0, 3, 3, 0x01020304, 5);
    ok(memcmp(wire, getk_wire, sizeof(wire)) == 0, "request header bytes at their offsets");

    struct mcr_bin_header h;
    mcr_bin_header_decode(getk_wire, &h);
    ok(h.magic == MCR_BIN_MAGIC_REQUEST && h.opcode == MCR_BIN_OP_GETK && h.keylen == 3 &&
           h.extlen == 0 && h.datatype == 0 && h.vbucket_or_status == 0 && h.bodylen == 3 &&
           h.opaque == 0x01020304 && h.cas == 5,
       "request header decodes field by field");

    /* a KEY_ENOENT response with every multi-byte field wide */
    mcr_bin_response_encode(wire, MCR_BIN_OP_GATKQ, MCR_BIN_STATUS_KEY_ENOENT, 4, 0x1234,
                            0xa1b2c3d4, 0xfffffffe, 0x0102030405060708ull);
    static const unsigned char resp_wire[MCR_BIN_HEADER_LEN] = {
        0x81, 0x24, 0x12, 0x34, 0x04, 0x00, 0x00, 0x01, 0xa1, 0xb2, 0xc3, 0xd4,
        0xff, 0xff, 0xff, 0xfe, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
    };
    ok(memcmp(wire, resp_wire, sizeof(wire)) == 0, "response header: big-endian fields");
    mcr_bin_header_decode(wire, &h);
    unsigned char again[MCR_BIN_HEADER_LEN];
    mcr_bin_header_encode(&h, again);
    ok(memcmp(again, wire, sizeof(wire)) == 0, "decode then encode gives the same bytes");

    unsigned char b[8];
    mcr_be_put64(b, 0xfedcba9876543210ull);
    ok(b[0] == 0xfe && b[7] == 0x10 && mcr_be_get64(b) == 0xfedcba9876543210ull,
       "64-bit fields round-trip, most significant byte first");
    mcr_be_put16(b, 0xbeef);
    ok(b[0] == 0xbe && b[1] == 0xef && mcr_be_get16(b) == 0xbeef, "16-bit fields round-trip");

    ok(MCR_BIN_OP_GET == 0x00 && MCR_BIN_OP_SETQ == 0x11 && MCR_BIN_OP_PREPENDQ == 0x1a &&
           MCR_BIN_OP_VERBOSITY == 0x1b && MCR_BIN_OP_TOUCH == 0x1c && MCR_BIN_OP_GAT == 0x1d &&
           MCR_BIN_OP_GATQ == 0x1e && MCR_BIN_OP_SASL_LIST_MECHS == 0x20 &&
           MCR_BIN_OP_GATK == 0x23 && MCR_BIN_OP_GATKQ == 0x24 && MCR_BIN_OP_RDECRQ == 0x3c,
       "opcode numbers");
    ok(MCR_BIN_STATUS_KEY_ENOENT == 1 && MCR_BIN_STATUS_DELTA_BADVAL == 6 &&
           MCR_BIN_STATUS_AUTH_ERROR == 0x20 && MCR_BIN_STATUS_UNKNOWN_COMMAND == 0x81 &&
           MCR_BIN_STATUS_ENOMEM == 0x82 && MCR_BIN_STATUS_ETMPFAIL == 0x86,
       "status numbers");
    ok(MCR_BIN_EXTRAS_STORE_LEN == 8 && MCR_BIN_EXTRAS_ARITH_LEN == 20 &&
           MCR_BIN_EXTRAS_TOUCH_LEN == 4 && MCR_BIN_EXTRAS_GET_REPLY_LEN == 4 &&
           MCR_BIN_ARITH_REPLY_LEN == 8 && MCR_BIN_ARITH_NO_CREATE == 0xffffffffu,
       "extras sizes");

    printf("1..%d\n", test_count);
    return failures ? 1 : 0;
}
