/*
 * t/fuzz/server_target.c: the server's fuzz target (LLVMFuzzerTestOneInput):
 * the request parsers (proto_text.c, proto_meta.c, proto_bin.c) as conn.c
 * feeds them, over real storage and an in-memory transport. Owns the fake
 * transports, the item handle count and allocation faults and a quiet log
 * (through -Wl,--wrap=, see t/fuzz/server.am), and the checks made after
 * each input.
 * t/fuzz/replay.c runs it over t/fuzz/server.corpus (t/test_fuzz_server);
 * built with clang -fsanitize=fuzzer it is a libFuzzer target.
 *
 * Once: settings (-m 64 -t 1 -U 0), clock, stats, the three engines, one
 * worker whose event base this file runs (as t/test_conn_park.c does), and
 * an auth file in memory (memfd). Per input: settings restored, storage
 * started afresh, one connection driven until it has consumed everything
 * (then EOF) or closed, then freed; storage shut down.
 *
 * Input: byte 0 = knobs, the rest = the bytes the client sent.
 *   bits 0-3  bytes per recv() (recv_sizes[] below; 0 = all at once)
 *   bit 4     short writes (7 bytes) alternating with EAGAIN
 *   bit 5     -R 1 (yield after every request)
 *   bits 6-7  0: stream;
 *             1: stream over storage with -o slab_chunk_max=1024 (values
 *                over 1 KiB in several segments), with allocation faults
 *                (byte 1 is a mask: item_alloc/item_arith call i fails as
 *                out of memory when bit i%8 is set) and a second connection
 *                running "watch";
 *             2: stream with -Y (auth file on);
 *             3: datagram (each recv is one message of the recv size, as UDP)
 *
 * Checks beyond the sanitizers (each aborts): every item handle the server
 * took is released (counted through --wrap), every connection is freed,
 * binary replies are well framed, and the connection drive makes progress.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "conn.h"
#include "items.h"
#include "log.h"
#include "mcr/byteorder.h"
#include "meta_marks.h"
#include "proto_bin.h"
#include "proto_meta.h"
#include "proto_text.h"
#include "settings.h"
#include "stats.h"
#include "stats_detail.h"
#include "thread.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "server_target: %s\n", what);
    abort();
}

/* ---- item handles and allocation faults (-Wl,--wrap=) --------------------- */
/* Handles taken and not yet released. The crawler's walk (metadump,
 * cachedump) takes its handles through item_ref_if_live and releases them
 * with item_release, so it is counted on both sides. */
static long live_handles;
/* Calls that went through the wrappers: proves the wrapping took effect. */
static unsigned long wrapped_allocs, wrapped_gets;
static uint8_t fault_mask;
static unsigned fault_calls;

static bool next_call_fails(void)
{
    unsigned call = fault_calls++;
    return (fault_mask >> (call % 8)) & 1;
}

enum arith_result __real_item_arith(const char *key, size_t nkey, bool incr, uint64_t delta,
                                    uint64_t cas, uint64_t *value, uint64_t *cas_out,
                                    item_recas_fn carry);
item *__real_item_get(const char *key, size_t nkey);
item *__real_item_peek(const char *key, size_t nkey);
item *__real_item_get_touch(const char *key, size_t nkey, rel_time_t exptime);
item *__real_item_alloc(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                        size_t nbytes, enum alloc_result *why);
item *__real_item_alloc_parkable(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                                 size_t nbytes, struct alloc_wait *w, enum alloc_result *why);
struct item *__real_item_ref_if_live(struct item *it);
void __real_item_release(item *it);

enum arith_result __wrap_item_arith(const char *key, size_t nkey, bool incr, uint64_t delta,
                                    uint64_t cas, uint64_t *value, uint64_t *cas_out,
                                    item_recas_fn carry);
item *__wrap_item_get(const char *key, size_t nkey);
item *__wrap_item_peek(const char *key, size_t nkey);
item *__wrap_item_get_touch(const char *key, size_t nkey, rel_time_t exptime);
item *__wrap_item_alloc(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                        size_t nbytes, enum alloc_result *why);
item *__wrap_item_alloc_parkable(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                                 size_t nbytes, struct alloc_wait *w, enum alloc_result *why);
struct item *__wrap_item_ref_if_live(struct item *it);
void __wrap_item_release(item *it);

