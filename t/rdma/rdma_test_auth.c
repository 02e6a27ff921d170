/* t/rdma/rdma_test_auth.c: authentication holds over RDMA as over TCP,
 * inside the Soft-RoCE guest:
 *   rdma_test_auth SERVER_BINARY [SASLPASSWD2]
 * For RC (rdma+rc://) and UD (rdma+ud://) clients of libmemcached-rdma:
 * - -Y (text protocol, a file of user:password lines): a connection that
 *   has not authenticated stores nothing and reads nothing, not even a
 *   value an authenticated client stored; a wrong password is refused;
 *   the right one ("set" of "user password") lets that connection store
 *   and read; a new connection starts unauthenticated again; the binary
 *   protocol is refused. The server's auth_cmds and auth_errors count it.
 *   With the hybrid transport the server moves no client while -Y is on
 *   (a moved client's new connection would not have logged in).
 * - -S (binary protocol, SASL PLAIN from a sasldb made with saslpasswd2):
 *   no credentials, and wrong ones, store and read nothing; the right ones
 *   do; a UD client idle long enough to set its peer up anew logs the new
 *   peer in before its next request; so does a client the hybrid
 *   transport moves between RC and UD, after each move, and it keeps
 *   storing and reading while it moves.
 * Other connections are served throughout (the TCP stats client). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "t/libmc/test_util.h"
#include "t/rdma/mc_server.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

#define USER "alice"
#define PASSWORD "secret"

static const char *const schemes[] = {"rdma+rc", "rdma+ud"};

/* A client of s over scheme, text protocol unless binary. */
static memcached_st *client_of(const struct server *s, const char *scheme, bool binary)
{
    char cfg[160];
    snprintf(cfg, sizeof(cfg), "--SERVER=%s://%s:%u%s", scheme, rxe, s->rdma_port,
             binary ? " --BINARY-PROTOCOL" : "");
    return memcached(cfg, strlen(cfg));
}

static memcached_return_t set_value(memcached_st *m, const char *key, const char *value)
{
    return memcached_set(m, key, strlen(key), value, strlen(value), 0, 0);
}

/* -Y's way in: a "set" whose value is "user password". */
static memcached_return_t text_login(memcached_st *m, const char *password)
{
    char token[64];
    snprintf(token, sizeof(token), USER " %s", password);
    return set_value(m, "auth", token);
}

/* Whether a get of key over m returned want (NULL: that nothing came
 * back); the result code in *rc. */
static bool got_value(memcached_st *m, const char *key, const char *want, memcached_return_t *rc)
{
    size_t len = 0;
    uint32_t flags = 0;
    char *got = memcached_get(m, key, strlen(key), &len, &flags, rc);
    bool same =
        want ? got != NULL && len == strlen(want) && memcmp(got, want, len) == 0 : got == NULL;
    free(got);
    return same;
}

/* A client that must not get in: its set of key fails and its get of key
 * fails without a value; what they returned in *set_rc and *get_rc. */
static bool locked_out(memcached_st *m, const char *key, memcached_return_t *set_rc,
                       memcached_return_t *get_rc)
{
    *set_rc = set_value(m, key, "overwritten");
    bool nothing = got_value(m, key, NULL, get_rc);
    return nothing && *get_rc != MEMCACHED_SUCCESS && *set_rc != MEMCACHED_SUCCESS;
}

/* Stats of the -Y server over TCP, read after one login there (which
 * they count): name's value, and second's into *second when not NULL. */
static long text_auth_stat2(const struct server *s, const char *name, const char *second,
                            long *second_value)
{
    memcached_st *m = tcp_stats_client(s->tcp_port);
    bool in = text_login(m, PASSWORD) == MEMCACHED_SUCCESS;
    long v = in ? client_stat(m, name) : -1;
    if (second != NULL)
        *second_value = in ? client_stat(m, second) : -1;
    memcached_free(m);
    return v;
}

static long text_auth_stat(const struct server *s, const char *name)
{
    return text_auth_stat2(s, name, NULL, NULL);
}

/* The -Y server's probe: log in over rdma+rc://, then ask the version. */
static bool probe_with_login(const struct server *s)
{
    memcached_st *m = client_of(s, "rdma+rc", false);
    bool ok =
        text_login(m, PASSWORD) == MEMCACHED_SUCCESS && memcached_version(m) == MEMCACHED_SUCCESS;
    memcached_free(m);
    return ok;
}

