/* t/libmc/api_handle.c: the blocking libmemcached API's handle against a
 * real server ($MC_SERVER): behaviors, server lists and configuration
 * strings, socket timeouts, callbacks, memory allocators, autoeject, the
 * less common calls (mget_execute, dump, push, reset, stat_servername),
 * unreachable servers and strerror. The data calls are
 * t/libmc/api_basic.c's. Expectations are libmemcached's: the file is also
 * built against Debian's libmemcached (api_handle_ref, with
 * REFERENCE_LIBMEMCACHED defined), which must pass every check not marked
 * OURS; those check our deliberate differences and additions
 * (doc/libmemcached-rdma.md) and run only against libmemcached-rdma. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "tap.h"
#include "test_util.h"

/* Whether some socket of this process connected to 127.0.0.1:port has the
 * given SO_SNDTIMEO and SO_RCVTIMEO (the kernel keeps them in clock ticks:
 * within 10 ms). */
static bool connection_has_timeouts(unsigned port, long snd_us, long rcv_us)
{
    for (int fd = 3; fd < 1024; fd++) {
        struct sockaddr_in peer;
        socklen_t len = sizeof(peer);
        if (getpeername(fd, (struct sockaddr *)&peer, &len) != 0 || peer.sin_family != AF_INET ||
            ntohs(peer.sin_port) != port)
            continue;
        struct timeval snd, rcv;
        socklen_t sl = sizeof(snd), rl = sizeof(rcv);
        if (getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &snd, &sl) == 0 &&
            getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, &rl) == 0 &&
            labs((long)snd.tv_sec * 1000000 + snd.tv_usec - snd_us) <= 10000 &&
            labs((long)rcv.tv_sec * 1000000 + rcv.tv_usec - rcv_us) <= 10000)
            return true;
    }
    return false;
}

/* SND_TIMEOUT / RCV_TIMEOUT (microseconds) become the sockets' SO_SNDTIMEO /
 * SO_RCVTIMEO, as libmemcached sets them. */
static void test_socket_timeouts(const struct test_server *s)
{
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "127.0.0.1", (in_port_t)s->port);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SND_TIMEOUT, 1500000);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RCV_TIMEOUT, 250000);
    is_rc(memcached_set(memc, "timeouts", 8, "v", 1, 0, 0), MEMCACHED_SUCCESS,
          "set with SND_TIMEOUT and RCV_TIMEOUT");
    ok(connection_has_timeouts(s->port, 1500000, 250000),
       "the connection has SO_SNDTIMEO 1.5 s and SO_RCVTIMEO 0.25 s");
    memcached_free(memc);
}

