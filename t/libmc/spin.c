/* t/libmc/spin.c: the socket spin budget (LIBMEMCACHED_SOCKET_SPIN_US)
 * against a real server ($MC_SERVER), over TCP and a Unix socket. The
 * server is stopped (SIGSTOP) while a blocking get waits and resumed 60 ms
 * later by a child process; the client's processor time over that wait
 * shows whether it polled or slept: with 0 it sleeps at once, with a
 * 20 ms budget it polls about that long and then sleeps, with no budget
 * given (the default, 100 us) it sleeps almost at once. The server runs on
 * another CPU than the client there; a TCP server whose replies come from
 * the client's own CPU makes the client sleep at once, whatever the
 * budget. Every get still returns the stored value. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "tap.h"

#define RESUME_AFTER_US 60000

static bool pin_to_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set) == 0;
}

/* Two CPUs this process may use: the server (started while pinned to
 * the second, which it inherits) and the client (then pinned to the
 * first) run apart. */
static cpu_set_t allowed; /* the CPUs the test started with */

/* The load average over the last minute, or -1 when unknown. */
static double load_average(void)
{
    double load = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1;
        fclose(f);
    }
    return load;
}

static bool two_cpus(int *first, int *second)
{
    const cpu_set_t set = allowed;
    int found = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; cpu++)
        if (CPU_ISSET(cpu, &set))
            *(found++ == 0 ? first : second) = cpu;
    return found == 2;
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A blocking get while the server is stopped for RESUME_AFTER_US; returns
 * the client's processor time over the get (ms), -1 when the get failed. */
static double get_during_stop(struct test_server *s, const char *spin_us, double *wall)
{
    if (spin_us != NULL)
        setenv("LIBMEMCACHED_SOCKET_SPIN_US", spin_us, 1);
    else
        unsetenv("LIBMEMCACHED_SOCKET_SPIN_US");
    memcached_st *memc = memcached_create(NULL);
    if (s->port == 0)
        memcached_server_add_unix_socket(memc, s->socket_path);
    else
        memcached_server_add(memc, "127.0.0.1", (in_port_t)s->port);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 5000);
    double spent = -1;
    /* connected and stored before the stop: the wait covers the get only */
    if (memcached_set(memc, "spin", 4, "value", 5, 0, 0) == MEMCACHED_SUCCESS) {
        test_server_pause(s);
        pid_t waker = fork();
        if (waker == 0) {
            usleep(RESUME_AFTER_US);
            kill(s->pid, SIGCONT);
            _exit(0);
        }
        double cpu0 = cpu_ms(), wall0 = wall_ms();
        size_t len = 0;
        uint32_t flags = 0;
        memcached_return_t rc;
        char *v = memcached_get(memc, "spin", 4, &len, &flags, &rc);
        double cpu1 = cpu_ms();
        *wall = wall_ms() - wall0;
        if (v != NULL && rc == MEMCACHED_SUCCESS && len == 5 && memcmp(v, "value", 5) == 0)
            spent = cpu1 - cpu0;
        free(v);
        if (waker > 0)
            waitpid(waker, NULL, 0);
        test_server_resume(s);
    }
    memcached_free(memc);
    return spent;
}

