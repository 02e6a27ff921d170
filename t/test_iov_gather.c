/*
 * t/test_iov_gather.c: unit test of include/mcr/iov_gather.h, the copy of
 * iovecs into one buffer that the server's socket and TLS transports and
 * the client library's request path share: the byte count stops at the cap
 * (cap + 1 once past it), empty pieces are skipped, the copy keeps the
 * pieces' order and never writes past the cap. TAP on stdout (t/libmc/tap.h).
 */
#include <string.h>

#include "mcr/iov_gather.h"
#include "t/libmc/tap.h"

int main(void)
{
    char head[] = "VALUE k 0 5\r\n", value[] = "hello", crlf[] = "\r\n", end[] = "END\r\n";
    struct iovec reply[] = {
        {head, strlen(head)}, {value, 5}, {NULL, 0}, {crlf, 2}, {end, 5},
    };
    size_t total = strlen(head) + 5 + 2 + 5;

    ok(mcr_iov_bytes_upto(reply, 5, 4608) == total, "bytes: the sum when under the cap");
    ok(mcr_iov_bytes_upto(reply, 5, total) == total, "bytes: the sum when exactly the cap");
    ok(mcr_iov_bytes_upto(reply, 5, total - 1) == total, "bytes: cap + 1 when one byte over");
    ok(mcr_iov_bytes_upto(reply, 5, 3) == 4, "bytes: cap + 1 when far over");
    ok(mcr_iov_bytes_upto(reply, 0, 10) == 0, "bytes: no pieces, 0");

    char buf[64];
    memset(buf, '#', sizeof(buf));
    size_t n = mcr_iov_gather(reply, 5, buf, sizeof(buf));
    ok(n == total && memcmp(buf, "VALUE k 0 5\r\nhello\r\nEND\r\n", total) == 0,
       "gather: every piece in order, the empty one skipped");
    ok(buf[total] == '#', "gather: nothing written past the bytes");

    memset(buf, '#', sizeof(buf));
    n = mcr_iov_gather(reply, 5, buf, 15);
    ok(n == 15 && memcmp(buf, "VALUE k 0 5\r\nhe", 15) == 0 && buf[15] == '#',
       "gather: stops at the cap inside a piece");
    n = mcr_iov_gather(reply, 5, buf, 0);
    ok(n == 0 && buf[0] == 'V', "gather: a cap of 0 copies nothing");

    printf("1..%d\n", tap_count);
    return tap_failed == 0 ? 0 : 1;
}
