/* t/libmc/api_basic.c: the blocking libmemcached API's data calls against a
 * real server ($MC_SERVER), in the text and the binary protocol and over a
 * Unix socket: storage, retrieval, mget/fetch, cas, delete, arithmetic,
 * touch, exist, bad keys and values, noreply and buffered requests,
 * namespaces, stats, version, quit and flush. The handle's settings and the
 * less common calls are t/libmc/api_handle.c's. Expectations are
 * libmemcached's: the file is also built against Debian's libmemcached
 * (api_basic_ref, with REFERENCE_LIBMEMCACHED defined), which must pass
 * every check not marked OURS; those check our deliberate differences and
 * additions (doc/libmemcached-rdma.md) and run only against
 * libmemcached-rdma. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "tap.h"
#include "test_util.h"

/* Values of mixed sizes on one connection, large ones next to small ones
 * and a miss, in one mget and in gets in turn (libmemcached-rdma reads a
 * reply's head alone after a large value): each comes back whole. `text`
 * holds at least 600,007 bytes. */
static void test_sizes_in_turn(memcached_st *memc, const char *p, const char *text, size_t text_len)
{
    enum { N = 7 };
    const size_t sizes[N] = {600000, 3, 20000, 0, 70000, 1, 16384};
    char keys[N + 1][240];
    const char *key_ptrs[N + 1];
    size_t key_lengths[N + 1];
    bool stored = text_len >= sizes[0] + N;
    for (int i = 0; i <= N; i++) {
        /* key 1 long (a text VALUE line near 250 bytes); key N missing */
        snprintf(keys[i], sizeof(keys[i]), "%s-turn-%d-%0*d", p, i, i == 1 ? 200 : 1, i);
        key_ptrs[i] = keys[i];
        key_lengths[i] = strlen(keys[i]);
        if (i == N)
            memcached_delete(memc, keys[i], key_lengths[i], 0);
        else
            stored = stored && memcached_set(memc, keys[i], key_lengths[i], text + i, sizes[i], 0,
                                             (uint32_t)i) == MEMCACHED_SUCCESS;
    }
    ok(stored, "%s: values of 0 to 600,000 bytes stored", p);

    bool whole = memcached_mget(memc, key_ptrs, key_lengths, N + 1) == MEMCACHED_SUCCESS;
    int found = 0;
    memcached_result_st *r;
    memcached_return_t rc;
    while ((r = memcached_fetch_result(memc, NULL, &rc)) != NULL) {
        int i = -1;
        for (int j = 0; j <= N; j++)
            if (memcached_result_key_length(r) == key_lengths[j] &&
                memcmp(memcached_result_key_value(r), keys[j], key_lengths[j]) == 0)
                i = j;
        whole = whole && i >= 0 && i < N && memcached_result_length(r) == sizes[i] &&
                (sizes[i] == 0 || memcmp(memcached_result_value(r), text + i, sizes[i]) == 0) &&
                memcached_result_flags(r) == (uint32_t)i;
        found++;
        memcached_result_free(r);
    }
    ok(whole && found == N, "%s: one mget of large and small values and a miss: %d of %d whole", p,
       found, N);

    whole = true;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i <= N; i++) {
            size_t len = 0;
            uint32_t flags = 0;
            char *v = memcached_get(memc, keys[i], key_lengths[i], &len, &flags, &rc);
            whole =
                whole && (i == N ? rc == MEMCACHED_NOTFOUND && v == NULL
                                 : rc == MEMCACHED_SUCCESS && len == sizes[i] &&
                                       (len == 0 || (v != NULL && memcmp(v, text + i, len) == 0)) &&
                                       flags == (uint32_t)i);
            free(v);
        }
    ok(whole, "%s: gets of large and small values in turn, twice, come back whole", p);
}

