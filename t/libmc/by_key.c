/* t/libmc/by_key.c: the _by_key calls over three real servers ($MC_SERVER):
 * every key stored with a group key lands on the group key's server, and
 * the _by_key forms of get, mget, delete, touch, exist, increment and cas
 * find it there, in the text and the binary protocol. Also built against
 * Debian's libmemcached (by_key_ref, REFERENCE_LIBMEMCACHED defined), which
 * passes every check not marked OURS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "tap.h"
#include "test_util.h"

static int holder(struct test_server *s, const char *key)
{
    int found = -1;
    for (int i = 0; i < 3; i++) {
        memcached_st *one = memcached_create(NULL);
        memcached_server_add(one, "127.0.0.1", (in_port_t)s[i].port);
        if (memcached_exist(one, key, strlen(key)) == MEMCACHED_SUCCESS)
            found = found == -1 ? i : -2; /* -2: on more than one server */
        memcached_free(one);
    }
    return found;
}

static void run(struct test_server *s, bool binary)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < 3; i++)
        memcached_server_add(memc, "127.0.0.1", (in_port_t)s[i].port);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    const char *group = binary ? "group-b" : "group-t";
    size_t gl = strlen(group);
    memcached_return_t rc;
    const memcached_instance_st *owner = memcached_server_by_key(memc, group, gl, &rc);
    int owner_index = -1;
    for (int i = 0; i < 3; i++)
        if (memcached_server_port(owner) == s[i].port)
            owner_index = i;

    enum { N = 12 };
    char keys[N][32];
    const char *kp[N];
    size_t kl[N];
    int placed = 0, spread_without_group = 0;
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%s-item-%d", group, i);
        kp[i] = keys[i];
        kl[i] = strlen(keys[i]);
        memcached_set_by_key(memc, group, gl, kp[i], kl[i], "5", 1, 0, (uint32_t)i);
        placed += holder(s, keys[i]) == owner_index;
        const memcached_instance_st *own = memcached_server_by_key(memc, kp[i], kl[i], &rc);
        spread_without_group += own != owner;
    }
    ok(placed == N, "set_by_key stores every key on the group key's server (%d of %d)", placed, N);
    ok(spread_without_group > 0, "(by their own keys they would spread: %d elsewhere)",
       spread_without_group);

    size_t len;
    uint32_t flags;
    char *v = memcached_get_by_key(memc, group, gl, kp[3], kl[3], &len, &flags, &rc);
    ok(v != NULL && len == 1 && v[0] == '5' && flags == 3, "get_by_key");
    free(v);

    is_rc(memcached_mget_by_key(memc, group, gl, kp, kl, N), MEMCACHED_SUCCESS, "mget_by_key");
    int fetched = 0;
    memcached_result_st *r;
    while ((r = memcached_fetch_result(memc, NULL, &rc)) != NULL) {
        fetched++;
        memcached_result_free(r);
    }
    ok(fetched == N, "mget_by_key fetches every key (%d)", fetched);

    uint64_t value = 0;
    is_rc(memcached_increment_by_key(memc, group, gl, kp[0], kl[0], 10, &value), MEMCACHED_SUCCESS,
          "increment_by_key");
    ok(value == 15, "incremented value");
    is_rc(memcached_decrement_by_key(memc, group, gl, kp[0], kl[0], 3, &value), MEMCACHED_SUCCESS,
          "decrement_by_key");
    ok(value == 12, "decremented value");
    is_rc(memcached_touch_by_key(memc, group, gl, kp[1], kl[1], 300), MEMCACHED_SUCCESS,
          "touch_by_key");
    is_rc(memcached_exist_by_key(memc, group, gl, kp[1], kl[1]), MEMCACHED_SUCCESS, "exist_by_key");
    is_rc(memcached_add_by_key(memc, group, gl, kp[1], kl[1], "x", 1, 0, 0),
          binary ? MEMCACHED_DATA_EXISTS : MEMCACHED_NOTSTORED, "add_by_key of existing key");
    is_rc(memcached_replace_by_key(memc, group, gl, kp[1], kl[1], "ab", 2, 0, 0), MEMCACHED_SUCCESS,
          "replace_by_key");
    is_rc(memcached_append_by_key(memc, group, gl, kp[1], kl[1], "c", 1, 0, 0), MEMCACHED_SUCCESS,
          "append_by_key");
    is_rc(memcached_prepend_by_key(memc, group, gl, kp[1], kl[1], "_", 1, 0, 0), MEMCACHED_SUCCESS,
          "prepend_by_key");
    v = memcached_get_by_key(memc, group, gl, kp[1], kl[1], &len, &flags, &rc);
    ok(v != NULL && len == 4 && memcmp(v, "_abc", 4) == 0, "by_key updates applied");
    free(v);

    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
    memcached_mget_by_key(memc, group, gl, kp + 2, kl + 2, 1);
    r = memcached_fetch_result(memc, NULL, &rc);
    uint64_t cas = r ? memcached_result_cas(r) : 0;
    memcached_result_free(r);
    while ((r = memcached_fetch_result(memc, NULL, &rc)) != NULL)
        memcached_result_free(r);
    is_rc(memcached_cas_by_key(memc, group, gl, kp[2], kl[2], "new", 3, 0, 0, cas),
          MEMCACHED_SUCCESS, "cas_by_key with the current cas");

    is_rc(memcached_delete_by_key(memc, group, gl, kp[4], kl[4], 0), MEMCACHED_SUCCESS,
          "delete_by_key");
    is_rc(memcached_exist_by_key(memc, group, gl, kp[4], kl[4]), MEMCACHED_NOTFOUND, "deleted");
    ok(holder(s, keys[4]) == -1, "gone from every server");
    /* without a group key the key's own server is asked (libmemcached's
     * delete, storage, exist and arithmetic hash the empty group key
     * instead, while its gets place by the key) */
    int k = 0;
    while (k < N - 1 && memcached_server_by_key(memc, kp[k], kl[k], &rc) == owner)
        k++;
    if (OURS)
        is_rc(memcached_delete_by_key(memc, NULL, 0, kp[k], kl[k], 0), MEMCACHED_NOTFOUND,
              "a NULL group key places by the key itself");
    memcached_free(memc);
}

int main(void)
{
    struct test_server s[3];
    for (int i = 0; i < 3; i++)
        if (!test_server_start(&s[i], false)) {
            printf("1..0 # SKIP cannot start the servers\n");
            return 0;
        }
    run(s, false);
    run(s, true);
    for (int i = 0; i < 3; i++)
        test_server_stop(&s[i], false);
    return done_testing();
}
