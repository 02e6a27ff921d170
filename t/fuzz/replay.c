/* t/fuzz/replay.c: runs a fuzz target (LLVMFuzzerTestOneInput, the
 * libFuzzer entry point) over every input of a packed corpus, as a TAP
 * test: the corpus coverage-guided fuzzing reached becomes a regression
 * test that needs no fuzzer (make check, with and without the sanitizers).
 * A target reports a failure by aborting, as under libFuzzer (or a
 * sanitizer stops the process); the input it was running is then named on
 * stderr.
 *
 * Corpus file (written by t/fuzz/pack-corpus): records of a 4-byte
 * little-endian length followed by that many bytes. Default path:
 * $top_srcdir/t/fuzz/FUZZ_CORPUS.corpus; a path argument replaces it. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcr/byteorder.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* optional, as under libFuzzer */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

/* set when built with a sanitizer: called before it ends the process */
__attribute__((weak)) void __sanitizer_set_death_callback(void (*callback)(void));

/* Under UBSan (GCC's runtime calls no death callback) a report that halts
 * the process aborts, so the SIGABRT handler names the input; options in
 * UBSAN_OPTIONS still apply over this default. Unused without UBSan. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "abort_on_error=1";
}

/* the input running now, for the report of a failure */
static volatile size_t current_input;
static volatile size_t current_offset;

static void name_input(void)
{
    static volatile sig_atomic_t named; /* a sanitizer's report may end in abort() */
    if (named)
        return;
    named = 1;
    char line[96];
    int n = snprintf(line, sizeof(line), "# failed at input %zu (the record at offset %zu)\n",
                     current_input, current_offset);
    if (n > 0 && write(2, line, (size_t)n) < 0)
        return;
}

static void on_fatal_signal(int sig)
{
    name_input();
    signal(sig, SIG_DFL);
    raise(sig);
}

#ifndef FUZZ_CORPUS
#error "FUZZ_CORPUS names the corpus (t/fuzz/FUZZ_CORPUS.corpus)"
#endif

static uint8_t *read_whole(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (buf == NULL)
            break;
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *bigger = realloc(buf, cap * 2);
        if (bigger == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    bool failed = ferror(f) != 0;
    fclose(f);
    if (failed) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    char path[4096];
    if (argc > 1) {
        snprintf(path, sizeof(path), "%s", argv[1]);
    } else {
        const char *top = getenv("top_srcdir");
        snprintf(path, sizeof(path), "%s/t/fuzz/%s.corpus", top != NULL ? top : ".", FUZZ_CORPUS);
    }
    printf("1..1\n");
    fflush(stdout);
    size_t len = 0;
    uint8_t *corpus = read_whole(path, &len);
    if (corpus == NULL) {
        printf("not ok 1 - cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (LLVMFuzzerInitialize != NULL)
        LLVMFuzzerInitialize(&argc, &argv);
    if (__sanitizer_set_death_callback != NULL)
        __sanitizer_set_death_callback(name_input);
    signal(SIGABRT, on_fatal_signal);
    signal(SIGSEGV, on_fatal_signal);
    signal(SIGBUS, on_fatal_signal);
    size_t at = 0, inputs = 0, bytes = 0;
    while (at + 4 <= len) {
        size_t n = mcr_le_get32(corpus + at);
        at += 4;
        if (n > len - at)
            break;
        /* the target gets its own copy, exactly n bytes long, so that
         * the sanitizers see any read past its end */
        uint8_t *input = malloc(n > 0 ? n : 1);
        if (input == NULL) {
            printf("not ok 1 - out of memory at input %zu\n", inputs);
            free(corpus);
            return 1;
        }
        memcpy(input, corpus + at, n);
        current_input = inputs;
        current_offset = at - 4;
        LLVMFuzzerTestOneInput(input, n);
        free(input);
        at += n;
        bytes += n;
        inputs++;
    }
    free(corpus);
    if (at != len || inputs == 0) {
        printf("not ok 1 - %s is damaged at offset %zu (%zu inputs read)\n", path, at, inputs);
        return 1;
    }
    printf("ok 1 - %zu inputs (%zu bytes) of %s replayed without a failure\n", inputs, bytes, path);
    return 0;
}
