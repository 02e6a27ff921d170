/*
 * settings.h: every run-time setting of the daemon in one struct, filled
 * from memcached 1.6's command-line flags (short and long forms, same
 * meanings) and -o suboptions. Owns parsing and validation only: it opens
 * no sockets, starts no threads and never touches the storage engine (main
 * turns the storage part into a struct storage_config).
 */
#ifndef MCR_SETTINGS_H
#define MCR_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "settings_ext.h"

enum binding_protocol { PROTOCOL_AUTO, PROTOCOL_ASCII, PROTOCOL_BINARY };

/* TLS as memcached 1.6.18 takes it; the values are OpenSSL's, so that
 * "stats settings" reports the numbers memcached reports. */
struct tls_settings {
    bool enabled;       /* -Z */
    char *chain_cert;   /* ssl_chain_cert, PEM */
    char *key;          /* ssl_key */
    int keyformat;      /* ssl_keyformat: SSL_FILETYPE_PEM (1) or ASN1 (2) */
    int verify_mode;    /* ssl_verify_mode 0..3 as SSL_VERIFY_* flags */
    char *ciphers;      /* ssl_ciphers; NULL: OpenSSL's default */
    char *ca_cert;      /* ssl_ca_cert: PEM file of acceptable client CAs */
    unsigned wbuf_size; /* ssl_wbuf_size, bytes (given in kilobytes) */
    bool session_cache; /* ssl_session_cache */
    bool kernel_tls;    /* ssl_kernel_tls */
    int min_version;    /* ssl_min_version as TLS1_x_VERSION */
};

/* memcached takes at most 62 sizes in -o slab_sizes (the largest class,
 * slab_chunk_max, is added after them). */
#define SETTINGS_SLAB_SIZES_MAX 62

/* -o rdma_transport */
enum { RDMA_SERVE_RC = 1, RDMA_SERVE_UD = 2, RDMA_SERVE_HYBRID = RDMA_SERVE_RC | RDMA_SERVE_UD };

struct settings {
    /* network */
    int port;                               /* -p, TCP; 0 disables TCP, -1 picks a free port */
    int udpport;                            /* -U; 0 = no UDP (net_udp.c) */
    char *socketpath;                       /* -s, Unix socket (disables TCP, as memcached) */
    int access;                             /* -a, octal mode of the Unix socket */
    char *inter;                            /* -l, comma separated; NULL: 127.0.0.1 */
    int backlog;                            /* -b */
    int maxconns;                           /* -c */
    bool maxconns_fast;                     /* -o maxconns_fast: reject at once with ERROR */
    int num_threads;                        /* -t */
    int reqs_per_event;                     /* -R */
    enum binding_protocol binding_protocol; /* -B */
    bool shutdown_command;                  /* -A */
    bool flush_enabled;                     /* cleared by -F */
    bool dump_enabled;                      /* cleared by -X */
    bool watch_enabled;                     /* cleared by -W */
    unsigned idle_timeout;                  /* -o idle_timeout, seconds; 0 = never */
    size_t read_buf_mem_limit;     /* -o read_buf_mem_limit (given in MB), bytes; 0 = none */
    char *auth_file;               /* -Y: ASCII authentication credentials */
    char *memory_file;             /* -e: warm restart file (restart.c) */
    bool sasl;                     /* -S: binary SASL authentication (sasl.c) */
    struct tls_settings tls;       /* -Z and -o ssl_* (settings_tls.c) */
    struct ext_settings ext;       /* -o ext_* (settings_ext.c) */
    char *rdma_listen;             /* -o rdma_listen=ADDR:PORT (repeatable), space separated */
    unsigned rdma_eager_max;       /* -o rdma_eager_max: RDMA message buffer, bytes; 8192 */
    int rdma_poll;                 /* -o rdma_poll: 0 event, 1 spin, 2 adaptive */
    int rdma_transport;            /* -o rdma_transport: RDMA_SERVE_RC, _UD, _HYBRID (default) */
    unsigned rdma_rc_max;          /* -o rdma_rc_max: RC connections at most; 0 = no limit */
    unsigned rdma_rc_credits;      /* -o rdma_rc_credits: receive credits per RC connection; 0 =
                                      the transport's default (rc 32, hybrid 8) */
    unsigned rdma_ud_keepalive_ms; /* -o rdma_ud_keepalive_ms: probe a silent UD peer; 30000 */
    unsigned rdma_ack_timeout;     /* -o rdma_ack_timeout: RC ACK timeout, 4.096 us * 2^N; 0 =
                                      the RDMA CM's (rdma/ctx.h, ack_timeout) */
    /* hybrid: moves between RC and UD (net_rdma_move.c) */
    unsigned rdma_promote_rate;     /* -o rdma_promote_rate: UD -> RC at this many msgs/s; 1000 */
    unsigned rdma_demote_rate;      /* -o rdma_demote_rate: RC -> UD below this many msgs/s; 10 */
    unsigned rdma_move_interval_ms; /* -o rdma_move_interval_ms: rates measured over; 1000 */

