/*
 * restart.c: warm restart (-e <file>), behind restart.h. Owns the two
 * files: <file> holds the items written at a graceful stop, <file>.meta
 * the settings they were stored under and the engine's state (clock, CAS
 * counter, flush boundary, hash table size) plus the size and checksum of
 * <file>. The metadata file is written last and read (then removed) first:
 * without it, <file> is never read.
 *
 * <file>: a header (magic, byte order, record header size), then one record
 * per item: a fixed header (value length, client flags, exptime, last
 * access, CAS unique, key length, fetched mark), the key, the value. Native
 * byte order: the files move between processes of one machine, not between
 * machines. The checksum covers the whole file, in blocks of WRITE_BLOCK.
 */
#include "restart.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "items.h"
#include "log.h"
#include "settings.h"

#define META_HEADER "memcached-rdma warm restart 1"
#define META_MAX_BYTES 65536
#define DATA_MAGIC "MCRITEMS"
#define BYTE_ORDER_MARK 0x01020304u
#define WRITE_BLOCK ((size_t)1 << 20)

struct data_head {
    char magic[8];
    uint32_t byte_order;
    uint32_t record_head_size;
    uint64_t reserved;
};

struct record_head {
    uint32_t nbytes;
    uint32_t client_flags;
    uint32_t exptime;     /* rel_time_t, 0 = never */
    uint32_t last_access; /* rel_time_t */
    uint64_t unique;
    uint8_t nkey;
    uint8_t fetched;
    uint8_t pad[6];
};

/* What restart_prepare() read, for restart_load(). */
static struct {
    bool warm;
    struct storage_restart_state state;
    uint64_t items;
    uint64_t data_bytes;
    uint64_t data_check;
    time_t process_started; /* of the process that saved the items */
} saved;

/* ---- names, checksum, timing ------------------------------------------------ */
static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

static char *path_with(const char *file, const char *suffix)
{
    size_t len = strlen(file) + strlen(suffix) + 1;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s%s", file, suffix);
    return p;
}

/* A 64-bit checksum of one block: words, then the tail bytes. Blocks are
 * WRITE_BLOCK bytes except the last, on both sides. */
static uint64_t check_block(uint64_t h, const unsigned char *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, sizeof(w));
        h ^= w * 0x9E3779B97F4A7C15ull;
        h = ((h << 27) | (h >> 37)) * 0xC2B2AE3D27D4EB4Full + 0x165667B19E3779F9ull;
    }
    for (; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

static uint64_t check_all(const unsigned char *p, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t at = 0; at < n; at += WRITE_BLOCK)
        h = check_block(h, p + at, n - at < WRITE_BLOCK ? n - at : WRITE_BLOCK);
    return h;
}

/* ---- the settings items must be loaded under ----------------------------- */
/* The settings whose change makes the saved items unusable (as memcached
 * decides): each formatted the same way when saving and when checking. */
enum { COMPAT_COUNT = 7 };
static const char *const compat_names[COMPAT_COUNT] = {
    "maxbytes",       "chunk_size",  "item_size_max", "slab_page_size",
    "slab_chunk_max", "slab_config", "use_cas",
};

static void compat_value(const struct settings *s, unsigned i, char *buf, size_t len)
{
    switch (i) {
    case 0:
        snprintf(buf, len, "%zu", s->maxbytes);
        break;
    case 1:
        snprintf(buf, len, "%d", s->chunk_size);
        break;
    case 2:
        snprintf(buf, len, "%zu", s->item_size_max);
        break;
    case 3:
        snprintf(buf, len, "%zu", s->slab_page_size);
        break;
    case 4:
        snprintf(buf, len, "%zu", s->slab_chunk_max);
        break;
    case 5:
        if (s->slab_sizes_count == 0) {
            snprintf(buf, len, "factor:%.17g", s->factor);
        } else {
            size_t at = (size_t)snprintf(buf, len, "sizes:");
            for (unsigned k = 0; k < s->slab_sizes_count && at < len; k++)
                at += (size_t)snprintf(buf + at, len - at, k ? "-%u" : "%u", s->slab_sizes[k]);
        }
        break;
    default:
        snprintf(buf, len, "%s", s->use_cas ? "true" : "false");
        break;
    }
}

