/* t/libmc/compat_writer.c: built against Debian's libmemcached (never
 * against libmemcached-rdma): stores COMPAT_KEYS keys over three servers
 * with a placement mode, so compat_reader can check that libmemcached-rdma
 * places every key on the same server.
 *   compat_writer MODE PORT1 PORT2 PORT3   (exit status 0 on success) */
#include <stdio.h>
#include <stdlib.h>

#include "compat_config.h"

int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    const struct compat_mode *mode = compat_find(argv[1]);
    if (mode == NULL)
        return 2;
    unsigned ports[3] = {(unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), (unsigned)atoi(argv[4])};
    memcached_st *memc = compat_client(mode, ports);
    int failures = 0;
    for (int i = 0; i < COMPAT_KEYS; i++) {
        char key[64];
        compat_key(key, sizeof(key), mode->name, i);
        if (memcached_set(memc, key, strlen(key), key, strlen(key), 0, 0) != MEMCACHED_SUCCESS)
            failures++;
    }
    memcached_free(memc);
    if (failures > 0)
        fprintf(stderr, "compat_writer: %d sets failed\n", failures);
    return failures == 0 ? 0 : 1;
}
