/* benchmarks/ohb_common.c: shared plumbing of the OHB benchmarks (options,
 * connection, buffers, CSV; the clock is ohb_clock.c). Public libmemcached API only; it must not
 * time or issue benchmark operations itself. */
#include "ohb_common.h"

#include <getopt.h>
#include <limits.h>
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

/* ---- the option table ------------------------------------------------------ */

static char *usage_text; /* the command parsed last, defaults before parsing */

/* The default shown for an option: its target's value before parsing. */
static void print_default(FILE *out, const struct ohb_option *opt)
{
    if (opt->help != NULL && strstr(opt->help, "default") != NULL)
        return;
    switch (opt->kind) {
    case OHB_OPT_STRING:
        if (*(const char **)opt->target != NULL)
            fprintf(out, " (default: %s)", *(const char **)opt->target);
        return;
    case OHB_OPT_SIZE:
    case OHB_OPT_UNSIGNED:
    case OHB_OPT_U64: {
        unsigned long long v = opt->kind == OHB_OPT_SIZE  ? *(size_t *)opt->target
                               : opt->kind == OHB_OPT_U64 ? *(uint64_t *)opt->target
                                                          : *(unsigned *)opt->target;
        if (v != 0 && v % (1024 * 1024) == 0)
            fprintf(out, " (default: %llum)", v / (1024 * 1024));
        else if (v != 0 && v % 1024 == 0)
            fprintf(out, " (default: %lluk)", v / 1024);
        else
            fprintf(out, " (default: %llu)", v);
        return;
    }
    case OHB_OPT_DOUBLE:
        fprintf(out, " (default: %g)", *(double *)opt->target);
        return;
    case OHB_OPT_SET:
    case OHB_OPT_CLEAR:
    case OHB_OPT_CALL:
        return;
    }
}

static char *render_usage(const struct ohb_command *cmd)
{
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    if (out == NULL) {
        perror("open_memstream");
        exit(1);
    }
    int width = (int)strlen("--help");
    for (size_t i = 0; i < cmd->count; i++) {
        const struct ohb_option *opt = &cmd->options[i];
        int w = 2 + (int)strlen(opt->name) + (opt->arg ? 1 + (int)strlen(opt->arg) : 0);
        if (w > width)
            width = w;
    }
    fprintf(out, "usage: %s [OPTION]...\n", cmd->name);
    for (size_t i = 0; i < cmd->count; i++) {
        const struct ohb_option *opt = &cmd->options[i];
        int w =
            fprintf(out, "  --%s%s%s", opt->name, opt->arg ? "=" : "", opt->arg ? opt->arg : "");
        fprintf(out, "%*s%s", width + 4 - w, "", opt->help ? opt->help : "");
        print_default(out, opt);
        fputc('\n', out);
    }
    fprintf(out, "  --help%*sthis text\n", width + 4 - 8, "");
    if (cmd->notes != NULL)
        fputs(cmd->notes, out);
    if (fclose(out) != 0) {
        perror("open_memstream");
        exit(1);
    }
    return text;
}

_Noreturn void ohb_usage_error(void)
{
    fputs(usage_text ? usage_text : "invalid options\n", stderr);
    exit(2);
}

static double parse_double(const char *name, const char *text)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end != '\0') {
        fprintf(stderr, "invalid --%s: %s\n", name, text);
        exit(2);
    }
    return v;
}

static void store(const struct ohb_option *opt, const char *text)
{
    switch (opt->kind) {
    case OHB_OPT_STRING:
        *(const char **)opt->target = text;
        return;
    case OHB_OPT_SIZE:
        *(size_t *)opt->target = ohb_parse_size(opt->name, text);
        return;
    case OHB_OPT_UNSIGNED: {
        size_t v = ohb_parse_size(opt->name, text);
        if (v > UINT_MAX) {
            fprintf(stderr, "invalid --%s: %s\n", opt->name, text);
            exit(2);
        }
        *(unsigned *)opt->target = (unsigned)v;
        return;
    }
    case OHB_OPT_U64:
        *(uint64_t *)opt->target = ohb_parse_size(opt->name, text);
        return;
    case OHB_OPT_DOUBLE:
        *(double *)opt->target = parse_double(opt->name, text);
        return;
    case OHB_OPT_SET:
        *(bool *)opt->target = true;
        return;
    case OHB_OPT_CLEAR:
        *(bool *)opt->target = false;
        return;
    case OHB_OPT_CALL:
        if (!opt->call(opt->target, text))
            exit(2);
        return;
    }
}

