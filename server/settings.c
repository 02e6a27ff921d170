/*
 * settings.c: memcached 1.6's command line, parsed into struct settings.
 *
 * Every flag memcached 1.6.18 documents is accepted with the same meaning.
 * Flags and -o suboptions this server implements act; the ones it knows but
 * does not implement print a one-line warning and are ignored. The ssl_*
 * suboptions are parsed by settings_tls.c. Anything unknown fails start-up with a clear message.
 * Parsing only: no sockets, threads or storage here.
 */
#include "settings.h"

#include "settings_ext.h"
#include "settings_rdma.h"
#include "settings_tls.h"

#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct settings settings;
static pthread_mutex_t tunables_lock = PTHREAD_MUTEX_INITIALIZER;

void settings_lock(void)
{
    pthread_mutex_lock(&tunables_lock);
}

void settings_unlock(void)
{
    pthread_mutex_unlock(&tunables_lock);
}

#define COMPAT_VERSION "1.6.18"

const char *settings_version(void)
{
    return COMPAT_VERSION;
}

const char *settings_protocol_name(enum binding_protocol p)
{
    switch (p) {
    case PROTOCOL_ASCII:
        return "ascii";
    case PROTOCOL_BINARY:
        return "binary";
    case PROTOCOL_AUTO:
        break;
    }
    return "auto-negotiate";
}

void settings_init(struct settings *s)
{
    memset(s, 0, sizeof(*s));
    s->port = 11211;
    s->udpport = 0;
    s->access = 0700;
    s->backlog = 1024;
    s->maxconns = 1024;
    s->maxconns_fast = true;
    settings_rdma_init(s);
    s->num_threads = 4;
    s->reqs_per_event = 20;
    s->binding_protocol = PROTOCOL_AUTO;
    s->flush_enabled = true;
    s->dump_enabled = true;
    s->watch_enabled = true;
    s->maxbytes = 64 * 1024 * 1024;
    s->evict_to_free = true;
    s->factor = 1.25;
    s->chunk_size = 48;
    s->use_cas = true;
    s->item_size_max = 1024 * 1024;
    s->slab_page_size = 1024 * 1024;
    s->lru_crawler = true;
    s->lru_crawler_sleep = -1;
    s->slab_automove = 1;
    s->slab_automove_ratio = 0.8;
    s->slab_automove_window = 30;
    s->hot_lru_pct = 20;
    s->warm_lru_pct = 40;
    s->hot_max_factor = 0.2;
    s->warm_max_factor = 2.0;
    s->temporary_ttl = 61;
    s->lru_segmented = true;
    s->lru_maintainer = true;
    s->watcher_logbuf_size = 256 * 1024;
    s->worker_logbuf_size = 64 * 1024;
    s->lru_crawler_tocrawl = -1;
    s->prefix_delimiter = ':';
    settings_tls_init(&s->tls);
    settings_ext_init(&s->ext);
}

void settings_free(struct settings *s)
{
    free(s->pid_file);
    free(s->username);
    free(s->inter);
    free(s->socketpath);
    free(s->rdma_listen);
    free(s->auth_file);
    free(s->memory_file);
    settings_ext_free(&s->ext);
    settings_tls_free(&s->tls);
    s->pid_file = s->username = s->inter = s->socketpath = s->rdma_listen = s->auth_file = NULL;
    s->memory_file = NULL;
}

/* Whole-string decimal integer in [min, max]. */
bool settings_ranged_long(const char *text, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* memcached reads most numeric flags with atoi(): leading blanks and a
 * sign, then digits; whatever follows is ignored and no digits mean 0. */
static int lenient_int(const char *text)
{
    long v = strtol(text, NULL, 10);
    if (v > INT_MAX)
        return INT_MAX;
    if (v < INT_MIN)
        return INT_MIN;
    return (int)v;
}

/* The same for atof(). */
static double lenient_double(const char *text)
{
    return strtod(text, NULL);
}

/* memcached's safe_strtoul: whole decimal string (trailing blanks allowed),
 * no negative values. */
bool settings_strict_ulong(const char *text, unsigned long max, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno != 0 || end == text || strchr(text, '-') != NULL || v > max)
        return false;
    while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
        end++;
    if (*end != '\0')
        return false;
    *out = v;
    return true;
}

/* memcached's safe_strtod. */
bool settings_strict_double(const char *text, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(text, &end);
    if (errno != 0 || end == text)
        return false;
    while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
        end++;
    if (*end != '\0')
        return false;
    *out = d;
    return true;
}

/* -I as memcached reads it: a k/K or m/M as the last character multiplies
 * (no other unit: "1g" is 1 byte), the number is read with atoi(). */
static long long item_size_arg(const char *text)
{
    size_t len = strlen(text);
    char unit = len ? text[len - 1] : '\0';
    long long mult = 1;
    if (unit == 'k' || unit == 'K')
        mult = 1024;
    else if (unit == 'm' || unit == 'M')
        mult = 1024 * 1024;
    return (long long)lenient_int(text) * mult;
}

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

