/* t/rdma/rdma_test_results.c: a program gets the same results over rdma:// (and
 * rdma+ud:// with MC_RDMA_SCHEME)
 * as over TCP, with the protocol its behaviours select. Inside the
 * Soft-RoCE guest:
 *   [MC_RDMA_SCHEME=rdma+ud] rdma_test_results SERVER_BINARY
 *
 * One server; the same sequence of libmemcached calls (stores that
 * succeed and that are refused, cas right and stale, append and prepend,
 * incr and decr, delete, touch, missing keys, keys the text protocol
 * refuses, values up to and beyond the server's item size) runs over TCP
 * and over RDMA, first with the default behaviours (the text protocol),
 * then with the binary protocol. Each call's return code (and, for reads,
 * what came back) over RDMA must equal the one over TCP. The two runs use
 * keys of their own (same lengths), so neither sees the other's items. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmemcached/memcached.h>

#include "t/rdma/mc_server.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

#define CALLS_MAX 128
#define BIG_OK (1u << 20)       /* under the server's -I 9m */
#define BIG_REFUSED (10u << 20) /* over it */
#define KEY_TOO_LONG 251        /* the text protocol's limit is 250 */

/* One call's result, as text ("add existing: NOTSTORED"). */
struct results {
    char line[CALLS_MAX][160];
    unsigned count;
};

__attribute__((format(printf, 2, 3))) static void record(struct results *r, const char *fmt, ...)
{
    if (r->count == CALLS_MAX)
        tap_bail("more than %d calls: raise CALLS_MAX", CALLS_MAX);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->line[r->count++], sizeof(r->line[0]), fmt, ap);
    va_end(ap);
}

/* The key `name` of this run: prefix (one letter per transport) + name. */
static size_t key_of(char *out, size_t cap, char prefix, const char *name)
{
    return (size_t)snprintf(out, cap, "%c%s", prefix, name);
}

static void note_get(struct results *r, memcached_st *m, const char *what, const char *key,
                     size_t klen)
{
    memcached_return_t rc;
    size_t len = 0;
    uint32_t flags = 0;
    char *v = memcached_get(m, key, klen, &len, &flags, &rc);
    /* the value itself when short, else its length and a sum of its bytes */
    unsigned long sum = 0;
    for (size_t i = 0; v && i < len; i++)
        sum = sum * 31 + (unsigned char)v[i];
    if (v && len <= 16)
        record(r, "%s: %s \"%.*s\" flags %u", what, memcached_strerror(m, rc), (int)len, v, flags);
    else
        record(r, "%s: %s len %zu sum %lu", what, memcached_strerror(m, rc), len, sum);
    free(v);
}

#define CALL(what, expr) record(r, "%s: %s", what, memcached_strerror(m, (expr)))