enum arith_result __wrap_item_arith(const char *key, size_t nkey, bool incr, uint64_t delta,
                                    uint64_t cas, uint64_t *value, uint64_t *cas_out,
                                    item_recas_fn carry)
{
    if (next_call_fails())
        return ARITH_NO_MEMORY;
    return __real_item_arith(key, nkey, incr, delta, cas, value, cas_out, carry);
}

static item *counted(item *it)
{
    if (it != NULL)
        live_handles++;
    return it;
}

item *__wrap_item_get(const char *key, size_t nkey)
{
    wrapped_gets++;
    return counted(__real_item_get(key, nkey));
}

item *__wrap_item_peek(const char *key, size_t nkey)
{
    return counted(__real_item_peek(key, nkey));
}

item *__wrap_item_get_touch(const char *key, size_t nkey, rel_time_t exptime)
{
    return counted(__real_item_get_touch(key, nkey, exptime));
}

item *__wrap_item_alloc(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                        size_t nbytes, enum alloc_result *why)
{
    wrapped_allocs++;
    if (next_call_fails()) {
        if (why != NULL)
            *why = ALLOC_NO_MEMORY;
        return NULL;
    }
    return counted(__real_item_alloc(key, nkey, flags, exptime, nbytes, why));
}

/* A set's item on a stream connection (conn_value.c): counted and failed
 * like item_alloc's. */
item *__wrap_item_alloc_parkable(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                                 size_t nbytes, struct alloc_wait *w, enum alloc_result *why)
{
    wrapped_allocs++;
    if (next_call_fails()) {
        *why = ALLOC_NO_MEMORY;
        return NULL;
    }
    return counted(__real_item_alloc_parkable(key, nkey, flags, exptime, nbytes, w, why));
}

struct item *__wrap_item_ref_if_live(struct item *it)
{
    return counted(__real_item_ref_if_live(it));
}

void __wrap_item_release(item *it)
{
    live_handles--;
    __real_item_release(it);
}

/* ---- the server's log (-Wl,--wrap=log_msg) -------------------------------- */
/* The input may raise the verbosity ("verbosity 3"): each message is still
 * formatted (its arguments are the request's bytes) but not printed, unless
 * FUZZ_SHOW is set, so that a replay's stderr holds only failures. */
static bool show_log;

void __wrap_log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void __wrap_log_msg(int level, const char *fmt, ...)
{
    if (log_verbosity() < level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n >= 0 && show_log)
        fprintf(stderr, "%s\n", line);
}

/* ---- the client's connection: an in-memory transport ---------------------- */
static const uint8_t *client_bytes;
static size_t client_len, client_pos, recv_size;
static bool client_eof;
static bool datagram_mode;
static char *reply_buf;
static size_t reply_len, reply_cap;
static bool short_writes, eagain_next;
static bool conn_wants_read, conn_wants_write, conn_closed;

static int fake_attach(struct conn *c, struct event_base *base)
{
    (void)c;
    (void)base;
    return 0;
}

/* As net_udp.c: the message picks the engine, and a read buffer too small
 * for it grows to hold it; the rest of a message that still does not fit
 * is lost. */
static ssize_t recv_datagram(struct conn *c, void *buf, size_t len, size_t n)
{
    c->engine = client_bytes[client_pos] == 0x80 && conn_binary_engine ? conn_binary_engine
                                                                       : conn_text_engine;
    char *at = buf;
    if (n > len && c->rbuf != NULL && at >= c->rbuf && at + len == c->rbuf + c->rsize) {
        size_t off = (size_t)(at - c->rbuf), size = off + n;
        char *bigger = realloc(c->rbuf, size);
        if (bigger != NULL) {
            STAT_ADD(&c->worker->stats, read_buf_bytes, size - c->rsize);
            c->rbuf = bigger;
            c->rsize = size;
            buf = bigger + off;
            len = n;
        }
    }
    size_t copied = n < len ? n : len;
    memcpy(buf, client_bytes + client_pos, copied);
    client_pos += n;
    return (ssize_t)copied;
}

static ssize_t fake_recv(struct conn *c, void *buf, size_t len)
{
    if (client_pos == client_len) {
        if (client_eof && !datagram_mode)
            return 0;
        errno = EAGAIN;
        return -1;
    }
    size_t n = client_len - client_pos;
    if (n > recv_size)
        n = recv_size;
    if (datagram_mode)
        return recv_datagram(c, buf, len, n);
    if (n > len)
        n = len;
    memcpy(buf, client_bytes + client_pos, n);
    client_pos += n;
    return (ssize_t)n;
}