static void test_budget(bool unix_socket)
{
    const char *over = unix_socket ? "unix socket" : "tcp";
    int client_cpu, server_cpu;
    if (!two_cpus(&client_cpu, &server_cpu)) {
        ok(1, "# SKIP %s: needs two CPUs (client and server apart)", over);
        return;
    }
    struct test_server s;
    pin_to_cpu(server_cpu);
    bool started = test_server_start(&s, unix_socket);
    pin_to_cpu(client_cpu);
    if (!ok(started, "%s: server on CPU %d, client on CPU %d", over, server_cpu, client_cpu))
        return;
    double wall = 0;

    double cpu = get_during_stop(&s, "0", &wall);
    double asleep = cpu;
    ok(cpu >= 0 && cpu < 15,
       "%s: spin 0: the get returns the value and sleeps (%.1f ms cpu in %.1f ms)", over, cpu,
       wall);

    /* A polling client that other processes keep off its CPU (a loaded
     * machine) gets far less processor time than it polls for, while a
     * client that sleeps stays near the spin 0 figure however often it is
     * asked: the wait is measured up to five times, and counts as polling
     * at 3 ms, or at 0.5 ms and five times what spin 0 took. */
    int attempts = 0;
    bool polled = false;
    do {
        cpu = get_during_stop(&s, "20000", &wall);
        polled = cpu >= 3 || (cpu >= 0.5 && cpu >= 5 * asleep);
    } while (++attempts < 5 && cpu >= 0 && !polled);
    /* Past a load average of four runnable tasks per processor a polling
     * client gets a small share of its CPU over the 20 ms it polls (and
     * gives it up at each yield): no figure tells it from a sleeper then. */
    double load = load_average();
    if (!polled && cpu >= 0 && load > 4.0 * (double)sysconf(_SC_NPROCESSORS_ONLN))
        ok(1, "# SKIP %s: spin 20000: %.1f ms cpu in five waits at a load average of %.1f", over,
           cpu, load);
    else
        ok(polled && cpu < 45,
           "%s: spin 20000: polls about 20 ms, then sleeps (%.1f ms cpu in %.1f ms, attempt %d; "
           "spin 0: %.2f ms)",
           over, cpu, wall, attempts, asleep);
    ok(wall >= RESUME_AFTER_US / 1000 - 5, "%s: the get waited for the stopped server (%.1f ms)",
       over, wall);

    cpu = get_during_stop(&s, NULL, &wall);
    ok(cpu >= 0 && cpu < 15, "%s: default budget (100 us): sleeps soon (%.1f ms cpu in %.1f ms)",
       over, cpu, wall);

    cpu = get_during_stop(&s, "not-a-number", &wall);
    ok(cpu >= 0 && cpu < 15, "%s: a malformed budget means the default (%.1f ms cpu in %.1f ms)",
       over, cpu, wall);

    test_server_stop(&s, false);
}

/* Server and client on one CPU over TCP: the client sees its replies
 * come from its own CPU and sleeps at once, so the server can run. */
static void test_same_cpu(void)
{
    int cpu, other;
    if (!two_cpus(&cpu, &other))
        cpu = sched_getcpu();
    pin_to_cpu(cpu);
    struct test_server s;
    if (!ok(test_server_start(&s, false), "tcp: server and client on CPU %d", cpu))
        return;
    double wall = 0;
    double spent = get_during_stop(&s, "20000", &wall);
    ok(spent >= 0 && spent < 15,
       "tcp: spin 20000, server on the client's CPU: sleeps at once (%.1f ms cpu in %.1f ms)",
       spent, wall);
    test_server_stop(&s, false);
}

/* ---- a long wait whose replies come while the client spins ---------------------- */
/* A fake text-protocol server on its own CPU answers PACED_REQUESTS gets
 * with misses: the first PACED_FIRST_MS after the first request (longer
 * than the client's spin budget, PACED_SPIN_MS: the client sleeps once),
 * the next ones 1 ms apart (each found by spinning), the last one
 * PACED_GAP_MS after the one before it (the client sleeps again). The run
 * of replies found by spinning lasts longer than the client's poll
 * timeout (PACED_TIMEOUT_MS), and the gap is shorter than it: no request
 * may time out. A generous spin budget keeps stalls of this machine from
 * breaking the run into shorter ones. */
#define PACED_REQUESTS 900
#define PACED_SPIN_MS 200
#define PACED_FIRST_MS 250
#define PACED_TIMEOUT_MS 600
#define PACED_GAP_MS 300

struct paced_server {
    int listen_fd;
    unsigned port;
    int cpu;
    int replied;            /* replies written */
    double longest_silence; /* ms: the longest wait for a reply, from the first request */
};

static void *paced_main(void *arg)
{
    struct paced_server *p = arg;
    pin_to_cpu(p->cpu);
    struct pollfd lp = {.fd = p->listen_fd, .events = POLLIN};
    if (poll(&lp, 1, 5000) <= 0)
        return NULL;
    int fd = accept(p->listen_fd, NULL, NULL);
    if (fd < 0)
        return NULL;
    int received = 0;
    double first = -1, last_write = wall_ms(), deadline = last_write + 20000;
    while (p->replied < PACED_REQUESTS && wall_ms() < deadline) {
        struct pollfd cp = {.fd = fd, .events = POLLIN};
        if (poll(&cp, 1, 1) > 0) {
            char buf[65536];
            ssize_t n = read(fd, buf, sizeof(buf));
            if (n <= 0)
                break;
            for (ssize_t i = 0; i < n; i++)
                received += buf[i] == '\n';
            if (first < 0)
                first = wall_ms();
        }
        while (p->replied < received) {
            int i = p->replied;
            double due = first + PACED_FIRST_MS + i + (i == PACED_REQUESTS - 1 ? PACED_GAP_MS : 0);
            if (wall_ms() < due)
                break;
            if (write(fd, "END\r\n", 5) != 5)
                goto out;
            double now = wall_ms();
            if (now - last_write > p->longest_silence)
                p->longest_silence = now - last_write;
            last_write = now;
            p->replied++;
        }
    }
out:
    if (p->replied < PACED_REQUESTS && wall_ms() - last_write > p->longest_silence)
        p->longest_silence = wall_ms() - last_write;
    close(fd);
    return NULL;
}

