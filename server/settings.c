/*
 * settings.c: memcached 1.6's command line, parsed into struct settings.
 *
 * Every flag memcached 1.6.18 documents is accepted with the same meaning.
 * Flags and -o suboptions this server implements act; the ones it knows but
 * does not implement print a one-line warning and are ignored. This file
 * owns the flags and the checks made once all are read; the -o suboptions
 * are parsed by settings_suboptions.c (ssl_* by settings_tls.c), -h's text
 * is in settings_usage.c. Anything unknown fails start-up with a clear message.
 * Parsing only: no sockets, threads or storage here.
 */
#include "settings.h"

#include "settings_ext.h"
#include "settings_internal.h"
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

void settings_automove_defaults(struct settings *s)
{
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
    settings_automove_defaults(s);
    s->lru_maintainer = true;
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
int settings_lenient_int(const char *text)
{
    long v = strtol(text, NULL, 10);
    if (v > INT_MAX)
        return INT_MAX;
    if (v < INT_MIN)
        return INT_MIN;
    return (int)v;
}

/* The same for atof(). */
double settings_lenient_double(const char *text)
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
    return (long long)settings_lenient_int(text) * mult;
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
    if (ps->slab_sizes && !settings_check_slab_sizes(s, ps->slab_sizes, errout))
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
            s->port = (int)settings_lenient_int(optarg);
            ps->tcp_port_given = true;
            break;
        case 'U':
            s->udpport = (int)settings_lenient_int(optarg); /* as -p */
            ps->udp_port_given = true;
            break;
        case 's':
            if (!replace_string(&s->socketpath, optarg, errout))
                return SETTINGS_EXIT_FAILED;
            break;
        case 'm':
            /* megabytes read with atoi() as memcached: "100m" is 100, a
             * negative number wraps round to a huge limit */
            s->maxbytes = (size_t)settings_lenient_int(optarg) * 1024 * 1024;
            break;
        case 'M':
            s->evict_to_free = false;
            break;
        case 'c':
            v = settings_lenient_int(optarg);
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
            double f = settings_lenient_double(optarg);
            if (!(f > 1.0)) {
                fprintf(errout, "Factor must be greater than 1\n");
                return SETTINGS_EXIT_FAILED;
            }
            s->factor = f;
            break;
        }
        case 'n':
            v = settings_lenient_int(optarg);
            if (v == 0) { /* memcached accepts negative values */
                fprintf(errout, "Chunk size must be greater than 0\n");
                return SETTINGS_EXIT_FAILED;
            }
            s->chunk_size = (int)v;
            break;
        case 't':
            v = settings_lenient_int(optarg);
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
            v = settings_lenient_int(optarg);
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
            s->backlog = settings_lenient_int(optarg); /* handed to listen() as is, as memcached */
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
            ps->napi_ids = settings_lenient_int(optarg);
            fprintf(errout, "warning: -N (napi ids) is not supported; ignored\n");
            break;
        case 'o':
            if (!settings_parse_suboptions(s, ps, optarg, errout))
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
        settings_print_usage(out);
        return SETTINGS_EXIT_OK;
    }
    if (show_version) {
        fprintf(out, "memcached-rdma %s (memcached %s compatible)\n", PACKAGE_VERSION,
                COMPAT_VERSION);
        return SETTINGS_EXIT_OK;
    }
    if (show_license) {
        settings_print_license(out);
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