/* memcached's checks of -o slab_sizes; the sizes go to s->slab_sizes. */
static bool check_slab_sizes(struct settings *s, const char *list, FILE *errout)
{
    char *copy = strdup(list);
    if (!copy)
        return false;
    bool ok = copy[0] != '\0';
    unsigned long last = 0;
    int classes = 0;
    char *save = NULL;
    for (char *p = strtok_r(copy, "-", &save); p && ok; p = strtok_r(NULL, "-", &save)) {
        unsigned long size = 0;
        if (!settings_strict_ulong(p, UINT32_MAX, &size) || size < (unsigned long)s->chunk_size ||
            size > s->slab_chunk_max) {
            fprintf(errout, "slab size %lu is out of valid range\n", size);
            ok = false;
        } else if (last >= size) {
            fprintf(errout,
                    "slab size %lu cannot be lower than or equal to a previous class size\n", size);
            ok = false;
        } else if (size <= last + 8) {
            fprintf(errout, "slab size %lu must be at least 8 bytes larger than previous class\n",
                    size);
            ok = false;
        } else if (++classes >= 63) {
            fprintf(errout, "too many slab classes specified\n");
            ok = false;
        } else {
            s->slab_sizes[classes - 1] = (unsigned)size;
        }
        last = size;
    }
    free(copy);
    s->slab_sizes_count = ok ? (unsigned)classes : 0;
    return ok;
}

static void print_usage(FILE *out)
{
    fprintf(out,
            "memcached-rdma %s (memcached %s compatible)\n"
            "-p, --port=<num>          TCP port to listen on (default: 11211)\n"
            "-U, --udp-port=<num>      UDP port to listen on (default: 0, off)\n"
            "-s, --unix-socket=<file>  UNIX socket to listen on (disables network support)\n"
            "-a, --unix-mask=<mask>    access mask for UNIX socket, in octal (default: 700)\n"
            "-A, --enable-shutdown     enable ascii \"shutdown\" command\n"
            "-l, --listen=<addr>       interface to listen on (default: 127.0.0.1;\n"
            "                          memcached's default is every interface: -l 0.0.0.0)\n"
            "                          if TLS/SSL is enabled, 'notls' prefix can be used to\n"
            "                          disable for specific listeners (-l notls:<ip>:<port>)\n"
            "-d, --daemon              run as a daemon\n"
            "-r, --enable-coredumps    maximize core file limit\n"
            "-u, --user=<user>         assume identity of <username> (only when run as root)\n"
            "-m, --memory-limit=<num>  item memory in megabytes (default: 64)\n"
            "-M, --disable-evictions   return error on memory exhausted instead of evicting\n"
            "-c, --conn-limit=<num>    max simultaneous connections (default: 1024)\n"
            "-k, --lock-memory         lock down all paged memory\n"
            "-v, --verbose             verbose (print errors/warnings while in event loop)\n"
            "-vv                       very verbose (also print client commands/responses)\n"
            "-vvv                      extremely verbose (internal state transitions)\n"
            "-h, --help                print this help and exit\n"
            "-i, --license             print the license and exit\n"
            "-V, --version             print version and exit\n"
            "-P, --pidfile=<file>      save PID in <file>\n"
            "-f, --slab-growth-factor=<num> chunk size growth factor (default: 1.25)\n"
            "-n, --slab-min-size=<bytes> min space used for key+value+flags (default: 48)\n"
            "-L, --enable-largepages   preallocate item memory\n"
            "-D <char>                 delimiter between key prefixes and IDs; turns on\n"
            "                          per-prefix stats (\"stats detail dump\")\n"
            "-t, --threads=<num>       number of worker threads (default: 4)\n"
            "-R, --max-reqs-per-event  maximum number of requests per event (default: 20)\n"
            "-C, --disable-cas         disable use of CAS\n"
            "-b, --listen-backlog=<num> set the backlog queue limit (default: 1024)\n"
            "-B, --protocol=<name>     protocol - one of ascii, binary, or auto (default: auto)\n"
            "-I, --max-item-size=<num> adjusts max item size\n"
            "                          (default: 1m, min: 1k, max: 1024m)\n"
            "-F, --disable-flush-all   disable flush_all command\n"
            "-X, --disable-dumping     disable stats cachedump and lru_crawler metadump\n"
            "-W, --disable-watch       disable watch commands (live logging)\n"
            "-Y, --auth-file=<file>    ASCII protocol authentication; lines user:pass\n"
            "-S, --enable-sasl         turn on Sasl authentication (binary protocol)\n"
            "-Z, --enable-ssl          enable TLS/SSL\n"
            "-e, --memory-file=<file>  keep the items across a restart: a graceful stop\n"
            "                          (SIGUSR1 or \"shutdown graceful\") saves them to\n"
            "                          <file> and <file>.meta, the next start loads them\n"
            "-o, --extended            comma separated list of extended options\n"
            "   - maxconns_fast, no_maxconns_fast: reject new connections over -c at once\n"
            "   - hashpower:           initial hash table size as a power of two\n"
            "   - no_hashexpand:       never grow the hash table\n"
            "   - slab_chunk_max:      maximum slab chunk size in bytes (default: 524288)\n"
            "   - slab_sizes:          dash-separated chunk sizes of the classes below\n"
            "                          slab_chunk_max, e.g. 96-200-400 (default: grow by -f)\n"
            "   - lru_crawler, no_lru_crawler: background expiry crawler (default: on)\n"
            "   - lru_maintainer, no_lru_maintainer: segmented LRU (HOT/WARM/COLD) and its\n"
            "                          background thread (default: on; off: one flat LRU)\n"
            "   - hot_lru_pct:         percent of a class's memory HOT may hold (default: 20)\n"
            "   - warm_lru_pct:        percent of a class's memory WARM may hold (default: 40)\n"
            "   - hot_max_factor:      HOT items idle longer than COLD's age x this move on\n"
            "                          (default: 0.20)\n"
            "   - warm_max_factor:     the same for WARM (default: 2.00)\n"
            "   - temporary_ttl:       items with TTLs up to this go to a TEMP LRU and are\n"
            "                          never evicted (needs lru_maintainer; default: off, 61)\n"
            "   - slab_automove:       0 keeps slab pages in their class, 1 or 2 moves them\n"
            "                          to classes that evict (default: 1)\n"
            "   - track_sizes:         keep the \"stats sizes\" histogram from the start\n"
            "   - lru_crawler_sleep:   microseconds between crawler batches\n"
            "   - lru_crawler_tocrawl: items examined per LRU per pass (0: all)\n"
            "   - idle_timeout:        close connections idle this many seconds (default: 0)\n"
            "   - read_buf_mem_limit:  megabytes of read buffers and responses connections\n"
            "                          may hold, split between the threads (default: 0, none)\n"
            "   - rdma_listen:         serve RDMA (RC) on ADDR:PORT; repeatable\n"
            "   - rdma_eager_max:      RDMA message buffer size in bytes (default: 8192)\n"
            "   - rdma_poll:           RDMA completions: event, spin or adaptive (default: event)\n"
            "   - rdma_transport:      serve RDMA as rc, ud or hybrid (both; default: hybrid)\n"
            "   - rdma_rc_max:         RC connections at most, more are refused (default: 0, no\n"
            "                          limit)\n"
            "   - rdma_rc_credits:     receive credits (message buffers) per RC connection,\n"
            "                          4..1024 (default: 32 with rc, 8 with hybrid)\n"
            "   - rdma_ud_keepalive_ms: probe a UD client silent this long (default: 30000)\n"
            "   - rdma_promote_rate:   hybrid: move an rdma:// client from UD to RC at this\n"
            "                          many messages a second (default: 1000)\n"
            "   - rdma_demote_rate:    hybrid: move it back to UD below this many (default: 10)\n"
            "   - rdma_move_interval_ms: hybrid: rates are measured over this long (default:\n"
            "                          1000)\n"
            "   - tail_repair_time:    accepted\n"
            "   - ext_path:            file for values on flash, PATH:SIZE (repeatable)\n"
            "   - ext_page_size:       flash page size in MiB (default: 64)\n"
            "   - ext_wbuf_size:       flash write buffer size in MiB (default: 4)\n"
            "   - ext_item_size:       write values at least this long (default: 512)\n"
            "   - ext_item_age:        write values idle at least this long, seconds\n"
            "                          (default: only when memory is full)\n"
            "   - ext_low_ttl:         values with less TTL left share their own pages\n"
            "   - slab_automove_freeratio: memory kept free; below it values go to flash\n"
            "                          (default: 0.010)\n"
            "   - ext_recache_rate:    recache a value read twice every N reads (default: 2000)\n"
            "   - ext_compact_under:   compact while at most this many pages are free\n"
            "                          (default: a quarter of them)\n"
            "   - ext_drop_under:      drop unread values while at most this many are free\n"
            "   - ext_max_frag:        compact pages less full than this (default: 0.80)\n"
            "   - ext_drop_unread:     compact the oldest page, dropping unread values\n"
            "   - ext_threads, ext_io_depth, ext_max_sleep:\n"
            "                          checked and reported (one I/O thread runs)\n"
            "   - ssl_chain_cert:      certificate chain file in PEM format\n"
            "   - ssl_key:             private key, if not part of the -ssl_chain_cert\n"
            "   - ssl_keyformat:       private key format (PEM, DER or ENGINE) (default: PEM)\n"
            "   - ssl_verify_mode:     peer certificate verification mode, default is 0(None).\n"
            "                          valid values are 0(None), 1(Request), 2(Require)\n"
            "                          or 3(Once)\n"
            "   - ssl_ciphers:         specify cipher list to be used\n"
            "   - ssl_ca_cert:         PEM format file of acceptable client CA's\n"
            "   - ssl_wbuf_size:       size in kilobytes of per-connection SSL output buffer\n"
            "                          (default: 16)\n"
            "   - ssl_session_cache:   enable server-side SSL session cache, to support session\n"
            "                          resumption\n"
            "   - ssl_kernel_tls:      enable kernel TLS offload\n"
            "   - ssl_min_version:     minimum protocol version to accept (default: tlsv1.2)\n"
            "                          valid values are 0(tlsv1.0), 1(tlsv1.1), 2(tlsv1.2),\n"
            "                          or 3(tlsv1.3).\n"
            "   other memcached 1.6 options are accepted with a warning and ignored\n",
            PACKAGE_VERSION, COMPAT_VERSION);
}