static void sequence(memcached_st *m, char p, struct results *r)
{
    char k1[300], k2[300], kmiss[300], knum[300], kbig[300], kbad[300];
    size_t l1 = key_of(k1, sizeof(k1), p, "one");
    size_t l2 = key_of(k2, sizeof(k2), p, "two");
    size_t lmiss = key_of(kmiss, sizeof(kmiss), p, "missing");
    size_t lnum = key_of(knum, sizeof(knum), p, "number");
    size_t lbig = key_of(kbig, sizeof(kbig), p, "big");
    memcached_return_t rc;
    uint64_t n = 0;

    CALL("set", memcached_set(m, k1, l1, "v1", 2, 0, 5));
    CALL("add existing", memcached_add(m, k1, l1, "v2", 2, 0, 0));
    CALL("add new", memcached_add(m, k2, l2, "v2", 2, 0, 0));
    CALL("replace missing", memcached_replace(m, kmiss, lmiss, "x", 1, 0, 0));
    CALL("replace existing", memcached_replace(m, k1, l1, "r1", 2, 0, 7));
    note_get(r, m, "get after replace", k1, l1);
    CALL("append missing", memcached_append(m, kmiss, lmiss, "x", 1, 0, 0));
    CALL("prepend missing", memcached_prepend(m, kmiss, lmiss, "x", 1, 0, 0));
    CALL("append", memcached_append(m, k1, l1, "-a", 2, 0, 0));
    CALL("prepend", memcached_prepend(m, k1, l1, "p-", 2, 0, 0));
    note_get(r, m, "get after append/prepend", k1, l1);

    /* cas: the right one, a stale one, one on a missing key */
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
    const char *keys[] = {k2};
    size_t lens[] = {l2};
    uint64_t cas = 0;
    rc = memcached_mget(m, keys, lens, 1);
    memcached_result_st *res = memcached_fetch_result(m, NULL, &rc);
    if (res != NULL)
        cas = memcached_result_cas(res);
    record(r, "gets: %s cas %s", memcached_strerror(m, rc), cas != 0 ? "nonzero" : "zero");
    memcached_result_free(res);
    while (memcached_fetch_result(m, NULL, &rc) != NULL) { /* to the end of the mget */
    }
    CALL("cas right", memcached_cas(m, k2, l2, "c1", 2, 0, 0, cas));
    CALL("cas stale", memcached_cas(m, k2, l2, "c2", 2, 0, 0, cas));
    CALL("cas missing", memcached_cas(m, kmiss, lmiss, "c3", 2, 0, 0, cas));
    note_get(r, m, "get after cas", k2, l2);

    /* incr / decr */
    CALL("set number", memcached_set(m, knum, lnum, "10", 2, 0, 0));
    rc = memcached_increment(m, knum, lnum, 5, &n);
    record(r, "incr: %s %llu", memcached_strerror(m, rc), (unsigned long long)n);
    rc = memcached_decrement(m, knum, lnum, 20, &n);
    record(r, "decr below zero: %s %llu", memcached_strerror(m, rc), (unsigned long long)n);
    CALL("incr missing", memcached_increment(m, kmiss, lmiss, 1, &n));
    CALL("decr missing", memcached_decrement(m, kmiss, lmiss, 1, &n));
    CALL("incr not a number", memcached_increment(m, k1, l1, 1, &n));
    CALL("incr with initial", memcached_increment_with_initial(m, kmiss, lmiss, 1, 42, 0, &n));

    /* delete, touch */
    CALL("touch", memcached_touch(m, k2, l2, 100));
    CALL("touch missing", memcached_touch(m, kmiss, lmiss, 100));
    CALL("delete", memcached_delete(m, k2, l2, 0));
    CALL("delete missing", memcached_delete(m, k2, l2, 0));
    note_get(r, m, "get deleted", k2, l2);
    note_get(r, m, "get missing", kmiss, lmiss);

    /* keys the text protocol cannot carry */
    size_t lbad = key_of(kbad, sizeof(kbad), p, "with space");
    CALL("set key with space", memcached_set(m, kbad, lbad, "x", 1, 0, 0));
    note_get(r, m, "get key with space", kbad, lbad);
    CALL("add key with space", memcached_add(m, kbad, lbad, "x", 1, 0, 0));
    CALL("delete key with space", memcached_delete(m, kbad, lbad, 0));
    lbad = key_of(kbad, sizeof(kbad), p, "with\nnewline");
    CALL("set key with newline", memcached_set(m, kbad, lbad, "x", 1, 0, 0));
    lbad = key_of(kbad, sizeof(kbad), p,
                  "with\x01"
                  "control");
    CALL("set key with a control byte", memcached_set(m, kbad, lbad, "x", 1, 0, 0));
    memset(kbad, 'k', KEY_TOO_LONG);
    kbad[0] = p;
    CALL("set 250-byte key", memcached_set(m, kbad, 250, "x", 1, 0, 0));
    note_get(r, m, "get 250-byte key", kbad, 250);
    CALL("set 251-byte key", memcached_set(m, kbad, KEY_TOO_LONG, "x", 1, 0, 0));
    note_get(r, m, "get 251-byte key", kbad, KEY_TOO_LONG);
    CALL("set empty key", memcached_set(m, kbad, 0, "x", 1, 0, 0));

    /* values: large, and larger than the server takes */
    char *big = malloc(BIG_REFUSED);
    if (big == NULL)
        tap_bail("out of memory");
    for (size_t i = 0; i < BIG_REFUSED; i++)
        big[i] = (char)('a' + (i * 7) % 26);
    CALL("set 1 MiB", memcached_set(m, kbig, lbig, big, BIG_OK, 0, 0));
    note_get(r, m, "get 1 MiB", kbig, lbig);
    CALL("append to 1 MiB", memcached_append(m, kbig, lbig, big, 1000, 0, 0));
    note_get(r, m, "get 1 MiB + 1000", kbig, lbig);
    CALL("set 10 MiB (over -I)", memcached_set(m, kbig, lbig, big, BIG_REFUSED, 0, 0));
    note_get(r, m, "get after refused set", kbig, lbig);
    CALL("add 10 MiB (over -I)", memcached_add(m, kmiss, lmiss, big, BIG_REFUSED, 0, 0));
    free(big);
    /* the connection still serves after all that */
    CALL("set after", memcached_set(m, k1, l1, "end", 3, 0, 0));
    note_get(r, m, "get after", k1, l1);
}

