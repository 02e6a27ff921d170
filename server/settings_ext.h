/*
 * settings_ext.h: memcached 1.6.18's external storage settings (-o ext_*
 * and slab_automove_freeratio): defaults, parsing of one suboption, the
 * checks memcached makes once all flags are read, and their "stats
 * settings" lines. Parsing only; the flash tier (flash.c) acts on them.
 */
#ifndef MCR_SETTINGS_EXT_H
#define MCR_SETTINGS_EXT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define EXT_PATHS_MAX 16

struct ext_path {
    char *path;    /* the file (created when missing) */
    uint64_t size; /* bytes */
};

struct ext_settings {
    struct ext_path paths[EXT_PATHS_MAX]; /* -o ext_path=PATH:SIZE, repeatable */
    unsigned npaths;                      /* 0: no flash tier */
    uint64_t page_size;                   /* ext_page_size, bytes (MiB given) */
    uint64_t wbuf_size;                   /* ext_wbuf_size, bytes (MiB given) */
    unsigned threads;                     /* ext_threads */
    unsigned io_depth;                    /* ext_io_depth */
    unsigned item_size;                   /* ext_item_size: values at least this long */
    unsigned item_age;                    /* ext_item_age: idle at least this long, s */
    unsigned low_ttl;                     /* ext_low_ttl, s */
    unsigned recache_rate;                /* ext_recache_rate */
    unsigned compact_under;               /* ext_compact_under, pages; 0: 1/4 of them */
    unsigned drop_under;                  /* ext_drop_under, pages; 0: 1/4 of them */
    unsigned max_sleep;                   /* ext_max_sleep, microseconds */
    double max_frag;                      /* ext_max_frag */
    bool drop_unread;                     /* ext_drop_unread */
    double automove_freeratio;            /* slab_automove_freeratio */
};

enum ext_suboption_result {
    EXT_SUBOPT_NOT_MINE, /* not an external storage suboption */
    EXT_SUBOPT_OK,
    EXT_SUBOPT_BAD, /* message written to errout */
};

void settings_ext_init(struct ext_settings *e);
void settings_ext_free(struct ext_settings *e);
/* One "-o name[=value]" entry (value NULL when no '=' was given). */
enum ext_suboption_result settings_ext_suboption(struct ext_settings *e, const char *name,
                                                 const char *value, FILE *errout);
/* memcached's checks once every flag is read, with an ext_path given:
 * false (exit 64) with its message when -I exceeds the write buffer or UDP
 * is on. */
bool settings_ext_check_usage(const struct ext_settings *e, size_t item_size_max, int udpport,
                              FILE *errout);
/* The check memcached makes as it opens the store: false with its
 * "Failed to initialize external storage" line. */
bool settings_ext_check_store(const struct ext_settings *e, FILE *errout);

/* The "extstore <name> <value>" admin command: item_size, item_age,
 * low_ttl, recache_rate, compact_under, drop_under, max_frag, drop_unread
 * set the setting (as memcached, a value that does not parse sets 0 and
 * answers ERROR), "free_memchunks <class> <n>" is accepted. false: the
 * caller answers ERROR. */
bool settings_ext_command(struct ext_settings *e, const char *name, const char *value,
                          const char *value2);

/* "stats settings" lines, in memcached's order and formats. */
void settings_ext_stats(const struct ext_settings *e,
                        void (*emit)(void *ctx, const char *name, const char *value), void *ctx);

#endif
