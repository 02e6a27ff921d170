/* t/libmc/tls.c: servers given as tls://host:port against $MC_SERVER started
 * with -Z (t/libmc/tls.t makes the certificates in $TLS_TEST_DIR). Each case
 * runs in a child process with its own LIBMEMCACHED_TLS_* settings, as the
 * library reads them once per process:
 *   trusted           the server is verified against the test CA: text and
 *                     binary protocols, a 1 MB value, a 100-key mget,
 *                     --SERVER=tls://..., memcached_server_type, a plain
 *                     server named with tls:// fails instead of hanging,
 *                     SASL over TLS (when tls.t set SASL_CONF_PATH)
 *   untrusted         the CA does not match: every call fails, none hangs
 *   client-cert       a server requiring client certificates
 *                     (ssl_verify_mode=2) accepts ours */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "tap.h"

static char server_args_buf[4][512];

static bool start_tls_server(struct test_server *s, bool require_client_cert, bool sasl)
{
    const char *dir = getenv("TLS_TEST_DIR");
    if (dir == NULL)
        return false;
    snprintf(server_args_buf[0], sizeof(server_args_buf[0]),
             "ssl_chain_cert=%s/server_crt.pem,ssl_key=%s/server_key.pem", dir, dir);
    snprintf(server_args_buf[1], sizeof(server_args_buf[1]),
             "ssl_verify_mode=2,ssl_ca_cert=%s/ca.pem", dir);
    const char *args[] = {"-Z", "-o", server_args_buf[0], NULL, NULL, NULL, NULL};
    int n = 3;
    if (require_client_cert) {
        args[n++] = "-o";
        args[n++] = server_args_buf[1];
    }
    if (sasl)
        args[n++] = "-S";
    return test_server_start_args(s, false, args);
}

static memcached_st *tls_client(unsigned port, bool binary)
{
    char spec[64];
    snprintf(spec, sizeof(spec), "tls://127.0.0.1:%u", port);
    memcached_server_st *list = memcached_servers_parse(spec);
    memcached_st *memc = memcached_create(NULL);
    memcached_server_push(memc, list);
    memcached_server_list_free(list);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, 2000);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 2000);
    return memc;
}

static void storage_round(memcached_st *memc, const char *what)
{
    char key[64];
    memcached_return_t rc;
    size_t len;
    uint32_t flags;
    snprintf(key, sizeof(key), "tls-%s", what);
    for (char *k = key; *k; k++)
        if (*k == ' ' || *k == ',')
            *k = '-'; /* a text-protocol key has no blanks */
    is_rc(memcached_set(memc, key, strlen(key), "over tls", 8, 0, 7), MEMCACHED_SUCCESS, what);
    char *v = memcached_get(memc, key, strlen(key), &len, &flags, &rc);
    ok(v != NULL && len == 8 && memcmp(v, "over tls", 8) == 0 && flags == 7,
       "%s: the value reads back", what);
    free(v);
}