/* ---- reading the metadata ------------------------------------------------ */
enum { STATE_COUNT = 10 };
static const char *const state_names[STATE_COUNT] = {
    "process_started", "current_time", "stop_time", "cas_counter", "oldest_cas",
    "oldest_live",     "hashpower",    "items",     "data_bytes",  "data_check",
};

static bool parse_u64(const char *text, int base, uint64_t *out)
{
    if (!*text || *text == '-' || *text == '+' || *text == ' ')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, base);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* Reads the file at path into a NUL-terminated buffer (at most max bytes). */
static char *read_small_file(const char *path, size_t max, size_t *len, int *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        *err = errno;
        return NULL;
    }
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
    *err = buf ? (ferror(f) ? EIO : 0) : ENOMEM;
    fclose(f);
    if (!buf || *err || n > max) {
        *err = *err ? *err : EFBIG;
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Checks the metadata text (header already matched) against s and fills
 * `saved`. NULL when usable, else why not (for the log). */
static const char *meta_check(char *text, const struct settings *s, char *why, size_t whylen)
{
    bool compat_seen[COMPAT_COUNT] = {false};
    uint64_t state[STATE_COUNT];
    bool state_seen[STATE_COUNT] = {false};
    bool ended = false;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (ended) {
            snprintf(why, whylen, "data after the end line");
            return why;
        }
        if (strcmp(line, "end") == 0) {
            ended = true;
            continue;
        }
        char *value = strchr(line, ' ');
        if (!value) {
            snprintf(why, whylen, "invalid metadata line [%.64s]", line);
            return why;
        }
        *value++ = '\0';
        if (strcmp(line, "version") == 0)
            continue; /* who wrote it: informative */
        bool known = false;
        for (unsigned i = 0; i < COMPAT_COUNT && !known; i++) {
            if (strcmp(line, compat_names[i]) != 0)
                continue;
            known = true;
            char now[512];
            compat_value(s, i, now, sizeof(now));
            if (strcmp(now, value) != 0) {
                snprintf(why, whylen,
                         "restart incompatible due to setting for [%s] [old value: %.128s] "
                         "[new value: %.128s]",
                         line, value, now);
                return why;
            }
            compat_seen[i] = true;
        }
        for (unsigned i = 0; i < STATE_COUNT && !known; i++) {
            if (strcmp(line, state_names[i]) != 0)
                continue;
            known = true;
            if (!parse_u64(value, strcmp(line, "data_check") == 0 ? 16 : 10, &state[i])) {
                snprintf(why, whylen, "failed to parse %s: %.64s", line, value);
                return why;
            }
            state_seen[i] = true;
        }
        if (!known) {
            snprintf(why, whylen, "unknown metadata key [%.64s]", line);
            return why;
        }
    }
    for (unsigned i = 0; i < COMPAT_COUNT; i++)
        if (!compat_seen[i]) {
            snprintf(why, whylen, "missing some metadata lines (%s)", compat_names[i]);
            return why;
        }
    for (unsigned i = 0; i < STATE_COUNT; i++)
        if (!state_seen[i]) {
            snprintf(why, whylen, "missing some metadata lines (%s)", state_names[i]);
            return why;
        }
    if (!ended) {
        snprintf(why, whylen, "missing some metadata lines (end)");
        return why;
    }
    time_t now = time(NULL);
    if (state[2] > (uint64_t)now || state[0] > state[2] || state[1] > state[2] - state[0] + 2) {
        snprintf(why, whylen, "the clock went backwards since the stop (stopped at %" PRIu64 ")",
                 state[2]);
        return why;
    }
    if (state[1] > UINT32_MAX || state[5] > UINT32_MAX || state[6] > 32 || state[6] == 0) {
        snprintf(why, whylen, "metadata values out of range");
        return why;
    }
    saved.state.cas_counter = state[3];
    saved.state.oldest_cas = state[4];
    saved.state.oldest_live = (rel_time_t)state[5];
    saved.state.hash_power = (unsigned)state[6];
    saved.items = state[7];
    saved.data_bytes = state[8];
    saved.data_check = state[9];
    saved.process_started = (time_t)state[0];
    return NULL;
}

