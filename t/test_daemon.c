/*
 * test_daemon.c: starts the real memcached-rdma binary and checks what a
 * memcached user relies on at the process level: -h/-V, refusing unknown
 * flags, -c (extra connections get "ERROR Too many open connections" and
 * are counted), -R (conn_yields), shutdown with and without -A, clean exit
 * and pid file removal on SIGTERM, a Unix socket (-s), -o idle_timeout.
 * Servers listen on 127.0.0.1 on an ephemeral port reported through
 * MEMCACHED_PORT_FILENAME. Every wait is bounded. TAP output.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>
#include "t/rdma/tap.h"

static char binary[PATH_MAX + 64];
static char workdir[64];

static void find_binary(void)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    /* t/test_daemon lives in the build tree next to server/ (libtool may
     * run it from t/.libs) */
    snprintf(binary, sizeof(binary), "%s/../server/memcached-rdma", self);
    if (access(binary, X_OK) != 0)
        snprintf(binary, sizeof(binary), "%s/../../server/memcached-rdma", self);
}

struct server {
    pid_t pid;
    int port;
    char errfile[PATH_MAX];
};

/* Runs the binary with args, stdout/stderr to files; returns pid. */
static pid_t spawn(const char *const *args, const char *portfile, const char *outfile,
                   const char *errfile)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = binary;
    for (; *args && argc < 60; args++)
        argv[argc++] = (char *)*args;
    if (getuid() == 0 || geteuid() == 0) {
        argv[argc++] = "-u";
        argv[argc++] = "root";
    }
    argv[argc] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        if (portfile)
            setenv("MEMCACHED_PORT_FILENAME", portfile, 1);
        int out = open(outfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int err = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(out, STDOUT_FILENO);
        dup2(err, STDERR_FILENO);
        execv(binary, argv);
        _exit(127);
    }
    return pid;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits up to ms for the child; returns its exit status or -1. */
static int wait_exit(pid_t pid, int ms)
{
    for (int waited = 0; waited <= ms; waited += 10) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        sleep_ms(10);
    }
    return -1;
}