static void reply_append(const void *p, size_t n)
{
    if (reply_len + n > reply_cap) {
        size_t cap = reply_cap > 0 ? reply_cap : 4096;
        while (cap < reply_len + n)
            cap *= 2;
        char *bigger = realloc(reply_buf, cap);
        if (bigger == NULL)
            fail("out of memory for the reply");
        reply_buf = bigger;
        reply_cap = cap;
    }
    memcpy(reply_buf + reply_len, p, n);
    reply_len += n;
}

static ssize_t fake_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
    (void)c;
    if (short_writes) {
        eagain_next = !eagain_next;
        if (!eagain_next) {
            errno = EAGAIN;
            return -1;
        }
    }
    size_t limit = short_writes && !datagram_mode ? 7 : SIZE_MAX;
    size_t total = 0;
    for (int i = 0; i < iovcnt && total < limit; i++) {
        size_t n = iov[i].iov_len;
        if (n > limit - total)
            n = limit - total;
        reply_append(iov[i].iov_base, n);
        total += n;
    }
    return (ssize_t)total;
}

static void fake_want(struct conn *c, bool r, bool w)
{
    (void)c;
    conn_wants_read = r;
    conn_wants_write = w;
}

static void fake_close(struct conn *c)
{
    (void)c;
    conn_closed = true;
}

static void fake_describe(struct conn *c, char *buf, size_t len)
{
    (void)c;
    snprintf(buf, len, "fuzz:0");
}

static const struct transport_ops stream_transport = {
    .name = "tcp",
    .attach = fake_attach,
    .recv = fake_recv,
    .sendv = fake_sendv,
    .want = fake_want,
    .close = fake_close,
    .describe = fake_describe,
};

static const struct transport_ops datagram_transport = {
    .name = "udp",
    .datagram = true,
    .attach = fake_attach,
    .recv = fake_recv,
    .sendv = fake_sendv,
    .want = fake_want,
    .close = fake_close,
    .describe = fake_describe,
};

/* ---- a second connection that runs "watch" (mode 1) ----------------------- */
static const char watch_request[] = "watch fetchers mutations deletions evictions\r\n";
static size_t watch_sent;
static size_t watch_reply_bytes;
static bool watch_wants_read, watch_wants_write, watch_closed;

static ssize_t watch_recv(struct conn *c, void *buf, size_t len)
{
    (void)c;
    size_t n = sizeof(watch_request) - 1 - watch_sent;
    if (n == 0) {
        errno = EAGAIN;
        return -1;
    }
    if (n > len)
        n = len;
    memcpy(buf, watch_request + watch_sent, n);
    watch_sent += n;
    return (ssize_t)n;
}

static ssize_t watch_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
    (void)c;
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    watch_reply_bytes += total;
    return (ssize_t)total;
}

static void watch_want(struct conn *c, bool r, bool w)
{
    (void)c;
    watch_wants_read = r;
    watch_wants_write = w;
}

static void watch_close(struct conn *c)
{
    (void)c;
    watch_closed = true;
}

static const struct transport_ops watch_transport = {
    .name = "tcp",
    .attach = fake_attach,
    .recv = watch_recv,
    .sendv = watch_sendv,
    .want = watch_want,
    .close = watch_close,
    .describe = fake_describe,
};

/* ---- set-up ---------------------------------------------------------------- */
static struct worker the_worker;
static struct settings initial_settings; /* restored before each input */
static int auth_fd = -1;                 /* a memfd holding the -Y file */
static char auth_path[64];               /* /proc/self/fd/N of auth_fd */

static void storage_up(bool small_chunks)
{
    struct storage_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.maxbytes = settings.maxbytes;
    cfg.factor = settings.factor;
    cfg.chunk_size = settings.chunk_size > 0 ? (size_t)settings.chunk_size : 1;
    cfg.item_size_max = settings.item_size_max;
    cfg.slab_page_size = settings.slab_page_size;
    cfg.slab_chunk_max = settings.slab_chunk_max < 8 ? 8 : settings.slab_chunk_max;
    if (small_chunks)
        cfg.slab_chunk_max = 1024; /* -o slab_chunk_max=1024 */
    cfg.prealloc = settings.prealloc;
    cfg.evict_to_free = settings.evict_to_free;
    cfg.use_cas = settings.use_cas;
    cfg.hashpower_init = 12;
    cfg.lru_crawler = settings.lru_crawler;
    cfg.worker_threads = 1;
    cfg.slab_automove_off = settings.slab_automove == 0;
    char err[256];
    if (storage_init(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "server_target: storage_init: %s\n", err);
        abort();
    }
}

