/*
 * settings.c: memcached 1.6's command line, parsed into struct settings.
 *
 * Every flag memcached 1.6.18 documents is accepted with the same meaning.
 * Flags and -o suboptions this server implements act; the ones it knows but
 * does not implement print a one-line warning and are ignored; features
 * whose silent absence would be unsafe (SASL, ASCII auth, TLS) fail
 * start-up instead. Anything unknown fails start-up with a clear message.
 * Parsing only: no sockets, threads or storage here.
 */
#include "settings.h"

#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
    return COMPAT_VERSION "-rdma-" PACKAGE_VERSION;
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
    s->rdma_eager_max = 8192;
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
    s->lru_segmented = true; /* memcached's default, as reported */
    s->watcher_logbuf_size = 256 * 1024;
    s->worker_logbuf_size = 64 * 1024;
    s->lru_crawler_tocrawl = -1;
    s->prefix_delimiter = ':';
}

void settings_free(struct settings *s)
{
    free(s->pid_file);
    free(s->username);
    free(s->inter);
    free(s->socketpath);
    free(s->rdma_listen);
    free(s->auth_file);
    s->pid_file = s->username = s->inter = s->socketpath = s->rdma_listen = s->auth_file = NULL;
}

/* Whole-string decimal integer in [min, max]. */
static bool parse_long(const char *text, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* A size with an optional k/m/g suffix (bytes without suffix), as -I. */
static bool parse_size(const char *text, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || text[0] == '-')
        return false;
    unsigned long long mult = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mult = 1024;
        end++;
        break;
    case 'm':
    case 'M':
        mult = 1024 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mult = 1024ULL * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || v > SIZE_MAX / mult)
        return false;
    *out = (size_t)(v * mult);
    return true;
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
            "-o, --extended            comma separated list of extended options\n"
            "   - maxconns_fast, no_maxconns_fast: reject new connections over -c at once\n"
            "   - hashpower:           initial hash table size as a power of two\n"
            "   - slab_chunk_max:      maximum slab chunk size in kilobytes\n"
            "   - lru_crawler, no_lru_crawler: background expiry crawler (default: on)\n"
            "   - slab_automove:       0 keeps slab pages in their class, 1 or 2 moves them\n"
            "                          to classes that evict (default: 1)\n"
            "   - track_sizes:         keep the \"stats sizes\" histogram from the start\n"
            "   - lru_crawler_sleep:   microseconds between crawler batches\n"
            "   - lru_crawler_tocrawl: items examined per class per pass (0: all)\n"
            "   - idle_timeout:        close connections idle this many seconds (default: 0)\n"
            "   - rdma_listen:         serve RDMA (RC) on ADDR:PORT; repeatable\n"
            "   - rdma_eager_max:      RDMA message buffer size in bytes (default: 8192)\n"
            "   - rdma_poll:           RDMA completions: event, spin or adaptive (default: event)\n"
            "   - tail_repair_time:    accepted\n"
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

/* -o suboptions memcached 1.6 knows but this server ignores (with a warning). */
static const char *const ignored_suboptions[] = {"slab_reassign",
                                                 "no_slab_reassign",
                                                 "hash_algorithm",
                                                 "lru_crawler_sleep",
                                                 "lru_crawler_tocrawl",
                                                 "lru_maintainer",
                                                 "no_lru_maintainer",
                                                 "read_buf_mem_limit",
                                                 "resp_obj_mem_limit",
                                                 "slab_sizes",
                                                 "no_inline_ascii_resp",
                                                 "modern",
                                                 "no_modern",
                                                 "no_chunked_items",
                                                 "no_hashexpand",
                                                 "drop_privileges",
                                                 "no_drop_privileges",
                                                 "meta_response_old",
                                                 "sock_cookie_id",
                                                 "num_napi_ids",
                                                 "expirezero_does_not_evict",
                                                 "lru_segmented",
                                                 "no_lru_segmented",
                                                 "ext_page_size",
                                                 "ext_wbuf_size",
                                                 "ext_threads",
                                                 "ext_io_depth",
                                                 "ext_path",
                                                 "ext_item_size",
                                                 "ext_item_age",
                                                 "ext_low_ttl",
                                                 "ext_recache_rate",
                                                 "ext_compact_under",
                                                 "ext_drop_under",
                                                 "ext_max_sleep",
                                                 "ext_max_frag",
                                                 "ext_drop_unread",
                                                 "slab_automove_freeratio",
                                                 "ssl_chain_cert",
                                                 "ssl_key",
                                                 "ssl_keyformat",
                                                 "ssl_verify_mode",
                                                 "ssl_ciphers",
                                                 "ssl_ca_cert",
                                                 "ssl_wbuf_size",
                                                 "ssl_session_cache",
                                                 "ssl_kernel_tls",
                                                 "ssl_min_version",
                                                 "proxy_config",
                                                 "proxy_startfile",
                                                 "proxy_arg",
                                                 NULL};