static void print_license(FILE *out)
{
    fprintf(out,
            "memcached-rdma %s\n"
            "A memcached-compatible server. This build links libevent (BSD license);\n"
            "see the project's documentation for its own license terms.\n",
            PACKAGE_VERSION);
}

/* -o suboptions memcached 1.6.18 accepts but this server ignores (with a
 * warning). Values are checked as memcached checks them, so a command line
 * starts here exactly when it starts memcached. */
enum value_kind { V_NONE, V_ANY, V_ULONG, V_DOUBLE };
static const struct ignored_suboption {
    const char *name;
    enum value_kind kind;
} ignored_suboptions[] = {
    {"slab_reassign", V_NONE},
    {"no_slab_reassign", V_NONE},
    {"resp_obj_mem_limit", V_ANY},
    {"drop_privileges", V_NONE},
    {"no_drop_privileges", V_NONE},
    {"sock_cookie_id", V_ANY},
    {NULL, V_NONE},
};

/* Handles one -o suboption "name" or "name=value". */
static bool parse_suboption(struct settings *s, struct parse_state *ps, char *opt, FILE *errout)
{
    char *value = strchr(opt, '=');
    if (value)
        *value++ = '\0';
    long v;
    unsigned long uv = 0;
    enum tls_suboption_result tls = settings_tls_suboption(&s->tls, opt, value, errout);
    if (tls != TLS_SUBOPT_NOT_MINE)
        return tls == TLS_SUBOPT_OK;
    enum ext_suboption_result ext = settings_ext_suboption(&s->ext, opt, value, errout);
    if (ext != EXT_SUBOPT_NOT_MINE)
        return ext == EXT_SUBOPT_OK;
    enum rdma_suboption_result rdma = settings_rdma_suboption(s, opt, value, errout);
    if (rdma != RDMA_SUBOPT_NOT_MINE)
        return rdma == RDMA_SUBOPT_OK;

#define NEED_VALUE()                                                                               \
    do {                                                                                           \
        if (value == NULL) {                                                                       \
            fprintf(errout, "Missing %s argument\n", opt);                                         \
            return false;                                                                          \
        }                                                                                          \
    } while (0)

    if (strcmp(opt, "maxconns_fast") == 0) {
        s->maxconns_fast = true;
    } else if (strcmp(opt, "no_maxconns_fast") == 0) {
        s->maxconns_fast = false;
    } else if (strcmp(opt, "hashpower") == 0) {
        NEED_VALUE();
        v = lenient_int(value);
        if (v < 12) {
            fprintf(errout, "Initial hashtable multiplier of %ld is too low\n", v);
            return false;
        }
        if (v > 32) { /* memcached allows 64, but cannot allocate such a table either */
            fprintf(errout, "Initial hashtable multiplier of %ld is too high\n", v);
            return false;
        }
        s->hashpower_init = (unsigned)v;
    } else if (strcmp(opt, "slab_chunk_max") == 0) {
        NEED_VALUE();
        /* bytes, whatever memcached's help says (kilobytes) */
        if (!settings_ranged_long(value, 1, 1024L * 1024 * 1024, &v)) {
            fprintf(errout, "could not parse argument to slab_chunk_max\n");
            return false;
        }
        s->slab_chunk_max = (size_t)v;
        ps->chunk_max_given = true;
    } else if (strcmp(opt, "no_chunked_items") == 0) {
        s->slab_chunk_max = s->slab_page_size;
    } else if (strcmp(opt, "modern") == 0) {
        /* memcached 1.6.18: no new defaults */
    } else if (strcmp(opt, "no_modern") == 0) { /* memcached 1.4's defaults */
        if (!ps->chunk_max_given)
            s->slab_chunk_max = s->slab_page_size;
        s->slab_automove = 0;
        s->maxconns_fast = false;
        s->lru_segmented = false;
        s->lru_crawler = false;
        s->lru_maintainer = false;
    } else if (strcmp(opt, "inline_ascii_resp") == 0 || strcmp(opt, "no_inline_ascii_resp") == 0) {
        /* no effect in memcached 1.6 either */
    } else if (strcmp(opt, "lru_maintainer") == 0) {
        s->lru_maintainer = true;
        s->lru_segmented = true;
    } else if (strcmp(opt, "no_lru_maintainer") == 0) {
        s->lru_maintainer = false;
        s->lru_segmented = false;
    } else if (strcmp(opt, "hash_algorithm") == 0) {
        NEED_VALUE();
        if (strcmp(value, "jenkins") != 0 && strcmp(value, "murmur3") != 0 &&
            strcmp(value, "xxh3") != 0) {
            fprintf(errout, "Unknown hash_algorithm option (jenkins, murmur3, xxh3)\n");
            return false;
        }
        fprintf(errout, "warning: -o hash_algorithm is accepted and has no effect here\n");
    } else if (strcmp(opt, "slab_sizes") == 0) {
        ps->slab_sizes = value;
        ps->slab_sizes_given = true;
    } else if (strcmp(opt, "lru_crawler") == 0) {
        s->lru_crawler = true;
    } else if (strcmp(opt, "no_lru_crawler") == 0) {
        s->lru_crawler = false;
    } else if (strcmp(opt, "slab_automove_ratio") == 0 || strcmp(opt, "hot_max_factor") == 0 ||
               strcmp(opt, "warm_max_factor") == 0) {
        NEED_VALUE();
        double d = lenient_double(value);
        if (opt[0] == 's') {
            if (d <= 0 || d > 1) {
                fprintf(errout, "slab_automove_ratio must be > 0 and <= 1\n");
                return false;
            }
            s->slab_automove_ratio = d;
        } else if (!(d > 0)) {
            fprintf(errout, "%s must be > 0\n", opt);
            return false;
        } else if (opt[0] == 'h') {
            s->hot_max_factor = d;
        } else {
            s->warm_max_factor = d;
        }
        if (opt[0] == 's')
            fprintf(errout, "warning: -o %s is accepted and reported but has no effect here\n",
                    opt);
    } else if (strcmp(opt, "hot_lru_pct") == 0 || strcmp(opt, "warm_lru_pct") == 0) {
        NEED_VALUE();
        v = lenient_int(value);
        if (v < 1 || v > 80) {
            fprintf(errout, "%s must be > 1 and < 80\n", opt);
            return false;
        }
        if (opt[0] == 'h')
            s->hot_lru_pct = (unsigned)v;
        else
            s->warm_lru_pct = (unsigned)v;
    } else if (strcmp(opt, "temporary_ttl") == 0) {
        NEED_VALUE();
        s->temporary_ttl = lenient_int(value);
        s->temp_lru = true;
        ps->temp_lru = true;
    } else if (strcmp(opt, "slab_automove_window") == 0 ||
               strcmp(opt, "watcher_logbuf_size") == 0 || strcmp(opt, "worker_logbuf_size") == 0) {
        NEED_VALUE();
        if (!settings_strict_ulong(value, INT_MAX / 1024, &uv)) {
            fprintf(errout, "could not parse argument to %s\n", opt);
            return false;
        }
        if (strcmp(opt, "slab_automove_window") == 0) {
            if (uv <= 2) { /* memcached's bound */
                fprintf(errout, "slab_automove_window must be > 2\n");
                return false;
            }
            s->slab_automove_window = (unsigned)uv; /* the slab mover's */
            return true;
        } else if (strcmp(opt, "watcher_logbuf_size") == 0) {
            s->watcher_logbuf_size = (unsigned)uv * 1024;
        } else {
            s->worker_logbuf_size = (unsigned)uv * 1024;
            /* memcached 1.6.18 falls through to slab_sizes here, so its
             * value must also pass the slab_sizes checks (memcached then
             * even uses it as the class sizes; that is not copied) */
            ps->slab_sizes = value;
        }
        fprintf(errout, "warning: -o %s is accepted and reported but has no effect here\n", opt);
    } else if (strcmp(opt, "slab_automove") == 0) {
        if (value == NULL) {
            s->slab_automove = 1;
            s->slab_automove_ratio = 0.8;
            s->slab_automove_window = 30;
            s->hot_lru_pct = 20;
            s->warm_lru_pct = 40;
            s->hot_max_factor = 0.2;
            s->warm_max_factor = 2.0;
            s->temporary_ttl = 61;
            s->lru_segmented = true; /* memcached's default, as reported */
            s->watcher_logbuf_size = 256 * 1024;
            s->worker_logbuf_size = 64 * 1024;
        } else {
            v = lenient_int(value);
            if (v < 0 || v > 2) {
                fprintf(errout, "slab_automove must be between 0 and 2\n");
                return false;
            }
            s->slab_automove = (int)v;
        }
    } else if (strcmp(opt, "track_sizes") == 0) {
        s->track_sizes = true;
    } else if (strcmp(opt, "no_hashexpand") == 0) {
        s->no_hashexpand = true;
    } else if (strcmp(opt, "no_slab_automove") == 0) {
        s->slab_automove = 0;
    } else if (strcmp(opt, "lru_crawler_sleep") == 0) {
        NEED_VALUE();
        v = lenient_int(value);
        if (v < 0 || v > 1000000) {
            fprintf(errout, "Illegal value for lru_crawler_sleep\n");
            return false;
        }
        s->lru_crawler_sleep = v;
    } else if (strcmp(opt, "lru_crawler_tocrawl") == 0) {
        NEED_VALUE();
        if (!settings_strict_ulong(value, UINT32_MAX, &uv)) {
            fprintf(errout, "could not parse argument to lru_crawler_tocrawl\n");
            return false;
        }
        s->lru_crawler_tocrawl = (long)uv;
    } else if (strcmp(opt, "idle_timeout") == 0) {
        NEED_VALUE();
        v = lenient_int(value);
        s->idle_timeout = v > 0 ? (unsigned)v : 0; /* memcached: <= 0 never times out */
    } else if (strcmp(opt, "read_buf_mem_limit") == 0) {
        NEED_VALUE();
        if (!settings_strict_ulong(value, UINT32_MAX, &uv)) {
            fprintf(errout, "could not parse argument to read_buf_mem_limit\n");
            return false;
        }
        /* megabytes; memcached keeps the product in 32 bits */
        s->read_buf_mem_limit = (size_t)(uint32_t)(uv * 1024 * 1024);
    } else if (strcmp(opt, "tail_repair_time") == 0) {
        NEED_VALUE();
        v = lenient_int(value);
        if (v < 10) {
            fprintf(errout, "Cannot set tail_repair_time to less than 10 seconds\n");
            return false;
        }
        s->tail_repair_time = (unsigned)v;
    } else {
        for (const struct ignored_suboption *ig = ignored_suboptions; ig->name; ig++) {
            if (strcmp(opt, ig->name) != 0)
                continue;
            double d;
            if (ig->kind != V_NONE && value == NULL) {
                fprintf(errout, "Missing %s argument\n", opt);
                return false;
            }
            if ((ig->kind == V_ULONG && !settings_strict_ulong(value, UINT32_MAX, &uv)) ||
                (ig->kind == V_DOUBLE && !settings_strict_double(value, &d))) {
                fprintf(errout, "could not parse argument to %s\n", opt);
                return false;
            }
            fprintf(errout, "warning: -o %s is not supported by memcached-rdma; ignored\n", opt);
            return true;
        }
        if (value)
            value[-1] = '=';
        fprintf(errout, "Illegal suboption \"%s\"\n", opt);
        return false;
    }
#undef NEED_VALUE
    return true;
}

