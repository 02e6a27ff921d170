/*
 * test_erasure_threads.c: the erasure code (libmemcached-rdma/src/erasure.c)
 * used by several threads from its first call. jerasure builds its Galois
 * field tables lazily into global memory without a lock, and XORs regions
 * (matrix entries equal to 1) through the w = 32 field, not the w = 8 one
 * the code multiplies in; a thread that finds that field half built calls
 * through a pointer not yet set. Checks: in fresh processes, threads
 * released together encode and decode their first values, and each gets
 * the parity its process computes for that value alone afterwards; after
 * lmr_ec_matrix() both fields are built; and the same threads in
 * processes forked after it, which start with the fields it built. TAP.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <galois.h>

#include "libmemcached-rdma/src/erasure.h"
#include "t/libmc/test_util.h"
#include "t/rdma/tap.h"

enum { K = 3, M = 2, CHUNK = 4096, THREADS = 8, PROCESSES = 40 };

struct coder {
    pthread_barrier_t *start;
    unsigned seed;
    char data[K][CHUNK], parity[M][CHUNK];
    int ok;
};

/* Parity of data[], and whether losing data chunk 0 and parity chunk 0
 * decodes back to the same bytes. */
static int code_and_recover(char data[K][CHUNK], char parity[M][CHUNK])
{
    int *matrix = lmr_ec_matrix(K, M);
    if (matrix == NULL)
        return 0;
    char *d[K], *c[M];
    for (int i = 0; i < K; i++)
        d[i] = data[i];
    for (int i = 0; i < M; i++)
        c[i] = parity[i];
    lmr_ec_encode(K, M, matrix, d, c, CHUNK);
    char saved_data[CHUNK], saved_parity[CHUNK];
    memcpy(saved_data, data[0], CHUNK);
    memcpy(saved_parity, parity[0], CHUNK);
    memset(data[0], 0, CHUNK);
    memset(parity[0], 0, CHUNK);
    int erasures[] = {0, K, -1};
    int ok = lmr_ec_decode(K, M, matrix, erasures, d, c, CHUNK) &&
             memcmp(saved_data, data[0], CHUNK) == 0 && memcmp(saved_parity, parity[0], CHUNK) == 0;
    free(matrix);
    return ok;
}

static void *coder_main(void *arg)
{
    struct coder *c = arg;
    fill_bytes((char *)c->data, sizeof(c->data), c->seed);
    pthread_barrier_wait(c->start);
    c->ok = code_and_recover(c->data, c->parity);
    return NULL;
}

/* After the threads: c's value coded again by this thread alone, the
 * fields built; whether the threads' parity is the same. */
static int same_parity_alone(const struct coder *c)
{
    static char data[K][CHUNK], parity[M][CHUNK];
    fill_bytes((char *)data, sizeof(data), c->seed);
    return code_and_recover(data, parity) && memcmp(parity, c->parity, sizeof(parity)) == 0;
}

/* In a fresh process: THREADS coders released at once, each on its own
 * value; exit status 0 when every one recovered its lost chunks and got
 * the parity one thread gets alone. */
static int threads_in_fresh_process(struct coder *coders)
{
    pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        pthread_barrier_t start;
        pthread_t threads[THREADS];
        pthread_barrier_init(&start, NULL, THREADS);
        for (int i = 0; i < THREADS; i++) {
            coders[i].start = &start;
            if (pthread_create(&threads[i], NULL, coder_main, &coders[i]) != 0)
                _exit(3);
        }
        int all = 1;
        for (int i = 0; i < THREADS; i++) {
            pthread_join(threads[i], NULL);
            all &= coders[i].ok && same_parity_alone(&coders[i]);
        }
        _exit(all ? 0 : 1);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return 0;
    if (WIFSIGNALED(status))
        tap_diag("a process coding from %d threads died of signal %d", THREADS, WTERMSIG(status));
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* threads_in_fresh_process PROCESSES times: how many passed. */
static int processes_passing(struct coder *coders)
{
    int good = 0;
    for (int p = 0; p < PROCESSES; p++)
        good += threads_in_fresh_process(coders);
    return good;
}

int main(void)
{
    tap_plan(3);
    static struct coder coders[THREADS];
    for (int i = 0; i < THREADS; i++)
        coders[i].seed = (unsigned)i + 1;

    /* forked before this process builds any field: in each child the
     * threads are the first to code */
    int good = processes_passing(coders);
    tap_ok(good == PROCESSES,
           "%d fresh processes, %d threads each coding its first value at once: %d recovered "
           "their lost chunks and got the one-thread parity",
           PROCESSES, THREADS, good);

    int *matrix = lmr_ec_matrix(K, M);
    tap_ok(matrix != NULL && galois_get_field_ptr(8) != NULL && galois_get_field_ptr(32) != NULL,
           "lmr_ec_matrix builds the w=8 field (multiplications) and the w=32 field (region XOR) "
           "before any thread codes");
    free(matrix);

    /* forked after lmr_ec_matrix: each child starts with the fields this
     * process built, and its threads code at once right after the
     * barrier (with only the w=8 field built, half of such processes
     * crashed in the region XOR) */
    good = processes_passing(coders);
    tap_ok(good == PROCESSES,
           "%d processes forked after lmr_ec_matrix, %d threads each coding at once: %d "
           "recovered their lost chunks and got the one-thread parity",
           PROCESSES, THREADS, good);
    return tap_exit_status();
}