/* Handles one -o suboption "name" or "name=value". */
static bool parse_suboption(struct settings *s, char *opt, FILE *errout)
{
    char *value = strchr(opt, '=');
    if (value)
        *value++ = '\0';
    long v;

#define NEED_VALUE()                                                                               \
    do {                                                                                           \
        if (value == NULL || *value == '\0') {                                                     \
            fprintf(errout, "Missing value for -o %s\n", opt);                                     \
            return false;                                                                          \
        }                                                                                          \
    } while (0)

    if (strcmp(opt, "maxconns_fast") == 0) {
        s->maxconns_fast = true;
    } else if (strcmp(opt, "no_maxconns_fast") == 0) {
        s->maxconns_fast = false;
    } else if (strcmp(opt, "hashpower") == 0) {
        NEED_VALUE();
        if (!parse_long(value, 12, 32, &v)) {
            fprintf(errout, "Initial hashtable multiplier of %s is out of range (12..32)\n", value);
            return false;
        }
        s->hashpower_init = (unsigned)v;
    } else if (strcmp(opt, "slab_chunk_max") == 0) {
        NEED_VALUE();
        if (!parse_long(value, 1, 1024 * 1024, &v)) {
            fprintf(errout, "could not parse argument to slab_chunk_max: %s\n", value);
            return false;
        }
        s->slab_chunk_max = (size_t)v * 1024;
    } else if (strcmp(opt, "lru_crawler") == 0) {
        s->lru_crawler = true;
    } else if (strcmp(opt, "no_lru_crawler") == 0) {
        s->lru_crawler = false;
    } else if (strcmp(opt, "slab_automove_ratio") == 0 || strcmp(opt, "hot_max_factor") == 0 ||
               strcmp(opt, "warm_max_factor") == 0) {
        NEED_VALUE();
        char *end;
        errno = 0;
        double d = strtod(value, &end);
        if (errno || end == value || *end != '\0' || !(d > 0)) {
            fprintf(errout, "Illegal value for %s: %s\n", opt, value);
            return false;
        }
        if (opt[0] == 's')
            s->slab_automove_ratio = d;
        else if (opt[0] == 'h')
            s->hot_max_factor = d;
        else
            s->warm_max_factor = d;
        fprintf(errout, "warning: -o %s is accepted and reported but has no effect here\n", opt);
    } else if (strcmp(opt, "slab_automove_window") == 0 || strcmp(opt, "hot_lru_pct") == 0 ||
               strcmp(opt, "warm_lru_pct") == 0 || strcmp(opt, "temporary_ttl") == 0 ||
               strcmp(opt, "watcher_logbuf_size") == 0 || strcmp(opt, "worker_logbuf_size") == 0) {
        NEED_VALUE();
        if (!parse_long(value, 0, INT_MAX / 1024, &v)) {
            fprintf(errout, "Illegal value for %s: %s\n", opt, value);
            return false;
        }
        if (strcmp(opt, "slab_automove_window") == 0)
            s->slab_automove_window = (unsigned)v;
        else if (strcmp(opt, "hot_lru_pct") == 0)
            s->hot_lru_pct = (unsigned)v;
        else if (strcmp(opt, "warm_lru_pct") == 0)
            s->warm_lru_pct = (unsigned)v;
        else if (strcmp(opt, "temporary_ttl") == 0)
            s->temporary_ttl = (int)v;
        else if (strcmp(opt, "watcher_logbuf_size") == 0)
            s->watcher_logbuf_size = (unsigned)v * 1024;
        else
            s->worker_logbuf_size = (unsigned)v * 1024;
        if (s->hot_lru_pct + s->warm_lru_pct > 80) {
            fprintf(errout, "hot_lru_pct + warm_lru_pct cannot be more than 80%% combined\n");
            return false;
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
        } else if (!parse_long(value, 0, 2, &v)) {
            fprintf(errout, "slab_automove must be 0, 1 or 2: %s\n", value);
            return false;
        } else {
            s->slab_automove = (int)v;
        }
    } else if (strcmp(opt, "track_sizes") == 0) {
        s->track_sizes = true;
    } else if (strcmp(opt, "no_slab_automove") == 0) {
        s->slab_automove = 0;
    } else if (strcmp(opt, "lru_crawler_sleep") == 0) {
        NEED_VALUE();
        if (!parse_long(value, 0, 1000000, &v)) {
            fprintf(errout, "Illegal value for lru_crawler_sleep: %s (0..1000000)\n", value);
            return false;
        }
        s->lru_crawler_sleep = v;
    } else if (strcmp(opt, "lru_crawler_tocrawl") == 0) {
        NEED_VALUE();
        if (!parse_long(value, 0, UINT32_MAX, &v)) {
            fprintf(errout, "could not parse argument to lru_crawler_tocrawl: %s\n", value);
            return false;
        }
        s->lru_crawler_tocrawl = v;
    } else if (strcmp(opt, "idle_timeout") == 0) {
        NEED_VALUE();
        if (!parse_long(value, 0, INT_MAX, &v)) {
            fprintf(errout, "could not parse argument to idle_timeout: %s\n", value);
            return false;
        }
        s->idle_timeout = (unsigned)v;
    } else if (strcmp(opt, "rdma_listen") == 0) {
        NEED_VALUE();
        char *joined = NULL;
        if (asprintf(&joined, "%s%s%s", s->rdma_listen ? s->rdma_listen : "",
                     s->rdma_listen ? " " : "", value) < 0)
            return false;
        free(s->rdma_listen);
        s->rdma_listen = joined;
    } else if (strcmp(opt, "rdma_eager_max") == 0) {
        NEED_VALUE();
        if (!parse_long(value, 1024, 1024 * 1024, &v)) {
            fprintf(errout, "rdma_eager_max must be 1024..1048576 bytes: %s\n", value);
            return false;
        }
        s->rdma_eager_max = (unsigned)v;
    } else if (strcmp(opt, "rdma_poll") == 0) {
        NEED_VALUE();
        if (strcmp(value, "event") == 0)
            s->rdma_poll = 0;
        else if (strcmp(value, "spin") == 0)
            s->rdma_poll = 1;
        else if (strcmp(value, "adaptive") == 0)
            s->rdma_poll = 2;
        else {
            fprintf(errout, "rdma_poll must be event, spin or adaptive: %s\n", value);
            return false;
        }
    } else if (strcmp(opt, "tail_repair_time") == 0) {
        NEED_VALUE();
        if (!parse_long(value, 0, INT_MAX, &v)) {
            fprintf(errout, "could not parse argument to tail_repair_time: %s\n", value);
            return false;
        }
        if (v > 0 && v < 10) {
            fprintf(errout, "Cannot set tail_repair_time to less than 10 seconds\n");
            return false;
        }
        s->tail_repair_time = (unsigned)v;
    } else {
        for (const char *const *name = ignored_suboptions; *name; name++) {
            if (strcmp(opt, *name) == 0) {
                fprintf(errout, "warning: -o %s is not supported by memcached-rdma; ignored\n",
                        opt);
                return true;
            }
        }
        fprintf(errout, "Illegal suboption \"%s\"\n", opt);
        return false;
    }
#undef NEED_VALUE
    return true;
}