/* The -Y file, in memory: nothing to clean up if a check aborts. */
static void auth_file_create(void)
{
    static const char lines[] = "user:pass\nfoo:bar baz\n";
    auth_fd = memfd_create("server_target_auth", 0);
    if (auth_fd < 0 || write(auth_fd, lines, sizeof(lines) - 1) != (ssize_t)(sizeof(lines) - 1))
        fail("cannot write the auth file");
    snprintf(auth_path, sizeof(auth_path), "/proc/self/fd/%d", auth_fd);
}

/* At exit (there is no libFuzzer hook for it): what LLVMFuzzerInitialize
 * and the inputs left, in reverse order of creation. */
static void target_teardown(void)
{
    free(reply_buf);
    reply_buf = NULL;
    reply_cap = 0;
    close(auth_fd);
    worker_destroy(&the_worker);
    settings = initial_settings; /* settings_free must not see auth_path */
    settings_free(&settings);
}

/* A set and a get: fails when the item wrappers were not linked in (a build
 * without the --wrap flags, or a linker that bypassed them), which would
 * leave the handle count and the faults silently off. */
static void check_wrapping(void)
{
    static const uint8_t set_then_get[] = "\0set k 0 0 1\r\nx\r\nget k\r\n";
    LLVMFuzzerTestOneInput(set_then_get, sizeof(set_then_get) - 1);
    if (wrapped_allocs == 0 || wrapped_gets == 0)
        fail("item functions not wrapped: link with -Wl,--wrap= (see t/fuzz/server.am)");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    settings_init(&settings);
    /* as the daemon: defaults finished by the command-line parser */
    char *args[] = {"memcached-rdma", "-m", "64", "-t", "1", "-U", "0", NULL};
    if (settings_parse(&settings, 7, args, stdout, stderr) != SETTINGS_RUN)
        fail("settings_parse");
    initial_settings = settings;
    clock_init();
    stats_init();
    conn_text_engine = &proto_text_engine;
    proto_text_meta_handler = proto_meta_handle;
    conn_binary_engine = &proto_bin_engine;
    if (worker_init(&the_worker, 0) != 0)
        fail("worker_init");
    auth_file_create();
    if (atexit(target_teardown) != 0)
        fail("atexit");
    show_log = getenv("FUZZ_SHOW") != NULL;
    check_wrapping();
    return 0;
}

/* ---- driving --------------------------------------------------------------- */
static void run_worker_events(void)
{
    for (int i = 0; i < 1000; i++) {
        event_base_loop(the_worker.base, EVLOOP_NONBLOCK);
        if (event_base_get_num_events(the_worker.base, EVENT_BASE_COUNT_ACTIVE) == 0)
            break;
    }
}

static void no_progress(const char *where)
{
    fprintf(stderr,
            "server_target: no progress in %s (read %zu of %zu, replied %zu, wants read %d "
            "write %d)\n",
            where, client_pos, client_len, reply_len, conn_wants_read, conn_wants_write);
    abort();
}

/* Drives the connection until it waits for input that will not come, or
 * closes. */
static void drive(struct conn *c)
{
    unsigned idle_rounds = 0;
    while (!conn_closed) {
        size_t pos_before = client_pos, reply_before = reply_len;
        if (!conn_wants_read && !conn_wants_write) {
            run_worker_events();
            if (!conn_wants_read && !conn_wants_write)
                break;
            continue;
        }
        if (conn_wants_read && !conn_wants_write && client_pos == client_len &&
            (!client_eof || datagram_mode))
            break;
        conn_on_ready(c, conn_wants_read, conn_wants_write);
        if (!conn_closed)
            run_worker_events();
        if (client_pos == pos_before && reply_len == reply_before) {
            if (++idle_rounds > 10000)
                no_progress("drive");
        } else {
            idle_rounds = 0;
        }
    }
}

