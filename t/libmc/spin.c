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
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    ok(cpu >= 0 && cpu < 15,
       "%s: spin 0: the get returns the value and sleeps (%.1f ms cpu in %.1f ms)", over, cpu,
       wall);

    cpu = get_during_stop(&s, "20000", &wall);
    ok(cpu >= 3 && cpu < 45,
       "%s: spin 20000: polls about 20 ms, then sleeps (%.1f ms cpu in %.1f ms)", over, cpu, wall);
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

int main(void)
{
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
        CPU_ZERO(&allowed);
    test_budget(false);
    test_budget(true);
    test_same_cpu();
    sched_setaffinity(0, sizeof(allowed), &allowed);
    return done_testing();
}
