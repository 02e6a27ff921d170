/*
 * main.c: start-up and shutdown of memcached-rdma. Parses the command line,
 * prepares the process (limits, daemon, user, pid file), starts the storage
 * engine, the workers and the listeners, runs the listener thread's event
 * loop (accepts, signals; SIGHUP reloads the -Y auth file) and, on
 * SIGTERM/SIGINT (or "shutdown"), takes everything down in reverse order of
 * creation. Owns no protocol and no connection logic.
 */
#include "config.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#include "auth.h"
#include "net_tls.h"
#include "sasl.h"
#include "clock.h"
#include "conn.h"
#include "flash.h"
#include "items.h"
#include "log.h"
#include "net_rdma.h"
#include "net_sock.h"
#include "net_udp.h"
#include "proto_bin.h"
#include "proto_meta.h"
#include "proto_text.h"
#include "restart.h"
#include "settings.h"
#include "stats.h"
#include "stats_detail.h"
#include "thread.h"
#include "watch.h"

/* The signal that ended the event loop: SIGUSR1 is the graceful stop,
 * which saves the items for a warm restart (-e). */
static int stop_signal;

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct event_base *base = arg;
    stop_signal = (int)sig;
    log_msg(LOG_WARN, "Signal handled: %s.", strsignal((int)sig));
    event_base_loopbreak(base);
}

/* SIGHUP: memcached keeps running and reloads its -Y file. */
static void sighup_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    (void)arg;
    if (!settings.auth_file) {
        log_msg(LOG_WARN, "SIGHUP: nothing to reload");
        return;
    }
    char err[256];
    if (auth_reload(settings.auth_file, err, sizeof(err)) != 0)
        log_msg(LOG_ALWAYS, "SIGHUP: %s; the credentials loaded before stay", err);
    else
        log_msg(LOG_WARN, "SIGHUP: auth file %s reloaded", settings.auth_file);
}

static int raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        log_msg(LOG_ALWAYS, "failed to getrlimit number of files");
        return -1;
    }
    rlim_t want = (rlim_t)settings.maxconns + 64;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = want;
        if (rl.rlim_max < want)
            rl.rlim_max = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            log_msg(LOG_ALWAYS, "failed to set rlimit for open files. Try starting as root or "
                                "requesting smaller maxconns value.");
            return -1;
        }
    }
    return 0;
}

static int drop_privileges(void)
{
    if (getuid() != 0 && geteuid() != 0)
        return 0;
    if (settings.username == NULL || settings.username[0] == '\0') {
        log_msg(LOG_ALWAYS, "can't run as root without the -u switch");
        return -1;
    }
    struct passwd *pw = getpwnam(settings.username);
    if (!pw) {
        log_msg(LOG_ALWAYS, "can't find the user %s to switch to", settings.username);
        return -1;
    }
    if (pw->pw_uid == 0)
        return 0; /* asked to stay root */
    if (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) {
        log_msg(LOG_ALWAYS, "failed to assume identity of user %s", settings.username);
        return -1;
    }
    return 0;
}

static int daemonize(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0)
        _exit(EXIT_SUCCESS);
    if (setsid() < 0)
        return -1;
    if (chdir("/") != 0)
        return -1;
    if (settings.verbose == 0) { /* keep stderr when asked to talk, as memcached */
        int fd = open("/dev/null", O_RDWR);
        if (fd < 0)
            return -1;
        dup2(fd, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        if (fd > STDERR_FILENO)
            close(fd);
    }
    return 0;
}

/* Writes <file>.tmp and renames it, as memcached. A pid file that cannot be
 * written is logged and the server runs on (memcached does the same). */
