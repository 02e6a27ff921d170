/* t/libmc/fuzz_replies.c: the reply parsers against damaged input. A fake
 * server answers each request with a valid reply (text or binary) that has
 * been cut, had bytes flipped, inserted or duplicated, or with random bytes;
 * every call must come back within its timeout with a defined return code,
 * and a clean reply afterwards must still work on a fresh client. Runs are
 * bounded in count and time; the sanitizer build turns any memory error
 * into a failure. The seed is printed so a failure can be replayed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "tap.h"

#define ROUNDS 120

/* valid for a get of "fake" and for an mget of "fake" and "other" */
static const char text_reply[] = "VALUE fake 7 5 99\r\nhello\r\nEND\r\n";

/* GET response, opaque 1, flags 7, value "hello" */
static const unsigned char bin_reply[] = {0x81, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00,
                                          0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
                                          0x00, 0x00, 0x00, 0x00, 0x00, 0x63, 0x00, 0x00, 0x00,
                                          0x07, 'h',  'e',  'l',  'l',  'o'};

static size_t mutate(char *out, size_t cap, const char *in, size_t len)
{
    size_t n = len < cap ? len : cap;
    memcpy(out, in, n);
    switch (random() % 5) {
    case 0: /* cut */
        return (size_t)random() % (n + 1);
    case 1: /* flip some bytes */
        for (int i = 0; i < 1 + random() % 4; i++)
            out[random() % n] = (char)random();
        return n;
    case 2: /* insert a byte */
        if (n < cap) {
            size_t at = (size_t)random() % n;
            memmove(out + at + 1, out + at, n - at);
            out[at] = (char)random();
            n++;
        }
        return n;
    case 3: /* duplicate the tail */
        if (n * 2 <= cap) {
            size_t from = (size_t)random() % n;
            memcpy(out + n, out + from, n - from);
            n += n - from;
        }
        return n;
    default: /* random bytes */
        n = 1 + (size_t)random() % 64;
        for (size_t i = 0; i < n; i++)
            out[i] = (char)random();
        return n;
    }
}

static bool run_one(const char *reply, size_t len, bool binary, bool hang_up, int *rc_out)
{
    struct fake_server f;
    if (!fake_server_start(&f, reply, len, hang_up))
        return false;
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "127.0.0.1", (in_port_t)f.port);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 100);
    memcached_return_t rc;
    if (random() % 2) {
        size_t vlen;
        uint32_t flags;
        char *v = memcached_get(memc, "fake", 4, &vlen, &flags, &rc);
        free(v);
    } else {
        const char *keys[] = {"fake", "other"};
        size_t lengths[] = {4, 5};
        rc = memcached_mget(memc, keys, lengths, 2);
        memcached_result_st *r;
        memcached_return_t frc;
        int guard = 0;
        while (guard++ < 16 && (r = memcached_fetch_result(memc, NULL, &frc)) != NULL)
            memcached_result_free(r);
    }
    memcached_free(memc);
    fake_server_stop(&f);
    *rc_out = (int)rc;
    return true;
}

static void fuzz(bool binary, const char *valid, size_t valid_len)
{
    char buf[512];
    int defined = 0, started = 0, worst_ms = 0;
    for (int i = 0; i < ROUNDS; i++) {
        size_t n = mutate(buf, sizeof(buf), valid, valid_len);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc;
        if (!run_one(buf, n, binary, random() % 4 != 0, &rc))
            continue;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        int ms = (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        if (ms > worst_ms)
            worst_ms = ms;
        started++;
        defined += rc >= 0 && rc < MEMCACHED_MAXIMUM_RETURN;
    }
    const char *name = binary ? "binary" : "text";
    ok(started == ROUNDS, "%s: %d damaged replies served", name, started);
    ok(defined == started, "%s: every call returned a defined code", name);
    ok(worst_ms < 10000, "%s: every call came back in bounded time (worst %d ms)", name, worst_ms);
    int rc = -1;
    bool served = run_one(valid, valid_len, binary, false, &rc);
    ok(served && rc == MEMCACHED_SUCCESS, "%s: the undamaged reply still parses (%d)", name, rc);
}

/* A binary frame: opcode, status, opaque 1, extras (4 bytes of flags when
 * flags >= 0), key and value. Returns its length. */
static size_t frame(unsigned char *out, int opcode, int status, long flags, const char *key,
                    const char *value)
{
    size_t extlen = flags >= 0 ? 4 : 0, klen = strlen(key), vlen = strlen(value);
    size_t body = extlen + klen + vlen;
    memset(out, 0, 24);
    out[0] = 0x81;
    out[1] = (unsigned char)opcode;
    out[2] = (unsigned char)(klen >> 8);
    out[3] = (unsigned char)klen;
    out[4] = (unsigned char)extlen;
    out[6] = (unsigned char)(status >> 8);
    out[7] = (unsigned char)status;
    out[10] = (unsigned char)(body >> 8);
    out[11] = (unsigned char)body;
    out[15] = 1; /* opaque: a fresh client's first request */
    size_t at = 24;
    for (size_t i = 0; i < extlen; i++)
        out[at++] = (unsigned char)((unsigned long)flags >> (24 - 8 * i));
    memcpy(out + at, key, klen);
    memcpy(out + at + klen, value, vlen);
    return at + klen + vlen;
}

/* Runs a binary get of "fake" against a fake server answering `reply`. */
static memcached_return_t get_from(const unsigned char *reply, size_t n, char **value, size_t *vlen,
                                   uint32_t *flags)
{
    struct fake_server f;
    memcached_return_t rc = MEMCACHED_SUCCESS;
    *value = NULL;
    if (!fake_server_start(&f, (const char *)reply, n, true))
        return MEMCACHED_FAILURE;
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "127.0.0.1", (in_port_t)f.port);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    *value = memcached_get(memc, "fake", 4, vlen, flags, &rc);
    memcached_free(memc);
    fake_server_stop(&f);
    return rc;
}

