/* t/libmc/resilience.c: behaviors for failing servers against real servers
 * ($MC_SERVER): NUMBER_OF_REPLICAS (a value survives its primary's death),
 * REMOVE_FAILED_SERVERS with SERVER_FAILURE_LIMIT (keys move to the live
 * servers), RETRY_TIMEOUT (a failed server is retried), mget over a dead
 * server (SOME_ERRORS, live keys still fetched), SERVER_TIMEOUT_LIMIT (a
 * server that stops answering is disabled, or removed, only after that many
 * timeouts in a row), SORT_HOSTS (the server list in host and port order),
 * the request window cap and a large zero-copy iget. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "tap.h"

static bool start_three(struct test_server *s)
{
    for (int i = 0; i < 3; i++)
        if (!test_server_start(&s[i], false))
            return false;
    return true;
}

static void stop_all(struct test_server *s)
{
    for (int i = 0; i < 3; i++)
        test_server_stop(&s[i], false);
}

static memcached_st *client_for(struct test_server *s, bool binary)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < 3; i++)
        memcached_server_add(memc, "127.0.0.1", (in_port_t)s[i].port);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 2000);
    return memc;
}

static int owner_of(memcached_st *memc, struct test_server *s, const char *key)
{
    memcached_return_t rc;
    const memcached_instance_st *inst = memcached_server_by_key(memc, key, strlen(key), &rc);
    for (int i = 0; i < 3; i++)
        if (inst != NULL && memcached_server_port(inst) == s[i].port)
            return i;
    return -1;
}

static void test_replicas(bool binary)
{
    struct test_server s[3];
    if (!ok(start_three(s), "three servers"))
        return;
    memcached_st *memc = client_for(s, binary);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_NUMBER_OF_REPLICAS, 1);
    const char *key = "replicated-key";
    is_rc(memcached_set(memc, key, strlen(key), "precious", 8, 0, 0), MEMCACHED_SUCCESS,
          "set with one replica");
    /* replica writes are quiet: a round trip to every server orders them */
    memcached_version(memc);
    int primary = owner_of(memc, s, key);
    int replica = (primary + 1) % 3;
    /* the copy is on the next server, read directly */
    memcached_st *direct = memcached_create(NULL);
    memcached_server_add(direct, "127.0.0.1", (in_port_t)s[replica].port);
    is_rc(memcached_exist(direct, key, strlen(key)), MEMCACHED_SUCCESS,
          "the replica server holds a copy");
    memcached_free(direct);
    test_server_stop(&s[primary], true);
    memcached_return_t rc;
    size_t len;
    uint32_t flags;
    char *v = memcached_get(memc, key, strlen(key), &len, &flags, &rc);
    ok(v != NULL && len == 8 && memcmp(v, "precious", 8) == 0,
       "get falls back to the replica when the primary is dead (%s)", memcached_strerror(memc, rc));
    free(v);
    const char *keys[] = {key};
    size_t lengths[] = {strlen(key)};
    memcached_mget(memc, keys, lengths, 1);
    int fetched = 0;
    memcached_result_st *r;
    while ((r = memcached_fetch_result(memc, NULL, &rc)) != NULL) {
        fetched += memcached_result_length(r) == 8;
        memcached_result_free(r);
    }
    ok(fetched == 1, "mget asks the replica when the primary is down");
    memcached_free(memc);
    stop_all(s);
}

static void test_eject(void)
{
    struct test_server s[3];
    if (!ok(start_three(s), "three servers"))
        return;
    memcached_st *memc = client_for(s, false);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                           MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS, 1);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, 2);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DEAD_TIMEOUT, 1);
    char key[32] = "";
    for (int i = 0; i < 1000; i++) { /* a key owned by server 0 */
        snprintf(key, sizeof(key), "eject-%d", i);
        if (owner_of(memc, s, key) == 0)
            break;
    }
    ok(owner_of(memc, s, key) == 0, "found a key on the server to be killed");
    test_server_stop(&s[0], true);
    memcached_return_t first = memcached_set(memc, key, strlen(key), "v", 1, 0, 0);
    ok(first != MEMCACHED_SUCCESS, "set to the dead server fails (%s)",
       memcached_strerror(memc, first));
    memcached_return_t rc = MEMCACHED_FAILURE;
    for (int attempt = 0; attempt < 5 && rc != MEMCACHED_SUCCESS; attempt++)
        rc = memcached_set(memc, key, strlen(key), "v", 1, 0, 0);
    is_rc(rc, MEMCACHED_SUCCESS, "after the failure limit the key moves to a live server");
    int owner = owner_of(memc, s, key);
    ok(owner == 1 || owner == 2, "the key's owner is now a live server (%d)", owner);
    sleep(2); /* past the 1 s dead timeout: the server rejoins the placement */
    ok(owner_of(memc, s, key) == 0, "after DEAD_TIMEOUT the ejected server owns its keys again");
    memcached_free(memc);
    stop_all(s);
}

