/* t/libmc/sasl.c: libmemcached's SASL calls against a server started with
 * -S ($MC_SERVER; t/libmc/sasl.t makes the user database "alice"/"secret"
 * and points SASL_CONF_PATH at it): memcached_set_sasl_auth_data turns the
 * binary protocol on and authenticates every new connection, wrong
 * credentials and missing ones fail with libmemcached's codes, callbacks of
 * the caller's own are used, destroy and clone behave as in libmemcached,
 * and a server without SASL refuses with libmemcached's code. Also built against Debian's
 * libmemcached (sasl_ref): the expectations are libmemcached's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmemcached/memcached.h>
#include <sasl/sasl.h>

#include "server.h"
#include "tap.h"

static memcached_st *client_for(const struct test_server *s)
{
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "127.0.0.1", (in_port_t)s->port);
    return memc;
}

static memcached_return_t set_get(memcached_st *memc, const char *key, const char *value,
                                  bool *same)
{
    memcached_return_t rc = memcached_set(memc, key, strlen(key), value, strlen(value), 0, 0);
    *same = false;
    if (rc != MEMCACHED_SUCCESS)
        return rc;
    size_t len = 0;
    uint32_t flags = 0;
    char *got = memcached_get(memc, key, strlen(key), &len, &flags, &rc);
    *same = got != NULL && len == strlen(value) && memcmp(got, value, len) == 0;
    free(got);
    return rc;
}

/* Callbacks of the caller's own (memcached_set_sasl_callbacks). */
static int own_name(void *context, int id, const char **result, unsigned *len)
{
    (void)context;
    if (id != SASL_CB_USER && id != SASL_CB_AUTHNAME)
        return SASL_BADPARAM;
    *result = "alice";
    if (len)
        *len = 5;
    return SASL_OK;
}

static int own_secret(sasl_conn_t *conn, void *context, int id, sasl_secret_t **psecret)
{
    (void)conn;
    if (id != SASL_CB_PASS)
        return SASL_BADPARAM;
    *psecret = context;
    return SASL_OK;
}

int main(void)
{
    struct test_server srv, plain;
    const char *const sasl_args[] = {"-S", "-B", "binary", NULL};
    if (!test_server_start_args(&srv, false, sasl_args)) {
        printf("1..0 # SKIP cannot start the server with -S\n");
        return 0;
    }
    bool same;

    memcached_st *memc = client_for(&srv);
    ok(memcached_get_sasl_callbacks(memc) == NULL, "no SASL callbacks at first");
    is_rc(memcached_set_sasl_auth_data(memc, "alice", "secret"), MEMCACHED_SUCCESS,
          "memcached_set_sasl_auth_data");
    ok(memcached_get_sasl_callbacks(memc) != NULL, "it installs callbacks");
    ok(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL) == 1,
       "and turns the binary protocol on");
    is_rc(set_get(memc, "sasl-key", "hello", &same), MEMCACHED_SUCCESS,
          "an authenticated client stores and reads");
    ok(same, "... the value it stored");

    memcached_st *copy = memcached_clone(NULL, memc);
    ok(copy != NULL && memcached_get_sasl_callbacks(copy) != NULL,
       "memcached_clone keeps the credentials");
    is_rc(set_get(copy, "sasl-clone", "v", &same), MEMCACHED_SUCCESS, "the clone authenticates");
    memcached_free(copy);

    is_rc(memcached_destroy_sasl_auth_data(memc), MEMCACHED_SUCCESS,
          "memcached_destroy_sasl_auth_data");
    ok(memcached_get_sasl_callbacks(memc) == NULL, "no callbacks after destroying them");
    is_rc(memcached_destroy_sasl_auth_data(memc), MEMCACHED_SUCCESS, "destroying twice is fine");
    memcached_free(memc);

    memc = client_for(&srv);
    memcached_set_sasl_auth_data(memc, "alice", "wrong");
    memcached_return_t rc = memcached_set(memc, "k", 1, "v", 1, 0, 0);
    ok(rc == MEMCACHED_AUTH_FAILURE, "a wrong password: MEMCACHED_AUTH_FAILURE");
    if (rc != MEMCACHED_AUTH_FAILURE)
        printf("#   got %d (%s)\n", rc, memcached_strerror(NULL, rc));
    memcached_free(memc);

    memc = client_for(&srv);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    rc = memcached_set(memc, "k", 1, "v", 1, 0, 0);
    ok(rc == MEMCACHED_AUTH_FAILURE, "no credentials: the server's refusal, AUTH_FAILURE");
    if (rc != MEMCACHED_AUTH_FAILURE)
        printf("#   got %d (%s)\n", rc, memcached_strerror(NULL, rc));
    memcached_free(memc);

    /* callbacks of the caller's own */
    sasl_secret_t *secret = malloc(sizeof(*secret) + 6);
    secret->len = 6;
    memcpy(secret->data, "secret", 7);
    sasl_callback_t own[] = {
        {SASL_CB_USER, (int (*)(void))(void (*)(void))own_name, NULL},
        {SASL_CB_AUTHNAME, (int (*)(void))(void (*)(void))own_name, NULL},
        {SASL_CB_PASS, (int (*)(void))(void (*)(void))own_secret, secret},
        {SASL_CB_LIST_END, NULL, NULL},
    };
    memc = client_for(&srv);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    memcached_set_sasl_callbacks(memc, own);
    ok(memcached_get_sasl_callbacks(memc) == own, "memcached_get_sasl_callbacks returns them");
    is_rc(set_get(memc, "sasl-own", "mine", &same), MEMCACHED_SUCCESS,
          "the caller's callbacks authenticate");
    ok(same, "... and the value reads back");
    memcached_free(memc);
    free(secret);

    is_rc(memcached_set_sasl_auth_data(NULL, "alice", "secret"), MEMCACHED_INVALID_ARGUMENTS,
          "no memcached_st: INVALID_ARGUMENTS");
    memc = memcached_create(NULL);
    is_rc(memcached_set_sasl_auth_data(memc, NULL, "secret"), MEMCACHED_INVALID_ARGUMENTS,
          "no user name: INVALID_ARGUMENTS");
    is_rc(memcached_set_sasl_auth_data(memc, "alice", NULL), MEMCACHED_INVALID_ARGUMENTS,
          "no password: INVALID_ARGUMENTS");
    memcached_free(memc);
    test_server_stop(&srv, false);

    /* a server without SASL cannot authenticate: libmemcached's code */
    if (test_server_start(&plain, false)) {
        memc = client_for(&plain);
        memcached_set_sasl_auth_data(memc, "alice", "secret");
        is_rc(memcached_set(memc, "k", 1, "v", 1, 0, 0), MEMCACHED_UNKNOWN_READ_FAILURE,
              "credentials for a server without SASL: UNKNOWN_READ_FAILURE");
        memcached_free(memc);
        memc = client_for(&plain);
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
        is_rc(set_get(memc, "no-sasl", "plain", &same), MEMCACHED_SUCCESS,
              "without them, the same server serves");
        memcached_free(memc);
        test_server_stop(&plain, false);
    } else {
        ok(0, "start a server without -S");
    }
    return done_testing();
}
