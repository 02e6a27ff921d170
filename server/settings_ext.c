/*
 * settings_ext.c: the external storage suboptions of memcached 1.6.18
 * (-o ext_path, ext_*, slab_automove_freeratio) with its defaults, value
 * checks, error lines and "stats settings" lines. Parsing only.
 */
#include "settings_ext.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "settings.h"

#define MIB (1024ULL * 1024)

void settings_ext_init(struct ext_settings *e)
{
    memset(e, 0, sizeof(*e));
    e->page_size = 64 * MIB;
    e->wbuf_size = 4 * MIB;
    e->threads = 1;
    e->io_depth = 1;
    e->item_size = 512;
    e->item_age = UINT32_MAX;
    e->recache_rate = 2000;
    e->max_sleep = 1000000;
    e->max_frag = 0.8;
    e->automove_freeratio = 0.01;
}

void settings_ext_free(struct ext_settings *e)
{
    for (unsigned i = e->npaths; i-- > 0;) {
        free(e->paths[i].path);
        e->paths[i].path = NULL;
    }
    e->npaths = 0;
}

/* "PATH:SIZE[:BUCKET]": SIZE is a number with an M, G, T or P unit (K is
 * taken too, as memcached takes it); the directory must be writable. */
static bool parse_ext_path(struct ext_settings *e, const char *value, FILE *errout)
{
    if (value == NULL) {
        fprintf(errout, "missing argument to ext_path, ie: ext_path=/d/file:5G\n");
        return false;
    }
    const char *colon = strchr(value, ':');
    if (colon == value) {
        fprintf(errout, "failed to parse ext_path argument\n");
        return false;
    }
    const char *size = colon ? colon + 1 : NULL;
    size_t len = size ? strcspn(size, ":") : 0;
    char unit = len ? size[len - 1] : '\0';
    uint64_t mult = 0;
    switch (unit) {
    case 'k':
    case 'K':
        mult = 1024;
        break;
    case 'm':
    case 'M':
        mult = MIB;
        break;
    case 'g':
    case 'G':
        mult = MIB * 1024;
        break;
    case 't':
    case 'T':
        mult = MIB * MIB;
        break;
    case 'p':
    case 'P':
        mult = MIB * MIB * 1024;
        break;
    default:
        break;
    }
    if (mult == 0) {
        fprintf(errout, "must supply size to ext_path, ie: ext_path=/f/e:64m (M|G|T|P supported)\n"
                        "failed to parse ext_path argument\n");
        return false;
    }
    char *end;
    errno = 0;
    unsigned long long n = strtoull(size, &end, 10);
    if (errno != 0 || end != size + len - 1 || size[0] == '-') {
        fprintf(errout, "failed to parse ext_path argument\n");
        return false;
    }
    if (size[len] == ':' && strcmp(size + len + 1, "default") != 0) {
        fprintf(errout, "ext_path only presently supports the default bucket\n"
                        "failed to parse ext_path argument\n");
        return false;
    }
    if (e->npaths == EXT_PATHS_MAX) {
        fprintf(errout, "too many ext_path arguments (at most %d)\n", EXT_PATHS_MAX);
        return false;
    }
    size_t plen = (size_t)(colon - value);
    char *path = strndup(value, plen);
    if (path == NULL) {
        fprintf(errout, "out of memory\n");
        return false;
    }
    char *dir = strdup(path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    const char *check = dir == NULL ? "." : slash == dir ? "/" : slash ? (*slash = '\0', dir) : ".";
    if (access(check, W_OK | X_OK) != 0) {
        fprintf(errout, "Failed to initialize external storage: failed to open file %s: %s\n", path,
                strerror(errno));
        free(dir);
        free(path);
        return false;
    }
    free(dir);
    e->paths[e->npaths].path = path;
    e->paths[e->npaths].size = (uint64_t)n * mult;
    e->npaths++;
    return true;
}

/* The whole-number settings: -o name, and whether the "extstore" command
 * (name without "ext_") may change them at run time. */
static const struct {
    const char *name;
    size_t offset;
    bool runtime;
} counts[] = {
    {"ext_threads", offsetof(struct ext_settings, threads), false},
    {"ext_io_depth", offsetof(struct ext_settings, io_depth), false},
    {"ext_item_size", offsetof(struct ext_settings, item_size), true},
    {"ext_item_age", offsetof(struct ext_settings, item_age), true},
    {"ext_low_ttl", offsetof(struct ext_settings, low_ttl), true},
    {"ext_recache_rate", offsetof(struct ext_settings, recache_rate), true},
    {"ext_compact_under", offsetof(struct ext_settings, compact_under), true},
    {"ext_drop_under", offsetof(struct ext_settings, drop_under), true},
    {"ext_max_sleep", offsetof(struct ext_settings, max_sleep), false},
};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

enum ext_suboption_result settings_ext_suboption(struct ext_settings *e, const char *name,
                                                 const char *value, FILE *errout)
{
    unsigned long uv;
    double d;

    if (strcmp(name, "ext_path") == 0)
        return parse_ext_path(e, value, errout) ? EXT_SUBOPT_OK : EXT_SUBOPT_BAD;
    if (strcmp(name, "ext_drop_unread") == 0) {
        e->drop_unread = true;
        return EXT_SUBOPT_OK;
    }
    bool page = strcmp(name, "ext_page_size") == 0, wbuf = strcmp(name, "ext_wbuf_size") == 0;
    bool frag = strcmp(name, "ext_max_frag") == 0;
    bool freeratio = strcmp(name, "slab_automove_freeratio") == 0;
    size_t count = NCOUNTS, i = 0;
    while (i < count && strcmp(name, counts[i].name) != 0)
        i++;
    if (!page && !wbuf && !frag && !freeratio && i == count)
        return EXT_SUBOPT_NOT_MINE;
    if (value == NULL) {
        fprintf(errout, "Missing %s argument\n", name);
        return EXT_SUBOPT_BAD;
    }
    if (page && e->npaths > 0) {
        fprintf(errout, "Must specify ext_page_size before any ext_path arguments\n");
        return EXT_SUBOPT_BAD;
    }
    if (frag || freeratio) {
        if (!settings_strict_double(value, &d)) {
            fprintf(errout, "could not parse argument to %s\n", name);
            return EXT_SUBOPT_BAD;
        }
        if (frag)
            e->max_frag = d;
        else
            e->automove_freeratio = d;
        return EXT_SUBOPT_OK;
    }
    if (!settings_strict_ulong(value, UINT32_MAX, &uv)) {
        fprintf(errout, "could not parse argument to %s\n", name);
        return EXT_SUBOPT_BAD;
    }
    if (page)
        e->page_size = (uint64_t)uv * MIB;
    else if (wbuf)
        e->wbuf_size = (uint64_t)uv * MIB;
    else
        *(unsigned *)((char *)e + counts[i].offset) = (unsigned)uv;
    return EXT_SUBOPT_OK;
}

bool settings_ext_command(struct ext_settings *e, const char *name, const char *value,
                          const char *value2)
{
    if (value == NULL)
        return false;
    unsigned long uv = 0;
    if (strcmp(name, "free_memchunks") == 0)
        return value2 != NULL && settings_strict_ulong(value, UINT32_MAX, &uv) &&
               settings_strict_ulong(value2, UINT32_MAX, &uv);
    if (strcmp(name, "max_frag") == 0) {
        double d = 0;
        bool ok = settings_strict_double(value, &d);
        e->max_frag = ok ? d : 0;
        return ok;
    }
    bool ok = settings_strict_ulong(value, UINT32_MAX, &uv);
    if (strcmp(name, "drop_unread") == 0) {
        e->drop_unread = ok && uv != 0;
        return ok;
    }
    for (size_t i = 0; i < NCOUNTS; i++) {
        if (counts[i].runtime && strcmp(name, counts[i].name + 4) == 0) {
            *(unsigned *)((char *)e + counts[i].offset) = ok ? (unsigned)uv : 0;
            return ok;
        }
    }
    return false;
}

bool settings_ext_check_usage(const struct ext_settings *e, size_t item_size_max, int udpport,
                              FILE *errout)
{
    if (e->npaths == 0)
        return true;
    if (item_size_max > e->wbuf_size) {
        fprintf(errout, "-I (item_size_max: %zu) cannot be larger than ext_wbuf_size: %llu\n",
                item_size_max, (unsigned long long)e->wbuf_size);
        return false;
    }
    if (udpport != 0) {
        fprintf(errout, "Cannot use UDP with extstore enabled (-U 0 to disable)\n");
        return false;
    }
    return true;
}

bool settings_ext_check_store(const struct ext_settings *e, FILE *errout)
{
    if (e->npaths == 0)
        return true;
    if (e->wbuf_size == 0 || e->page_size == 0 || e->page_size % e->wbuf_size != 0) {
        fprintf(
            errout,
            "Failed to initialize external storage: page_size must be divisible by wbuf_size\n");
        return false;
    }
    if (e->page_size % (2 * MIB) != 0 || e->wbuf_size % (2 * MIB) != 0) {
        fprintf(errout, "Failed to initialize external storage: page_size and wbuf_size must be "
                        "divisible by 1024*1024*2\n");
        return false;
    }
    if (e->threads == 0) {
        fprintf(errout, "Failed to initialize external storage: ext_threads must be at least 1\n");
        return false;
    }
    return true;
}

void settings_ext_stats(const struct ext_settings *e,
                        void (*emit)(void *ctx, const char *name, const char *value), void *ctx)
{
    char buf[32];
#define EMIT_U(n, v)                                                                               \
    do {                                                                                           \
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(v));                               \
        emit(ctx, n, buf);                                                                         \
    } while (0)
    EMIT_U("ext_item_size", e->item_size);
    EMIT_U("ext_item_age", e->item_age);
    EMIT_U("ext_low_ttl", e->low_ttl);
    EMIT_U("ext_recache_rate", e->recache_rate);
    EMIT_U("ext_wbuf_size", e->wbuf_size);
    EMIT_U("ext_compact_under", e->compact_under);
    EMIT_U("ext_drop_under", e->drop_under);
    EMIT_U("ext_max_sleep", e->max_sleep);
#undef EMIT_U
    snprintf(buf, sizeof(buf), "%.2f", e->max_frag);
    emit(ctx, "ext_max_frag", buf);
    snprintf(buf, sizeof(buf), "%.3f", e->automove_freeratio);
    emit(ctx, "slab_automove_freeratio", buf);
    emit(ctx, "ext_drop_unread", e->drop_unread ? "yes" : "no");
}