enum restart_plan restart_prepare(const struct settings *s, unsigned *hashpower)
{
    saved.warm = false;
    int fd = open(s->memory_file, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        log_msg(LOG_ALWAYS, "[restart] cannot open the memory file %s: %s", s->memory_file,
                strerror(errno));
        return RESTART_REFUSE;
    }
    close(fd);
    char *meta = path_with(s->memory_file, ".meta");
    if (!meta) {
        log_msg(LOG_ALWAYS, "[restart] out of memory");
        return RESTART_REFUSE;
    }
    size_t len = 0;
    int err = 0;
    char *text = read_small_file(meta, META_MAX_BYTES, &len, &err);
    if (!text) {
        if (err == ENOENT) {
            log_msg(LOG_ALWAYS, "[restart] no metadata save file, starting with a clean cache");
            free(meta);
            return RESTART_COLD;
        }
        log_msg(LOG_ALWAYS, "[restart] cannot read the metadata file %s: %s", meta, strerror(err));
        free(meta);
        return RESTART_REFUSE;
    }
    enum restart_plan plan = RESTART_COLD;
    size_t header_len = strlen(META_HEADER);
    if (len > header_len && memcmp(text, META_HEADER, header_len) == 0 &&
        text[header_len] == '\n') {
        char why[512];
        const char *bad = meta_check(text + header_len + 1, s, why, sizeof(why));
        if (!bad && clock_resume(saved.process_started) != 0) {
            snprintf(why, sizeof(why), "the saved start time %lld is not usable",
                     (long long)saved.process_started);
            bad = why;
        }
        if (bad) {
            log_msg(LOG_ALWAYS, "[restart] %s; starting with a clean cache", bad);
        } else {
            plan = RESTART_WARM;
            saved.warm = true;
            *hashpower = saved.state.hash_power;
        }
    } else if (strncmp(text, "Tmain\n", 6) == 0) {
        /* memcached's own metadata: its memory file is its slab memory */
        log_msg(LOG_ALWAYS,
                "[restart] %s was written by memcached, whose memory file "
                "memcached-rdma cannot read; starting with a clean cache",
                meta);
    } else {
        log_msg(LOG_ALWAYS,
                "[restart] corrupt metadata file %s (no valid first line); "
                "remove it to start with a clean cache",
                meta);
        plan = RESTART_REFUSE;
    }
    if (plan != RESTART_REFUSE && unlink(meta) != 0) {
        log_msg(LOG_ALWAYS, "[restart] cannot remove %s: %s", meta, strerror(errno));
        plan = RESTART_REFUSE; /* it would be used again after a crash */
        saved.warm = false;
    }
    free(text);
    free(meta);
    return plan;
}

/* ---- loading the items ---------------------------------------------------- */
/* Walks the records of a checked-size file; calls fn on each (when not
 * NULL). The number of records, or -1 when the structure is broken. */
typedef void (*record_fn)(const struct record_head *h, const char *key, const char *value,
                          void *ctx);
static int64_t walk_records(const unsigned char *p, size_t n, record_fn fn, void *ctx)
{
    struct data_head dh;
    if (n < sizeof(dh))
        return -1;
    memcpy(&dh, p, sizeof(dh));
    if (memcmp(dh.magic, DATA_MAGIC, sizeof(dh.magic)) != 0 || dh.byte_order != BYTE_ORDER_MARK ||
        dh.record_head_size != sizeof(struct record_head))
        return -1;
    int64_t count = 0;
    size_t at = sizeof(dh);
    while (at < n) {
        struct record_head h;
        if (n - at < sizeof(h))
            return -1;
        memcpy(&h, p + at, sizeof(h));
        at += sizeof(h);
        if (h.nkey == 0 || n - at < (size_t)h.nkey + h.nbytes)
            return -1;
        if (fn)
            fn(&h, (const char *)p + at, (const char *)p + at + h.nkey, ctx);
        at += (size_t)h.nkey + h.nbytes;
        count++;
    }
    return count;
}