static void test_behaviors(void)
{
    memcached_st *m = memcached_create(NULL);
    ok(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT) == 4000 &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT) == 5000 &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT) == 2 &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT) == 5,
       "default timeouts and limits");
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_KETAMA, 1);
    ok(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_DISTRIBUTION) ==
           MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA,
       "KETAMA selects ketama distribution");
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
    ok(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_DISTRIBUTION) ==
               MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_HASH) == MEMCACHED_HASH_MD5 &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_KETAMA_HASH) == MEMCACHED_HASH_MD5,
       "KETAMA_WEIGHTED selects weighted ketama with MD5");
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                           MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY);
    ok(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED) == 1,
       "KETAMA_SPY keeps the weighting");
    is_rc(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                 MEMCACHED_DISTRIBUTION_CONSISTENT_MAX),
          MEMCACHED_INVALID_ARGUMENTS, "an unknown distribution is refused");
    is_rc(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                 MEMCACHED_DISTRIBUTION_VIRTUAL_BUCKET),
          MEMCACHED_SUCCESS, "VIRTUAL_BUCKET is accepted");
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_MODULA);
    ok(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED) == 0 &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_KETAMA) == 0,
       "MODULA clears ketama");
    /* libmemcached keeps the weighting flag under MODULA; it shows again with
     * a consistent distribution that does not reset it */
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                           MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY);
    ok(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED) == 1,
       "weighting survives MODULA and shows again under KETAMA_SPY");
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                           MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
    ok(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED) == 0,
       "CONSISTENT_KETAMA clears the weighting");
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                           MEMCACHED_DISTRIBUTION_VIRTUAL_BUCKET);
    ok(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_KETAMA) == 0,
       "VIRTUAL_BUCKET is not a ketama distribution");
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_MODULA);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_MD5);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_KETAMA_HASH, MEMCACHED_HASH_CRC);
    ok(memcached_behavior_get_distribution_hash(m) == MEMCACHED_HASH_MD5 &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_KETAMA_HASH) == MEMCACHED_HASH_CRC,
       "memcached_behavior_get_distribution_hash answers the key hash, as libmemcached's");
    {
        /* a weight above 1: memcached_server_add turns weighting on only
         * under a consistent distribution, memcached_server_push always */
        memcached_st *added = memcached_create(NULL);
        memcached_server_add_with_weight(added, "10.9.0.1", 11211, 3);
        memcached_behavior_set(added, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                               MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY);
        memcached_st *pushed = memcached_create(NULL);
        memcached_return_t rc;
        memcached_server_list_st list =
            memcached_server_list_append_with_weight(NULL, "10.9.0.1", 11211, 3, &rc);
        memcached_server_push(pushed, list);
        memcached_server_list_free(list);
        memcached_behavior_set(pushed, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                               MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY);
        memcached_st *spy = memcached_create(NULL);
        memcached_behavior_set(spy, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                               MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY);
        memcached_server_add_with_weight(spy, "10.9.0.1", 11211, 3);
        ok(memcached_behavior_get(added, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED) == 0 &&
               memcached_behavior_get(pushed, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED) == 1 &&
               memcached_behavior_get(spy, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED) == 1,
           "weight > 1 turns weighting on: add under ketama, push always");
        memcached_free(added);
        memcached_free(pushed);
        memcached_free(spy);
    }
    {
        const char *twice = "--SERVER=127.0.0.1:11211 --HASH=MD5 --HASH=CRC";
        memcached_st *parsed = memcached(twice, strlen(twice));
        ok(parsed == NULL, "--HASH twice in a configuration string is refused");
        memcached_free(parsed);
    }
    is_rc(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_CRC), MEMCACHED_SUCCESS,
          "set HASH");
    ok(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_HASH) == MEMCACHED_HASH_CRC, "get HASH");
    is_rc(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_CUSTOM),
          MEMCACHED_INVALID_ARGUMENTS, "HASH_CUSTOM cannot be set as a behavior");
    ok(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_HASH) == MEMCACHED_HASH_CRC,
       "a refused hash leaves the setting alone");
    const memcached_behavior_t numeric[] = {
        MEMCACHED_BEHAVIOR_POLL_TIMEOUT,       MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT,
        MEMCACHED_BEHAVIOR_RCV_TIMEOUT,        MEMCACHED_BEHAVIOR_SND_TIMEOUT,
        MEMCACHED_BEHAVIOR_RETRY_TIMEOUT,      MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT,
        MEMCACHED_BEHAVIOR_NUMBER_OF_REPLICAS, MEMCACHED_BEHAVIOR_DEAD_TIMEOUT,
    };
    bool all = true;
    for (size_t i = 0; i < sizeof(numeric) / sizeof(numeric[0]); i++) {
        memcached_behavior_set(m, numeric[i], 123 + i);
        all = all && memcached_behavior_get(m, numeric[i]) == 123 + i;
    }
    ok(all, "numeric behaviors round-trip");
    const memcached_behavior_t flags[] = {
        MEMCACHED_BEHAVIOR_NO_BLOCK,
        MEMCACHED_BEHAVIOR_TCP_NODELAY,
        MEMCACHED_BEHAVIOR_SUPPORT_CAS,
        MEMCACHED_BEHAVIOR_NOREPLY,
        MEMCACHED_BEHAVIOR_BUFFER_REQUESTS,
        MEMCACHED_BEHAVIOR_VERIFY_KEY,
        MEMCACHED_BEHAVIOR_RANDOMIZE_REPLICA_READ,
        MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS,
        MEMCACHED_BEHAVIOR_BINARY_PROTOCOL,
    };
    all = true;
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        memcached_behavior_set(m, flags[i], 1);
        all = all && memcached_behavior_get(m, flags[i]) == 1;
        memcached_behavior_set(m, flags[i], 0);
        all = all && memcached_behavior_get(m, flags[i]) == 0;
    }
    ok(all, "boolean behaviors round-trip");
    memcached_free(m);

    /* libmemcached's defaults and refusals */
    m = memcached_create(NULL);
    ok(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_IO_MSG_WATERMARK) == 500 &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_IO_BYTES_WATERMARK) == 65 * 1024,
       "IO watermarks default to 500 messages and 65 KiB");
    ok(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_CORK, 0) == MEMCACHED_DEPRECATED &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_CORK) == 1 &&
           memcached_behavior_set(m, MEMCACHED_BEHAVIOR_CACHE_LOOKUPS, 0) == MEMCACHED_DEPRECATED &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_CACHE_LOOKUPS) == 1 &&
           memcached_behavior_set(m, MEMCACHED_BEHAVIOR_USER_DATA, 1) == MEMCACHED_DEPRECATED,
       "CORK, CACHE_LOOKUPS and USER_DATA are DEPRECATED (the first two always on)");
    ok(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, 0) ==
               MEMCACHED_INVALID_ARGUMENTS &&
           memcached_behavior_set(m, MEMCACHED_BEHAVIOR_LOAD_FROM_FILE, 1) ==
               MEMCACHED_INVALID_ARGUMENTS,
       "SERVER_FAILURE_LIMIT 0 and LOAD_FROM_FILE are INVALID_ARGUMENTS");
    memcached_free(m);
}

