/* t/libmc/redundancy_cluster.h: what the redundancy checks
 * (t/libmc/redundancy_survival.c, t/libmc/redundancy_calls.c) share: five
 * servers ($MC_SERVER) over TCP, a Unix socket, RDMA or a mixed cluster of
 * the three, clients of each scheme and of one server alone, the test
 * values and their writes, and the runs over each transport (with --rdma:
 * RDMA and the mixed cluster, RXE_VM_ADDR naming the RDMA address). */
#ifndef LMR_TEST_REDUNDANCY_CLUSTER_H
#define LMR_TEST_REDUNDANCY_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libmemcached/memcached.h>

#include "server.h"

#define SERVERS 5
#define VALUES 7
/* coded clients code values from 1 KiB on (below the library's default),
 * so the values of 4 and 5 KB and 100 KB are coded too */
#define CODED_FROM 1024

enum transport { OVER_TCP, OVER_UNIX, OVER_RDMA, OVER_MIXED };

extern struct test_server servers[SERVERS];
/* The transport of the run under way. */
extern enum transport mode;
extern const size_t sizes[VALUES];
extern char *values[VALUES];
/* The coded clients' threshold: CODED_FROM, or 0 for a pass where every
 * value is coded (empty and short data chunks, whose padded ends are
 * coded apart from the rest) */
extern uint64_t coded_from;
/* Values above the servers' item size limit (1 MiB) are stored only when
 * coded (in chunks of a third); copies skip them. */
extern size_t largest;

/* How server i is reached: the run's transport, or in the mixed cluster
 * its own. */
enum transport transport_of(int i);
/* The name of a transport in the checks' texts. */
const char *transport_name(enum transport transport);
/* Sets mode to transport, says which transport and protocol the checks
 * after it use, and starts the five servers; false if one did not start. */
bool start_servers(enum transport transport, bool binary);
/* A client of the five servers with replication or coding (0 for none). */
memcached_st *client(uint64_t replication, uint64_t coding, bool binary);
/* A client of one server alone, without any scheme. */
memcached_st *plain_client(int i);
/* Whether item is a stored replicated copy of value. */
bool is_copy(const char *item, size_t item_length, const char *value, size_t length);
/* values[] made again from seed. */
void make_values(unsigned seed);
/* The key of value v under prefix. */
void key_of(char *key, size_t size, const char *prefix, int v);
/* values[] set under prefix: how many stored. */
int write_all(memcached_st *memc, const char *prefix);
/* Whether the library was built with erasure coding (jerasure). */
bool coding_built(void);
/* run(transport, binary) for each transport: with --rdma over RDMA and
 * over the mixed cluster in the binary protocol, else over TCP in both
 * protocols and over a Unix socket in the text protocol. False, with a
 * diagnostic, when --rdma has no RXE_VM_ADDR. */
bool run_over_each_transport(int argc, char **argv, void (*run)(enum transport, bool binary));

#endif