/* Splits -o's list as memcached's getsubopt loop does: a trailing comma
 * ends the list, an empty entry anywhere else is an illegal suboption. */
static bool parse_suboptions(struct settings *s, struct parse_state *ps, const char *list,
                             FILE *errout)
{
    char *copy = strdup(list);
    if (!copy) {
        fprintf(errout, "out of memory parsing -o\n");
        return false;
    }
    bool ok = true;
    char *opt = copy;
    while (ok && *opt != '\0') {
        char *comma = strchr(opt, ',');
        char *next = comma ? comma + 1 : opt + strlen(opt);
        if (comma)
            *comma = '\0';
        ok = parse_suboption(s, ps, opt, errout);
        opt = next;
    }
    if (ok && ps->slab_sizes && ps->slab_sizes != ps->slab_sizes_copy) {
        char *kept = strdup(ps->slab_sizes); /* keep the value past this copy */
        free(ps->slab_sizes_copy);
        ps->slab_sizes_copy = kept;
        ps->slab_sizes = kept;
        ok = kept != NULL;
    }
    free(copy);
    return ok;
}

static bool replace_string(char **slot, const char *value, FILE *errout)
{
    char *copy = strdup(value);
    if (!copy) {
        fprintf(errout, "out of memory\n");
        return false;
    }
    free(*slot);
    *slot = copy;
    return true;
}