/* Binary replies must tile the output exactly. */
static void check_binary_framing(void)
{
    size_t at = 0;
    while (at < reply_len) {
        const unsigned char *h = (const unsigned char *)reply_buf + at;
        if (reply_len - at < 24) {
            fprintf(stderr, "server_target: truncated binary header at %zu of %zu\n", at,
                    reply_len);
            abort();
        }
        if (h[0] != 0x81) {
            fprintf(stderr, "server_target: bad reply magic %02x at %zu of %zu\n", h[0], at,
                    reply_len);
            abort();
        }
        uint32_t body_len = mcr_be_get32(h + 8);
        unsigned ext_len = h[4], key_len = mcr_be_get16(h + 2);
        if (ext_len + key_len > body_len) {
            fprintf(stderr, "server_target: reply extras+key > body at %zu\n", at);
            abort();
        }
        if (reply_len - at - 24 < body_len) {
            fprintf(stderr, "server_target: truncated binary body at %zu (body %u, have %zu)\n", at,
                    body_len, reply_len - at - 24);
            abort();
        }
        at += 24 + (size_t)body_len;
    }
}

static struct conn *watch_conn_open(void)
{
    watch_sent = watch_reply_bytes = 0;
    watch_wants_read = watch_wants_write = watch_closed = false;
    struct conn *wc = conn_new(&the_worker, &watch_transport, 99, NULL, NULL, "fuzz");
    if (wc == NULL)
        fail("conn_new (watch)");
    for (int i = 0; i < 10 && watch_wants_read && watch_sent < sizeof(watch_request) - 1; i++)
        conn_on_ready(wc, true, false);
    run_worker_events();
    return wc;
}

static void watch_conn_close(struct conn *wc)
{
    for (int i = 0; i < 100 && !watch_closed && watch_wants_write; i++) {
        conn_on_ready(wc, false, true);
        run_worker_events();
    }
    if (!watch_closed)
        conn_close(wc);
    run_worker_events();
}

static const size_t recv_sizes[16] = {SIZE_MAX, 1,  2,   3,    5,    7,    11,    24,
                                      25,       64, 100, 1000, 2048, 4097, 16385, 70000};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t knobs = data[0];
    unsigned mode = knobs >> 6;
    client_bytes = data + 1;
    client_len = size - 1;
    fault_mask = 0;
    fault_calls = 0;
    if (mode == 1) {
        if (client_len == 0)
            return 0;
        fault_mask = client_bytes[0];
        client_bytes++;
        client_len--;
    }
    client_pos = 0;
    client_eof = false;
    recv_size = recv_sizes[knobs & 15];
    datagram_mode = mode == 3;
    short_writes = (knobs & 16) != 0;
    eagain_next = false;
    reply_len = 0;
    conn_wants_read = conn_wants_write = conn_closed = false;
    live_handles = 0;

    settings = initial_settings;
    settings.reqs_per_event = (knobs & 32) ? 1 : 20;
    log_set_verbosity(0);
    storage_up(mode == 1);
    if (mode == 2) {
        char err[256];
        settings.auth_file = auth_path;
        if (auth_load(auth_path, err, sizeof(err)) != 0) {
            fprintf(stderr, "server_target: auth_load: %s\n", err);
            abort();
        }
    }

    unsigned conns_before = conns_allocated();
    struct conn *wc = mode == 1 ? watch_conn_open() : NULL;
    struct conn *c = conn_new(&the_worker, datagram_mode ? &datagram_transport : &stream_transport,
                              100, NULL, datagram_mode ? conn_text_engine : NULL, "fuzz");
    if (c == NULL)
        fail("conn_new");
    drive(c);
    if (!conn_closed && !datagram_mode) {
        client_eof = true;
        drive(c);
    }
    if (!conn_closed)
        conn_close(c);
    run_worker_events();
    if (wc != NULL)
        watch_conn_close(wc);

    if (conns_allocated() != conns_before)
        fail("a connection was not freed (parked responses?)");
    if (live_handles != 0) {
        fprintf(stderr, "server_target: %ld item handle(s) not released\n", live_handles);
        abort();
    }
    /* framing holds when the connection was binary all along and no close
     * cut a partly written reply */
    if (!datagram_mode && client_len > 0 && client_bytes[0] == 0x80 && !short_writes)
        check_binary_framing();
    if (show_log) {
        printf("---- output (%zu bytes, closed=%d) ----\n", reply_len, conn_closed);
        fwrite(reply_buf, 1, reply_len, stdout);
        printf("\n---- end ----\n");
        fflush(stdout);
    }

    stats_detail_free();
    meta_marks_free();
    if (mode == 2)
        auth_free();
    storage_shutdown();
    log_set_verbosity(0);
    return 0;
}
