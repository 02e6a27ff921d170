/*
 * watch.c: the watcher list behind "watch". Each watcher is a connection on
 * some worker; a logged event is formatted once and handed to each
 * interested watcher's worker with worker_call(), where it is queued as a
 * reply on the watcher's connection. A watcher is looked up by id on
 * delivery, so a line for a connection that closed meanwhile is dropped.
 */
#include "watch.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "conn.h"
#include "log.h"
#include "thread.h"

#define WATCHERS_MAX 20 /* memcached's limit */
/* Lines queued on a watcher that is not reading; past it further lines are
 * skipped (log_watcher_skipped), as memcached bounds a watcher's buffer. */
#define WATCH_PENDING_MAX 2048

unsigned watch_kinds_active;

struct watcher {
    uint64_t id;
    struct conn *c;
    struct worker *w;
    unsigned kinds;
    unsigned long long skipped; /* lines not queued since it was told last */
};

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct watcher watchers[WATCHERS_MAX];
static unsigned nwatchers;
static uint64_t next_watcher_id = 1;
static uint64_t next_gid = 1;
static unsigned long long lines_sent, lines_dropped, lines_skipped; /* under watch_lock */

static void recompute_active(void)
{
    unsigned kinds = 0;
    for (unsigned i = 0; i < nwatchers; i++)
        kinds |= watchers[i].kinds;
    __atomic_store_n(&watch_kinds_active, kinds, __ATOMIC_RELAXED);
}

int watch_parse_kind(const char *word)
{
    if (strcmp(word, "fetchers") == 0)
        return WATCH_FETCHERS;
    if (strcmp(word, "mutations") == 0)
        return WATCH_MUTATIONS;
    if (strcmp(word, "deletions") == 0)
        return WATCH_DELETIONS;
    if (strcmp(word, "evictions") == 0)
        return WATCH_EVICTIONS;
    if (strcmp(word, "connevents") == 0)
        return WATCH_CONNEVENTS;
    /* kinds memcached knows that never log anything here */
    if (strcmp(word, "rawcmds") == 0 || strcmp(word, "sysevents") == 0 ||
        strcmp(word, "proxyreqs") == 0 || strcmp(word, "proxyevents") == 0 ||
        strcmp(word, "proxyuser") == 0)
        return 0;
    return -1;
}

bool watch_start(struct conn *c, unsigned kinds)
{
    if (c->tp->datagram)
        return false; /* a shared UDP endpoint is never a log stream */
    pthread_mutex_lock(&watch_lock);
    if (nwatchers == WATCHERS_MAX) {
        pthread_mutex_unlock(&watch_lock);
        return false;
    }
    struct watcher *wt = &watchers[nwatchers++];
    wt->id = next_watcher_id++;
    wt->c = c;
    wt->w = c->worker;
    wt->kinds = kinds;
    c->watching = true;
    recompute_active();
    pthread_mutex_unlock(&watch_lock);
    return true;
}

void watch_stop(struct conn *c)
{
    if (!c->watching)
        return;
    pthread_mutex_lock(&watch_lock);
    for (unsigned i = 0; i < nwatchers; i++) {
        if (watchers[i].c == c) {
            watchers[i] = watchers[--nwatchers];
            break;
        }
    }
    c->watching = false;
    recompute_active();
    pthread_mutex_unlock(&watch_lock);
}

struct delivery {
    uint64_t watcher_id;
    size_t len;
    char line[];
};

/* Queues len bytes of text as a reply of watcher c (its own worker). */
static void queue_line(struct conn *c, const char *text, size_t len)
{
    struct resp *r = conn_resp_add(c);
    char *copy = r ? malloc(len) : NULL;
    if (copy) {
        memcpy(copy, text, len);
        resp_set_heap(r, copy, len);
    }
}

/* On the watcher's worker: queue the line if the watcher still exists
 * (only this thread can close its connection, so it stays valid) and keeps
 * up; after lines were skipped, memcached's "skipped=N" line goes first. */
static void deliver(struct worker *w, void *arg)
{
    (void)w;
    struct delivery *d = arg;
    struct conn *c = NULL;
    unsigned long long skipped = 0;
    pthread_mutex_lock(&watch_lock);
    for (unsigned i = 0; i < nwatchers; i++) {
        if (watchers[i].id != d->watcher_id)
            continue;
        c = watchers[i].c;
        if (c->nresp >= WATCH_PENDING_MAX) { /* the watcher does not keep up */
            watchers[i].skipped++;
            lines_skipped++;
            c = NULL;
        } else {
            skipped = watchers[i].skipped;
            watchers[i].skipped = 0;
            lines_sent++;
        }
    }
    pthread_mutex_unlock(&watch_lock);
    if (c) {
        if (skipped > 0) {
            char note[48];
            int n = snprintf(note, sizeof(note), "skipped=%llu\n", skipped);
            queue_line(c, note, (size_t)n);
        }
        queue_line(c, d->line, d->len);
        conn_wake(c);
    }
    free(d);
}

