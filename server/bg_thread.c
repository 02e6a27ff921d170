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
        rc = pthread_create(&t->thread, NULL, body, NULL);
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
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    pthread_mutex_lock(&t->lock);
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

struct timespec bg_thread_deadline_us(uint64_t us)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(us / 1000000);
    until.tv_nsec += (long)(us % 1000000) * 1000;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return until;
}