static void test_storage(memcached_st *memc, bool binary)
{
    const char *p = binary ? "bin" : "txt";
    char key[64];
    memcached_return_t rc;
    size_t len;
    uint32_t flags;

    snprintf(key, sizeof(key), "%s-store", p);
    is_rc(memcached_set(memc, key, strlen(key), "hello", 5, 0, 42), MEMCACHED_SUCCESS,
          "set succeeds");
    char *v = memcached_get(memc, key, strlen(key), &len, &flags, &rc);
    is_rc(rc, MEMCACHED_SUCCESS, "get finds the value");
    ok(v != NULL && len == 5 && memcmp(v, "hello", 5) == 0 && v[5] == '\0',
       "get returns the value, NUL-terminated");
    ok(flags == 42, "get returns the flags");
    free(v);

    is_rc(memcached_add(memc, key, strlen(key), "x", 1, 0, 0),
          binary ? MEMCACHED_DATA_EXISTS : MEMCACHED_NOTSTORED, "add of an existing key fails");
    is_rc(memcached_replace(memc, key, strlen(key), "world", 5, 0, 0), MEMCACHED_SUCCESS,
          "replace of an existing key");
    is_rc(memcached_append(memc, key, strlen(key), "!!", 2, 0, 0), MEMCACHED_SUCCESS, "append");
    is_rc(memcached_prepend(memc, key, strlen(key), "<<", 2, 0, 0), MEMCACHED_SUCCESS, "prepend");
    v = memcached_get(memc, key, strlen(key), &len, &flags, &rc);
    ok(v != NULL && len == 9 && memcmp(v, "<<world!!", 9) == 0, "append/prepend applied");
    free(v);

    snprintf(key, sizeof(key), "%s-missing", p);
    memcached_delete(memc, key, strlen(key), 0);
    is_rc(memcached_replace(memc, key, strlen(key), "x", 1, 0, 0),
          binary ? MEMCACHED_NOTFOUND : MEMCACHED_NOTSTORED, "replace of a missing key");
    is_rc(memcached_append(memc, key, strlen(key), "x", 1, 0, 0), MEMCACHED_NOTSTORED,
          "append to a missing key");
    v = memcached_get(memc, key, strlen(key), &len, &flags, &rc);
    is_rc(rc, MEMCACHED_NOTFOUND, "get of a missing key");
    ok(v == NULL, "get of a missing key returns NULL");
    is_rc(memcached_add(memc, key, strlen(key), "new", 3, 0, 0), MEMCACHED_SUCCESS,
          "add of a missing key");

    /* empty value */
    snprintf(key, sizeof(key), "%s-empty", p);
    is_rc(memcached_set(memc, key, strlen(key), "", 0, 0, 7), MEMCACHED_SUCCESS,
          "set of an empty value");
    v = memcached_get(memc, key, strlen(key), &len, &flags, &rc);
    ok(rc == MEMCACHED_SUCCESS && len == 0 && flags == 7, "empty value comes back empty");
    free(v);

    /* a large value, sent and received in many pieces */
    size_t big_len = 700 * 1000;
    char *big = malloc(big_len);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (char)('a' + i % 26);
    snprintf(key, sizeof(key), "%s-large", p);
    is_rc(memcached_set(memc, key, strlen(key), big, big_len, 0, 0), MEMCACHED_SUCCESS,
          "set of a 700 kB value");
    v = memcached_get(memc, key, strlen(key), &len, &flags, &rc);
    ok(rc == MEMCACHED_SUCCESS && len == big_len && v && memcmp(v, big, big_len) == 0,
       "700 kB value round-trips");
    free(v);
    test_sizes_in_turn(memc, p, big, big_len);
    free(big);

    /* a value over the server's item size limit */
    size_t huge_len = 2 * 1024 * 1024;
    char *huge = calloc(1, huge_len);
    snprintf(key, sizeof(key), "%s-huge", p);
    is_rc(memcached_set(memc, key, strlen(key), huge, huge_len, 0, 0), MEMCACHED_E2BIG,
          "value over the server limit gives E2BIG");
    free(huge);
    is_rc(memcached_set(memc, key, strlen(key), "ok", 2, 0, 0), MEMCACHED_SUCCESS,
          "the connection is still usable after E2BIG");
}

