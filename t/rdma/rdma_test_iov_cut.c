/* t/rdma/rdma_test_iov_cut.c: cutting iovecs into eager messages
 * (rdma/iov_cut.h): message sizes at the payload limit, empty pieces, the
 * piece limit, and that the cut messages put back together give the stream.
 * Pure code: runs anywhere. */
#include <string.h>

#include "rdma/iov_cut.h"
#include "t/rdma/tap.h"

/* Cuts iov into messages of at most max bytes and glues them into out;
 * returns the bytes glued, the number of messages in *msgs and the largest
 * piece count of one message in *most_pieces. */
static size_t cut_all(const struct iovec *iov, int iovcnt, size_t max, char *out, int *msgs,
                      int *most_pieces, size_t *largest)
{
    struct mcr_rdma_iov_pos pos = {0, 0};
    size_t at = 0;
    *msgs = *most_pieces = 0;
    *largest = 0;
    for (;;) {
        struct iovec msg[MCR_RDMA_MSG_IOV_MAX];
        int n;
        size_t len = mcr_rdma_iov_cut(iov, iovcnt, &pos, max, msg, &n);
        if (len == 0)
            return at;
        size_t sum = 0;
        for (int k = 0; k < n; k++) {
            if (msg[k].iov_len == 0)
                return (size_t)-1; /* an empty piece must not be handed out */
            memcpy(out + at, msg[k].iov_base, msg[k].iov_len);
            at += msg[k].iov_len;
            sum += msg[k].iov_len;
        }
        if (sum != len)
            return (size_t)-1;
        ++*msgs;
        if (n > *most_pieces)
            *most_pieces = n;
        if (len > *largest)
            *largest = len;
    }
}

int main(void)
{
    tap_plan(13);
    static char src[20000], out[20000];
    for (size_t k = 0; k < sizeof(src); k++)
        src[k] = (char)(k * 7 + 3);
    int msgs, most;
    size_t largest;

    /* one piece over several messages: exact split at the limit */
    struct iovec one = {src, 10000};
    size_t got = cut_all(&one, 1, 4096, out, &msgs, &most, &largest);
    tap_ok(got == 10000 && memcmp(out, src, 10000) == 0, "one 10000-byte piece comes back whole");
    tap_ok(msgs == 3 && largest == 4096, "in 3 messages of at most 4096 bytes (%d, %zu)", msgs,
           largest);

    /* pieces smaller than a message, with empty ones between */
    struct iovec mixed[] = {{src, 24}, {src + 24, 0},    {src + 24, 4},
                            {NULL, 0}, {src + 28, 5000}, {src + 5028, 2}};
    got = cut_all(mixed, 6, 4096, out, &msgs, &most, &largest);
    tap_ok(got == 5030 && memcmp(out, src, 5030) == 0, "mixed pieces come back in order");
    tap_ok(msgs == 2, "5030 bytes take 2 messages of 4096 (%d)", msgs);

    /* exactly one message's worth */
    struct iovec exact[] = {{src, 4000}, {src + 4000, 96}};
    got = cut_all(exact, 2, 4096, out, &msgs, &most, &largest);
    tap_ok(got == 4096 && msgs == 1 && most == 2, "4096 bytes in 2 pieces: one message");

    /* more pieces than a message may carry */
    static struct iovec many[200];
    for (int k = 0; k < 200; k++)
        many[k] = (struct iovec){src + k * 10, 10};
    got = cut_all(many, 200, 8192, out, &msgs, &most, &largest);
    tap_ok(got == 2000 && memcmp(out, src, 2000) == 0, "200 small pieces come back whole");
    tap_ok(most == MCR_RDMA_MSG_IOV_MAX && msgs == 4,
           "at most %d pieces a message: %d messages, %d pieces at most", MCR_RDMA_MSG_IOV_MAX,
           msgs, most);

    /* nothing to send */
    struct iovec empty[] = {{src, 0}, {NULL, 0}};
    got = cut_all(empty, 2, 4096, out, &msgs, &most, &largest);
    tap_ok(got == 0 && msgs == 0, "empty pieces only: no message");
    got = cut_all(NULL, 0, 4096, out, &msgs, &most, &largest);
    tap_ok(got == 0 && msgs == 0, "no pieces: no message");

    /* the position: where a message ended, and resuming from it */
    struct mcr_rdma_iov_pos pos = {0, 0};
    struct iovec msg[MCR_RDMA_MSG_IOV_MAX];
    int n;
    size_t len = mcr_rdma_iov_cut(mixed, 6, &pos, 100, msg, &n);
    tap_ok(len == 100 && n == 3 && pos.index == 4 && pos.offset == 72,
           "100 bytes end inside the 5000-byte piece (index %d, offset %zu)", pos.index,
           pos.offset);
    struct mcr_rdma_iov_pos kept = pos;
    len = mcr_rdma_iov_cut(mixed, 6, &pos, 4096, msg, &n);
    tap_ok(len == 4096 && msg[0].iov_base == src + 100, "the next message resumes at byte 100");
    pos = kept; /* a message that did not go is cut again from the same place */
    len = mcr_rdma_iov_cut(mixed, 6, &pos, 4096, msg, &n);
    tap_ok(len == 4096 && msg[0].iov_base == src + 100, "cut again from a kept position");
    len = mcr_rdma_iov_cut(mixed, 6, &pos, 4096, msg, &n);
    tap_ok(len == 834 && pos.index == 6 && pos.offset == 0, "the rest, then the end (%zu)", len);
    return tap_failed ? 1 : 0;
}