static void test_server_lists(const struct test_server *s)
{
    memcached_return_t rc;
    memcached_server_list_st list = memcached_servers_parse("10.0.0.1:11311, 10.0.0.2, host3:1:7");
    ok(list != NULL && memcached_server_list_count(list) == 3, "servers_parse: three servers");
    if (list != NULL) {
        ok(strcmp(list[0].hostname, "10.0.0.1") == 0 && list[0].port == 11311,
           "parsed host and port");
        ok(list[1].port == MEMCACHED_DEFAULT_PORT, "default port");
        ok(list[2].weight == 7, "parsed weight");
    }
    memcached_server_list_free(list);
    /* a blank inside an item starts its weight, as libmemcached reads it */
    list = memcached_servers_parse("localhost:11211 5, other:11212");
    ok(list != NULL && memcached_server_list_count(list) == 2 && list[0].weight == 5 &&
           list[0].port == 11211 && strcmp(list[1].hostname, "other") == 0,
       "servers_parse: \"host:port weight\"");
    memcached_server_list_free(list);
    if (OURS) { /* libmemcached takes "[]" for a host name */
        list = memcached_servers_parse("[]:1");
        ok(list == NULL, "servers_parse: an empty bracketed host is refused");
        memcached_server_list_free(list);
        list = memcached_servers_parse("rdma:///tmp/x");
        ok(list == NULL, "servers_parse: rdma:// with a socket path is refused");
        memcached_server_list_free(list);
        list = memcached_servers_parse("rdma+ud:///tmp/x");
        ok(list == NULL, "servers_parse: rdma+ud:// with a socket path is refused");
        memcached_server_list_free(list);
#ifndef REFERENCE_LIBMEMCACHED /* our connection types */
        list = memcached_servers_parse("rdma+ud://10.0.0.1:11311, rdma+rc://10.0.0.2, rdma://h3");
        ok(list != NULL && memcached_server_list_count(list) == 3 &&
               list[0].type == MEMCACHED_CONNECTION_RDMA_UD && list[0].port == 11311 &&
               strcmp(list[0].hostname, "10.0.0.1") == 0 &&
               list[1].type == MEMCACHED_CONNECTION_RDMA_RC &&
               list[1].port == MEMCACHED_DEFAULT_PORT && list[2].type == MEMCACHED_CONNECTION_RDMA,
           "servers_parse: rdma+ud:// is UD only, rdma+rc:// RC only, rdma:// either");
        memcached_server_list_free(list);
        static const char ud_cfg[] = "--SERVER=rdma+ud://10.0.0.1:11311";
        memcached_st *ud = memcached(ud_cfg, strlen(ud_cfg));
        ok(ud != NULL && memcached_server_count(ud) == 1 &&
               strcmp(memcached_server_type(memcached_server_instance_by_position(ud, 0)),
                      "RDMA+UD") == 0,
           "config string: an rdma+ud:// server has the type RDMA+UD");
        memcached_free(ud);
        static const char rc_cfg[] = "--SERVER=rdma+rc://10.0.0.1:11311 --SERVER=rdma://10.0.0.2";
        memcached_st *rcm = memcached(rc_cfg, strlen(rc_cfg));
        ok(rcm != NULL && memcached_server_count(rcm) == 2 &&
               strcmp(memcached_server_type(memcached_server_instance_by_position(rcm, 0)),
                      "RDMA+RC") == 0 &&
               strcmp(memcached_server_type(memcached_server_instance_by_position(rcm, 1)),
                      "RDMA") == 0,
           "config string: rdma+rc:// has the type RDMA+RC, rdma:// RDMA");
        memcached_free(rcm);
#endif
    }

    list = memcached_server_list_append(NULL, "127.0.0.1", (in_port_t)s->port, &rc);
    is_rc(rc, MEMCACHED_SUCCESS, "server_list_append");
    memcached_st *m = memcached_create(NULL);
    is_rc(memcached_server_push(m, list), MEMCACHED_SUCCESS, "server_push");
    memcached_server_list_free(list);
    ok(memcached_server_count(m) == 1, "server_count after push");
    const memcached_instance_st *inst = memcached_server_by_key(m, "abc", 3, &rc);
    ok(inst != NULL && rc == MEMCACHED_SUCCESS && memcached_server_port(inst) == s->port &&
           strcmp(memcached_server_name(inst), "127.0.0.1") == 0,
       "server_by_key");
    is_rc(memcached_set(m, "pushed", 6, "x", 1, 0, 0), MEMCACHED_SUCCESS,
          "pushed server is usable");

    memcached_st *copy = memcached_clone(NULL, m);
    ok(copy != NULL && memcached_server_count(copy) == 1, "clone copies servers");
    is_rc(memcached_exist(copy, "pushed", 6), MEMCACHED_SUCCESS, "clone reaches the server");
    memcached_free(copy);
    memcached_free(m);

    char config[128];
    snprintf(config, sizeof(config),
             "--SERVER=127.0.0.1:%u --BINARY-PROTOCOL --POLL-TIMEOUT=3000 --NUMBER-OF-REPLICAS=0",
             s->port);
    m = memcached(config, strlen(config));
    ok(m != NULL, "memcached() with a configuration string");
    if (m != NULL) {
        ok(memcached_server_count(m) == 1 &&
               memcached_behavior_get(m, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL) == 1 &&
               memcached_behavior_get(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT) == 3000,
           "configuration applied");
        is_rc(memcached_exist(m, "pushed", 6), MEMCACHED_SUCCESS, "configured client works");
        memcached_free(m);
    }
    ok(memcached("--NO-SUCH-OPTION", 16) == NULL, "unknown option is rejected");
    char err[128] = "";
    is_rc(libmemcached_check_configuration("--SERVER=", 9, err, sizeof(err)), MEMCACHED_PARSE_ERROR,
          "check_configuration reports a parse error");
    /* server specs libmemcached refuses, which used to build a server the
     * user did not write (a host "fe80:" on port 1, "localhost:11211" on
     * port 5, one host "a:1,b"), or to drop what follows */
    static const char *const bad_specs[] = {
        "--SERVER=fe80::1",
        "--SERVER=localhost:11211:5",
        "--SERVER=a:1,b:2",
        "--SERVER=[::1]junk",
        "--SERVER=[::1]x:5",
        "--SERVER=[]:1",
        "--SERVER=host\v--BINARY-PROTOCOL",
        "--SERVER=/tmp/sock",     /* a path is for --SOCKET */
        "--SERVER=rdma:///tmp/x", /* and has no rdma:// */
        "--SERVER=rdma+ud:///tmp/x",
        "--SERVER=rdma+ud://",
        "--SERVER=\"local host\"", /* a host with a blank, even quoted */
    };
    int refused = 0;
    for (size_t i = 0; i < sizeof(bad_specs) / sizeof(bad_specs[0]); i++) {
        memcached_st *bad = memcached(bad_specs[i], strlen(bad_specs[i]));
        if (bad == NULL)
            refused++;
        else
            tap_diag("accepted: %s", bad_specs[i]);
        memcached_free(bad);
    }
    ok(refused == (int)(sizeof(bad_specs) / sizeof(bad_specs[0])),
       "malformed --SERVER specs are refused (%d of %zu)", refused,
       sizeof(bad_specs) / sizeof(bad_specs[0]));
    static const char with_nul[] = "--SERVER=localhost\0--NO-SUCH-OPTION";
    ok(memcached(with_nul, sizeof(with_nul) - 1) == NULL,
       "a NUL inside the given length is refused, not the end of the string");
    err[0] = '\0';
    if (OURS) { /* libmemcached takes port 99999 as 34463 */
        libmemcached_check_configuration("--SERVER=localhost:99999", 24, err, sizeof(err));
        ok(strstr(err, "localhost:99999") != NULL, "the error names the whole option (%s)", err);
    }
    /* blanks between double quotes belong to the value, as libmemcached
     * reads them */
    static const char quoted[] = "--SOCKET=\"/tmp/a b\" --BINARY-PROTOCOL";
    m = memcached(quoted, sizeof(quoted) - 1);
    ok(m != NULL && memcached_server_count(m) == 1 &&
           strcmp(memcached_server_name(memcached_server_instance_by_position(m, 0)), "/tmp/a b") ==
               0 &&
           strcmp(memcached_server_type(memcached_server_instance_by_position(m, 0)), "SOCKET") ==
               0 &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL) == 1,
       "--SOCKET=\"/tmp/a b\": a quoted path with a blank, then the next option");
    memcached_free(m);
    static const char unclosed[] = "--SOCKET=\"/tmp/a --BINARY-PROTOCOL";
    ok(memcached(unclosed, sizeof(unclosed) - 1) == NULL, "an unclosed quote is refused");
    static const char inner[] = "--SERVER=h1 --SOCKET=/tmp/x\" --SERVER=h2";
    m = memcached(inner, sizeof(inner) - 1);
    ok(m == NULL || memcached_server_count(m) == 3,
       "a quote inside a value does not swallow the options after it");
    memcached_free(m);
    if (OURS) { /* libmemcached's parser refuses IPv6 addresses */
        m = memcached("--SERVER=[::1]:11212", 20);
        ok(m != NULL && memcached_server_count(m) == 1 &&
               strcmp(memcached_server_name(memcached_server_instance_by_position(m, 0)), "::1") ==
                   0 &&
               memcached_server_port(memcached_server_instance_by_position(m, 0)) == 11212,
           "--SERVER=[::1]:11212: an IPv6 address in brackets");
        memcached_free(m);
    }

    const char *sock_config = "--SOCKET=\"/some/path/sock\" --DISTRIBUTION=consistent";
    m = memcached(sock_config, strlen(sock_config));
    ok(m != NULL && memcached_server_count(m) == 1 &&
           strcmp(memcached_server_type(memcached_server_instance_by_position(m, 0)), "SOCKET") ==
               0 &&
           memcached_behavior_get(m, MEMCACHED_BEHAVIOR_DISTRIBUTION) ==
               MEMCACHED_DISTRIBUTION_CONSISTENT,
       "--SOCKET and --DISTRIBUTION");
    memcached_free(m);
}