static void test_cas_and_mget(memcached_st *memc, bool binary)
{
    const char *p = binary ? "bin" : "txt";
    char k1[32], k2[32], k3[32];
    snprintf(k1, sizeof(k1), "%s-m1", p);
    snprintf(k2, sizeof(k2), "%s-m2", p);
    snprintf(k3, sizeof(k3), "%s-m3-missing", p);
    memcached_set(memc, k1, strlen(k1), "one", 3, 0, 1);
    memcached_set(memc, k2, strlen(k2), "two", 3, 0, 2);
    memcached_delete(memc, k3, strlen(k3), 0);
    const char *keys[] = {k1, k2, k3};
    size_t lengths[] = {strlen(k1), strlen(k2), strlen(k3)};

    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
    is_rc(memcached_mget(memc, keys, lengths, 3), MEMCACHED_SUCCESS, "mget");
    memcached_result_st *r;
    memcached_return_t rc;
    int found = 0;
    uint64_t cas1 = 0;
    bool right = true;
    while ((r = memcached_fetch_result(memc, NULL, &rc)) != NULL) {
        found++;
        const char *k = memcached_result_key_value(r);
        size_t kl = memcached_result_key_length(r);
        if (kl == strlen(k1) && memcmp(k, k1, kl) == 0) {
            right = right && memcached_result_length(r) == 3 &&
                    memcmp(memcached_result_value(r), "one", 3) == 0 &&
                    memcached_result_flags(r) == 1;
            cas1 = memcached_result_cas(r);
        } else if (kl == strlen(k2) && memcmp(k, k2, kl) == 0) {
            right = right && memcmp(memcached_result_value(r), "two", 3) == 0 &&
                    memcached_result_flags(r) == 2;
        } else {
            right = false;
        }
        memcached_result_free(r);
    }
    ok(found == 2, "mget fetches the two present keys (got %d)", found);
    ok(right, "fetched keys, values and flags are right");
    is_rc(rc, MEMCACHED_NOTFOUND, "fetch_result ends with NOTFOUND");
    ok(cas1 != 0, "result carries a cas value");

    is_rc(memcached_cas(memc, k1, strlen(k1), "uno", 3, 0, 1, cas1 + 1000), MEMCACHED_DATA_EXISTS,
          "cas with a stale value fails");
    is_rc(memcached_cas(memc, k1, strlen(k1), "uno", 3, 0, 1, cas1), MEMCACHED_SUCCESS,
          "cas with the current value succeeds");

    /* a caller-provided result and memcached_fetch_execute */
    memcached_result_st stack_result;
    memcached_result_create(memc, &stack_result);
    memcached_mget(memc, keys, lengths, 2);
    int n = 0;
    while (memcached_fetch_result(memc, &stack_result, &rc) != NULL)
        n++;
    ok(n == 2, "fetch into a caller's result");
    char *taken = NULL;
    memcached_mget(memc, keys, lengths, 1);
    if (memcached_fetch_result(memc, &stack_result, &rc) != NULL)
        taken = memcached_result_take_value(&stack_result);
    ok(taken != NULL && memcmp(taken, "uno", 3) == 0, "take_value hands over the value");
    free(taken);
    while (memcached_fetch_result(memc, &stack_result, &rc) != NULL)
        ;
    memcached_result_free(&stack_result);

    /* a result the caller allocated is freed by the fetch that ends, as
     * libmemcached frees it: programs written for it do not free it again
     * (the sanitizer build's leak check fails here if it is not freed) */
    memcached_result_st *mine = memcached_result_create(memc, NULL);
    memcached_mget(memc, keys, lengths, 2);
    int own = 0;
    memcached_result_st *got;
    while ((got = memcached_fetch_result(memc, mine, &rc)) != NULL)
        own += got == mine;
    ok(own == 2 && rc == MEMCACHED_END,
       "fetch into an allocated result: each hit in it, then END (the result freed)");

    memcached_mget(memc, keys, lengths, 3);
    int calls = 0;
    memcached_result_st *res;
    while ((res = memcached_fetch_result(memc, NULL, &rc)) != NULL) {
        calls++;
        memcached_result_free(res);
    }
    ok(calls == 2, "second mget delivers again");
    is_rc(memcached_mget(memc, keys, lengths, 0), MEMCACHED_INVALID_ARGUMENTS, "mget of zero keys");
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 0);

    /* without SUPPORT_CAS the text protocol asks with "get", as libmemcached
     * does: results carry no CAS; binary replies always carry it */
    memcached_mget(memc, keys, lengths, 1);
    uint64_t plain_cas = 1;
    int plain = 0;
    while ((res = memcached_fetch_result(memc, NULL, &rc)) != NULL) {
        plain++;
        plain_cas = memcached_result_cas(res);
        memcached_result_free(res);
    }
    ok(plain == 1 && (binary ? plain_cas != 0 : plain_cas == 0),
       "without SUPPORT_CAS a result's cas is %s (%" PRIu64 ")", binary ? "set" : "0", plain_cas);
}

