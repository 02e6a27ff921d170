/*
 * t/test_byteorder.c: unit test of include/mcr/byteorder.h, the one set of
 * little- and big-endian integer helpers: every width lays its bytes out in
 * the order named, reads back what it wrote, works at odd addresses and
 * touches no byte outside its field. TAP on stdout.
 */
#include <string.h>

#include "mcr/byteorder.h"
#include "t/rdma/tap.h"

/* Writes the low `width` bytes' worth of v at an odd address between guard
 * bytes with the helper of that order and width, then reads them back. */
static int check(int big, int width, uint64_t v, const unsigned char *want)
{
    unsigned char buf[11];
    memset(buf, 0xee, sizeof(buf));
    uint64_t back;
    if (width == 2) {
        big ? mcr_be_put16(buf + 1, (uint16_t)v) : mcr_le_put16(buf + 1, (uint16_t)v);
        back = big ? mcr_be_get16(buf + 1) : mcr_le_get16(buf + 1);
    } else if (width == 4) {
        big ? mcr_be_put32(buf + 1, (uint32_t)v) : mcr_le_put32(buf + 1, (uint32_t)v);
        back = big ? mcr_be_get32(buf + 1) : mcr_le_get32(buf + 1);
    } else {
        big ? mcr_be_put64(buf + 1, v) : mcr_le_put64(buf + 1, v);
        back = big ? mcr_be_get64(buf + 1) : mcr_le_get64(buf + 1);
    }
    return memcmp(buf + 1, want, (size_t)width) == 0 && buf[0] == 0xee && buf[1 + width] == 0xee &&
           back == v;
}

int main(void)
{
    static const unsigned char le[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
    static const unsigned char be[8] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
    const uint64_t v64 = 0x0102030405060708ull;
    for (int width = 2; width <= 8; width *= 2) {
        int bits = width * 8;
        uint64_t v = bits == 64 ? v64 : v64 & ((1ull << bits) - 1);
        tap_ok(check(0, width, v, le),
               "le %d-bit: least significant byte first, round trip, "
               "guards intact",
               bits);
        /* the high end of v64 in big-endian order starts with 0x01 */
        uint64_t high = v64 >> (64 - bits);
        tap_ok(check(1, width, high, be),
               "be %d-bit: most significant byte first, round trip, "
               "guards intact",
               bits);
    }
    tap_ok(mcr_le_get32((const unsigned char[]){0xff, 0xff, 0xff, 0xff}) == 0xffffffffu &&
               mcr_be_get16((const unsigned char[]){0x80, 0x00}) == 0x8000 &&
               mcr_le_get64((const unsigned char[]){0, 0, 0, 0, 0, 0, 0, 0x80}) == 1ull << 63,
           "high bits are not sign-extended");
    tap_no_plan_end();
    return tap_failed ? 1 : 0;
}