struct paced_result {
    double took;            /* ms the client waited in memcached_wait_all */
    int misses, timeouts;   /* of PACED_REQUESTS gets */
    double longest_silence; /* ms: the fake server's own longest wait between replies */
};

/* One paced run; false when the fake server could not be started. */
static bool paced_run(int client_cpu, int server_cpu, struct paced_result *r)
{
    struct paced_server p = {.cpu = server_cpu};
    p.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    pthread_t thread;
    if (p.listen_fd < 0 || bind(p.listen_fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
        listen(p.listen_fd, 1) != 0 ||
        getsockname(p.listen_fd, (struct sockaddr *)&sin, &len) != 0 ||
        pthread_create(&thread, NULL, paced_main, &p) != 0) {
        if (p.listen_fd >= 0)
            close(p.listen_fd);
        return false;
    }
    pin_to_cpu(client_cpu);
    char spin[16];
    snprintf(spin, sizeof(spin), "%d", PACED_SPIN_MS * 1000);
    setenv("LIBMEMCACHED_SOCKET_SPIN_US", spin, 1);
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "127.0.0.1", ntohs(sin.sin_port));
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, PACED_TIMEOUT_MS);
    memcached_request_st *reqs[PACED_REQUESTS];
    char value[PACED_REQUESTS][8];
    for (int i = 0; i < PACED_REQUESTS; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "paced%d", i);
        reqs[i] = memcached_request_create(memc);
        memcached_iget(memc, key, (size_t)kl, value[i], sizeof(value[i]), reqs[i]);
    }
    double t0 = wall_ms();
    memcached_wait_all(memc);
    r->took = wall_ms() - t0;
    r->misses = r->timeouts = 0;
    for (int i = 0; i < PACED_REQUESTS; i++) {
        memcached_return_t rc = memcached_request_return(reqs[i]);
        r->misses += rc == MEMCACHED_NOTFOUND;
        r->timeouts += rc == MEMCACHED_TIMEOUT;
        memcached_request_free(reqs[i]);
    }
    memcached_free(memc);
    unsetenv("LIBMEMCACHED_SOCKET_SPIN_US");
    pthread_join(thread, NULL);
    close(p.listen_fd);
    r->longest_silence = p.longest_silence;
    return true;
}

/* A run in which the fake server itself fell silent for a whole poll
 * timeout (its thread not scheduled on a loaded machine) timed out
 * rightly and proves nothing: it is run again, at most three times. A run
 * whose replies came on time must see no timeout. */
static void test_spinning_progress(void)
{
    int client_cpu, server_cpu;
    if (!two_cpus(&client_cpu, &server_cpu)) {
        ok(1, "# SKIP paced replies: needs two CPUs (client and server apart)");
        return;
    }
    struct paced_result r = {0};
    int attempt;
    for (attempt = 1; attempt <= 3; attempt++) {
        if (!ok(paced_run(client_cpu, server_cpu, &r),
                "paced fake server on CPU %d, client on CPU %d (run %d)", server_cpu, client_cpu,
                attempt))
            return;
        if (r.timeouts == 0 || r.longest_silence < PACED_TIMEOUT_MS)
            break;
        tap_diag("run %d void: the fake server itself was silent for %.0f ms (%d timeouts)",
                 attempt, r.longest_silence, r.timeouts);
    }
    ok(r.misses == PACED_REQUESTS && r.took > PACED_TIMEOUT_MS,
       "replies found while spinning count as progress: %d gets over %.0f ms with a %d ms poll "
       "timeout and a %d ms gap at the end all answered (%d misses, %d timeouts, the fake "
       "server's longest silence %.0f ms, run %d)",
       PACED_REQUESTS, r.took, PACED_TIMEOUT_MS, PACED_GAP_MS, r.misses, r.timeouts,
       r.longest_silence, attempt > 3 ? 3 : attempt);
}

int main(void)
{
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
        CPU_ZERO(&allowed);
    test_budget(false);
    test_budget(true);
    test_same_cpu();
    test_spinning_progress();
    sched_setaffinity(0, sizeof(allowed), &allowed);
    return done_testing();
}