static void text_auth(const char *path, unsigned base)
{
    struct server s;
    server_probe = probe_with_login;
    server_start_args(&s, base, base + 1, "2", NULL, (const char *[]){"-Y", path, NULL});
    server_probe = NULL;
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        const char *scheme = schemes[i];
        char key[32], value[32];
        snprintf(key, sizeof(key), "kept-%zu", i);
        snprintf(value, sizeof(value), "value over %s", scheme);
        long errors0, cmds0 = text_auth_stat2(&s, "auth_cmds", "auth_errors", &errors0);

        memcached_st *in = client_of(&s, scheme, false);
        memcached_return_t login = text_login(in, PASSWORD), stored = set_value(in, key, value);
        memcached_return_t read_rc;
        bool read_back = got_value(in, key, value, &read_rc);
        tap_ok(login == MEMCACHED_SUCCESS && stored == MEMCACHED_SUCCESS && read_back,
               "-Y over %s: the right password lets the connection in (%s), it stores (%s) and "
               "reads its value back (%s)",
               scheme, memcached_strerror(in, login), memcached_strerror(in, stored),
               memcached_strerror(in, read_rc));

        memcached_st *out = client_of(&s, scheme, false);
        memcached_return_t get_rc, set_rc;
        bool out_locked = locked_out(out, key, &set_rc, &get_rc);
        tap_ok(out_locked,
               "-Y over %s: a new connection without a password reads nothing (%s) and stores "
               "nothing (%s)",
               scheme, memcached_strerror(out, get_rc), memcached_strerror(out, set_rc));
        memcached_return_t wrong = text_login(out, "wrong");
        memcached_return_t after_rc;
        bool still_nothing = got_value(out, key, NULL, &after_rc);
        tap_ok(wrong != MEMCACHED_SUCCESS && still_nothing && after_rc != MEMCACHED_SUCCESS,
               "-Y over %s: a wrong password is refused (%s) and the connection still reads "
               "nothing (%s)",
               scheme, memcached_strerror(out, wrong), memcached_strerror(out, after_rc));
        memcached_free(out);

        bool unchanged = got_value(in, key, value, &read_rc);
        tap_ok(unchanged,
               "-Y over %s: the value stored by the authenticated connection is unchanged (%s)",
               scheme, memcached_strerror(in, read_rc));
        memcached_free(in);

        memcached_st *binary = client_of(&s, scheme, true);
        memcached_return_t bin_rc;
        bool bin_nothing = got_value(binary, key, NULL, &bin_rc);
        tap_ok(bin_nothing && bin_rc != MEMCACHED_SUCCESS,
               "-Y over %s: the binary protocol reads nothing (%s)", scheme,
               memcached_strerror(binary, bin_rc));
        memcached_free(binary);

        /* the right login and the wrong one; the unauthenticated get, set
         * and the "set" that carried the wrong password are commands that
         * count as memcached counts them: logins only */
        /* over RDMA: the right password, the refused set (a login with a
         * malformed token) and the wrong password; and the second TCP
         * stats login, which counts before its read */
        long errors, cmds = text_auth_stat2(&s, "auth_cmds", "auth_errors", &errors);
        cmds -= cmds0 + 1;
        errors -= errors0;
        tap_ok(cmds == 3 && errors == 2,
               "-Y over %s: the server counted the 3 logins over RDMA (auth_cmds +%ld) and their "
               "2 failures (auth_errors +%ld)",
               scheme, cmds, errors);
    }
    server_stop(&s, SIGTERM);
}

/* The hybrid servers' options: moves forced every 200 ms. */
#define MOVES_FORCED                                                                               \
    "rdma_transport=hybrid,rdma_rc_max=1,rdma_promote_rate=1,rdma_demote_rate=1000000,"            \
    "rdma_move_interval_ms=200"

/* Sets and gets of one key over m, each value read back, for 3 s (2,000
 * sets at most): how many; *failed of them failed, the last with *last. */
static int calls_for_3s(memcached_st *m, int *failed, memcached_return_t *last)
{
    int calls = 0;
    *failed = 0;
    *last = MEMCACHED_SUCCESS;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (; elapsed_ms(&t0) < 3000 && calls < 2000; calls++) {
        char value[32];
        snprintf(value, sizeof(value), "moving %d", calls);
        memcached_return_t rc = set_value(m, "moving", value);
        if (rc == MEMCACHED_SUCCESS && !got_value(m, "moving", value, &rc))
            rc = rc == MEMCACHED_SUCCESS ? MEMCACHED_FAILURE : rc;
        if (rc != MEMCACHED_SUCCESS) {
            if (*failed == 0)
                tap_diag("call %d failed: %s", calls, memcached_last_error_message(m));
            (*failed)++;
            *last = rc;
        }
    }
    return calls;
}

