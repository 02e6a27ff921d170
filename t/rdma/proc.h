/* t/rdma/proc.h: the child processes of the RDMA test programs (servers,
 * client processes): they die with the test program, even one that bails
 * out or crashes, and are reaped within a deadline. Header-only; owns
 * nothing else. */
#ifndef MCR_T_RDMA_PROC_H
#define MCR_T_RDMA_PROC_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t/rdma/tap.h"

/* fork() for a child that must not outlive the test program (the parent
 * death signal survives exec); bails out when fork fails, so a caller
 * never signals pid -1. */
static inline pid_t proc_fork(void)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        tap_bail("fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126); /* the test program is gone already */
    }
    return pid;
}

/* Waits up to timeout_ms for pid to end, then kills it (SIGKILL) and reaps
 * it. Its wait status, or -1 when it had to be killed or was no child. */
static inline int proc_reap(pid_t pid, int timeout_ms)
{
    int status = 0;
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0)
            return -1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* True while pid has not ended (it is reaped if it has). */
static inline bool proc_alive(pid_t pid, int *status)
{
    return waitpid(pid, status, WNOHANG) == 0;
}

/* A server stopped with SIGTERM exits 0: with the sanitizers, a leak or
 * a memory error found on the way out makes it exit otherwise. */
static inline void proc_check_clean_exit(int status, const char *what)
{
    tap_ok(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "%s exits cleanly on SIGTERM (%s %d)", what,
           status == -1          ? "killed after 10 s, status"
           : WIFSIGNALED(status) ? "signal"
                                 : "exit status",
           status == -1          ? -1
           : WIFSIGNALED(status) ? WTERMSIG(status)
                                 : WEXITSTATUS(status));
}

#endif