static memcached_st *client(const char *server, bool binary)
{
    char cfg[160];
    snprintf(cfg, sizeof(cfg), "--SERVER=%s%s", server, binary ? " --BINARY-PROTOCOL" : "");
    memcached_st *m = memcached(cfg, strlen(cfg));
    if (m == NULL)
        tap_bail("config string %s refused", cfg);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 10000);
    return m;
}

/* The sequence over TCP and over RDMA with one protocol; one check per
 * call. Returns the RDMA run's results for the checks of main. */
static void compare(const struct server *s, bool binary, struct results *over_rdma)
{
    const char *proto = binary ? "binary" : "text";
    char tcp_server[64], rdma_server[64];
    snprintf(tcp_server, sizeof(tcp_server), "127.0.0.1:%u", s->tcp_port);
    snprintf(rdma_server, sizeof(rdma_server), "%s://%s:%u", rdma_scheme(), rxe, s->rdma_port);
    struct results over_tcp = {.count = 0};
    memcached_st *mt = client(tcp_server, binary);
    memcached_st *mr = client(rdma_server, binary);
    tap_ok(memcached_behavior_get(mr, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL) == (uint64_t)binary,
           "%s: the %s:// client keeps the protocol its behaviours select", proto, rdma_scheme());
    sequence(mt, binary ? 'T' : 't', &over_tcp);
    sequence(mr, binary ? 'R' : 'r', over_rdma);
    tap_ok(over_tcp.count == over_rdma->count, "%s: %u calls over TCP, %u over RDMA", proto,
           over_tcp.count, over_rdma->count);
    for (unsigned i = 0; i < over_tcp.count && i < over_rdma->count; i++) {
        bool same = strcmp(over_tcp.line[i], over_rdma->line[i]) == 0;
        tap_ok(same, "%s: %s", proto, over_tcp.line[i]);
        if (!same)
            tap_diag("over RDMA: %s", over_rdma->line[i]);
    }
    memcached_free(mr);
    memcached_free(mt);
}

/* The run's result for call `what` is rc. */
static bool result_is(const struct results *r, const char *what, memcached_return_t rc)
{
    char line[160];
    snprintf(line, sizeof(line), "%s: %s", what, memcached_strerror(NULL, rc));
    for (unsigned i = 0; i < r->count; i++)
        if (strcmp(r->line[i], line) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        tap_bail("usage: rdma_test_results SERVER_BINARY");
    rxe = getenv("RXE_VM_ADDR");
    if (rxe == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    server_bin = argv[1];
    signal(SIGPIPE, SIG_IGN);
    unsigned base = 25000 + (unsigned)(getpid() % 1000) * 2;
    struct server s;
    server_start(&s, base, base + 1);
    static struct results text, binary;
    compare(&s, false, &text);
    compare(&s, true, &binary);
    /* the differences between the protocols that a program sees, over RDMA */
    tap_ok(result_is(&text, "add existing", MEMCACHED_NOTSTORED) &&
               result_is(&text, "replace missing", MEMCACHED_NOTSTORED) &&
               result_is(&text, "set key with space", MEMCACHED_BAD_KEY_PROVIDED),
           "text over RDMA: add of an existing key and replace of a missing one are NOTSTORED, "
           "a key with a space is refused");
    tap_ok(result_is(&binary, "add existing", MEMCACHED_DATA_EXISTS) &&
               result_is(&binary, "replace missing", MEMCACHED_NOTFOUND),
           "binary over RDMA: add of an existing key is DATA_EXISTS, replace of a missing one "
           "NOTFOUND");
    server_stop(&s, SIGTERM);
    tap_no_plan_end();
    return tap_failed == 0 ? 0 : 1;
}