/* -Y with the hybrid transport and moves forced every 200 ms: a moved
 * client reconnects, and its new connection would not have logged in (the
 * client library repeats SASL's login after a move, but knows nothing of
 * -Y's), so the server moves no client while -Y is on: an rdma:// client
 * that logged in keeps storing and reading, and nothing moved. */
static void text_auth_hybrid(const char *path, unsigned base)
{
    struct server s;
    server_probe = probe_with_login;
    server_start_args(&s, base, base + 1, "2", NULL,
                      (const char *[]){"-Y", path, "-o", MOVES_FORCED, NULL});
    server_probe = NULL;
    memcached_st *m = client_of(&s, "rdma", false);
    memcached_return_t login = text_login(m, PASSWORD), last;
    int failed, calls = calls_for_3s(m, &failed, &last);
    memcached_free(m);
    long moves = text_auth_stat(&s, "rdma_promotions") + text_auth_stat(&s, "rdma_demotions");
    tap_ok(login == MEMCACHED_SUCCESS && calls > 0 && failed == 0 && moves == 0,
           "-Y with hybrid moves every 200 ms: an rdma:// client that logged in (%s) made %d "
           "sets and gets, %d failed (last %s); moves %ld",
           memcached_strerror(NULL, login), calls, failed, memcached_strerror(NULL, last), moves);
    server_stop(&s, SIGTERM);
}

/* A sasldb with USER/PASSWORD in dir and SASL_CONF_PATH pointing at it;
 * false when saslpasswd2 failed. */
static bool make_sasldb(const char *dir, const char *saslpasswd)
{
    char path[256], cmd[640];
    snprintf(path, sizeof(path), "%s/memcached.conf", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL || fprintf(f, "mech_list: plain\nsasldb_path: %s/sasldb\n", dir) < 0 ||
        fclose(f) != 0)
        return false;
    snprintf(cmd, sizeof(cmd), "echo " PASSWORD " | %s -f %s/sasldb -a memcached -c -p " USER,
             saslpasswd, dir);
    if (system(cmd) != 0)
        return false;
    setenv("SASL_CONF_PATH", dir, 1); /* the server's, inherited */
    return true;
}

/* A binary client over TCP with the right credentials, for a -S
 * server's stats. */
static long sasl_stat(const struct server *s, const char *name)
{
    char cfg[64];
    snprintf(cfg, sizeof(cfg), "--SERVER=127.0.0.1:%u --BINARY-PROTOCOL", s->tcp_port);
    memcached_st *m = memcached(cfg, strlen(cfg));
    memcached_set_sasl_auth_data(m, USER, PASSWORD);
    long v = client_stat(m, name);
    memcached_destroy_sasl_auth_data(m);
    memcached_free(m);
    return v;
}

/* -S over rdma+ud://: a client idle past its idle time (500 ms here,
 * LIBMEMCACHED_RDMA_UD_IDLE_MS) sets its peer up anew before the next
 * request, which the server sees as a new connection: the library logs it
 * in first, so the client goes on reading and storing. */
static void sasl_auth_idle(const struct server *s)
{
    setenv("LIBMEMCACHED_RDMA_UD_IDLE_MS", "500", 1); /* read at the client's first UD open */
    memcached_st *m = client_of(s, "rdma+ud", true);
    memcached_set_sasl_auth_data(m, USER, PASSWORD);
    memcached_return_t before = set_value(m, "idle", "stored before the pause");
    unsetenv("LIBMEMCACHED_RDMA_UD_IDLE_MS");
    long conns0 = sasl_stat(s, "total_connections");
    usleep(800 * 1000);
    memcached_return_t read_rc, after;
    bool read_back = got_value(m, "idle", "stored before the pause", &read_rc);
    after = set_value(m, "idle", "stored after the pause");
    /* the renewed peer, and the second stats client's own connection */
    long new_conns = sasl_stat(s, "total_connections") - conns0;
    tap_ok(before == MEMCACHED_SUCCESS && read_back && after == MEMCACHED_SUCCESS && new_conns == 2,
           "-S over rdma+ud: a client idle past its idle time sets its peer up anew (%ld new "
           "connections, want 2 with the stats client's) and logs it in: it reads (%s) and stores "
           "(%s) as before the pause (%s)",
           new_conns, memcached_strerror(m, read_rc), memcached_strerror(m, after),
           memcached_strerror(m, before));
    memcached_destroy_sasl_auth_data(m);
    memcached_free(m);
}

