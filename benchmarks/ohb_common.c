/* benchmarks/ohb_common.c: shared plumbing of the OHB benchmarks (options,
 * connection, buffers, CSV; the clock is ohb_clock.c). Public libmemcached API only; it must not
 * time or issue benchmark operations itself. */
#include "ohb_common.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "ohb_clock.h"

size_t ohb_parse_size(const char *name, const char *text)
{
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text)
        goto bad;
    if (*end == 'k' || *end == 'K')
        v *= 1024, end++;
    else if (*end == 'm' || *end == 'M')
        v *= 1024 * 1024, end++;
    if (*end == '\0')
        return (size_t)v;
bad:
    fprintf(stderr, "invalid --%s: %s\n", name, text);
    exit(2);
}

void ohb_parse_options(int argc, char **argv, int extras, const char *usage,
                       struct ohb_options *opts)
{
    *opts = (struct ohb_options){
        .servers = "127.0.0.1:11211",
        .op = "get",
        .api = "iget",
        .min_size = 1,
        .max_size = 1024 * 1024 / 2,
        .iterations = 10000,
        .warmup = 0,
        .window = 64,
        .max_seconds = 10.0,
        .csv = NULL,
    };
    bool warmup_given = false;
    enum {
        OPT_SERVERS = 1,
        OPT_OP,
        OPT_API,
        OPT_MIN,
        OPT_MAX,
        OPT_ITER,
        OPT_WARMUP,
        OPT_WINDOW,
        OPT_MAXTIME,
        OPT_CSV,
        OPT_MEDIAN,
        OPT_HELP
    };
    static const struct option longopts[] = {
        {"servers", required_argument, NULL, OPT_SERVERS},
        {"op", required_argument, NULL, OPT_OP},
        {"api", required_argument, NULL, OPT_API},
        {"min-size", required_argument, NULL, OPT_MIN},
        {"max-size", required_argument, NULL, OPT_MAX},
        {"iterations", required_argument, NULL, OPT_ITER},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"max-time", required_argument, NULL, OPT_MAXTIME},
        {"csv", required_argument, NULL, OPT_CSV},
        {"median", no_argument, NULL, OPT_MEDIAN},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_SERVERS:
            opts->servers = optarg;
            break;
        case OPT_OP:
            if (!(extras & OHB_EXTRA_OP))
                goto usage;
            opts->op = optarg;
            break;
        case OPT_API:
            if (!(extras & OHB_EXTRA_API))
                goto usage;
            opts->api = optarg;
            break;
        case OPT_MIN:
            opts->min_size = ohb_parse_size("min-size", optarg);
            break;
        case OPT_MAX:
            opts->max_size = ohb_parse_size("max-size", optarg);
            break;
        case OPT_ITER:
            opts->iterations = (unsigned)ohb_parse_size("iterations", optarg);
            break;
        case OPT_WARMUP:
            opts->warmup = (unsigned)ohb_parse_size("warmup", optarg);
            warmup_given = true;
            break;
        case OPT_WINDOW:
            if (!(extras & OHB_EXTRA_API))
                goto usage;
            opts->window = (unsigned)ohb_parse_size("window", optarg);
            break;
        case OPT_MAXTIME:
            opts->max_seconds = strtod(optarg, NULL);
            break;
        case OPT_CSV:
            opts->csv = optarg;
            break;
        case OPT_MEDIAN:
            opts->median = true;
            break;
        case OPT_HELP:
            fputs(usage, stdout);
            exit(0);
        default:
            goto usage;
        }
    }
    if (optind != argc || opts->min_size == 0 || opts->max_size < opts->min_size ||
        opts->iterations == 0 || opts->window == 0 || opts->max_seconds <= 0)
        goto usage;
    if (!warmup_given)
        opts->warmup = opts->iterations / 10 < 100 ? opts->iterations / 10 : 100;
    ohb_clock_calibrate();
    return;
usage:
    fputs(usage, stderr);
    exit(2);
}

memcached_st *ohb_connect(const char *servers)
{
    memcached_st *memc;
    if (strncmp(servers, "--", 2) == 0) {
        memc = memcached(servers, strlen(servers));
        if (memc == NULL) {
            fprintf(stderr, "invalid libmemcached configuration: %s\n", servers);
            exit(1);
        }
        return memc;
    }
    memc = memcached_create(NULL);
    memcached_server_list_st list = memcached_servers_parse(servers);
    if (memc == NULL || list == NULL) {
        fprintf(stderr, "invalid server list: %s\n", servers);
        exit(1);
    }
    memcached_return_t rc = memcached_server_push(memc, list);
    memcached_server_list_free(list);
    if (rc != MEMCACHED_SUCCESS)
        ohb_fail(memc, "memcached_server_push", rc);
    return memc;
}

char *ohb_value_new(size_t size)
{
    char *value = malloc(size ? size : 1);
    if (value == NULL) {
        fprintf(stderr, "out of memory for a %zu-byte value\n", size);
        exit(1);
    }
    for (size_t i = 0; i < size; i++)
        value[i] = (char)('a' + i % 26);
    return value;
}

FILE *ohb_csv_open(const struct ohb_options *opts, const char *header)
{
    if (opts->csv == NULL)
        return NULL;
    FILE *csv = fopen(opts->csv, "w");
    if (csv == NULL) {
        perror(opts->csv);
        exit(1);
    }
    fprintf(csv, "%s\n", header);
    return csv;
}

uint64_t ohb_random(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

double ohb_uniform(uint64_t *state)
{
    return (double)(ohb_random(state) >> 11) * 0x1p-53;
}

void ohb_fail(memcached_st *memc, const char *what, memcached_return_t rc)
{
    fprintf(stderr, "%s failed: %s\n", what, memcached_strerror(memc, rc));
    exit(1);
}
