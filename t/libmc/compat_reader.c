/* t/libmc/compat_reader.c: key placement agrees with Debian's libmemcached.
 * For each placement mode it starts three servers, lets compat_writer
 * (linked with Debian's libmemcached) store keys through its own placement,
 * then reads every key through libmemcached-rdma with the same settings:
 * each key lives on exactly one server, so a hit proves the same choice.
 * It also checks each server directly, so a mode cannot pass by chance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compat_config.h"
#include "server.h"
#include "tap.h"

static int run_writer(const char *writer, const char *mode, const unsigned *ports)
{
    char p[3][16];
    for (int i = 0; i < 3; i++)
        snprintf(p[i], sizeof(p[i]), "%u", ports[i]);
    pid_t pid = fork();
    if (pid == 0) {
        execl(writer, writer, mode, p[0], p[1], p[2], (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(void)
{
    const char *top = getenv("top_builddir");
    char writer[4096];
    snprintf(writer, sizeof(writer), "%s/t/libmc/compat_writer", top ? top : ".");
    if (access(writer, X_OK) != 0) {
        printf("1..0 # SKIP Debian's libmemcached not available (no compat_writer)\n");
        return 0;
    }
    for (size_t m = 0; m < COMPAT_MODE_COUNT; m++) {
        const struct compat_mode *mode = &compat_modes[m];
        struct test_server servers[3];
        unsigned ports[3];
        bool started = true;
        for (int i = 0; i < 3; i++) {
            started = started && test_server_start(&servers[i], false);
            ports[i] = servers[i].port;
        }
        if (!ok(started, "%s: three servers", mode->name))
            return done_testing();
        ok(run_writer(writer, mode->name, ports) == 0, "%s: Debian's libmemcached stored keys",
           mode->name);

        memcached_st *memc = compat_client(mode, ports);
        int hits = 0;
        for (int i = 0; i < COMPAT_KEYS; i++) {
            char key[64];
            compat_key(key, sizeof(key), mode->name, i);
            memcached_return_t rc;
            size_t len;
            uint32_t flags;
            char *v = memcached_get(memc, key, strlen(key), &len, &flags, &rc);
            if (v != NULL && len == strlen(key) && memcmp(v, key, len) == 0)
                hits++;
            free(v);
        }
        ok(hits == COMPAT_KEYS, "%s: every key found where libmemcached-rdma places it (%d/%d)",
           mode->name, hits, COMPAT_KEYS);
        if (mode->sort_hosts) {
            bool ascending = true;
            for (uint32_t i = 1; i < 3; i++)
                ascending =
                    ascending &&
                    memcached_server_port(memcached_server_instance_by_position(memc, i - 1)) <
                        memcached_server_port(memcached_server_instance_by_position(memc, i));
            ok(ascending, "%s: servers added in descending port order are sorted", mode->name);
        }

        /* the keys really are spread (at least two servers hold some), so a
         * placement that sent everything to one server could not pass */
        int per_server[3];
        int holding = 0;
        for (int s = 0; s < 3; s++) {
            memcached_st *one = memcached_create(NULL);
            memcached_server_add(one, "127.0.0.1", (in_port_t)ports[s]);
            per_server[s] = 0;
            for (int i = 0; i < COMPAT_KEYS; i++) {
                char key[64];
                compat_key(key, sizeof(key), mode->name, i);
                if (memcached_exist(one, key, strlen(key)) == MEMCACHED_SUCCESS)
                    per_server[s]++;
            }
            memcached_free(one);
            holding += per_server[s] > 0;
        }
        ok(holding >= 2 && per_server[0] + per_server[1] + per_server[2] == COMPAT_KEYS,
           "%s: keys spread over the servers, each stored once (%d/%d/%d)", mode->name,
           per_server[0], per_server[1], per_server[2]);
        memcached_free(memc);
        for (int i = 0; i < 3; i++)
            test_server_stop(&servers[i], false);
    }
    return done_testing();
}
