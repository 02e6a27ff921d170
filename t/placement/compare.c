/* t/placement/compare.c: see compare.h. Test plumbing only: processes,
 * files and TAP output for the placement comparison tests. */
#include "compare.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void tap_result(struct tap *tap, int pass, const char *todo, const char *fmt, ...)
{
    tap->tests++;
    if (!pass && todo == NULL)
        tap->failures++;
    printf("%s %d - ", pass ? "ok" : "not ok", tap->tests);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (todo)
        printf(" # TODO %s", todo);
    printf("\n");
}

int run_to_file(char *const argv[], const char *in_path, const char *out_path)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int in = open(in_path ? in_path : "/dev/null", O_RDONLY);
        int out = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0)
            _exit(127);
        close(in);
        close(out);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void own_dir(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    if (n <= 0) {
        snprintf(buf, size, "t");
        return;
    }
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
}

static int grow(void **array, size_t *cap, size_t count, size_t elem)
{
    if (count < *cap)
        return 0;
    size_t new_cap = *cap ? *cap * 2 : 64;
    void *p = realloc(*array, new_cap * elem);
    if (p == NULL)
        return -1;
    *array = p;
    *cap = new_cap;
    return 0;
}

static int is_header(const char *line)
{
    return strncmp(line, "config ", 7) == 0 || strcmp(line, "hashes") == 0;
}

int placement_output_read(const char *path, struct placement_output *out)
{
    *out = (struct placement_output){NULL, 0};
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        printf("# cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t blocks_cap = 0, lines_cap = 0;
    char line[4096];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *copy = strdup(line);
        if (copy == NULL) {
            rc = -1;
            break;
        }
        if (is_header(line)) {
            if (grow((void **)&out->blocks, &blocks_cap, out->count, sizeof(*out->blocks))) {
                free(copy);
                rc = -1;
                break;
            }
            out->blocks[out->count++] = (struct placement_block){copy, NULL, 0};
            lines_cap = 0;
            continue;
        }
        if (out->count == 0) {
            printf("# %s: data before the first block: %s\n", path, line);
            free(copy);
            rc = -1;
            break;
        }
        struct placement_block *b = &out->blocks[out->count - 1];
        if (grow((void **)&b->lines, &lines_cap, b->count, sizeof(*b->lines))) {
            free(copy);
            rc = -1;
            break;
        }
        b->lines[b->count++] = copy;
    }
    fclose(f);
    if (rc)
        placement_output_free(out);
    return rc;
}

void placement_output_free(struct placement_output *out)
{
    for (size_t i = out->count; i-- > 0;) {
        for (size_t j = out->blocks[i].count; j-- > 0;)
            free(out->blocks[i].lines[j]);
        free(out->blocks[i].lines);
        free(out->blocks[i].header);
    }
    free(out->blocks);
    *out = (struct placement_output){NULL, 0};
}

int make_tmpdir(const char *prefix, char *buf, size_t size)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || *base == '\0')
        base = P_tmpdir;
    if ((size_t)snprintf(buf, size, "%s/%s.XXXXXX", base, prefix) >= size)
        return -1;
    return mkdtemp(buf) ? 0 : -1;
}

int placement_headers_write(const struct placement_output *out, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    for (size_t i = 0; i < out->count; i++)
        fprintf(f, "%s\n", out->blocks[i].header);
    return fclose(f);
}

size_t placement_compare(struct tap *tap, const struct placement_output *ref,
                         const struct placement_output *other, const char *other_name,
                         size_t expected_lines, const char *(*todo)(const char *ref_header))
{
    size_t configs = 0;
    for (size_t i = 0; i < ref->count; i++) {
        const struct placement_block *r = &ref->blocks[i];
        const struct placement_block *o = i < other->count ? &other->blocks[i] : NULL;
        const char *known = todo ? todo(r->header) : NULL;
        configs += strncmp(r->header, "config ", 7) == 0;
        if (o == NULL || strcmp(r->header, o->header) != 0) {
            tap_result(tap, 0, known, "%s: %s", r->header, other_name);
            printf("#   %s has: %s\n", other_name, o ? o->header : "no such block");
            continue;
        }
        size_t mismatches = 0, first = 0;
        for (size_t j = 0; j < r->count; j++)
            if (j >= o->count || strcmp(r->lines[j], o->lines[j]) != 0)
                if (mismatches++ == 0)
                    first = j;
        int pass = mismatches == 0 && r->count == o->count && r->count == expected_lines;
        tap_result(tap, pass, known, "%s (%zu keys): %s agrees", r->header, r->count, other_name);
        if (mismatches)
            printf("#   %zu lines differ; first: reference \"%s\", %s \"%s\"\n", mismatches,
                   r->lines[first], other_name, first < o->count ? o->lines[first] : "EOF");
        else if (!pass)
            printf("#   %zu and %zu lines, expected %zu\n", r->count, o->count, expected_lines);
    }
    if (other->count != ref->count)
        tap_result(tap, 0, NULL, "%s prints %zu blocks, the reference %zu", other_name,
                   other->count, ref->count);
    return configs;
}