static void slurp(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Starts a server on an ephemeral 127.0.0.1 port; 0 on success. */
static int start_server(struct server *s, const char *const *extra)
{
    const char *args[48];
    int n = 0;
    args[n++] = "-l";
    args[n++] = "127.0.0.1";
    args[n++] = "-p";
    args[n++] = "-1"; /* a free port, reported in MEMCACHED_PORT_FILENAME */
    args[n++] = "-U";
    args[n++] = "0";
    for (; extra && *extra && n < 46; extra++)
        args[n++] = *extra;
    args[n] = NULL;
    char portfile[PATH_MAX], outfile[PATH_MAX];
    snprintf(portfile, sizeof(portfile), "%s/ports", workdir);
    snprintf(outfile, sizeof(outfile), "%s/out", workdir);
    snprintf(s->errfile, sizeof(s->errfile), "%s/err", workdir);
    unlink(portfile);
    s->pid = spawn(args, portfile, outfile, s->errfile);
    s->port = 0;
    for (int i = 0; i < 500 && s->port == 0; i++) {
        char text[256];
        slurp(portfile, text, sizeof(text));
        char *p = strstr(text, "TCP INET: ");
        if (p)
            s->port = atoi(p + 10);
        else
            sleep_ms(10);
        if (wait_exit(s->pid, 0) >= 0)
            return -1;
    }
    return s->port ? 0 : -1;
}

static int stop_server(struct server *s)
{
    kill(s->pid, SIGTERM);
    int st = wait_exit(s->pid, 10000);
    if (st < 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    return st;
}

static int connect_tcp(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((unsigned short)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends req, reads until the reply ends with `until` (or EOF/timeout).
 * Returns bytes read; *eof tells whether the server closed. */
static size_t talk(int fd, const char *req, const char *until, char *buf, size_t len, int ms,
                   bool *eof)
{
    size_t got = 0;
    if (eof)
        *eof = false;
    if (req && send(fd, req, strlen(req), MSG_NOSIGNAL) < 0)
        return 0;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int left = ms - (int)((now.tv_sec - start.tv_sec) * 1000 +
                              (now.tv_nsec - start.tv_nsec) / 1000000);
        if (left <= 0)
            break;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, left) <= 0)
            break;
        ssize_t n = recv(fd, buf + got, len - 1 - got, 0);
        if (n <= 0) {
            if (eof)
                *eof = true;
            break;
        }
        got += (size_t)n;
        buf[got] = '\0';
        size_t ul = until ? strlen(until) : 0;
        if (until && got >= ul && memcmp(buf + got - ul, until, ul) == 0)
            break;
    }
    buf[got] = '\0';
    return got;
}

static long stat_value(int fd, const char *name)
{
    static char buf[65536];
    talk(fd, "stats\r\n", "END\r\n", buf, sizeof(buf), 3000, NULL);
    char key[128];
    snprintf(key, sizeof(key), "STAT %s ", name);
    char *p = strstr(buf, key);
    return p ? atol(p + strlen(key)) : -1;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

int main(void)
{
    tap_plan(27);
    find_binary();
    snprintf(workdir, sizeof(workdir), "/tmp/test_daemon.XXXXXX");
    if (!mkdtemp(workdir)) {
        printf("Bail out! mkdtemp failed\n");
        return 1;
    }
    char out[PATH_MAX], err[PATH_MAX], text[8192], buf[8192];
    snprintf(out, sizeof(out), "%s/o", workdir);
    snprintf(err, sizeof(err), "%s/e", workdir);

    /* command line */
    int st = wait_exit(spawn(ARGS("-h"), NULL, out, err), 10000);
    slurp(out, text, sizeof(text));
    tap_ok(st == 0 && strstr(text, "--port") && strstr(text, "--max-reqs-per-event"),
           "-h prints usage and exits 0");
    st = wait_exit(spawn(ARGS("-V"), NULL, out, err), 10000);
    slurp(out, text, sizeof(text));
    tap_ok(st == 0 && strncmp(text, "memcached-rdma ", 15) == 0,
           "-V prints memcached-rdma <version>");
    st = wait_exit(spawn(ARGS("--no-such-flag"), NULL, out, err), 10000);
    slurp(err, text, sizeof(text));
    tap_ok(st > 0 && st < 128 && strstr(text, "no-such-flag"),
           "unknown flag: message, non-zero exit");
    st = wait_exit(spawn(ARGS("-o", "no_such_suboption"), NULL, out, err), 10000);
    slurp(err, text, sizeof(text));
    tap_ok(st > 0 && st < 128 && strstr(text, "no_such_suboption"),
           "unknown -o suboption: message, non-zero exit");

    /* a server with an ignored suboption, a pid file and -c */
    struct server s;
    char pidfile[PATH_MAX];
    snprintf(pidfile, sizeof(pidfile), "%s/pid", workdir);
    int started = start_server(
        &s, ARGS("-o", "slab_reassign", "-P", pidfile, "-c", "6", "-t", "2", "-R", "1"));
    slurp(s.errfile, text, sizeof(text));
    tap_ok(started == 0 && strstr(text, "slab_reassign"), "known -o suboption warns and starts");
    slurp(pidfile, text, sizeof(text));
    tap_ok(started == 0 && atoi(text) == s.pid, "-P writes the pid");

    int fds[16];
    int nfds = 0, rejected = 0;
    for (int i = 0; i < 12 && !rejected; i++) {
        int fd = connect_tcp(s.port);
        if (fd < 0)
            break;
        bool eof;
        talk(fd, "version\r\n", "\r\n", buf, sizeof(buf), 2000, &eof);
        if (strncmp(buf, "ERROR Too many open connections\r\n", 33) == 0) {
            rejected = 1;
            talk(fd, NULL, NULL, buf, sizeof(buf), 2000, &eof);
            tap_ok(eof, "the rejected connection is closed");
            close(fd);
        } else {
            fds[nfds++] = fd;
        }
    }
    tap_ok(rejected && nfds <= 6, "beyond -c: \"ERROR Too many open connections\"");
    close(fds[--nfds]); /* make room for the stats connection */
    sleep_ms(100);
    int fd = connect_tcp(s.port);
    tap_ok(stat_value(fd, "rejected_connections") >= 1, "rejected_connections counts it");
    tap_ok(stat_value(fd, "max_connections") == 6, "max_connections reports -c");

    /* -R 1: pipelined requests are served across several events */
    talk(fd, "set y 0 0 1\r\nz\r\n", "\r\n", buf, sizeof(buf), 2000, NULL);
    long yields = stat_value(fd, "conn_yields");
    const char *five = "get y\r\nget y\r\nget y\r\nget y\r\nget y\r\n";
    send(fd, five, strlen(five), MSG_NOSIGNAL);
    size_t got = 0;
    buf[0] = '\0';
    for (int i = 0; i < 50 && got < 5 * strlen("VALUE y 0 1\r\nz\r\nEND\r\n"); i++)
        got += talk(fd, NULL, "END\r\n", buf + got, sizeof(buf) - got, 200, NULL);
    tap_ok(strstr(buf,
                  "VALUE y 0 1\r\nz\r\nEND\r\nVALUE y 0 1\r\nz\r\nEND\r\nVALUE y 0 1\r\nz\r\nEND"
                  "\r\nVALUE y 0 1\r\nz\r\nEND\r\nVALUE y 0 1\r\nz\r\nEND\r\n") != NULL,
           "pipelined gets all answered in order");
    tap_ok(stat_value(fd, "conn_yields") > yields, "-R 1 yields between requests (conn_yields)");

    talk(fd, "shutdown\r\n", "\r\n", buf, sizeof(buf), 2000, NULL);
    tap_ok(strcmp(buf, "ERROR: shutdown not enabled\r\n") == 0, "shutdown without -A is refused");
    close(fd);
    while (nfds > 0)
        close(fds[--nfds]);
    st = stop_server(&s);
    tap_ok(st == 0, "SIGTERM: clean exit status 0");
    tap_ok(access(pidfile, F_OK) != 0, "pid file removed at exit");

    /* -A: shutdown stops the server */
    if (start_server(&s, ARGS("-A")) == 0) {
        fd = connect_tcp(s.port);
        bool eof;
        talk(fd, "shutdown\r\n", NULL, buf, sizeof(buf), 3000, &eof);
        tap_ok(eof, "shutdown with -A closes the connection");
        tap_ok(wait_exit(s.pid, 10000) == 0, "and the server exits with status 0");
        close(fd);
    } else {
        tap_ok(0, "server with -A started");
        tap_ok(0, "server with -A stopped");
    }

    /* -A: "shutdown graceful" stops it too; a bad mode is refused */
    if (start_server(&s, ARGS("-A")) == 0) {
        fd = connect_tcp(s.port);
        talk(fd, "shutdown sometime\r\n", "\r\n", buf, sizeof(buf), 2000, NULL);
        tap_ok(strcmp(buf, "CLIENT_ERROR invalid shutdown mode\r\n") == 0,
               "shutdown with an unknown mode is refused");
        bool eof;
        talk(fd, "shutdown graceful\r\n", NULL, buf, sizeof(buf), 3000, &eof);
        tap_ok(eof && wait_exit(s.pid, 10000) == 0, "shutdown graceful stops the server, status 0");
        close(fd);
    } else {
        tap_ok(0, "server with -A started");
        tap_ok(0, "server with -A stopped");
    }

    /* -s: the text protocol on a Unix socket; the file goes away at exit */
    char sockpath[96];
    snprintf(sockpath, sizeof(sockpath), "%s/mc.sock", workdir);
    pid_t pid = spawn(ARGS("-s", sockpath, "-a", "700"), NULL, out, err);
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, sockpath, strlen(sockpath) + 1); /* short: workdir is in /tmp */
    fd = -1;
    for (int i = 0; i < 500 && fd < 0; i++) {
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
            close(fd);
            fd = -1;
            sleep_ms(10);
        }
    }
    if (fd >= 0)
        talk(fd, "set u 0 0 2\r\nhi\r\nget u\r\n", "END\r\n", buf, sizeof(buf), 3000, NULL);
    tap_ok(fd >= 0 && strcmp(buf, "STORED\r\nVALUE u 0 2\r\nhi\r\nEND\r\n") == 0,
           "-s serves the text protocol on a Unix socket");
    if (fd >= 0)
        close(fd);
    kill(pid, SIGINT);
    tap_ok(wait_exit(pid, 10000) == 0 && access(sockpath, F_OK) != 0,
           "SIGINT: clean exit, socket file removed");

    /* -o no_maxconns_fast: the extra connection waits and is served later */
    if (start_server(&s, ARGS("-c", "4", "-o", "no_maxconns_fast")) == 0) {
        int waiters[4];
        for (int i = 0; i < 3; i++) {
            waiters[i] = connect_tcp(s.port);
            talk(waiters[i], "version\r\n", "\r\n", buf, sizeof(buf), 2000, NULL);
        }
        int extra = connect_tcp(s.port);
        talk(extra, "version\r\n", "\r\n", buf, sizeof(buf), 500, NULL);
        tap_ok(buf[0] == '\0', "no_maxconns_fast: a connection over -c gets no reply yet");
        close(waiters[0]);
        talk(extra, NULL, "\r\n", buf, sizeof(buf), 3000, NULL);
        tap_ok(strncmp(buf, "VERSION ", 8) == 0, "and is served once another connection closes");
        close(extra);
        close(waiters[1]);
        close(waiters[2]);
        stop_server(&s);
    } else {
        tap_ok(0, "server with no_maxconns_fast started");
        tap_ok(0, "server with no_maxconns_fast stopped");
    }

    /* watch: a log stream of another connection's mutations; -W refuses it */
    if (start_server(&s, NULL) == 0) {
        int watcher = connect_tcp(s.port);
        talk(watcher, "watch mutations\r\n", "\r\n", buf, sizeof(buf), 2000, NULL);
        tap_ok(strcmp(buf, "OK\r\n") == 0, "watch mutations answers OK");
        fd = connect_tcp(s.port);
        talk(fd, "set wkey 0 0 1\r\nx\r\n", "\r\n", buf, sizeof(buf), 2000, NULL);
        talk(watcher, NULL, "\n", buf, sizeof(buf), 3000, NULL);
        tap_ok(strncmp(buf, "ts=", 3) == 0 && strstr(buf, " gid=") && strstr(buf, "key=wkey") &&
                   strstr(buf, "cmd=set"),
               "the watcher receives a ts= gid= line for the set");
        close(fd);
        close(watcher);
        stop_server(&s);
    } else {
        tap_ok(0, "server for watch started");
        tap_ok(0, "watch line");
    }
    if (start_server(&s, ARGS("-W")) == 0) {
        fd = connect_tcp(s.port);
        talk(fd, "watch\r\n", "\r\n", buf, sizeof(buf), 2000, NULL);
        tap_ok(strcmp(buf, "CLIENT_ERROR watch commands not allowed\r\n") == 0, "-W refuses watch");
        close(fd);
        stop_server(&s);
    } else {
        tap_ok(0, "server with -W started");
    }

    /* -o idle_timeout closes idle connections */
    if (start_server(&s, ARGS("-o", "idle_timeout=1")) == 0) {
        fd = connect_tcp(s.port);
        bool eof;
        talk(fd, NULL, NULL, buf, sizeof(buf), 5000, &eof);
        tap_ok(eof, "-o idle_timeout=1 closes an idle connection");
        close(fd);
        stop_server(&s);
    } else {
        tap_ok(0, "server with idle_timeout started");
    }

    unlink(out);
    unlink(err);
    char path[128];
    const char *names[] = {"ports", "out", "err", NULL};
    for (const char **n = names; *n; n++) {
        snprintf(path, sizeof(path), "%s/%.16s", workdir, *n);
        unlink(path);
    }
    rmdir(workdir);
    return tap_exit_status();
}
