/*
 * settings_internal.h: what settings.c, settings_suboptions.c and
 * settings_usage.c share: the state of one parse and memcached's lenient
 * number readers. Not included elsewhere.
 */
#ifndef MCR_SETTINGS_INTERNAL_H
#define MCR_SETTINGS_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>

#include "settings.h"

#define COMPAT_VERSION "1.6.18"

/* State of one settings_parse() that memcached checks once all flags are in. */
struct parse_state {
    bool chunk_max_given;   /* -o slab_chunk_max */
    bool temp_lru;          /* -o temporary_ttl */
    const char *slab_sizes; /* -o slab_sizes, checked once all flags are in */
    bool slab_sizes_given;  /* by slab_sizes itself (see worker_logbuf_size) */
    char *slab_sizes_copy;
    int napi_ids;        /* -N */
    bool protocol_given; /* -B */
    bool tcp_port_given; /* -p */
    bool udp_port_given; /* -U */
};

/* atoi() and atof() as memcached reads most numeric flags (settings.c). */
int settings_lenient_int(const char *text);
double settings_lenient_double(const char *text);

/* memcached's defaults for slab automove, the segmented LRU and the log
 * buffers: settings_init's, and again for a bare -o slab_automove
 * (settings.c). */
void settings_automove_defaults(struct settings *s);

/* settings_suboptions.c */
bool settings_parse_suboptions(struct settings *s, struct parse_state *ps, const char *list,
                               FILE *errout);
bool settings_check_slab_sizes(struct settings *s, const char *list, FILE *errout);

/* settings_usage.c: -h and -i */
void settings_print_usage(FILE *out);
void settings_print_license(FILE *out);

#endif