static void sasl_auth(const char *dir, const char *saslpasswd, unsigned base)
{
    if (!make_sasldb(dir, saslpasswd))
        tap_bail("%s could not make the SASL user database in %s", saslpasswd, dir);
    struct server s;
    server_start_args(&s, base, base + 1, "2", NULL, (const char *[]){"-S", NULL});
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        const char *scheme = schemes[i];
        char key[32], value[32];
        snprintf(key, sizeof(key), "sasl-%zu", i);
        snprintf(value, sizeof(value), "sasl value over %s", scheme);

        memcached_st *in = client_of(&s, scheme, true);
        memcached_set_sasl_auth_data(in, USER, PASSWORD);
        memcached_return_t read_rc, stored = set_value(in, key, value);
        bool read_back = got_value(in, key, value, &read_rc);
        tap_ok(stored == MEMCACHED_SUCCESS && read_back,
               "-S over %s: with the right credentials the client stores (%s) and reads back "
               "(%s)",
               scheme, memcached_strerror(in, stored), memcached_strerror(in, read_rc));

        memcached_st *none = client_of(&s, scheme, true);
        memcached_return_t none_get, none_set;
        bool none_locked = locked_out(none, key, &none_set, &none_get);
        tap_ok(none_locked,
               "-S over %s: without credentials the client reads nothing (%s) and stores "
               "nothing (%s)",
               scheme, memcached_strerror(none, none_get), memcached_strerror(none, none_set));
        memcached_free(none);

        memcached_st *wrong = client_of(&s, scheme, true);
        memcached_set_sasl_auth_data(wrong, USER, "wrong");
        memcached_return_t wrong_get, wrong_set;
        bool wrong_locked = locked_out(wrong, key, &wrong_set, &wrong_get);
        tap_ok(wrong_locked,
               "-S over %s: with a wrong password the client reads nothing (%s) and stores "
               "nothing (%s)",
               scheme, memcached_strerror(wrong, wrong_get), memcached_strerror(wrong, wrong_set));
        memcached_destroy_sasl_auth_data(wrong);
        memcached_free(wrong);

        bool unchanged = got_value(in, key, value, &read_rc);
        tap_ok(unchanged,
               "-S over %s: the value stored with the right credentials is unchanged (%s)", scheme,
               memcached_strerror(in, read_rc));
        memcached_destroy_sasl_auth_data(in);
        memcached_free(in);
    }
    sasl_auth_idle(&s);
    server_stop(&s, SIGTERM);
}

/* -S with hybrid moves forced every 200 ms: the client library logs in
 * again on the new connection after each move (over UD too), so an
 * rdma:// client with credentials keeps storing and reading while it
 * moves. The server's next MOVE can come during that login (a new
 * connection's first interval): the client's END must go without input
 * to wake it, or its next call waits out the poll timeout (10 of 12
 * runs before that was fixed). */
static void sasl_auth_hybrid(unsigned base)
{
    struct server s;
    server_start_args(&s, base, base + 1, "2", NULL,
                      (const char *[]){"-S", "-o", MOVES_FORCED, NULL});
    memcached_st *m = client_of(&s, "rdma", true);
    memcached_set_sasl_auth_data(m, USER, PASSWORD);
    memcached_return_t last;
    int failed, calls = calls_for_3s(m, &failed, &last);
    memcached_destroy_sasl_auth_data(m);
    memcached_free(m);
    long promotions = sasl_stat(&s, "rdma_promotions"), demotions = sasl_stat(&s, "rdma_demotions");
    tap_ok(calls > 0 && failed == 0 && promotions >= 1 && demotions >= 1,
           "-S with hybrid moves every 200 ms: an rdma:// client with credentials made %d sets "
           "and gets, %d failed (last %s), while it moved (%ld promotions, %ld demotions)",
           calls, failed, memcached_strerror(NULL, last), promotions, demotions);
    server_stop(&s, SIGTERM);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        tap_bail("usage: rdma_test_auth SERVER_BINARY [SASLPASSWD2]");
    rxe = getenv("RXE_VM_ADDR");
    if (rxe == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    server_bin = argv[1];
    const char *saslpasswd = argc > 2 ? argv[2] : "/usr/sbin/saslpasswd2";
    signal(SIGPIPE, SIG_IGN);
    char dir[] = "/tmp/rdma-auth-XXXXXX";
    if (mkdtemp(dir) == NULL)
        tap_bail("mkdtemp failed");
    unsigned base = 31000 + (unsigned)(getpid() % 200) * 8; /* below the ephemeral ports */
    char path[256];
    snprintf(path, sizeof(path), "%s/auth", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL || fprintf(f, USER ":" PASSWORD "\n") < 0 || fclose(f) != 0)
        tap_bail("cannot write %s", path);
    text_auth(path, base);
    text_auth_hybrid(path, base + 2);
    sasl_auth(dir, saslpasswd, base + 4);
    sasl_auth_hybrid(base + 6);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    tap_no_plan_end();
    return tap_exit_status();
}