static int write_pid_file(void)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", settings.pid_file) >= sizeof(tmp)) {
        log_msg(LOG_ALWAYS, "Could not open the pid file %s: name too long", settings.pid_file);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        log_msg(LOG_ALWAYS, "Could not open the pid file %s for writing: %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "%ld\n", (long)getpid());
    if (fclose(f) != 0) {
        log_msg(LOG_ALWAYS, "Could not close the pid file %s", tmp);
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, settings.pid_file) != 0) {
        log_msg(LOG_ALWAYS, "Could not rename the pid file from %s to %s: %s", tmp,
                settings.pid_file, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void storage_config_from_settings(struct storage_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->maxbytes = settings.maxbytes;
    cfg->factor = settings.factor;
    /* memcached accepts a negative -n (a smaller first class); the engine
     * takes its smallest */
    cfg->chunk_size = settings.chunk_size > 0 ? (size_t)settings.chunk_size : 1;
    cfg->item_size_max = settings.item_size_max;
    cfg->slab_page_size = settings.slab_page_size;
    cfg->slab_chunk_max =
        settings.slab_chunk_max < 8 ? 8 : settings.slab_chunk_max; /* engine minimum */
    cfg->slab_sizes = settings.slab_sizes;
    cfg->slab_sizes_count = settings.slab_sizes_count;
    cfg->prealloc = settings.prealloc;
    cfg->evict_to_free = settings.evict_to_free;
    cfg->use_cas = settings.use_cas;
    cfg->hashpower_init = settings.hashpower_init;
    cfg->no_hashexpand = settings.no_hashexpand;
    cfg->lru_crawler = settings.lru_crawler;
    cfg->worker_threads = (unsigned)settings.num_threads;
    cfg->slab_automove_off = settings.slab_automove == 0;
    cfg->slab_automove_window = settings.slab_automove_window;
    cfg->lru_maintainer = settings.lru_maintainer;
    cfg->lru_segmented = settings.lru_segmented;
    cfg->hot_lru_pct = settings.hot_lru_pct;
    cfg->warm_lru_pct = settings.warm_lru_pct;
    cfg->hot_max_factor = settings.hot_max_factor;
    cfg->warm_max_factor = settings.warm_max_factor;
    cfg->temp_lru = settings.temp_lru;
    cfg->temporary_ttl = settings.temporary_ttl;
}

int main(int argc, char **argv)
{
    int status = EXIT_FAILURE;
    struct event_base *base = NULL;
    struct event *sigint_ev = NULL, *sigterm_ev = NULL, *sigusr1_ev = NULL;
    struct event *sighup_ev = NULL;
    bool pid_written = false, storage_up = false, workers_up = false, flash_up = false;

    setvbuf(stderr, NULL, _IONBF, 0);
    settings_init(&settings);
    switch (settings_parse(&settings, argc, argv, stdout, stderr)) {
    case SETTINGS_RUN:
        break;
    case SETTINGS_EXIT_OK:
        settings_free(&settings);
        return EXIT_SUCCESS;
    case SETTINGS_EXIT_BAD:
        settings_free(&settings);
        return 64; /* EX_USAGE, as memcached */
    case SETTINGS_EXIT_FAILED:
        settings_free(&settings);
        return EXIT_FAILURE;
    }
    log_set_verbosity(settings.verbose);

    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN); /* until its event below reloads the auth file */
    if (settings.coredumps) {
        struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
        if (setrlimit(RLIMIT_CORE, &rl) != 0)
            log_msg(LOG_ALWAYS, "failed to ensure corefile creation");
    }
    char auth_err[256];
    if (settings.auth_file && auth_load(settings.auth_file, auth_err, sizeof(auth_err)) != 0) {
        log_msg(LOG_ALWAYS, "%s", auth_err);
        goto out_settings;
    }
    if (net_tls_init() != 0) {
        status = 64; /* EX_USAGE, as memcached when TLS cannot start */
        goto out_auth;
    }
    if (settings.sasl && sasl_setup() != 0)
        goto out_tls;
    if (raise_fd_limit() != 0 || drop_privileges() != 0)
        goto out_sasl;
    if (settings.daemonize && daemonize() != 0) {
        log_msg(LOG_ALWAYS, "failed to daemon() in order to daemonize");
        goto out_sasl;
    }
    if (settings.lock_memory && mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
        log_msg(LOG_ALWAYS, "warning: -k invalid, mlockall() failed: %s", strerror(errno));
    if (settings.pid_file)
        pid_written = write_pid_file() == 0;

    clock_init();
    stats_init();
    conn_text_engine = &proto_text_engine;
    proto_text_meta_handler = proto_meta_handle;
    conn_binary_engine = &proto_bin_engine;

    struct storage_config cfg;
    char err[256] = "";
    storage_config_from_settings(&cfg);
    if (settings.memory_file && restart_prepare(&settings, &cfg.hashpower_init) == RESTART_REFUSE)
        goto out_pid;
    if (storage_init(&cfg, err, sizeof(err)) != 0) {
        log_msg(LOG_ALWAYS, "failed to initialise storage: %s", err);
        goto out_pid;
    }
    storage_up = true;
    if (settings.memory_file)
        restart_load(&settings);
    storage_on_eviction(watch_eviction);

    base = event_base_new();
    if (!base) {
        log_msg(LOG_ALWAYS, "failed to create the main event base");
        goto out_storage;
    }
    if (workers_start((unsigned)settings.num_threads) != 0)
        goto out_base;
    workers_up = true;
    if (storage_start_threads() != 0) {
        log_msg(LOG_ALWAYS, "failed to start storage threads");
        goto out_workers;
    }
    if (settings.ext.npaths > 0) {
        if (flash_start(&settings.ext, err, sizeof(err)) != 0) {
            log_msg(LOG_ALWAYS, "Failed to initialize external storage: %s", err);
            goto out_workers;
        }
        flash_up = true;
    }
    if (settings.lru_crawler_sleep >= 0 &&
        storage_crawler_set_sleep((unsigned)settings.lru_crawler_sleep) != 0)
        log_msg(LOG_ALWAYS, "warning: -o lru_crawler_sleep not applied");
    if (settings.track_sizes)
        storage_sizes_enable(true);
    if (settings.lru_crawler_tocrawl >= 0)
        storage_crawler_set_tocrawl((unsigned)settings.lru_crawler_tocrawl);
    /* signals first: a SIGTERM right after the port opens must stop the
     * server cleanly */
    sigint_ev = evsignal_new(base, SIGINT, signal_cb, base);
    sigterm_ev = evsignal_new(base, SIGTERM, signal_cb, base);
    sigusr1_ev = evsignal_new(base, SIGUSR1, signal_cb, base);
    sighup_ev = evsignal_new(base, SIGHUP, sighup_cb, NULL);
    if (!sigint_ev || !sigterm_ev || !sigusr1_ev || !sighup_ev || event_add(sigint_ev, NULL) != 0 ||
        event_add(sigterm_ev, NULL) != 0 || event_add(sigusr1_ev, NULL) != 0 ||
        event_add(sighup_ev, NULL) != 0) {
        log_msg(LOG_ALWAYS, "failed to set up the signal events");
        goto out_events;
    }
    if (listeners_open(base) != 0) {
        log_msg(LOG_ALWAYS, "failed to open the listening sockets");
        status = EX_OSERR; /* as memcached exits when it cannot listen */
        goto out_events;
    }
    if (udp_open() != 0) {
        log_msg(LOG_ALWAYS, "failed to open the UDP sockets");
        status = EX_OSERR;
        goto out_events;
    }
    if (net_rdma_open(base) != 0)
        goto out_events;

    log_msg(LOG_WARN, "memcached-rdma %s ready: %d worker threads, %zu MB", PACKAGE_VERSION,
            settings.num_threads, settings.maxbytes / (1024 * 1024));
    event_base_dispatch(base);
    status = EXIT_SUCCESS;

out_events:
    if (sighup_ev)
        event_free(sighup_ev);
    if (sigusr1_ev)
        event_free(sigusr1_ev);
    if (sigterm_ev)
        event_free(sigterm_ev);
    if (sigint_ev)
        event_free(sigint_ev);
    listeners_close();
    net_rdma_close();
out_workers:
    if (flash_up)
        flash_stop(); /* completes queued reads on the still running workers */
    if (workers_up)
        workers_stop();
    net_rdma_shutdown();
    /* a graceful stop saves the items once nothing changes them any more */
    if (settings.memory_file && stop_signal == SIGUSR1 && status == EXIT_SUCCESS) {
        storage_stop_threads();
        restart_save(&settings);
    }
out_base:
    event_base_free(base);
out_storage:
    if (storage_up) {
        storage_on_eviction(NULL);
        storage_shutdown();
    }
    proto_meta_shutdown();
    stats_detail_free();
out_pid:
    if (pid_written)
        unlink(settings.pid_file);
out_sasl:
    if (settings.sasl)
        sasl_teardown();
out_tls:
    net_tls_shutdown();
out_auth:
    auth_free();
out_settings:
    settings_free(&settings);
    return status;
}