static void test_retry(void)
{
    struct test_server s;
    if (!ok(test_server_start(&s, false), "a server"))
        return;
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "127.0.0.1", (in_port_t)s.port);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 1);
    is_rc(memcached_set(memc, "r", 1, "1", 1, 0, 0), MEMCACHED_SUCCESS, "set");
    test_server_stop(&s, true);
    ok(memcached_set(memc, "r", 1, "2", 1, 0, 0) != MEMCACHED_SUCCESS, "server gone: fails");
    is_rc(memcached_set(memc, "r", 1, "3", 1, 0, 0), MEMCACHED_SERVER_TEMPORARILY_DISABLED,
          "within the retry timeout: disabled");
    sleep(2); /* past the 1 s retry timeout */
    memcached_return_t rc = memcached_set(memc, "r", 1, "4", 1, 0, 0);
    is_rc(rc, MEMCACHED_CONNECTION_FAILURE,
          "after the retry timeout the server is tried again (and still refuses)");
    memcached_free(memc);
}

static void test_mget_dead(void)
{
    struct test_server s[3];
    if (!ok(start_three(s), "three servers"))
        return;
    memcached_st *memc = client_for(s, false);
    char keys[60][16];
    const char *kp[60];
    size_t kl[60];
    int live = 0;
    for (int i = 0; i < 60; i++) {
        snprintf(keys[i], sizeof(keys[i]), "mg-%d", i);
        kp[i] = keys[i];
        kl[i] = strlen(keys[i]);
        memcached_set(memc, kp[i], kl[i], "x", 1, 0, 0);
        if (owner_of(memc, s, keys[i]) != 2)
            live++;
    }
    test_server_stop(&s[2], true);
    memcached_return_t rc = memcached_mget(memc, kp, kl, 60);
    ok(rc == MEMCACHED_SOME_ERRORS || rc == MEMCACHED_SUCCESS,
       "mget with one dead server is issued (%s)", memcached_strerror(memc, rc));
    int got = 0;
    memcached_result_st *r;
    while ((r = memcached_fetch_result(memc, NULL, &rc)) != NULL) {
        got++;
        memcached_result_free(r);
    }
    ok(got == live, "the keys on live servers are fetched (%d of %d)", got, live);
    rc = memcached_mget(memc, kp, kl, 60);
    is_rc(rc, MEMCACHED_SOME_ERRORS, "mget while a server is disabled: SOME_ERRORS");
    while ((r = memcached_fetch_result(memc, NULL, &rc)) != NULL)
        memcached_result_free(r);
    memcached_free(memc);
    stop_all(s);
}