static int execute_hits;
static memcached_return_t count_hit(const memcached_st *memc, memcached_result_st *result,
                                    void *context)
{
    (void)memc;
    (void)result;
    (void)context;
    execute_hits++;
    return MEMCACHED_SUCCESS;
}

static int dumped_keys, dumped_ours;
static memcached_return_t count_dumped(const memcached_st *memc, const char *key, size_t key_length,
                                       void *context)
{
    (void)memc;
    (void)context;
    dumped_keys++;
    dumped_ours += key_length == 4 && memcmp(key, "mc-", 3) == 0 && key[4] == '\0';
    return strcmp(key, "mc-b") == 0 ? MEMCACHED_FAILURE : MEMCACHED_SUCCESS;
}

/* Calls a libmemcached program may link against besides the everyday ones. */
static void test_more_calls(const struct test_server *s)
{
    memcached_return_t rc;
    memcached_st *fresh = test_client_for(s, false);
    const memcached_instance_st *inst = memcached_server_instance_by_position(fresh, 0);
    ok(memcached_server_major_version(inst) == UINT8_MAX,
       "a server's version reads 255 before it said it");
    uint64_t queries = memcached_query_id(fresh);
    is_rc(memcached_set(fresh, "mc-a", 4, "1", 1, 0, 0), MEMCACHED_SUCCESS, "a set");
    ok(memcached_query_id(fresh) > queries, "query_id grows with a query");
    ok(memcached_server_srcport(inst) > 0, "server_srcport: the connection's local port");
    memcached_mget(fresh, NULL, NULL, 0); /* fails: no keys */
    const char *said = memcached_error(fresh);
    ok(said != NULL && said[0] != '\0' && strcmp(said, memcached_last_error_message(fresh)) == 0,
       "memcached_error gives the last error's message (%s)", said ? said : "NULL");

    const char *keys[] = {"mc-a", "mc-b"};
    size_t lens[] = {4, 4};
    memcached_set(fresh, "mc-b", 4, "2", 1, 0, 0);
    memcached_execute_fn fns[] = {count_hit};
    is_rc(memcached_mget_execute(fresh, keys, lens, 2, fns, NULL, 1), MEMCACHED_NOT_SUPPORTED,
          "mget_execute in the text protocol: NOT_SUPPORTED");
    memcached_behavior_set(fresh, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    execute_hits = 0;
    is_rc(memcached_mget_execute(fresh, keys, lens, 2, fns, NULL, 1), MEMCACHED_SUCCESS,
          "mget_execute in binary");
    memcached_fetch_execute(fresh, fns, NULL, 1);
    ok(execute_hits == 2, "its callbacks see both hits by the end of fetch_execute (%d)",
       execute_hits);

    memcached_dump_fn dump_fns[] = {count_dumped};
    is_rc(memcached_dump(fresh, dump_fns, NULL, 1), MEMCACHED_NOT_SUPPORTED,
          "dump in binary: NOT_SUPPORTED");
    memcached_behavior_set(fresh, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 0);
    is_rc(memcached_dump(fresh, NULL, NULL, 0), MEMCACHED_SUCCESS, "dump without callbacks");
    is_rc(memcached_set(fresh, "step", 4, "3", 1, 0, 0), MEMCACHED_SUCCESS,
          "... leaves the connection in step");
    /* memcached 1.6 lists only the items of a class's COLD LRU, where fresh
     * ones are not yet while the LRU maintainer runs; without it (one flat
     * LRU, all COLD) every item is listed: a server of its own for that */
    struct test_server flat;
    const char *const flat_args[] = {"-o", "no_lru_maintainer", NULL};
    if (test_server_start_args(&flat, false, flat_args)) {
        memcached_st *listed = test_client_for(&flat, false);
        memcached_set(listed, "mc-a", 4, "1", 1, 0, 0);
        memcached_set(listed, "mc-b", 4, "2", 1, 0, 0);
        dumped_keys = dumped_ours = 0;
        is_rc(memcached_dump(listed, dump_fns, NULL, 1), MEMCACHED_SOME_ERRORS,
              "dump: a callback that fails makes SOME_ERRORS");
        ok(dumped_ours == 2 && dumped_keys == 2,
           "dump hands every stored key to the callback (%d of them ours, %d in all)", dumped_ours,
           dumped_keys);
        memcached_free(listed);
        test_server_stop(&flat, false);
    } else {
        ok(false, "a server with -o no_lru_maintainer starts");
        ok(false, "(dump not checked)");
    }
    memcached_behavior_set(fresh, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);

    memcached_st *other = memcached_create(NULL);
    is_rc(memcached_push(other, fresh), MEMCACHED_SUCCESS, "push");
    size_t len;
    uint32_t flags;
    char *v = memcached_get(other, "mc-b", 4, &len, &flags, &rc);
    ok(memcached_server_count(other) == 1 && v != NULL && len == 1,
       "the pushed server serves the other handle");
    free(v);
    memcached_free(other);

    is_rc(memcached_reset(fresh), MEMCACHED_SUCCESS, "reset");
    ok(memcached_server_count(fresh) == 0 &&
           memcached_behavior_get(fresh, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL) == 0,
       "reset: no servers, default behaviors");
    memcached_free(fresh);

    memcached_stat_st one;
    is_rc(memcached_stat_servername(&one, NULL, "127.0.0.1", (in_port_t)s->port), MEMCACHED_SUCCESS,
          "stat_servername");
    ok(one.pid > 0 && one.limit_maxbytes > 0, "stat_servername fills the stats");
    char *pid_text = memcached_stat_get_value(NULL, &one, "pid", &rc);
    ok(pid_text != NULL && rc == MEMCACHED_SUCCESS &&
           strtoul(pid_text, NULL, 10) == (unsigned long)one.pid,
       "stat_get_value reads stat_servername's fields");
    free(pid_text);
    is_rc(memcached_stat_servername(&one, NULL, "127.0.0.1", (in_port_t)test_unused_port()),
          MEMCACHED_CONNECTION_FAILURE, "stat_servername of a closed port: CONNECTION_FAILURE");
    if (OURS) { /* libmemcached has UDP servers */
        memcached_st *m = memcached_create(NULL);
        is_rc(memcached_server_add_udp(m, "127.0.0.1", 11211), MEMCACHED_NOT_SUPPORTED,
              "server_add_udp: NOT_SUPPORTED");
        memcached_free(m);
    }
}

/* Function callbacks pass through memcached_callback_set as data. */
static const void *fn_data(void (*fn)(void))
{
    const void *data;
    memcpy(&data, &fn, sizeof(data));
    return data;
}

static int miss_calls, delete_calls, clone_calls, cleanup_calls;
static char deleted_key[64];

static memcached_return_t make_value(const memcached_st *memc, const char *key, size_t key_length,
                                     memcached_result_st *result)
{
    (void)memc;
    miss_calls++;
    if (key_length >= 5 && memcmp(key, "skip-", 5) == 0)
        return MEMCACHED_NOTFOUND; /* no value: the miss stands */
    char value[80];
    int n = snprintf(value, sizeof(value), "made:%.*s", (int)key_length, key);
    memcached_result_set_value(result, value, (size_t)n);
    memcached_result_set_flags(result, 7);
    return MEMCACHED_SUCCESS;
}

static memcached_return_t note_delete(const memcached_st *memc, const char *key, size_t key_length)
{
    (void)memc;
    delete_calls++;
    snprintf(deleted_key, sizeof(deleted_key), "%.*s", (int)key_length, key);
    return MEMCACHED_SUCCESS;
}

static const memcached_st *cloned_from;
static memcached_return_t note_clone(memcached_st *destination, const memcached_st *source)
{
    clone_calls += destination != NULL;
    cloned_from = source;
    return MEMCACHED_SUCCESS;
}

static memcached_return_t note_cleanup(const memcached_st *memc)
{
    cleanup_calls += memc != NULL;
    return MEMCACHED_SUCCESS;
}

/* MEMCACHED_CALLBACK_GET_FAILURE (read-through), DELETE_TRIGGER, CLONE_FUNCTION
 * and CLEANUP_FUNCTION, called where libmemcached calls them. */
static void test_callbacks(const struct test_server *s)
{
    memcached_st *memc = test_client_for(s, false);
    memcached_return_t rc;
    ok(memcached_callback_get(memc, MEMCACHED_CALLBACK_GET_FAILURE, &rc) == NULL &&
           rc == MEMCACHED_FAILURE,
       "callback_get of an unset function callback: NULL, FAILURE");
    is_rc(memcached_callback_set(memc, MEMCACHED_CALLBACK_GET_FAILURE,
                                 fn_data((void (*)(void))make_value)),
          MEMCACHED_SUCCESS, "set a get-failure callback");
    ok(memcached_callback_get(memc, MEMCACHED_CALLBACK_GET_FAILURE, &rc) ==
               fn_data((void (*)(void))make_value) &&
           rc == MEMCACHED_SUCCESS,
       "callback_get gives it back");
    memcached_delete(memc, "rt-key", 6, 0);
    size_t len = 0;
    uint32_t flags = 0;
    miss_calls = 0;
    char *v = memcached_get(memc, "rt-key", 6, &len, &flags, &rc);
    ok(v != NULL && len == 11 && memcmp(v, "made:rt-key", 11) == 0 && flags == 7 &&
           rc == MEMCACHED_SUCCESS && miss_calls == 1,
       "a miss asks the callback and returns its value and flags");
    free(v);
    v = memcached_get(memc, "skip-key", 8, &len, &flags, &rc);
    ok(v == NULL && rc == MEMCACHED_NOTFOUND && miss_calls == 2,
       "a callback without a value leaves the miss");
    memcached_callback_set(memc, MEMCACHED_CALLBACK_GET_FAILURE, NULL);
    v = memcached_get(memc, "rt-key", 6, &len, &flags, &rc);
    ok(v != NULL && len == 11 && flags == 7 && miss_calls == 2,
       "the callback's value was stored under the key");
    free(v);

    is_rc(memcached_callback_set(memc, MEMCACHED_CALLBACK_DELETE_TRIGGER,
                                 fn_data((void (*)(void))note_delete)),
          MEMCACHED_SUCCESS, "set a delete trigger");
    delete_calls = 0;
    is_rc(memcached_delete(memc, "rt-key", 6, 0), MEMCACHED_SUCCESS, "delete with a trigger");
    ok(delete_calls == 1 && strcmp(deleted_key, "rt-key") == 0, "the trigger names the key");
    is_rc(memcached_delete(memc, "rt-key", 6, 0), MEMCACHED_NOTFOUND, "delete of a missing key");
    ok(delete_calls == 1, "no trigger when nothing was deleted");
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    is_rc(memcached_delete(memc, "rt-key", 6, 0), MEMCACHED_INVALID_ARGUMENTS,
          "a delete trigger with NOREPLY: the delete is refused");
    memcached_callback_set(memc, MEMCACHED_CALLBACK_DELETE_TRIGGER, NULL);
    is_rc(memcached_callback_set(memc, MEMCACHED_CALLBACK_DELETE_TRIGGER,
                                 fn_data((void (*)(void))note_delete)),
          MEMCACHED_INVALID_ARGUMENTS, "a delete trigger cannot be set under NOREPLY");
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_NOREPLY, 0);

    memcached_callback_set(memc, MEMCACHED_CALLBACK_CLONE_FUNCTION,
                           fn_data((void (*)(void))note_clone));
    memcached_callback_set(memc, MEMCACHED_CALLBACK_CLEANUP_FUNCTION,
                           fn_data((void (*)(void))note_cleanup));
    clone_calls = cleanup_calls = 0;
    memcached_st *copy = memcached_clone(NULL, memc);
    ok(copy != NULL && clone_calls == 1 && cloned_from == memc,
       "clone calls the source's clone callback");
    ok(copy != NULL && memcached_callback_get(copy, MEMCACHED_CALLBACK_CLEANUP_FUNCTION, &rc) ==
                           fn_data((void (*)(void))note_cleanup),
       "the clone keeps the callbacks");
    memcached_free(copy);
    ok(cleanup_calls == 1, "free calls the cleanup callback");
    memcached_free(memc);
    ok(cleanup_calls == 2, "... for the original too");
}