static memcached_return_t count_result(const memcached_st *memc, memcached_result_st *result,
                                       void *context)
{
    (void)memc;
    (void)result;
    (*(int *)context)++;
    return MEMCACHED_SUCCESS;
}

static void test_fetch_execute(memcached_st *memc)
{
    const char *keys[] = {"fx-a", "fx-b", "fx-c"};
    size_t lengths[] = {4, 4, 4};
    for (int i = 0; i < 3; i++)
        memcached_set(memc, keys[i], 4, "v", 1, 0, 0);
    memcached_mget(memc, keys, lengths, 3);
    int count = 0;
    memcached_execute_fn fn[] = {count_result};
    is_rc(memcached_fetch_execute(memc, fn, &count, 1), MEMCACHED_SUCCESS, "fetch_execute");
    ok(count == 3, "fetch_execute calls back once per item (%d)", count);
}

static void test_key_ops(memcached_st *memc, bool binary)
{
    const char *p = binary ? "bin" : "txt";
    char key[32];
    uint64_t value = 0;
    snprintf(key, sizeof(key), "%s-counter", p);
    memcached_delete(memc, key, strlen(key), 0);
    is_rc(memcached_increment(memc, key, strlen(key), 1, &value), MEMCACHED_NOTFOUND,
          "increment of a missing key");
    memcached_set(memc, key, strlen(key), "10", 2, 0, 0);
    is_rc(memcached_increment(memc, key, strlen(key), 5, &value), MEMCACHED_SUCCESS, "increment");
    ok(value == 15, "increment returns the new value (%llu)", (unsigned long long)value);
    is_rc(memcached_decrement(memc, key, strlen(key), 20, &value), MEMCACHED_SUCCESS,
          "decrement below zero");
    ok(value == 0, "decrement stops at zero");
    memcached_set(memc, key, strlen(key), "abc", 3, 0, 0);
    is_rc(memcached_increment(memc, key, strlen(key), 1, &value),
          binary ? MEMCACHED_UNKNOWN_READ_FAILURE : MEMCACHED_CLIENT_ERROR,
          "increment of a non-number");
    memcached_delete(memc, key, strlen(key), 0);
    memcached_return_t rc =
        memcached_increment_with_initial(memc, key, strlen(key), 1, 77, 0, &value);
    if (binary) {
        is_rc(rc, MEMCACHED_SUCCESS, "increment_with_initial creates the key");
        ok(value == 77, "with the initial value");
        rc = memcached_decrement_with_initial(memc, key, strlen(key), 7, 0, 0, &value);
        ok(rc == MEMCACHED_SUCCESS && value == 70, "decrement_with_initial on existing key");
    } else {
        is_rc(rc, MEMCACHED_INVALID_ARGUMENTS, "increment_with_initial needs binary protocol");
    }

    snprintf(key, sizeof(key), "%s-del", p);
    memcached_set(memc, key, strlen(key), "x", 1, 0, 0);
    is_rc(memcached_exist(memc, key, strlen(key)), MEMCACHED_SUCCESS, "exist: present");
    is_rc(memcached_touch(memc, key, strlen(key), 100), MEMCACHED_SUCCESS, "touch: present");
    is_rc(memcached_delete(memc, key, strlen(key), 0), MEMCACHED_SUCCESS, "delete");
    is_rc(memcached_delete(memc, key, strlen(key), 0), MEMCACHED_NOTFOUND, "delete again");
    is_rc(memcached_exist(memc, key, strlen(key)), MEMCACHED_NOTFOUND, "exist: absent");
    is_rc(memcached_exist(memc, key, strlen(key)), MEMCACHED_NOTFOUND,
          "exist leaves no visible trace");
    is_rc(memcached_touch(memc, key, strlen(key), 100), MEMCACHED_NOTFOUND, "touch: absent");
}