static void test_window_and_large(void)
{
    struct test_server s;
    if (!ok(test_server_start(&s, false), "a server"))
        return;
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "127.0.0.1", (in_port_t)s.port);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REQUEST_WINDOW, 16);
    ok(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_REQUEST_WINDOW) == 16, "window set");
    enum { N = 500 };
    memcached_request_st *reqs[N];
    char keys[N][16];
    uint32_t max_seen = 0;
    const memcached_instance_st *inst = memcached_server_instance_by_position(memc, 0);
    for (int i = 0; i < N; i++) {
        reqs[i] = memcached_request_create(memc);
        snprintf(keys[i], sizeof(keys[i]), "w-%d", i);
        memcached_iset(memc, keys[i], strlen(keys[i]), "value", 5, 0, 0, reqs[i]);
        uint32_t now = memcached_server_response_count(inst);
        if (now > max_seen)
            max_seen = now;
    }
    memcached_wait_all(memc);
    ok(max_seen <= 16, "never more than the window on the wire (max %u)", max_seen);
    int good = 0;
    for (int i = 0; i < N; i++) {
        good += memcached_request_return(reqs[i]) == MEMCACHED_SUCCESS;
        memcached_request_free(reqs[i]);
    }
    ok(good == N, "all windowed requests succeeded (%d)", good);

    size_t big = 900 * 1000;
    char *value = malloc(big), *buffer = malloc(big);
    for (size_t i = 0; i < big; i++)
        value[i] = (char)(i * 7);
    memcached_request_st *req = memcached_request_create(memc);
    memcached_iset(memc, "big-iget", 8, value, big, 0, 3, req);
    is_rc(memcached_wait(memc, req), MEMCACHED_SUCCESS, "iset of 900 kB (zero-copy)");
    memcached_iget(memc, "big-iget", 8, buffer, big, req);
    is_rc(memcached_wait(memc, req), MEMCACHED_SUCCESS, "iget of 900 kB into the caller's buffer");
    size_t len;
    const char *got = memcached_request_value(req, &len);
    ok(got == buffer && len == big && memcmp(buffer, value, big) == 0, "900 kB value intact");
    memcached_request_free(req);
    free(buffer);
    free(value);
    memcached_free(memc);
    test_server_stop(&s, false);
}

/* get of `key` through memc: its return code */
static memcached_return_t get_rc(memcached_st *memc, const char *key)
{
    memcached_return_t rc;
    size_t len;
    uint32_t flags;
    free(memcached_get(memc, key, strlen(key), &len, &flags, &rc));
    return rc;
}

static void test_timeout_limit(void)
{
    struct test_server s;
    if (!ok(test_server_start(&s, false), "a server"))
        return;
    for (uint64_t limit = 0; limit <= 3; limit += 3) {
        memcached_st *memc = memcached_create(NULL);
        memcached_server_add(memc, "127.0.0.1", (in_port_t)s.port);
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 200);
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 30);
        is_rc(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SERVER_TIMEOUT_LIMIT, limit),
              MEMCACHED_SUCCESS, "SERVER_TIMEOUT_LIMIT set");
        ok(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_SERVER_TIMEOUT_LIMIT) == limit,
           "SERVER_TIMEOUT_LIMIT reads back %llu", (unsigned long long)limit);
        is_rc(memcached_set(memc, "tl", 2, "v", 1, 0, 0), MEMCACHED_SUCCESS, "set");
        if (limit == 3) {
            /* a reply in between starts the count again */
            test_server_pause(&s);
            is_rc(get_rc(memc, "tl"), MEMCACHED_TIMEOUT, "limit 3: a timeout");
            is_rc(get_rc(memc, "tl"), MEMCACHED_TIMEOUT, "limit 3: a second timeout");
            test_server_resume(&s);
            is_rc(get_rc(memc, "tl"), MEMCACHED_SUCCESS, "limit 3: the server answers again");
        }
        test_server_pause(&s);
        uint64_t timeouts = limit > 1 ? limit : 1;
        int timed_out = 0;
        for (uint64_t i = 0; i < timeouts; i++)
            if (get_rc(memc, "tl") == MEMCACHED_TIMEOUT)
                timed_out++;
        ok(timed_out == (int)timeouts, "limit %llu: %d timeouts in a row, each tried the server",
           (unsigned long long)limit, timed_out);
        is_rc(get_rc(memc, "tl"), MEMCACHED_SERVER_TEMPORARILY_DISABLED,
              limit == 0 ? "limit 0: disabled after the first timeout"
                         : "limit 3: disabled after the third timeout");
        test_server_resume(&s);
        memcached_free(memc);
    }
    test_server_stop(&s, false);

    /* with REMOVE_FAILED_SERVERS: removed after the timeouts, keys move */
    struct test_server three[3];
    if (!ok(start_three(three), "three servers"))
        return;
    memcached_st *memc = client_for(three, false);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 200);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                           MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS, 1);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, 1);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SERVER_TIMEOUT_LIMIT, 2);
    char key[32] = "";
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "tl-eject-%d", i);
        if (owner_of(memc, three, key) == 0)
            break;
    }
    is_rc(memcached_set(memc, key, strlen(key), "v", 1, 0, 0), MEMCACHED_SUCCESS,
          "set on the server about to stop answering");
    test_server_pause(&three[0]);
    is_rc(get_rc(memc, key), MEMCACHED_TIMEOUT, "first timeout");
    ok(owner_of(memc, three, key) == 0, "the server keeps its keys after one timeout");
    is_rc(get_rc(memc, key), MEMCACHED_TIMEOUT, "second timeout");
    int owner = owner_of(memc, three, key);
    ok(owner == 1 || owner == 2, "after the second the server is removed (owner now %d)", owner);
    is_rc(memcached_set(memc, key, strlen(key), "w", 1, 0, 0), MEMCACHED_SUCCESS,
          "the key is served by a live server");
    test_server_resume(&three[0]);
    memcached_free(memc);
    stop_all(three);
}

