/*
 * settings_rdma.h: the RDMA suboptions (-o rdma_*): their defaults, the
 * parsing of one suboption into struct settings and their "stats
 * settings" lines. Parsing and reporting only; the RDMA listener
 * (net_rdma.c) acts on them.
 */
#ifndef MCR_SETTINGS_RDMA_H
#define MCR_SETTINGS_RDMA_H

#include <stdio.h>

struct settings;

enum rdma_suboption_result {
    RDMA_SUBOPT_NOT_MINE, /* not an rdma_* suboption */
    RDMA_SUBOPT_OK,
    RDMA_SUBOPT_BAD, /* message written to errout */
};

/* The RDMA fields' defaults. */
void settings_rdma_init(struct settings *s);
/* One "-o name[=value]" entry (value NULL when no '=' was given). */
enum rdma_suboption_result settings_rdma_suboption(struct settings *s, const char *name,
                                                   const char *value, FILE *errout);

/* One "stats settings" line per RDMA suboption, named as the option: the
 * numbers as given (or their defaults), the choices as their words,
 * rdma_listen's addresses space-separated ("NULL" when none was given). */
void settings_rdma_stats(const struct settings *s,
                         void (*emit)(void *ctx, const char *name, const char *value), void *ctx);

#endif