/* Frames of another command where a get's or a multi-get's answer belongs. */
static void wrong_kind(void)
{
    unsigned char reply[256];
    char *v;
    size_t vlen = 0;
    uint32_t flags = 0;

    /* GETK answers a get as libmemcached takes it: the value and flags */
    size_t n = frame(reply, 0x0c, 0, 7, "fake", "hello");
    memcached_return_t rc = get_from(reply, n, &v, &vlen, &flags);
    ok(rc == MEMCACHED_SUCCESS && v && vlen == 5 && memcmp(v, "hello", 5) == 0 && flags == 7,
       "binary get answered by a GETK frame: its value and flags (%s, %zu bytes)",
       memcached_strerror(NULL, rc), vlen);
    free(v);

    /* a frame of another command (a success with a body, an error): the
     * server is out of step, the call says so (it returned SUCCESS and an
     * empty value, and read the value as the next frame) */
    static const struct {
        int status;
        const char *body, *name;
    } other[] = {{0, "hello", "a SET frame with a body"}, {1, "Not found", "a SET error frame"}};
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        n = frame(reply, 0x01, other[i].status, -1, "", other[i].body);
        rc = get_from(reply, n, &v, &vlen, &flags);
        ok(rc == MEMCACHED_PROTOCOL_ERROR && v == NULL,
           "binary get answered by %s: PROTOCOL_ERROR (%s)", other[i].name,
           memcached_strerror(NULL, rc));
        free(v);
    }

    /* a multi-get of "fake" and "other": a hit, a stray GET miss frame with
     * the multi-get's opaque, a second hit, the closing NOOP. The stray
     * frame is skipped, as libmemcached does; it used to end the multi-get
     * and lose the second hit. */
    n = frame(reply, 0x0d, 0, 1, "fake", "abc");
    n += frame(reply + n, 0x00, 1, -1, "", "Not found");
    n += frame(reply + n, 0x0d, 0, 2, "other", "def");
    n += frame(reply + n, 0x0a, 0, -1, "", "");
    int hits = 0;
    memcached_return_t last = MEMCACHED_SUCCESS;
    struct fake_server f;
    if (fake_server_start(&f, (const char *)reply, n, true)) {
        memcached_st *memc = memcached_create(NULL);
        memcached_server_add(memc, "127.0.0.1", (in_port_t)f.port);
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
        const char *keys[] = {"fake", "other"};
        size_t lengths[] = {4, 5};
        if (memcached_mget(memc, keys, lengths, 2) == MEMCACHED_SUCCESS) {
            memcached_result_st *r;
            int guard = 0;
            while (guard++ < 8 && (r = memcached_fetch_result(memc, NULL, &last)) != NULL) {
                hits++;
                memcached_result_free(r);
            }
        }
        memcached_free(memc);
        fake_server_stop(&f);
    }
    ok(hits == 2 && last == MEMCACHED_NOTFOUND,
       "binary multi-get with a stray GET frame among its answers: both hits, then the end "
       "(%d hits, %s)",
       hits, memcached_strerror(NULL, last));
}

int main(void)
{
    unsigned seed =
        getenv("FUZZ_SEED") ? (unsigned)atoi(getenv("FUZZ_SEED")) : (unsigned)time(NULL);
    srandom(seed);
    tap_diag("seed %u (set FUZZ_SEED to replay)", seed);
    fuzz(false, text_reply, sizeof(text_reply) - 1);
    fuzz(true, (const char *)bin_reply, sizeof(bin_reply));
    wrong_kind();
    return done_testing();
}