    /* process */
    bool daemonize;   /* -d */
    char *username;   /* -u */
    char *pid_file;   /* -P */
    int verbose;      /* -v, -vv, -vvv */
    bool lock_memory; /* -k */
    bool coredumps;   /* -r */

    /* storage (handed to storage_init) */
    size_t maxbytes;                              /* -m, bytes */
    bool evict_to_free;                           /* cleared by -M */
    double factor;                                /* -f */
    int chunk_size;                               /* -n */
    bool prealloc;                                /* -L */
    bool use_cas;                                 /* cleared by -C */
    size_t item_size_max;                         /* -I */
    size_t slab_page_size;                        /* 1 MiB */
    size_t slab_chunk_max;                        /* -o slab_chunk_max, bytes; 0 = default */
    unsigned slab_sizes[SETTINGS_SLAB_SIZES_MAX]; /* -o slab_sizes, rising */
    unsigned slab_sizes_count;                    /* 0: classes grow by -f */
    unsigned hashpower_init;                      /* -o hashpower */
    bool no_hashexpand;                           /* -o no_hashexpand: the table keeps its size */
    bool lru_crawler;                             /* -o lru_crawler / no_lru_crawler */
    long lru_crawler_sleep;    /* -o lru_crawler_sleep, microseconds; -1 = default */
    long lru_crawler_tocrawl;  /* -o lru_crawler_tocrawl; -1 = default */
    unsigned tail_repair_time; /* -o tail_repair_time (accepted, informative) */
    int slab_automove;         /* -o slab_automove=0|1|2; 0 keeps pages in their class */
    bool track_sizes;          /* -o track_sizes: "stats sizes" histogram from the start */

    /* memcached's segmented LRU (-o lru_maintainer / no_lru_maintainer,
     * hot_lru_pct, warm_lru_pct, hot_max_factor, warm_max_factor,
     * temporary_ttl), and tunables accepted and reported ("stats
     * settings") without acting on them (automove ratio and window, log
     * buffer sizes). Changed at run time by "lru tune|mode|temp_ttl" and
     * "slabs automove ratio" under settings_lock. */
    double slab_automove_ratio;
    unsigned slab_automove_window;
    unsigned hot_lru_pct, warm_lru_pct;
    double hot_max_factor, warm_max_factor;
    int temporary_ttl;
    bool lru_segmented, temp_lru;
    bool lru_maintainer; /* run the LRU maintainer thread (memcached's default) */
    unsigned watcher_logbuf_size, worker_logbuf_size; /* bytes */

    /* stats */
    char prefix_delimiter; /* -D */
    bool detail_enabled;   /* set by -D */
};

/* What start-up should do after parsing. */
enum settings_action {
    SETTINGS_RUN,         /* serve */
    SETTINGS_EXIT_OK,     /* -h, -V or -i printed what was asked */
    SETTINGS_EXIT_BAD,    /* flags memcached refuses together, once all are
                           * read (exit 64, EX_USAGE); message to errout */
    SETTINGS_EXIT_FAILED, /* a bad flag or value, or a table size memcached
                           * refuses as it starts (exit 1); message to errout */
};

/* memcached 1.6's defaults (except the listen address, see inter). */
void settings_init(struct settings *s);
/* Parses argv into s. Help/version/license go to out, errors and warnings
 * about ignored options to errout. Safe to call more than once (tests). */
enum settings_action settings_parse(struct settings *s, int argc, char **argv, FILE *out,
                                    FILE *errout);
/* Frees the strings settings_parse duplicated. */
void settings_free(struct settings *s);

const char *settings_protocol_name(enum binding_protocol p);
/* "1.6.18-compatible version string" reported by "version" and stats. */
const char *settings_version(void);

/* The one instance the daemon runs with (read-only once workers start,
 * except the reported tunables, which settings_lock guards). */
extern struct settings settings;

/* memcached's safe_strtoul (whole decimal string, trailing blanks, no
 * sign, at most max) and safe_strtod, for the suboption parsers. */
bool settings_strict_ulong(const char *text, unsigned long max, unsigned long *out);
bool settings_strict_double(const char *text, double *out);
/* A whole decimal string (no blanks) whose value is in [min, max]. */
bool settings_ranged_long(const char *text, long min, long max, long *out);
void settings_lock(void);
void settings_unlock(void);

#endif