struct load_counts {
    uint64_t loaded, expired, duplicate, no_memory;
};

static void load_record(const struct record_head *h, const char *key, const char *value, void *arg)
{
    struct load_counts *lc = arg;
    if (h->exptime != 0 && h->exptime <= clock_now()) {
        lc->expired++;
        return;
    }
    enum alloc_result why;
    item *it = item_alloc(key, h->nkey, h->client_flags, h->exptime, h->nbytes, &why);
    if (!it) {
        lc->no_memory++;
        return;
    }
    item_value_write(it, value, h->nbytes);
    if (item_restore(it, h->unique, h->last_access, h->fetched != 0))
        lc->loaded++;
    else
        lc->duplicate++;
    item_release(it);
}

void restart_load(const struct settings *s)
{
    if (!saved.warm)
        return;
    saved.warm = false;
    struct timespec started;
    clock_gettime(CLOCK_MONOTONIC, &started);
    storage_restart_state_set(&saved.state);
    int fd = open(s->memory_file, O_RDWR);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        log_msg(LOG_ALWAYS, "[restart] cannot open %s: %s; starting with a clean cache",
                s->memory_file, strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    const char *bad = NULL;
    unsigned char *map = MAP_FAILED;
    if ((uint64_t)st.st_size != saved.data_bytes || st.st_size == 0) {
        bad = "its size is not the size saved";
    } else {
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED)
            bad = "it cannot be mapped";
    }
    if (!bad) {
        madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
        if (check_all(map, (size_t)st.st_size) != saved.data_check)
            bad = "its checksum does not match";
        else if (walk_records(map, (size_t)st.st_size, NULL, NULL) != (int64_t)saved.items)
            bad = "its records do not match the metadata";
    }
    if (bad) {
        log_msg(LOG_ALWAYS,
                "[restart] the memory file %s is damaged (%s); starting with a "
                "clean cache",
                s->memory_file, bad);
    } else {
        struct load_counts lc = {0};
        walk_records(map, (size_t)st.st_size, load_record, &lc);
        log_msg(LOG_WARN,
                "[restart] loaded %" PRIu64 " items from %s in %.2f s (%" PRIu64
                " expired while stopped, %" PRIu64 " without memory, %" PRIu64 " duplicate keys)",
                lc.loaded, s->memory_file, seconds_since(&started), lc.expired, lc.no_memory,
                lc.duplicate);
    }
    if (map != MAP_FAILED)
        munmap(map, (size_t)st.st_size);
    /* used once: its memory (often a RAM disk's) is given back */
    if (ftruncate(fd, 0) != 0)
        log_msg(LOG_ALWAYS, "[restart] cannot empty %s: %s", s->memory_file, strerror(errno));
    close(fd);
}

/* ---- saving the items ---------------------------------------------------- */
struct writer {
    int fd;
    unsigned char *buf;
    size_t used;
    uint64_t check;
    uint64_t bytes;
    uint64_t items;
    uint64_t on_flash;
    int err; /* first write error */
};

static void writer_flush(struct writer *w)
{
    w->check = check_block(w->check, w->buf, w->used);
    size_t at = 0;
    while (at < w->used && !w->err) {
        ssize_t n = write(w->fd, w->buf + at, w->used - at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            w->err = n < 0 ? errno : EIO;
        else
            at += (size_t)n;
    }
    w->bytes += w->used;
    w->used = 0;
}

static void writer_put(struct writer *w, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len > 0 && !w->err) {
        size_t room = WRITE_BLOCK - w->used;
        size_t n = len < room ? len : room;
        memcpy(w->buf + w->used, p, n);
        w->used += n;
        p += n;
        len -= n;
        if (w->used == WRITE_BLOCK)
            writer_flush(w);
    }
}