static void trusted(void)
{
    struct test_server srv, plain;
    if (!start_tls_server(&srv, false, false)) {
        ok(0, "start the server with -Z");
        return;
    }
    for (int binary = 0; binary <= 1; binary++) {
        memcached_st *memc = tls_client(srv.port, binary);
        storage_round(memc, binary ? "binary protocol over TLS" : "text protocol over TLS");

        size_t big_len = 1000 * 1000;
        char *big = malloc(big_len);
        for (size_t i = 0; i < big_len; i++)
            big[i] = (char)('a' + i % 26);
        is_rc(memcached_set(memc, "tls-big", 7, big, big_len, 0, 0), MEMCACHED_SUCCESS,
              "a 1 MB value is stored over TLS");
        size_t len = 0;
        uint32_t flags;
        memcached_return_t rc;
        char *v = memcached_get(memc, "tls-big", 7, &len, &flags, &rc);
        ok(v != NULL && len == big_len && memcmp(v, big, big_len) == 0, "... and read back whole");
        free(v);
        free(big);

        char keys[100][16];
        const char *kp[100];
        size_t kl[100];
        for (int i = 0; i < 100; i++) {
            snprintf(keys[i], sizeof(keys[i]), "m%d-%d", binary, i);
            kp[i] = keys[i];
            kl[i] = strlen(keys[i]);
            memcached_set(memc, kp[i], kl[i], keys[i], kl[i], 0, 0);
        }
        is_rc(memcached_mget(memc, kp, kl, 100), MEMCACHED_SUCCESS, "a 100-key mget over TLS");
        int found = 0;
        memcached_result_st *r;
        while ((r = memcached_fetch_result(memc, NULL, &rc)) != NULL) {
            found++;
            memcached_result_free(r);
        }
        ok(found == 100, "... returns all 100 (got %d)", found);
        memcached_free(memc);
    }

    char config[96];
    snprintf(config, sizeof(config), "--SERVER=tls://127.0.0.1:%u --CONNECT-TIMEOUT=2000",
             srv.port);
    memcached_st *memc = memcached(config, strlen(config));
    ok(memc != NULL, "--SERVER=tls://... is accepted");
    if (memc != NULL) {
        storage_round(memc, "--SERVER=tls://");
        memcached_return_t rc;
        const memcached_instance_st *inst = memcached_server_by_key(memc, "k", 1, &rc);
        ok(inst != NULL && strcmp(memcached_server_type(inst), "TLS") == 0,
           "memcached_server_type says TLS");
        memcached_free(memc);
    }
    test_server_stop(&srv, false);

    /* SASL over TLS (t/libmc/tls.t made the user database, when it could) */
    if (getenv("SASL_CONF_PATH") != NULL && start_tls_server(&srv, false, true)) {
        memc = tls_client(srv.port, true);
        is_rc(memcached_set_sasl_auth_data(memc, "alice", "secret"), MEMCACHED_SUCCESS,
              "SASL credentials for a TLS server");
        storage_round(memc, "SASL over TLS");
        memcached_free(memc);
        memc = tls_client(srv.port, true);
        memcached_set_sasl_auth_data(memc, "alice", "wrong");
        is_rc(memcached_set(memc, "k", 1, "v", 1, 0, 0), MEMCACHED_AUTH_FAILURE,
              "a wrong password over TLS: AUTH_FAILURE");
        memcached_free(memc);
        test_server_stop(&srv, false);
    }

    if (test_server_start(&plain, false)) {
        memc = tls_client(plain.port, false);
        memcached_return_t rc = memcached_set(memc, "k", 1, "v", 1, 0, 0);
        ok(rc != MEMCACHED_SUCCESS, "tls:// to a server without TLS fails (%s)",
           memcached_strerror(memc, rc));
        memcached_free(memc);
        test_server_stop(&plain, false);
    }
}

static void untrusted(void)
{
    struct test_server srv;
    if (!start_tls_server(&srv, false, false)) {
        ok(0, "start the server with -Z");
        return;
    }
    memcached_st *memc = tls_client(srv.port, false);
    memcached_return_t rc = memcached_set(memc, "k", 1, "v", 1, 0, 0);
    ok(rc != MEMCACHED_SUCCESS, "a server certificate from an unknown CA is refused (%s)",
       memcached_strerror(memc, rc));
    memcached_free(memc);
    test_server_stop(&srv, false);
}

static void client_cert(void)
{
    struct test_server srv;
    if (!start_tls_server(&srv, true, false)) {
        ok(0, "start the server with -Z -o ssl_verify_mode=2");
        return;
    }
    for (int binary = 0; binary <= 1; binary++) {
        memcached_st *memc = tls_client(srv.port, binary);
        storage_round(memc, binary ? "client certificate, binary" : "client certificate, text");
        memcached_free(memc);
    }
    test_server_stop(&srv, false);
}

/* Runs one case in a child with the CA (and client certificate) given; the
 * child's TAP numbering continues ours and it reports its counts back. */
static void run_case(void (*fn)(void), const char *ca, bool with_client_cert)
{
    const char *dir = getenv("TLS_TEST_DIR");
    int fds[2];
    fflush(stdout);
    if (dir == NULL || pipe(fds) != 0) {
        ok(0, "set up a test case");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        char path[600];
        close(fds[0]);
        snprintf(path, sizeof(path), "%s/%s", dir, ca);
        setenv("LIBMEMCACHED_TLS_CA_FILE", path, 1);
        if (with_client_cert) {
            snprintf(path, sizeof(path), "%s/client_crt.pem", dir);
            setenv("LIBMEMCACHED_TLS_CERT_FILE", path, 1);
            snprintf(path, sizeof(path), "%s/client_key.pem", dir);
            setenv("LIBMEMCACHED_TLS_KEY_FILE", path, 1);
        }
        fn();
        fflush(stdout);
        int counts[2] = {tap_count, tap_failed};
        ssize_t n = write(fds[1], counts, sizeof(counts));
        _exit(n == sizeof(counts) ? 0 : 1);
    }
    close(fds[1]);
    int counts[2] = {0, 0};
    ssize_t n = pid > 0 ? read(fds[0], counts, sizeof(counts)) : -1;
    close(fds[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    if (n != sizeof(counts)) {
        ok(0, "a test case ran to its end");
        return;
    }
    tap_count = counts[0];
    tap_failed = counts[1];
}

int main(void)
{
    run_case(trusted, "ca.pem", false);
    run_case(untrusted, "other_ca.pem", false);
    run_case(client_cert, "ca.pem", true);
    return done_testing();
}
