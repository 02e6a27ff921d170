/* t/libmc/redundancy_cluster.c: the five servers, clients, values and runs
 * over each transport that the redundancy checks share (see
 * redundancy_cluster.h). */
#include "redundancy_cluster.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "mcr/byteorder.h"
#include "tap.h"

const size_t sizes[VALUES] = {0, 10, 100, 4095, 5000, 100000, 1048576 + 3};
uint64_t coded_from = CODED_FROM;

struct test_server servers[SERVERS];
enum transport mode;
static const char *rdma_addr;
size_t largest = SIZE_MAX;

/* A mixed cluster: servers 0 and 3 over RDMA, 1 and 4 over TCP, 2 over a
 * Unix socket. */
enum transport transport_of(int i)
{
    static const enum transport mixed[3] = {OVER_RDMA, OVER_TCP, OVER_UNIX};
    return mode == OVER_MIXED ? mixed[i % 3] : mode;
}

const char *transport_name(enum transport transport)
{
    static const char *const names[] = {"tcp", "unix", "rdma", "mixed rdma+tcp+unix"};
    return names[transport];
}

bool start_servers(enum transport transport, bool binary)
{
    mode = transport;
    tap_diag("over %s, %s protocol", transport_name(transport), binary ? "binary" : "text");
    enum test_transport transports[SERVERS];
    for (int i = 0; i < SERVERS; i++) {
        enum transport t = transport_of(i);
        transports[i] = t == OVER_RDMA   ? TEST_OVER_RDMA
                        : t == OVER_UNIX ? TEST_OVER_UNIX
                                         : TEST_OVER_TCP;
    }
    return test_servers_start(servers, SERVERS, transports, rdma_addr);
}

memcached_st *client(uint64_t replication, uint64_t coding, bool binary)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < SERVERS; i++)
        test_server_add_to(memc, &servers[i]);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 3000);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    /* writes here must say SUCCESS with every server up: a write leaves a
     * server that made no progress for four hedge timeouts behind, and a
     * loaded machine (sanitizers, the emulated guest) can keep a live
     * server off the processor for 400 ms */
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT, 1000);
    if (replication != 0)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REPLICATION, replication);
    if (coding != 0) {
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING, coding);
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD, coded_from);
    }
    return memc;
}

/* A client of one server alone, without any scheme. */
memcached_st *plain_client(int i)
{
    return test_client_for(&servers[i], false);
}

/* A stored replicated copy: the 32-byte header of a whole copy (K = 1) of
 * a value of `length` bytes, then the value. */
bool is_copy(const char *item, size_t item_length, const char *value, size_t length)
{
    uint64_t stored_length = item_length >= 32 ? mcr_le_get64(item + 8) : 0;
    return item_length == 32 + length && memcmp(item, "RSc1", 4) == 0 && item[6] == 1 &&
           stored_length == length && memcmp(item + 32, value, length) == 0;
}

char *values[VALUES];

void make_values(unsigned seed)
{
    for (int v = 0; v < VALUES; v++) {
        free(values[v]);
        values[v] = malloc(sizes[v] + 1);
        fill_bytes(values[v], sizes[v], seed + (unsigned)v);
    }
}

void key_of(char *key, size_t size, const char *prefix, int v)
{
    snprintf(key, size, "%s-%d", prefix, v);
}

int write_all(memcached_st *memc, const char *prefix)
{
    int stored = 0;
    for (int v = 0; v < VALUES; v++) {
        if (sizes[v] > largest) {
            stored++;
            continue;
        }
        char key[64];
        key_of(key, sizeof(key), prefix, v);
        memcached_return_t rc =
            memcached_set(memc, key, strlen(key), values[v], sizes[v], 0, (uint32_t)v);
        if (rc == MEMCACHED_SUCCESS)
            stored++;
        else
            tap_diag("%s: set of %zu bytes: %s", key, sizes[v], memcached_strerror(NULL, rc));
    }
    return stored;
}

bool coding_built(void)
{
    memcached_st *memc = memcached_create(NULL);
    memcached_return_t rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING,
                                                   MEMCACHED_ERASURE_CODING(3, 2));
    memcached_free(memc);
    return rc != MEMCACHED_NOT_SUPPORTED;
}

bool run_over_each_transport(int argc, char **argv, void (*run)(enum transport, bool binary))
{
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "--rdma") == 0) {
        rdma_addr = getenv("RXE_VM_ADDR");
        if (rdma_addr == NULL || rdma_addr[0] == '\0') {
            tap_diag("--rdma needs RXE_VM_ADDR, the address of an RDMA device");
            return false;
        }
        run(OVER_RDMA, true);
        run(OVER_MIXED, true);
    } else {
        run(OVER_TCP, false);
        run(OVER_TCP, true);
        run(OVER_UNIX, false);
    }
    for (int v = 0; v < VALUES; v++)
        free(values[v]);
    return true;
}