static void test_bad_keys(memcached_st *memc, bool binary)
{
    char long_key[300];
    memset(long_key, 'k', sizeof(long_key));
    memcached_return_t rc;
    size_t len;
    uint32_t flags;
    is_rc(memcached_set(memc, NULL, 0, "v", 1, 0, 0), MEMCACHED_BAD_KEY_PROVIDED, "NULL key");
    is_rc(memcached_set(memc, "k", 0, "v", 1, 0, 0), MEMCACHED_BAD_KEY_PROVIDED, "zero-length key");
    is_rc(memcached_set(memc, long_key, 251, "v", 1, 0, 0), MEMCACHED_BAD_KEY_PROVIDED,
          "251-byte key");
    is_rc(memcached_set(memc, long_key, 250, "v", 1, 0, 0), MEMCACHED_SUCCESS,
          "250-byte key is fine");
    ok(memcached_get(memc, NULL, 0, &len, &flags, &rc) == NULL && rc == MEMCACHED_BAD_KEY_PROVIDED,
       "get with NULL key");
    if (!binary) {
        if (OURS) { /* libmemcached sends them and loses step */
            is_rc(memcached_set(memc, "a b", 3, "v", 1, 0, 0), MEMCACHED_BAD_KEY_PROVIDED,
                  "key with a space (text)");
            is_rc(memcached_set(memc, "a\nb", 3, "v", 1, 0, 0), MEMCACHED_BAD_KEY_PROVIDED,
                  "key with a newline (text)");
        }
    } else {
        is_rc(memcached_set(memc, "a b", 3, "v", 1, 0, 0), MEMCACHED_SUCCESS,
              "key with a space is fine in binary");
        char *got = memcached_get(memc, "a b", 3, &len, &flags, &rc);
        ok(got && len == 1 && got[0] == 'v', "... and reads back");
        free(got);
        is_rc(memcached_set(memc, "a\r\nb\t", 5, "w", 1, 0, 0), MEMCACHED_SUCCESS,
              "key with control characters is fine in binary");
        got = memcached_get(memc, "a\r\nb\t", 5, &len, &flags, &rc);
        ok(got && len == 1 && got[0] == 'w', "... and reads back");
        free(got);
        /* gone again: a text-protocol dump would list it as raw bytes */
        is_rc(memcached_delete(memc, "a\r\nb\t", 5, 0), MEMCACHED_SUCCESS, "... and deletes");
        is_rc(memcached_delete(memc, "a b", 3, 0), MEMCACHED_SUCCESS,
              "delete the key with a space");
    }
    is_rc(memcached_set(memc, "after-bad", 9, "v", 1, 0, 0), MEMCACHED_SUCCESS,
          "connection still usable after bad keys");
}

static memcached_return_t count_server(const memcached_st *memc,
                                       const memcached_instance_st *server, void *context)
{
    (void)memc;
    (void)server;
    (*(int *)context)++;
    return MEMCACHED_SUCCESS;
}

static memcached_return_t count_stat(const memcached_instance_st *server, const char *key,
                                     size_t key_length, const char *value, size_t value_length,
                                     void *context)
{
    (void)server;
    (void)value;
    if (key_length > 0 && value_length > 0 && key != NULL)
        (*(int *)context)++;
    return MEMCACHED_SUCCESS;
}