/* -l may be repeated: memcached joins the lists. */
static bool append_listen(struct settings *s, const char *value, FILE *errout)
{
    if (s->inter == NULL)
        return replace_string(&s->inter, value, errout);
    size_t len = strlen(s->inter) + strlen(value) + 2;
    char *joined = malloc(len);
    if (!joined) {
        fprintf(errout, "out of memory\n");
        return false;
    }
    snprintf(joined, len, "%s,%s", s->inter, value);
    free(s->inter);
    s->inter = joined;
    return true;
}

static const struct option long_options[] = {
    {"unix-mask", required_argument, NULL, 'a'},
    {"enable-shutdown", no_argument, NULL, 'A'},
    {"enable-ssl", no_argument, NULL, 'Z'},
    {"port", required_argument, NULL, 'p'},
    {"unix-socket", required_argument, NULL, 's'},
    {"udp-port", required_argument, NULL, 'U'},
    {"memory-limit", required_argument, NULL, 'm'},
    {"disable-evictions", no_argument, NULL, 'M'},
    {"conn-limit", required_argument, NULL, 'c'},
    {"lock-memory", no_argument, NULL, 'k'},
    {"help", no_argument, NULL, 'h'},
    {"license", no_argument, NULL, 'i'},
    {"version", no_argument, NULL, 'V'},
    {"enable-coredumps", no_argument, NULL, 'r'},
    {"verbose", optional_argument, NULL, 'v'},
    {"daemon", no_argument, NULL, 'd'},
    {"listen", required_argument, NULL, 'l'},
    {"user", required_argument, NULL, 'u'},
    {"pidfile", required_argument, NULL, 'P'},
    {"slab-growth-factor", required_argument, NULL, 'f'},
    {"factor", required_argument, NULL, 'f'},
    {"slab-min-size", required_argument, NULL, 'n'},
    {"threads", required_argument, NULL, 't'},
    {"enable-largepages", no_argument, NULL, 'L'},
    {"max-reqs-per-event", required_argument, NULL, 'R'},
    {"disable-cas", no_argument, NULL, 'C'},
    {"listen-backlog", required_argument, NULL, 'b'},
    {"protocol", required_argument, NULL, 'B'},
    {"max-item-size", required_argument, NULL, 'I'},
    {"enable-sasl", no_argument, NULL, 'S'},
    {"disable-flush-all", no_argument, NULL, 'F'},
    {"disable-dumping", no_argument, NULL, 'X'},
    {"disable-watch", no_argument, NULL, 'W'},
    {"auth-file", required_argument, NULL, 'Y'},
    {"memory-file", required_argument, NULL, 'e'},
    {"extended", required_argument, NULL, 'o'},
    {"napi-ids", required_argument, NULL, 'N'},
    {NULL, 0, NULL, 0},
};