/* Counting allocators: every block they hand out is remembered, so the
 * test can tell that memory the library returned came from them. */
#define TRACKED_MAX 256
static void *tracked[TRACKED_MAX];
static int tracked_allocs, tracked_frees, foreign_frees;
static const char alloc_context[] = "allocator context";

static void *track(void *mem)
{
    for (int i = 0; mem && i < TRACKED_MAX; i++)
        if (tracked[i] == NULL) {
            tracked[i] = mem;
            tracked_allocs++;
            return mem;
        }
    return mem;
}

static bool untrack(void *mem)
{
    for (int i = 0; mem && i < TRACKED_MAX; i++)
        if (tracked[i] == mem) {
            tracked[i] = NULL;
            return true;
        }
    return false;
}

static void *counting_malloc(const memcached_st *ptr, const size_t size, void *context)
{
    (void)ptr;
    (void)context;
    return track(malloc(size));
}

static void counting_free(const memcached_st *ptr, void *mem, void *context)
{
    (void)ptr;
    (void)context;
    if (mem == NULL)
        return;
    if (untrack(mem))
        tracked_frees++;
    else
        foreign_frees++;
    free(mem);
}

static void *counting_realloc(const memcached_st *ptr, void *mem, const size_t size, void *context)
{
    (void)ptr;
    (void)context;
    untrack(mem);
    return track(realloc(mem, size));
}

