/* benchmarks/ohb_memlat_resilience.h: what the files of ohb_memlat_resilience
 * share: the schemes, the servers, the options and the steps each file
 * provides. Not included by other programs. */
#ifndef OHB_MEMLAT_RESILIENCE_H
#define OHB_MEMLAT_RESILIENCE_H

#include "ohb_common.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define SERVERS 5
#define WINDOW 64
#define MAX_SIZES 32

enum scheme { NONE, SYNC_REP, ASYNC_REP, RS, SCHEMES };
extern const char *scheme_names[SCHEMES];
extern const char *csv_names[SCHEMES];

enum measure { SET_BLOCK, GET_BLOCK, SET_WINDOW, GET_WINDOW, GET_WINDOW_CPU, MEASURES };
extern const enum scheme ratio_to[MEASURES];

struct server {
    pid_t pid;
    unsigned port;
    unsigned rdma_port; /* --rdma: a new one at every start (a killed
                           server's RDMA port stays taken for a while) */
    char path[108];
};
extern struct server servers[SERVERS];

/* The options (ohb_memlat_resilience.c) */
extern const char *server_binary;
extern bool over_unix;
extern const char *rdma_addr;
extern const char *rdma_modes[];
extern const char *rdma_schemes[];
extern int rdma_mode;
extern size_t min_size, max_size;
extern unsigned iterations;
extern double max_seconds;
extern FILE *csv;
extern long long ec_threshold;
extern long long hedge_timeout;
extern unsigned paired_rounds;
extern bool degraded_only;
extern bool latency_only;
extern bool blocking_only;
extern unsigned pair_rounds;
extern unsigned pair_gets;
extern unsigned count_gets;
extern enum scheme count_scheme;
extern bool count_window;
/* the value sizes measured, doubling from min_size to max_size */
extern size_t sizes[MAX_SIZES];
extern unsigned size_count;

/* ohb_memlat_resilience.c */
__attribute__((format(printf, 1, 2))) void res_progress(const char *fmt, ...);

/* ohb_memlat_resilience_servers.c */
bool res_server_start(int i);
void res_server_kill(int i);
memcached_st *res_client(enum scheme scheme);
void res_restart_all(void);
void res_flush_all(void);
uint64_t res_servers_stat(bool gets);
void res_kill_servers(void);

/* ohb_memlat_resilience_measure.c */
void res_measure_rounds(double latency[MEASURES][SCHEMES][MAX_SIZES],
                        double ratio[MEASURES][MAX_SIZES]);
void res_paired_get_rounds(void);
void res_count_only(void);
void res_fanout_floor(double floor[MAX_SIZES]);
void res_memory_efficiency(void);
void res_coding_time(double set_latency[][MAX_SIZES]);
void res_degraded_gets(const char *value);

/* ohb_memlat_resilience_tables.c */
void res_csv_row(const char *section, enum scheme scheme, size_t size, double value);
void res_print_latency(const char *title, const char *section, double latency[][MAX_SIZES],
                       const double ratio[MAX_SIZES], enum scheme compared_to);
void res_print_round_ratios(enum measure m, size_t size, const double *by_round);
void res_quartiles(const double *values, unsigned n, double q[3]);
void res_print_windows(double latency[MEASURES][SCHEMES][MAX_SIZES],
                       double ratio[MEASURES][MAX_SIZES]);
void res_print_degraded(const char *title, const char *suffix, double table[2][3][MAX_SIZES]);

#endif