void ohb_command_parse(const struct ohb_command *cmd, int argc, char **argv)
{
    free(usage_text);
    usage_text = render_usage(cmd);
    struct option *longopts = calloc(cmd->count + 2, sizeof(*longopts));
    if (longopts == NULL) {
        fputs("out of memory for the options\n", stderr);
        exit(1);
    }
    for (size_t i = 0; i < cmd->count; i++)
        longopts[i] = (struct option){cmd->options[i].name,
                                      cmd->options[i].arg ? required_argument : no_argument, NULL,
                                      (int)i + 1};
    longopts[cmd->count] = (struct option){"help", no_argument, NULL, (int)cmd->count + 1};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == (int)cmd->count + 1) {
            fputs(usage_text, stdout);
            exit(0);
        }
        if (c < 1 || c > (int)cmd->count)
            ohb_usage_error();
        store(&cmd->options[c - 1], optarg);
    }
    free(longopts);
    if (optind != argc)
        ohb_usage_error();
}

/* ---- the latency programs' common options ----------------------------------- */

struct warmup_choice {
    unsigned *warmup;
    bool given; /* else a tenth of the iterations, at most 100 */
};

static bool parse_warmup(void *target, const char *text)
{
    struct warmup_choice *choice = target;
    *choice->warmup = (unsigned)ohb_parse_size("warmup", text);
    choice->given = true;
    return true;
}

void ohb_parse_options(int argc, char **argv, int extras, const char *name, const char *notes,
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
    struct warmup_choice warmup = {&opts->warmup, false};
    const struct ohb_option all[] = {
        OHB_OPTION_SERVERS(&opts->servers),
        {"op", OHB_OPT_STRING, &opts->op, "set|get|mix", "the operation timed", NULL},
        {"api", OHB_OPT_STRING, &opts->api, "iset|iget|bset|bget", "the call timed", NULL},
        {"window", OHB_OPT_UNSIGNED, &opts->window, "N", "requests in flight", NULL},
        {"min-size", OHB_OPT_SIZE, &opts->min_size, "N", "the first value size", NULL},
        {"max-size", OHB_OPT_SIZE, &opts->max_size, "N", "the last value size (sizes double)",
         NULL},
        {"iterations", OHB_OPT_UNSIGNED, &opts->iterations, "N", "timed operations per size", NULL},
        {"warmup", OHB_OPT_CALL, &warmup, "N",
         "untimed operations per size first (default: a tenth of the iterations, at most 100)",
         parse_warmup},
        {"max-time", OHB_OPT_DOUBLE, &opts->max_seconds, "SECONDS", "time cap per size", NULL},
        OHB_OPTION_CSV(&opts->csv),
        {"median", OHB_OPT_SET, &opts->median, NULL, "report the median operation, not the mean",
         NULL},
    };
    struct ohb_option table[sizeof(all) / sizeof(all[0])];
    size_t count = 0;
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        const char *option = all[i].name;
        if (strcmp(option, "op") == 0 && !(extras & OHB_EXTRA_OP))
            continue;
        if ((strcmp(option, "api") == 0 || strcmp(option, "window") == 0) &&
            !(extras & OHB_EXTRA_API))
            continue;
        table[count++] = all[i];
    }
    const struct ohb_command cmd = {name, table, count, notes};
    ohb_command_parse(&cmd, argc, argv);
    if (opts->min_size == 0 || opts->max_size < opts->min_size || opts->iterations == 0 ||
        opts->window == 0 || opts->max_seconds <= 0)
        ohb_usage_error();
    if (!warmup.given)
        opts->warmup = opts->iterations / 10 < 100 ? opts->iterations / 10 : 100;
    ohb_clock_calibrate();
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