static void *counting_calloc(const memcached_st *ptr, size_t nelem, const size_t elsize,
                             void *context)
{
    (void)ptr;
    (void)context;
    return track(calloc(nelem, elsize));
}

static void test_memory_allocators(const struct test_server *s)
{
    memcached_st *memc = test_client_for(s, false);
    memcached_malloc_fn m = NULL;
    memcached_free_fn f = NULL;
    memcached_realloc_fn r = NULL;
    memcached_calloc_fn c = NULL;
    memcached_get_memory_allocators(memc, &m, &f, &r, &c);
    ok(m && f && r && c, "get_memory_allocators: the defaults are functions");
    void *probe = m(memc, 16, NULL);
    ok(probe != NULL, "the default malloc allocates");
    f(memc, probe, NULL);
    is_rc(memcached_set_memory_allocators(memc, counting_malloc, NULL, counting_realloc,
                                          counting_calloc, NULL),
          MEMCACHED_INVALID_ARGUMENTS, "set_memory_allocators with one of them NULL");
    is_rc(memcached_set_memory_allocators(memc, counting_malloc, counting_free, counting_realloc,
                                          counting_calloc, (void *)alloc_context),
          MEMCACHED_SUCCESS, "set_memory_allocators");
    memcached_get_memory_allocators(memc, &m, &f, &r, &c);
    ok(m == counting_malloc && f == counting_free && r == counting_realloc && c == counting_calloc,
       "get_memory_allocators returns them");
    ok(memcached_get_memory_allocators_context(memc) == alloc_context,
       "get_memory_allocators_context returns the context");

    is_rc(memcached_set(memc, "alloc-key", 9, "allocated", 9, 0, 0), MEMCACHED_SUCCESS,
          "set under custom allocators");
    size_t len = 0;
    uint32_t flags = 0;
    memcached_return_t rc;
    char *value = memcached_get(memc, "alloc-key", 9, &len, &flags, &rc);
    ok(value && len == 9 && memcmp(value, "allocated", 9) == 0, "get under custom allocators");
    ok(untrack(value), "the value memcached_get returns comes from the custom allocators");
    free(value);

    const char *keys[] = {"alloc-key"};
    size_t lens[] = {9};
    memcached_mget(memc, keys, lens, 1);
    char key[MEMCACHED_MAX_KEY];
    size_t key_len = 0;
    value = memcached_fetch(memc, key, &key_len, &len, &flags, &rc);
    ok(value && len == 9, "fetch under custom allocators");
    ok(untrack(value), "the value memcached_fetch returns comes from the custom allocators");
    free(value);
    while ((value = memcached_fetch(memc, key, &key_len, &len, &flags, &rc)) != NULL)
        free(value);

    memcached_stat_st *st = memcached_stat(memc, NULL, &rc);
    char *pid = st ? memcached_stat_get_value(memc, st, "pid", &rc) : NULL;
    if (OURS) /* libmemcached's comes from the C library's malloc */
        ok(pid && untrack(pid),
           "memcached_stat_get_value's string comes from the custom allocators");
    untrack(pid);
    free(pid);
    char **names = st ? memcached_stat_get_keys(memc, st, &rc) : NULL;
    ok(names && untrack(names), "memcached_stat_get_keys' list comes from the custom allocators");
    free(names);
    memcached_stat_free(memc, st);

    memcached_st *copy = memcached_clone(NULL, memc);
    memcached_get_memory_allocators(copy, &m, &f, &r, &c);
    ok(m == counting_malloc && memcached_get_memory_allocators_context(copy) == alloc_context,
       "memcached_clone keeps the allocators");
    memcached_free(copy);

    is_rc(memcached_set_memory_allocators(memc, NULL, NULL, NULL, NULL, NULL), MEMCACHED_SUCCESS,
          "set_memory_allocators with all NULL restores the defaults");
    memcached_get_memory_allocators(memc, &m, &f, &r, &c);
    ok(m != counting_malloc && m != NULL && memcached_get_memory_allocators_context(memc) == NULL,
       "... which get_memory_allocators returns");
    value = memcached_get(memc, "alloc-key", 9, &len, &flags, &rc);
    ok(value && !untrack(value), "values come from the C library again");
    free(value);
    memcached_free(memc);
    if (OURS) /* libmemcached's memcached_free gives it blocks allocated before */
        ok(foreign_frees == 0, "the custom free was never given memory it did not allocate (%d)",
           foreign_frees);
}

