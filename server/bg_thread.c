/* server/bg_thread.c: start, stop, wake and wait of a background thread (see
 * bg_thread.h). */
#include "bg_thread.h"

#include <errno.h>

int bg_thread_start(struct bg_thread *t, void *(*body)(void *))
{
    pthread_mutex_lock(&t->lock);
    int rc = 0;
    if (!t->running) {
        t->stopping = false;
        rc = sem_init(&t->nap, 0, 0);
        if (rc == 0) {
            rc = pthread_create(&t->thread, NULL, body, NULL);
            if (rc != 0)
                sem_destroy(&t->nap);
        }
        t->running = rc == 0;
    }
    pthread_mutex_unlock(&t->lock);
    return rc == 0 ? 0 : -1;
}

void bg_thread_stop(struct bg_thread *t)
{
    pthread_mutex_lock(&t->lock);
    if (!t->running) {
        pthread_mutex_unlock(&t->lock);
        return;
    }
    t->stopping = true;
    pthread_cond_broadcast(&t->wake);
    sem_post(&t->nap);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    pthread_mutex_lock(&t->lock);
    sem_destroy(&t->nap);
    t->running = false;
    pthread_mutex_unlock(&t->lock);
}

bool bg_thread_running(struct bg_thread *t)
{
    pthread_mutex_lock(&t->lock);
    bool running = t->running;
    pthread_mutex_unlock(&t->lock);
    return running;
}

void bg_thread_lock(struct bg_thread *t)
{
    pthread_mutex_lock(&t->lock);
}

void bg_thread_unlock(struct bg_thread *t)
{
    pthread_mutex_unlock(&t->lock);
}

bool bg_thread_stopping(const struct bg_thread *t)
{
    return t->stopping;
}

void bg_thread_wake(struct bg_thread *t)
{
    pthread_cond_broadcast(&t->wake);
}

void bg_thread_wait(struct bg_thread *t)
{
    pthread_cond_wait(&t->wake, &t->lock);
}

bool bg_thread_wait_until(struct bg_thread *t, const struct timespec *until)
{
    return pthread_cond_timedwait(&t->wake, &t->lock, until) != ETIMEDOUT;
}

/* The time us microseconds from now on clock. */
static struct timespec deadline_on(clockid_t clock, uint64_t us)
{
    struct timespec until;
    clock_gettime(clock, &until);
    until.tv_sec += (time_t)(us / 1000000);
    until.tv_nsec += (long)(us % 1000000) * 1000;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return until;
}

bool bg_thread_nap_us(struct bg_thread *t, uint64_t us)
{
    struct timespec until = deadline_on(CLOCK_MONOTONIC, us);
    for (;;) {
        if (sem_clockwait(&t->nap, CLOCK_MONOTONIC, &until) == 0) {
            sem_post(&t->nap); /* the stop stays visible to later naps */
            return false;
        }
        if (errno == ETIMEDOUT)
            return true;
        /* EINTR: sleep on until the deadline */
    }
}

struct timespec bg_thread_deadline_us(uint64_t us)
{
    return deadline_on(CLOCK_REALTIME, us);
}
