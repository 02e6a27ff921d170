/* server/bg_thread.h: a background thread with a stop flag, a condition
 * variable that wakes it and a join, the one implementation of the start and
 * stop of the hash expander, the LRU crawler, the slab mover and the LRU
 * maintainer. The thread's own state (what it is asked to do) lives in its
 * module, guarded by the same lock.
 *
 * The thread body runs with the lock taken by bg_thread_lock() and waits with
 * bg_thread_wait() / bg_thread_wait_until(), which return with it held; it
 * returns when bg_thread_stopping() is true. A body that takes no requests
 * (the LRU maintainer) may instead sleep without the lock in
 * bg_thread_nap_us(): one futex call per nap, where a timed wait on the
 * condition variable costs two (glibc marks the mutex contended when the
 * wait takes it back, so the next unlock makes a wake call). */
#ifndef BG_THREAD_H
#define BG_THREAD_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct bg_thread {
    pthread_t thread;
    pthread_mutex_t lock; /* guards running, stopping and the owner's requests */
    pthread_cond_t wake;  /* signalled on a request and on stop */
    sem_t nap;            /* posted on stop: ends a bg_thread_nap_us() */
    bool running;         /* started and not yet joined */
    bool stopping;        /* asked to stop */
};

#define BG_THREAD_INIT                                                                             \
    {                                                                                              \
        .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER                        \
    }

/* Starts body(NULL) unless the thread runs already; 0, or -1 when it cannot
 * be created. */
int bg_thread_start(struct bg_thread *t, void *(*body)(void *));

/* Asks the thread to stop, wakes it and joins it; nothing when it does not
 * run. Must be called without the lock. */
void bg_thread_stop(struct bg_thread *t);

/* Whether the thread runs (takes the lock). */
bool bg_thread_running(struct bg_thread *t);

void bg_thread_lock(struct bg_thread *t);
void bg_thread_unlock(struct bg_thread *t);

/* With the lock held: */
/* Whether the thread has been asked to stop. */
bool bg_thread_stopping(const struct bg_thread *t);
/* Wakes the thread (every waiter). */
void bg_thread_wake(struct bg_thread *t);
/* Waits for a wake without a time limit. */
void bg_thread_wait(struct bg_thread *t);
/* Waits for a wake until the CLOCK_REALTIME time until; false once it has
 * passed. */
bool bg_thread_wait_until(struct bg_thread *t, const struct timespec *until);

/* Without the lock: sleeps us microseconds; false when the thread was asked
 * to stop (at once if it was asked before). */
bool bg_thread_nap_us(struct bg_thread *t, uint64_t us);

/* The CLOCK_REALTIME time us microseconds from now, for bg_thread_wait_until. */
struct timespec bg_thread_deadline_us(uint64_t us);

#endif