static bool parse_suboptions(struct settings *s, const char *list, FILE *errout)
{
    char *copy = strdup(list);
    if (!copy) {
        fprintf(errout, "out of memory parsing -o\n");
        return false;
    }
    bool ok = true;
    char *save = NULL;
    for (char *opt = strtok_r(copy, ",", &save); opt && ok; opt = strtok_r(NULL, ",", &save))
        ok = parse_suboption(s, opt, errout);
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

enum settings_action settings_parse(struct settings *s, int argc, char **argv, FILE *out,
                                    FILE *errout)
{
    long v;
    bool item_size_given = false;
    bool show_help = false, show_version = false, show_license = false;
    int opt;

    optind = 0; /* full re-initialisation (GNU), so tests may parse again */
    opterr = 0;
    while ((opt = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
        switch (opt) {
        case 'a': {
            char *end;
            errno = 0;
            v = strtol(optarg, &end, 8);
            if (errno || end == optarg || *end != '\0' || v < 0 || v > 0777) {
                fprintf(errout, "Invalid unix socket mask: %s (octal, e.g. 700)\n", optarg);
                return SETTINGS_EXIT_BAD;
            }
            s->access = (int)v;
            break;
        }
        case 'A':
            s->shutdown_command = true;
            break;
        case 'p':
            if (!parse_long(optarg, -1, 65535, &v)) { /* -1: any free port, as memcached */
                fprintf(errout, "Invalid TCP port: %s\n", optarg);
                return SETTINGS_EXIT_BAD;
            }
            s->port = (int)v;
            break;
        case 'U':
            if (!parse_long(optarg, 0, 65535, &v)) {
                fprintf(errout, "Invalid UDP port: %s\n", optarg);
                return SETTINGS_EXIT_BAD;
            }
            s->udpport = (int)v;
            break;
        case 's':
            if (!replace_string(&s->socketpath, optarg, errout))
                return SETTINGS_EXIT_BAD;
            break;
        case 'm':
            if (!parse_long(optarg, 1, (long)(SIZE_MAX / (1024 * 1024)), &v)) {
                fprintf(errout, "Invalid memory limit: %s (megabytes)\n", optarg);
                return SETTINGS_EXIT_BAD;
            }
            s->maxbytes = (size_t)v * 1024 * 1024;
            break;
        case 'M':
            s->evict_to_free = false;
            break;
        case 'c':
            if (!parse_long(optarg, 1, INT_MAX, &v)) {
                fprintf(errout, "Maximum connections must be greater than 0: %s\n", optarg);
                return SETTINGS_EXIT_BAD;
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
                if (!parse_long(optarg, 0, 3, &v)) {
                    fprintf(errout, "Invalid verbosity: %s (0..3)\n", optarg);
                    return SETTINGS_EXIT_BAD;
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
                return SETTINGS_EXIT_BAD;
            break;
        case 'u':
            if (!replace_string(&s->username, optarg, errout))
                return SETTINGS_EXIT_BAD;
            break;
        case 'P':
            if (!replace_string(&s->pid_file, optarg, errout))
                return SETTINGS_EXIT_BAD;
            break;
        case 'f': {
            char *end;
            errno = 0;
            double f = strtod(optarg, &end);
            if (errno || end == optarg || *end != '\0' || !(f > 1.0)) {
                fprintf(errout, "Factor must be greater than 1\n");
                return SETTINGS_EXIT_BAD;
            }
            s->factor = f;
            break;
        }
        case 'n':
            if (!parse_long(optarg, 1, INT_MAX, &v)) {
                fprintf(errout, "Chunk size must be greater than 0\n");
                return SETTINGS_EXIT_BAD;
            }
            s->chunk_size = (int)v;
            break;
        case 't':
            if (!parse_long(optarg, 1, INT_MAX, &v)) {
                fprintf(errout, "Number of threads must be greater than 0\n");
                return SETTINGS_EXIT_BAD;
            }
            if (v > 64)
                fprintf(errout, "WARNING: Setting a high number of worker threads is not "
                                "recommended.\n");
            if (v > 256) {
                fprintf(errout, "Number of threads must be at most 256\n");
                return SETTINGS_EXIT_BAD;
            }
            s->num_threads = (int)v;
            break;
        case 'D':
            if (optarg[0] == '\0' || optarg[1] != '\0') {
                fprintf(errout, "No delimiter specified\n");
                return SETTINGS_EXIT_BAD;
            }
            s->prefix_delimiter = optarg[0];
            s->detail_enabled = true;
            break;
        case 'L':
            s->prealloc = true;
            break;
        case 'R':
            if (!parse_long(optarg, 1, INT_MAX, &v)) {
                fprintf(errout, "Maximum number of requests per event must be greater than 0\n");
                return SETTINGS_EXIT_BAD;
            }
            s->reqs_per_event = (int)v;
            break;
        case 'C':
            s->use_cas = false;
            break;
        case 'b':
            if (!parse_long(optarg, 1, INT_MAX, &v)) {
                fprintf(errout, "Invalid listen backlog: %s\n", optarg);
                return SETTINGS_EXIT_BAD;
            }
            s->backlog = (int)v;
            break;
        case 'B':
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
                return SETTINGS_EXIT_BAD;
            }
            break;
        case 'I':
            if (!parse_size(optarg, &s->item_size_max)) {
                fprintf(errout, "Invalid max item size: %s\n", optarg);
                return SETTINGS_EXIT_BAD;
            }
            item_size_given = true;
            break;
        case 'S':
            fprintf(errout, "This server is not built with SASL support.\n");
            return SETTINGS_EXIT_BAD;
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
                return SETTINGS_EXIT_BAD;
            break;
        case 'Z':
            fprintf(errout, "This server is not built with TLS support.\n");
            return SETTINGS_EXIT_BAD;
        case 'e':
            fprintf(errout, "warning: -e (memory file) is not supported; ignored\n");
            break;
        case 'N':
            fprintf(errout, "warning: -N (napi ids) is not supported; ignored\n");
            break;
        case 'o':
            if (!parse_suboptions(s, optarg, errout))
                return SETTINGS_EXIT_BAD;
            break;
        case ':':
            fprintf(errout, "Option %s requires an argument\n", argv[optind - 1]);
            return SETTINGS_EXIT_BAD;
        default: /* '?' */
            if (optopt)
                fprintf(errout, "Illegal argument \"%c\"\n", optopt);
            else
                fprintf(errout, "Illegal argument \"%s\"\n", argv[optind - 1]);
            fprintf(errout, "Try '%s -h' for the list of options.\n", argv[0]);
            return SETTINGS_EXIT_BAD;
        }
    }
    if (optind < argc) {
        fprintf(errout, "Unexpected argument \"%s\"\n", argv[optind]);
        return SETTINGS_EXIT_BAD;
    }
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

    if (item_size_given) {
        if (s->item_size_max < 1024) {
            fprintf(errout, "Item max size cannot be less than 1024 bytes.\n");
            return SETTINGS_EXIT_BAD;
        }
        if (s->item_size_max > s->maxbytes / 2) {
            fprintf(errout, "Cannot set item size limit higher than 1/2 of memory max.\n");
            return SETTINGS_EXIT_BAD;
        }
        if (s->item_size_max > 1024 * 1024 * 1024) {
            fprintf(errout, "Cannot set item size limit higher than a gigabyte.\n");
            return SETTINGS_EXIT_BAD;
        }
    }
    if (s->slab_chunk_max > s->slab_page_size / 2 && s->slab_chunk_max > s->item_size_max) {
        fprintf(errout, "slab_chunk_max cannot be larger than -I (item_size_max)\n");
        return SETTINGS_EXIT_BAD;
    }
    if (s->socketpath && s->inter)
        fprintf(errout, "warning: -l is ignored with -s (Unix socket only)\n");
    return SETTINGS_RUN;
}