static void test_server_ops(memcached_st *memc)
{
    int pairs = 0;
    is_rc(memcached_stat_execute(memc, NULL, count_stat, &pairs), MEMCACHED_SUCCESS,
          "stat_execute");
    ok(pairs > 10, "stat_execute calls back for every pair (%d)", pairs);
    is_rc(memcached_version(memc), MEMCACHED_SUCCESS, "version");
    const memcached_instance_st *inst = memcached_server_instance_by_position(memc, 0);
    ok(inst != NULL && memcached_server_major_version(inst) >= 1, "server version recorded");
    memcached_return_t rc;
    memcached_stat_st *st = memcached_stat(memc, NULL, &rc);
    is_rc(rc, MEMCACHED_SUCCESS, "stat");
    ok(st != NULL && st[0].pid > 0 && st[0].uptime > 0 && st[0].limit_maxbytes > 0,
       "stat fills pid, uptime, limit_maxbytes");
    memcached_analysis_st *an = st ? memcached_analyze(memc, st, &rc) : NULL;
    ok(an != NULL && rc == MEMCACHED_SUCCESS && an->most_consumed_server == 0 &&
           an->oldest_server == 0 && an->least_free_server == 0 &&
           an->longest_uptime == (uint32_t)st[0].uptime &&
           an->least_remaining_bytes == st[0].limit_maxbytes - st[0].bytes &&
           an->average_item_size ==
               (st[0].curr_items ? (uint32_t)(st[0].bytes / st[0].curr_items) : 0) &&
           an->pool_hit_ratio > 0 && an->pool_hit_ratio <= 100,
       "analyze sums up the stats (hit ratio %.1f%%)", an ? an->pool_hit_ratio : -1.0);
    if (an != NULL)
        memcached_analyze_free(an);
    char *pid = memcached_stat_get_value(memc, st, "pid", &rc);
    ok(pid != NULL && rc == MEMCACHED_SUCCESS &&
           (unsigned long)atol(pid) == (unsigned long)st[0].pid,
       "stat_get_value(pid)");
    free(pid);
    char *none = memcached_stat_get_value(memc, st, "no_such_stat", &rc);
    ok(none == NULL && rc == MEMCACHED_INVALID_ARGUMENTS,
       "stat_get_value of an unknown name: INVALID_ARGUMENTS");
    /* libmemcached's fixed list of memcached_stat_st's names, whatever the
     * server sent (memcached sends about 90 names) */
    static const char *const fixed_keys[] = {"pid",
                                             "uptime",
                                             "time",
                                             "version",
                                             "pointer_size",
                                             "rusage_user",
                                             "rusage_system",
                                             "curr_items",
                                             "total_items",
                                             "bytes",
                                             "curr_connections",
                                             "total_connections",
                                             "connection_structures",
                                             "cmd_get",
                                             "cmd_set",
                                             "get_hits",
                                             "get_misses",
                                             "evictions",
                                             "bytes_read",
                                             "bytes_written",
                                             "limit_maxbytes",
                                             "threads",
                                             NULL};
    char **keys = memcached_stat_get_keys(memc, st, &rc);
    int n = 0, same = keys != NULL && rc == MEMCACHED_SUCCESS;
    for (char **k = keys; same && *k; k++, n++)
        same = fixed_keys[n] != NULL && strcmp(*k, fixed_keys[n]) == 0;
    ok(same && fixed_keys[n] == NULL, "stat_get_keys returns libmemcached's 22 names (%d)", n);
    free(keys);
    keys = memcached_stat_get_keys(memc, NULL, &rc);
    ok(keys != NULL && keys[0] != NULL && strcmp(keys[0], "pid") == 0,
       "stat_get_keys without a stat gives the same list");
    free(keys);
    memcached_stat_free(memc, st);

    int servers = 0;
    memcached_server_fn fn[] = {count_server};
    memcached_server_cursor(memc, fn, &servers, 1);
    ok(servers == (int)memcached_server_count(memc), "server_cursor visits every server");

    is_rc(memcached_verbosity(memc, 0), MEMCACHED_SUCCESS, "verbosity");

    /* memcached_fetch, the older way to drain an mget */
    memcached_set(memc, "fetch-a", 7, "AA", 2, 0, 9);
    const char *fkeys[] = {"fetch-a"};
    size_t flens[] = {7};
    memcached_mget(memc, fkeys, flens, 1);
    char fkey[MEMCACHED_MAX_KEY];
    size_t fkey_len = 0, fval_len = 0;
    uint32_t fflags = 0;
    char *fval = memcached_fetch(memc, fkey, &fkey_len, &fval_len, &fflags, &rc);
    ok(fval != NULL && fkey_len == 7 && memcmp(fkey, "fetch-a", 7) == 0 && fval_len == 2 &&
           memcmp(fval, "AA", 2) == 0 && fflags == 9,
       "memcached_fetch returns key, value and flags");
    free(fval);
    fval = memcached_fetch(memc, fkey, &fkey_len, &fval_len, &fflags, &rc);
    ok(fval == NULL && rc == MEMCACHED_END, "memcached_fetch ends with END after a hit");
    memcached_mget(memc, (const char *[]){"no-such-key"}, (size_t[]){11}, 1);
    fval = memcached_fetch(memc, fkey, &fkey_len, &fval_len, &fflags, &rc);
    ok(fval == NULL && rc == MEMCACHED_NOTFOUND, "memcached_fetch ends with NOTFOUND without");

    /* quit closes connections; the next call reconnects */
    memcached_quit(memc);
    is_rc(memcached_exist(memc, "fetch-a", 7), MEMCACHED_SUCCESS, "reconnects after quit");

    memcached_set(memc, "flushme", 7, "x", 1, 0, 0);
    is_rc(memcached_flush(memc, 0), MEMCACHED_SUCCESS, "flush");
    is_rc(memcached_exist(memc, "flushme", 7), MEMCACHED_NOTFOUND, "flush removed the item");
}