static const char short_options[] = ":a:AZp:s:U:m:Mc:khiVrvdl:u:P:f:n:t:D:LR:Cb:B:I:SFXWY:e:o:N:";

/* memcached's item lock table (thread.c): the hash table must be larger. */
static unsigned item_lock_hashpower(int threads)
{
    if (threads < 3)
        return 10;
    if (threads < 4)
        return 11;
    if (threads < 5)
        return 12;
    if (threads <= 10)
        return 13;
    if (threads <= 20)
        return 14;
    return 15;
}

/* The checks memcached makes once every flag is read, in its order. */
static bool check_combination(struct settings *s, struct parse_state *ps, long long item_size,
                              FILE *errout)
{
    if (item_size < 1024) {
        fprintf(errout, "Item max size cannot be less than 1024 bytes.\n");
        return false;
    }
    if ((unsigned long long)item_size > s->maxbytes / 2) {
        fprintf(errout, "Cannot set item size limit higher than 1/2 of memory max.\n");
        return false;
    }
    if (item_size > 1024 * 1024 * 1024) {
        fprintf(errout, "Cannot set item size limit higher than a gigabyte.\n");
        return false;
    }
    s->item_size_max = (size_t)item_size;
    size_t chunk = s->slab_chunk_max ? s->slab_chunk_max : s->slab_page_size / 2;
    if (s->item_size_max > 1024 * 1024 && !ps->chunk_max_given)
        chunk = s->slab_page_size / 2;
    if (chunk > s->item_size_max) {
        fprintf(errout,
                "slab_chunk_max (bytes: %zu) cannot be larger than -I (item_size_max %zu)\n", chunk,
                s->item_size_max);
        return false;
    }
    if (s->item_size_max % chunk != 0) {
        fprintf(errout,
                "-I (item_size_max: %zu) must be evenly divisible by slab_chunk_max (bytes: %zu)\n",
                s->item_size_max, chunk);
        return false;
    }
    if (s->slab_page_size % chunk != 0) {
        fprintf(errout,
                "slab_chunk_max (bytes: %zu) must divide evenly into %zu (slab_page_size)\n", chunk,
                s->slab_page_size);
        return false;
    }
    s->slab_chunk_max = chunk;
    if (ps->slab_sizes && !check_slab_sizes(s, ps->slab_sizes, errout))
        return false;
    if (!ps->slab_sizes_given)
        s->slab_sizes_count = 0;
    /* as memcached: -U without -p listens for TCP on the UDP port too */
    if (ps->udp_port_given && s->udpport != 0 && !ps->tcp_port_given)
        s->port = s->udpport;
    if (s->port > 65535 || s->udpport > 65535) {
        fprintf(errout, "ERROR: Invalid port number %d.\n", s->port > 65535 ? s->port : s->udpport);
        return false;
    }
    if (s->hot_lru_pct + s->warm_lru_pct > 80) {
        fprintf(errout, "hot_lru_pct + warm_lru_pct cannot be more than 80%% combined\n");
        return false;
    }
    if (ps->temp_lru && !s->lru_maintainer) {
        fprintf(errout, "temporary_ttl requires lru_maintainer to be enabled\n");
        return false;
    }
    if (s->sasl) { /* binary SASL only, as memcached */
        if (!ps->protocol_given) {
            s->binding_protocol = PROTOCOL_BINARY;
        } else if (s->binding_protocol != PROTOCOL_BINARY) {
            fprintf(errout, "ERROR: You cannot allow the ASCII protocol while using SASL.\n");
            return false;
        }
        if (s->udpport) {
            fprintf(errout, "ERROR: Cannot enable UDP while using binary SASL authentication.\n");
            return false;
        }
    }
    if (s->tls.enabled && s->port == 0) {
        fprintf(errout, "ERROR: You cannot enable SSL without a TCP port.\n");
        return false;
    }
    if (ps->napi_ids > s->num_threads) {
        fprintf(errout, "Number of napi_ids(%d) cannot be greater than number of threads(%d)\n",
                ps->napi_ids, s->num_threads);
        return false;
    }
    return true;
}