static void test_unreachable(void)
{
    memcached_st *m = memcached_create(NULL);
    is_rc(memcached_set(m, "k", 1, "v", 1, 0, 0), MEMCACHED_NO_SERVERS, "no servers");
    memcached_server_add(m, "127.0.0.1", (in_port_t)test_unused_port());
    is_rc(memcached_set(m, "k", 1, "v", 1, 0, 0), MEMCACHED_CONNECTION_FAILURE,
          "refused connection");
    is_rc(memcached_set(m, "k", 1, "v", 1, 0, 0), MEMCACHED_SERVER_TEMPORARILY_DISABLED,
          "then disabled until the retry timeout");
    ok(strlen(memcached_last_error_message(m)) > 0, "last_error_message says something");
    const memcached_instance_st *gone = memcached_server_get_last_disconnect(m);
    ok(gone != NULL, "server_get_last_disconnect gives a server");
    if (OURS) { /* libmemcached gives a copy that reads SUCCESS */
        ok(gone == memcached_server_instance_by_position(m, 0),
           "server_get_last_disconnect names the failed server itself");
        is_rc(memcached_server_error_return(gone), MEMCACHED_CONNECTION_FAILURE,
              "server_error_return gives its failure");
    }
    ok(memcached_server_error(gone) != NULL, "server_error describes it");
    memcached_reset_last_disconnected_server(m);
    ok(memcached_server_get_last_disconnect(m) == NULL, "reset_last_disconnected_server");
    memcached_free(m);
}