static void test_modes(memcached_st *memc, bool binary)
{
    memcached_return_t rc;
    size_t len;
    uint32_t flags;
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    is_rc(memcached_set(memc, "nr", 2, "quiet", 5, 0, 0), MEMCACHED_SUCCESS, "noreply set");
    /* incr/decr are quiet too: SUCCESS, the value unknown. (libmemcached
     * reads a binary quiet incr's miss reply as the next call's: OURS) */
    if (!binary || OURS) {
        uint64_t value = 0;
        is_rc(memcached_increment(memc, "nr-missing", 10, 1, &value), MEMCACHED_SUCCESS,
              "noreply incr of a missing key: SUCCESS");
        ok(value == UINT64_MAX, "... and no value (UINT64_MAX)");
    }
    if (binary && OURS) {
        /* each quiet miss still gets an error reply that no call waits for:
         * unread, some 200,000 of them fill both socket buffers and the
         * server stops reading (libmemcached then times out) */
        memcached_st *quiet = memcached_clone(NULL, memc);
        memcached_return_t last = MEMCACHED_SUCCESS;
        int sent = 0;
        while (sent < 400000 && last == MEMCACHED_SUCCESS) {
            last = memcached_increment(quiet, "nr-missing", 10, 1, NULL);
            sent += last == MEMCACHED_SUCCESS;
        }
        ok(sent == 400000, "400,000 quiet incr misses in a row all go out (%d did)", sent);
        memcached_free(quiet);
    }
    /* a failing quiet request (binary servers still answer its error) must
     * not disturb the requests after it */
    is_rc(memcached_add(memc, "nr", 2, "other", 5, 0, 0), MEMCACHED_SUCCESS,
          "noreply add of an existing key reports nothing");
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_NOREPLY, 0);
    char *v = memcached_get(memc, "nr", 2, &len, &flags, &rc);
    ok(v != NULL && len == 5 && memcmp(v, "quiet", 5) == 0, "noreply set took effect");
    free(v);
    is_rc(memcached_set(memc, "nr2", 3, "x", 1, 0, 0), MEMCACHED_SUCCESS,
          "the connection is in step after a failed quiet request");

    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BUFFER_REQUESTS, 1);
    is_rc(memcached_set(memc, "bf", 2, "buffered", 8, 0, 0), MEMCACHED_BUFFERED, "buffered set");
    v = memcached_get(memc, "bf", 2, &len, &flags, &rc);
    ok(v != NULL && len == 8, "a get flushes buffered requests first");
    free(v);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BUFFER_REQUESTS, 0);
}

