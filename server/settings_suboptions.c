/*
 * settings_suboptions.c: memcached 1.6.18's general -o suboptions (hashpower,
 * slab_*, lru_*, ...) and the split of -o's list; ssl_*, ext_* and rdma_* go
 * to settings_tls.c, settings_ext.c and settings_rdma.c. Parsing only.
 */
#include "settings.h"

#include "settings_ext.h"
#include "settings_internal.h"
#include "settings_rdma.h"
#include "settings_tls.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* memcached's checks of -o slab_sizes; the sizes go to s->slab_sizes. */
bool settings_check_slab_sizes(struct settings *s, const char *list, FILE *errout)
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
        v = settings_lenient_int(value);
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
        double d = settings_lenient_double(value);
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
        v = settings_lenient_int(value);
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
        s->temporary_ttl = settings_lenient_int(value);
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
            settings_automove_defaults(s);
        } else {
            v = settings_lenient_int(value);
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
        v = settings_lenient_int(value);
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
        v = settings_lenient_int(value);
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
        v = settings_lenient_int(value);
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
bool settings_parse_suboptions(struct settings *s, struct parse_state *ps, const char *list,
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