static void test_autoeject(const struct test_server *s)
{
    if (OURS) /* libmemcached dereferences NULL */
        memcached_autoeject(NULL);
    memcached_st *m = test_client_for(s, false);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_AUTO_EJECT_HOSTS, 1);
    memcached_autoeject(m);
    is_rc(memcached_set(m, "autoeject", 9, "v", 1, 0, 0), MEMCACHED_SUCCESS,
          "memcached_autoeject keeps a live server in the placement");
    memcached_free(m);
}

static void test_strings(void)
{
    bool all = true;
    for (int rc = 0; rc < MEMCACHED_MAXIMUM_RETURN; rc++) {
        const char *s = memcached_strerror(NULL, (memcached_return_t)rc);
        all = all && s != NULL && s[0] != '\0';
    }
    ok(all, "strerror names every return code");
    ok(strcmp(memcached_lib_version(), LIBMEMCACHED_VERSION_STRING) == 0, "lib_version");
}

int main(void)
{
    struct test_server tcp;
    if (!test_server_start(&tcp, false)) {
        printf("1..0 # SKIP cannot start %s\n",
               getenv("MC_SERVER") ? getenv("MC_SERVER") : "memcached");
        return 0;
    }
    test_behaviors();
    test_server_lists(&tcp);
    test_socket_timeouts(&tcp);
    test_callbacks(&tcp);
    test_memory_allocators(&tcp);
    test_autoeject(&tcp);
    test_more_calls(&tcp);
    test_unreachable();
    test_strings();
    test_server_stop(&tcp, false);
    return done_testing();
}