static void test_namespace(const struct test_server *s, bool binary)
{
    memcached_st *plain = test_client_for(s, binary);
    memcached_st *spaced = test_client_for(s, binary);
    is_rc(memcached_callback_set(spaced, MEMCACHED_CALLBACK_PREFIX_KEY, "ns1:"), MEMCACHED_SUCCESS,
          "set a namespace");
    memcached_return_t rc;
    const char *got = memcached_callback_get(spaced, MEMCACHED_CALLBACK_PREFIX_KEY, &rc);
    ok(got != NULL && strcmp(got, "ns1:") == 0, "namespace read back");
    is_rc(memcached_set(spaced, "item", 4, "in-ns", 5, 0, 0), MEMCACHED_SUCCESS,
          "set inside the namespace");
    is_rc(memcached_exist(plain, "ns1:item", 8), MEMCACHED_SUCCESS, "stored under namespace + key");
    const char *keys[] = {"item"};
    size_t lengths[] = {4};
    memcached_mget(spaced, keys, lengths, 1);
    memcached_result_st *r = memcached_fetch_result(spaced, NULL, &rc);
    ok(r != NULL && memcached_result_key_length(r) == 4 &&
           memcmp(memcached_result_key_value(r), "item", 4) == 0,
       "fetched key comes back without the namespace");
    memcached_result_free(r);
    while ((r = memcached_fetch_result(spaced, NULL, &rc)) != NULL)
        memcached_result_free(r);
    char long_key[260];
    memset(long_key, 'k', sizeof(long_key));
    if (OURS) /* libmemcached sends it: CLIENT_ERROR, or a lost reply in binary */
        is_rc(memcached_set(spaced, long_key, 248, "v", 1, 0, 0), MEMCACHED_BAD_KEY_PROVIDED,
              "namespace + key over 250 bytes is a bad key");
    memcached_free(spaced);
    memcached_free(plain);

    char config[128];
    /* quoted: libmemcached's parser refuses a bare ':' in the value */
    snprintf(config, sizeof(config), "--SERVER=127.0.0.1:%u --NAMESPACE=\"ns1:\"%s", s->port,
             binary ? " --BINARY-PROTOCOL" : "");
    memcached_st *configured = memcached(config, strlen(config));
    ok(configured != NULL, "--NAMESPACE in a configuration string");
    if (configured != NULL) {
        size_t len;
        uint32_t flags;
        char *v = memcached_get(configured, "item", 4, &len, &flags, &rc);
        ok(v != NULL && len == 5 && memcmp(v, "in-ns", 5) == 0, "configured namespace applies");
        free(v);
        memcached_free(configured);
    }
}

int main(void)
{
    struct test_server tcp, unix_server;
    if (!test_server_start(&tcp, false)) {
        printf("1..0 # SKIP cannot start %s\n",
               getenv("MC_SERVER") ? getenv("MC_SERVER") : "memcached");
        return 0;
    }
    for (int binary = 0; binary < 2; binary++) {
        tap_diag("%s protocol over TCP", binary ? "binary" : "text");
        memcached_st *memc = test_client_for(&tcp, binary);
        test_storage(memc, binary);
        test_cas_and_mget(memc, binary);
        test_fetch_execute(memc);
        test_key_ops(memc, binary);
        test_bad_keys(memc, binary);
        test_modes(memc, binary);
        test_server_ops(memc);
        memcached_free(memc);
        test_namespace(&tcp, binary);
    }
    test_server_stop(&tcp, false);

    if (test_server_start(&unix_server, true)) {
        tap_diag("Unix socket");
        memcached_st *memc = test_client_for(&unix_server, false);
        is_rc(memcached_set(memc, "unix", 4, "sock", 4, 0, 0), MEMCACHED_SUCCESS,
              "set over a Unix socket");
        ok(memcached_exist(memc, "unix", 4) == MEMCACHED_SUCCESS, "exist over a Unix socket");
        memcached_free(memc);
        test_server_stop(&unix_server, false);
    } else {
        ok(0, "start a server on a Unix socket");
    }
    return done_testing();
}