static void test_sort_hosts(void)
{
    struct test_server s[3];
    if (!ok(start_three(s), "three servers"))
        return;
    unsigned ports[3] = {s[0].port, s[1].port, s[2].port};
    for (int i = 0; i < 3; i++) /* descending */
        for (int j = i + 1; j < 3; j++)
            if (ports[j] > ports[i]) {
                unsigned t = ports[i];
                ports[i] = ports[j];
                ports[j] = t;
            }
    for (int late = 0; late < 2; late++) {
        memcached_st *memc = memcached_create(NULL);
        if (!late)
            memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SORT_HOSTS, 1);
        for (int i = 0; i < 3; i++)
            memcached_server_add(memc, "127.0.0.1", (in_port_t)ports[i]);
        if (late) {
            ok(memcached_server_port(memcached_server_instance_by_position(memc, 0)) == ports[0],
               "without SORT_HOSTS servers stay in the order added");
            memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SORT_HOSTS, 1);
        }
        ok(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_SORT_HOSTS) == 1, "SORT_HOSTS on");
        bool sorted = memcached_server_count(memc) == 3;
        for (uint32_t i = 0; i < 3 && sorted; i++)
            sorted = memcached_server_port(memcached_server_instance_by_position(memc, i)) ==
                     ports[2 - i];
        ok(sorted, "SORT_HOSTS %s: servers in port order", late ? "set late" : "set first");
        /* placement follows the sorted list: a key on position p is stored
         * on the server at that position */
        int right = 0;
        for (int k = 0; k < 30; k++) {
            char key[32];
            snprintf(key, sizeof(key), "sorted-%d", k);
            memcached_set(memc, key, strlen(key), "v", 1, 0, 0);
            memcached_return_t rc;
            const memcached_instance_st *inst =
                memcached_server_by_key(memc, key, strlen(key), &rc);
            memcached_st *one = memcached_create(NULL);
            memcached_server_add(one, "127.0.0.1", memcached_server_port(inst));
            if (memcached_exist(one, key, strlen(key)) == MEMCACHED_SUCCESS)
                right++;
            memcached_free(one);
        }
        ok(right == 30, "keys stored where server_by_key says (%d of 30)", right);
        memcached_free(memc);
    }
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "b.invalid", 2);
    memcached_server_add(memc, "a.invalid", 3);
    memcached_server_add(memc, "b.invalid", 1);
    memcached_server_add_unix_socket(memc, "/tmp/sorted.sock");
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SORT_HOSTS, 1);
    const char *want_host[4] = {"/tmp/sorted.sock", "a.invalid", "b.invalid", "b.invalid"};
    unsigned want_port[4] = {0, 3, 1, 2};
    int in_place = 0;
    for (uint32_t i = 0; i < 4; i++) {
        const memcached_instance_st *inst = memcached_server_instance_by_position(memc, i);
        if (strcmp(memcached_server_name(inst), want_host[i]) == 0 &&
            memcached_server_port(inst) == want_port[i])
            in_place++;
    }
    ok(in_place == 4, "sorted by host name (strcmp), then port (%d of 4 in place)", in_place);
    memcached_free(memc);
    stop_all(s);
}

int main(void)
{
    test_replicas(true);
    test_replicas(false);
    test_eject();
    test_retry();
    test_mget_dead();
    test_timeout_limit();
    test_sort_hosts();
    test_window_and_large();
    return done_testing();
}