void watch_log(unsigned kind, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    pthread_mutex_lock(&watch_lock);
    uint64_t gid = next_gid++;
    for (unsigned i = 0; i < nwatchers; i++) {
        if (!(watchers[i].kinds & kind))
            continue;
        char line[1200];
        int len = snprintf(line, sizeof(line), "ts=%ld.%06ld gid=%llu %s\n", (long)tv.tv_sec,
                           (long)tv.tv_usec, (unsigned long long)gid, text);
        if (len < 0)
            continue;
        if ((size_t)len >= sizeof(line))
            len = (int)sizeof(line) - 1;
        struct delivery *d = malloc(sizeof(*d) + (size_t)len);
        if (!d) {
            lines_dropped++;
            continue;
        }
        d->watcher_id = watchers[i].id;
        d->len = (size_t)len;
        memcpy(d->line, line, (size_t)len);
        if (worker_call(watchers[i].w, deliver, d) != 0) {
            free(d);
            lines_dropped++;
        }
    }
    pthread_mutex_unlock(&watch_lock);
}

void watch_counters(unsigned *watchers_now, unsigned long long *logged, unsigned long long *sent,
                    unsigned long long *dropped, unsigned long long *skipped)
{
    pthread_mutex_lock(&watch_lock);
    *watchers_now = nwatchers;
    *logged = next_gid - 1;
    *sent = lines_sent;
    *dropped = lines_dropped;
    *skipped = lines_skipped;
    pthread_mutex_unlock(&watch_lock);
}

const char *watch_key(char *buf, size_t len, const char *key, size_t nkey)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < nkey && o + 4 <= len; i++) { /* 3 bytes and the NUL */
        unsigned char ch = (unsigned char)key[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '.' || ch == '_' || ch == '~') {
            buf[o++] = (char)ch;
        } else {
            buf[o++] = '%';
            buf[o++] = hex[ch >> 4];
            buf[o++] = hex[ch & 15];
        }
    }
    buf[o] = '\0';
    return buf;
}

void watch_conn_event(const struct conn *c, bool closing)
{
    static const char *const reasons[] = {[CLOSE_NORMAL] = "normal",
                                          [CLOSE_ERROR] = "error",
                                          [CLOSE_IDLE_TIMEOUT] = "idle_timeout",
                                          [CLOSE_SHUTDOWN] = "shutdown"};
    if (!watch_wants(WATCH_CONNEVENTS) || c->tp->datagram)
        return;
    /* peer_addr is "tcp:host:port", "tcp6:[host]:port" or, for RDMA,
     * "rdma:host:port#n"; memcached logs the host without brackets */
    char rip[96] = "", rport[16] = "";
    const char *transport = c->tp->name;
    if (strcmp(transport, "unix") == 0) {
        transport = "local"; /* memcached's words for a Unix socket's peer */
        snprintf(rip, sizeof(rip), "unix");
        snprintf(rport, sizeof(rport), "0");
    } else {
        const char *addr = strchr(c->peer_addr, ':');
        addr = addr ? addr + 1 : c->peer_addr;
        size_t n = strcspn(addr, "#"), colon = n;
        while (colon > 0 && addr[colon - 1] != ':')
            colon--;
        if (colon > 0) {
            size_t host_len = colon - 1;
            if (host_len >= 2 && addr[0] == '[' && addr[host_len - 1] == ']') {
                addr++;
                host_len -= 2;
                n--;
                colon--;
            }
            snprintf(rip, sizeof(rip), "%.*s", (int)host_len, addr);
            snprintf(rport, sizeof(rport), "%.*s", (int)(n - colon), addr + colon);
        }
    }
    if (closing)
        watch_log(WATCH_CONNEVENTS, "type=conn_close rip=%s rport=%s transport=%s reason=%s cfd=%d",
                  rip, rport, transport, reasons[c->close_reason], c->fd);
    else
        watch_log(WATCH_CONNEVENTS, "type=conn_new rip=%s rport=%s transport=%s cfd=%d", rip, rport,
                  transport, c->fd);
}