/* The hash table must be larger than the item lock table, which grows with
 * -t. memcached finds this only when it starts its threads, and exits 1
 * with three lines. */
static bool check_lock_table(const struct settings *s, FILE *errout)
{
    unsigned hashpower = s->hashpower_init ? s->hashpower_init : 16;
    unsigned lock_power = item_lock_hashpower(s->num_threads);
    if (lock_power < hashpower)
        return true;
    fprintf(errout,
            "Hash table power size (%u) cannot be equal to or less than item lock table (%u)\n"
            "Item lock table grows with `-t N` (worker threadcount)\n"
            "Hash table grows with `-o hashpower=N` \n",
            hashpower, lock_power);
    return false;
}

static enum settings_action parse_args(struct settings *s, struct parse_state *ps, int argc,
                                       char **argv, FILE *out, FILE *errout)
{
    long v;
    long long item_size = (long long)s->item_size_max;
    bool show_help = false, show_version = false, show_license = false;
    int opt;

    optind = 0; /* full re-initialisation (GNU), so tests may parse again */
    opterr = 0;
    while ((opt = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
        switch (opt) {
        case 'a': /* strtol(optarg, NULL, 8), as memcached: "abc" is 0 */
            s->access = (int)(strtol(optarg, NULL, 8) & 07777);
            break;
        case 'A':
            s->shutdown_command = true;
            break;
        case 'p':
            /* -1: any free port, as memcached; the range is checked once
             * every flag is read, and a negative port fails to listen */
            s->port = (int)lenient_int(optarg);
            ps->tcp_port_given = true;
            break;
        case 'U':
            s->udpport = (int)lenient_int(optarg); /* as -p */
            ps->udp_port_given = true;
            break;
        case 's':
            if (!replace_string(&s->socketpath, optarg, errout))
                return SETTINGS_EXIT_FAILED;
            break;
        case 'm':
            /* megabytes read with atoi() as memcached: "100m" is 100, a
             * negative number wraps round to a huge limit */
            s->maxbytes = (size_t)lenient_int(optarg) * 1024 * 1024;
            break;
        case 'M':
            s->evict_to_free = false;
            break;
        case 'c':
            v = lenient_int(optarg);
            if (v <= 0) {
                fprintf(errout, "Maximum connections must be greater than 0\n");
                return SETTINGS_EXIT_FAILED;
            }
            s->maxconns = (int)v;
            break;
        case 'k':
            s->lock_memory = true;
            break;
        case 'h':
            show_help = true;
            break;
        case 'i':
            show_license = true;
            break;
        case 'V':
            show_version = true;
            break;
        case 'r':
            s->coredumps = true;
            break;
        case 'v':
            if (optarg) {
                if (!settings_ranged_long(optarg, 0, 3, &v)) {
                    fprintf(errout, "Invalid verbosity: %s (0..3)\n", optarg);
                    return SETTINGS_EXIT_FAILED;
                }
                s->verbose = (int)v;
            } else if (s->verbose < 3) {
                s->verbose++;
            }
            break;
        case 'd':
            s->daemonize = true;
            break;
        case 'l':
            if (!append_listen(s, optarg, errout))
                return SETTINGS_EXIT_FAILED;
            break;
        case 'u':
            if (!replace_string(&s->username, optarg, errout))
                return SETTINGS_EXIT_FAILED;
            break;
        case 'P':
            if (!replace_string(&s->pid_file, optarg, errout))
                return SETTINGS_EXIT_FAILED;
            break;
        case 'f': {
            double f = lenient_double(optarg);
            if (!(f > 1.0)) {
                fprintf(errout, "Factor must be greater than 1\n");
                return SETTINGS_EXIT_FAILED;
            }
            s->factor = f;
            break;
        }
        case 'n':
            v = lenient_int(optarg);
            if (v == 0) { /* memcached accepts negative values */
                fprintf(errout, "Chunk size must be greater than 0\n");
                return SETTINGS_EXIT_FAILED;
            }
            s->chunk_size = (int)v;
            break;
        case 't':
            v = lenient_int(optarg);
            if (v <= 0) {
                fprintf(errout, "Number of threads must be greater than 0\n");
                return SETTINGS_EXIT_FAILED;
            }
            if (v > 64)
                fprintf(errout, "WARNING: Setting a high number of worker threads is not "
                                "recommended.\n");
            if (v > 256) {
                fprintf(errout, "Number of threads must be at most 256\n");
                return SETTINGS_EXIT_FAILED;
            }
            s->num_threads = (int)v;
            break;
        case 'D':
            if (optarg[0] == '\0') { /* memcached takes the first character */
                fprintf(errout, "No delimiter specified\n");
                return SETTINGS_EXIT_FAILED;
            }
            s->prefix_delimiter = optarg[0];
            s->detail_enabled = true;
            break;
        case 'L':
            s->prealloc = true;
            break;
        case 'R':
            v = lenient_int(optarg);
            if (v == 0) { /* memcached accepts negative values */
                fprintf(errout, "Number of requests per event must be greater than 0\n");
                return SETTINGS_EXIT_FAILED;
            }
            s->reqs_per_event = (int)v;
            break;
        case 'C':
            s->use_cas = false;
            break;
        case 'b':
            s->backlog = lenient_int(optarg); /* handed to listen() as is, as memcached */
            break;
        case 'B':
            ps->protocol_given = true;
            if (strcmp(optarg, "auto") == 0) {
                s->binding_protocol = PROTOCOL_AUTO;
            } else if (strcmp(optarg, "binary") == 0) {
                s->binding_protocol = PROTOCOL_BINARY;
            } else if (strcmp(optarg, "ascii") == 0) {
                s->binding_protocol = PROTOCOL_ASCII;
            } else {
                fprintf(errout,
                        "Invalid value for binding protocol: %s\n"
                        " -- should be one of auto, binary, or ascii\n",
                        optarg);
                return SETTINGS_EXIT_BAD; /* 64, as memcached here */
            }
            break;
        case 'I':
            item_size = item_size_arg(optarg);
            break;
        case 'S':
            s->sasl = true;
            break;
        case 'F':
            s->flush_enabled = false;
            break;
        case 'X':
            s->dump_enabled = false;
            break;
        case 'W':
            s->watch_enabled = false;
            break;
        case 'Y':
            if (!replace_string(&s->auth_file, optarg, errout))
                return SETTINGS_EXIT_FAILED;
            break;
        case 'Z':
            s->tls.enabled = true;
            break;
        case 'e':
            if (!replace_string(&s->memory_file, optarg, errout))
                return SETTINGS_EXIT_FAILED;
            break;
        case 'N':
            ps->napi_ids = lenient_int(optarg);
            fprintf(errout, "warning: -N (napi ids) is not supported; ignored\n");
            break;
        case 'o':
            if (!parse_suboptions(s, ps, optarg, errout))
                return SETTINGS_EXIT_FAILED;
            break;
        case ':':
            fprintf(errout, "Option %s requires an argument\n", argv[optind - 1]);
            return SETTINGS_EXIT_FAILED;
        default: /* '?' */
            if (optopt)
                fprintf(errout, "Illegal argument \"%c\"\n", optopt);
            else
                fprintf(errout, "Illegal argument \"%s\"\n", argv[optind - 1]);
            fprintf(errout, "Try '%s -h' for the list of options.\n", argv[0]);
            return SETTINGS_EXIT_FAILED;
        }
    }
    for (int i = optind; i < argc; i++) /* memcached runs, ignoring them */
        fprintf(errout, "warning: ignoring argument \"%s\"\n", argv[i]);
    if (show_help) {
        print_usage(out);
        return SETTINGS_EXIT_OK;
    }
    if (show_version) {
        fprintf(out, "memcached-rdma %s (memcached %s compatible)\n", PACKAGE_VERSION,
                COMPAT_VERSION);
        return SETTINGS_EXIT_OK;
    }
    if (show_license) {
        print_license(out);
        return SETTINGS_EXIT_OK;
    }

    if (!check_combination(s, ps, item_size, errout) ||
        !settings_ext_check_usage(&s->ext, s->item_size_max, s->udpport, errout))
        return SETTINGS_EXIT_BAD;
    if (!settings_ext_check_store(&s->ext, errout))
        return SETTINGS_EXIT_FAILED;
    if (!check_lock_table(s, errout))
        return SETTINGS_EXIT_FAILED;
    if (s->socketpath && s->inter)
        fprintf(errout, "warning: -l is ignored with -s (Unix socket only)\n");
    return SETTINGS_RUN;
}

enum settings_action settings_parse(struct settings *s, int argc, char **argv, FILE *out,
                                    FILE *errout)
{
    struct parse_state ps = {0};
    enum settings_action a = parse_args(s, &ps, argc, argv, out, errout);
    free(ps.slab_sizes_copy);
    return a;
}