static void save_item(void *arg, const item *it)
{
    struct writer *w = arg;
    if (item_on_flash(it)) {
        w->on_flash++;
        return;
    }
    struct record_head h;
    memset(&h, 0, sizeof(h));
    h.nbytes = (uint32_t)item_nbytes(it);
    h.client_flags = item_flags(it);
    h.exptime = item_exptime(it);
    h.last_access = item_last_access(it);
    h.unique = item_unique(it);
    h.nkey = (uint8_t)item_nkey(it);
    h.fetched = item_was_fetched(it) ? 1 : 0;
    writer_put(w, &h, sizeof(h));
    writer_put(w, item_key(it), item_nkey(it));
    unsigned nseg = item_value_nseg(it);
    for (unsigned i = 0; i < nseg; i++) {
        struct iovec v = item_value_seg(it, i);
        writer_put(w, v.iov_base, v.iov_len);
    }
    w->items++;
}

static int write_meta(const struct settings *s, const struct writer *w,
                      const struct storage_restart_state *st, rel_time_t now_rel)
{
    char *meta = path_with(s->memory_file, ".meta");
    char *tmp = path_with(s->memory_file, ".meta.tmp");
    int rc = -1;
    FILE *f = NULL;
    if (!meta || !tmp)
        goto out;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        log_msg(LOG_ALWAYS, "[restart] cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    fprintf(f, "%s\nversion %s\n", META_HEADER, PACKAGE_VERSION);
    for (unsigned i = 0; i < COMPAT_COUNT; i++) {
        char value[512];
        compat_value(s, i, value, sizeof(value));
        fprintf(f, "%s %s\n", compat_names[i], value);
    }
    fprintf(f,
            "process_started %lld\ncurrent_time %u\nstop_time %lld\ncas_counter %" PRIu64
            "\noldest_cas %" PRIu64 "\noldest_live %u\nhashpower %u\nitems %" PRIu64
            "\ndata_bytes %" PRIu64 "\ndata_check %016" PRIx64 "\nend\n",
            (long long)clock_process_started(), now_rel, (long long)time(NULL), st->cas_counter,
            st->oldest_cas, st->oldest_live, st->hash_power, w->items, w->bytes, w->check);
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    f = NULL;
    if (!ok || rename(tmp, meta) != 0) {
        log_msg(LOG_ALWAYS, "[restart] cannot write %s: %s", meta, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    free(tmp);
    free(meta);
    return rc;
}

int restart_save(const struct settings *s)
{
    struct writer w = {.fd = -1, .check = 0xCBF29CE484222325ull};
    struct timespec started;
    clock_gettime(CLOCK_MONOTONIC, &started);
    int rc = -1;
    w.buf = malloc(WRITE_BLOCK);
    w.fd = open(s->memory_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (!w.buf || w.fd < 0) {
        log_msg(LOG_ALWAYS, "[restart] cannot write %s: %s", s->memory_file,
                w.buf ? strerror(errno) : "out of memory");
        goto out;
    }
    struct storage_restart_state st;
    struct data_head dh;
    memset(&dh, 0, sizeof(dh));
    memcpy(dh.magic, DATA_MAGIC, sizeof(dh.magic));
    dh.byte_order = BYTE_ORDER_MARK;
    dh.record_head_size = sizeof(struct record_head);
    writer_put(&w, &dh, sizeof(dh));
    storage_walk_items(0, 0, save_item, &w);
    writer_flush(&w);
    storage_restart_state_get(&st);
    rel_time_t now_rel = clock_now();
    if (!w.err && fsync(w.fd) != 0)
        w.err = errno;
    if (w.err) {
        log_msg(LOG_ALWAYS, "[restart] cannot write %s: %s", s->memory_file, strerror(w.err));
        goto out;
    }
    if (write_meta(s, &w, &st, now_rel) != 0)
        goto out;
    log_msg(LOG_WARN, "[restart] saved %" PRIu64 " items (%" PRIu64 " bytes) to %s in %.2f s",
            w.items, w.bytes, s->memory_file, seconds_since(&started));
    if (w.on_flash)
        log_msg(LOG_ALWAYS, "[restart] %" PRIu64 " items whose values were on flash were not saved",
                w.on_flash);
    rc = 0;
out:
    if (w.fd >= 0)
        close(w.fd);
    free(w.buf);
    return rc;
}
