/* t/placement/compare.h: plumbing of the placement comparison tests: running
 * a companion program into a file, reading "hashes"/"config" block outputs, and
 * comparing two outputs block by block as TAP. No placement logic here. */
#ifndef PLACEMENT_COMPARE_H
#define PLACEMENT_COMPARE_H

#include <stddef.h>

struct tap {
    int tests;
    int failures;
};

/* Prints one TAP line; a todo reason marks it as TODO (it cannot fail the run). */
void tap_result(struct tap *tap, int pass, const char *todo, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Runs argv with stdin from in_path (NULL: /dev/null), stdout appended to
 * out_path; returns the exit status, or -1. */
int run_to_file(char *const argv[], const char *in_path, const char *out_path);

/* The directory of the running test binary (its companion programs are in placement/). */
void own_dir(char *buf, size_t size);

struct placement_block {
    char *header; /* "hashes" or "config ..." without the newline */
    char **lines; /* the block's data lines, without newlines */
    size_t count;
};

struct placement_output {
    struct placement_block *blocks;
    size_t count;
};

/* Reads a companion program's output; returns 0, or -1 (message printed as TAP diag). */
int placement_output_read(const char *path, struct placement_output *out);
void placement_output_free(struct placement_output *out);

/* Writes the header lines of out to path (what dump_placement replays). */
int placement_headers_write(const struct placement_output *out, const char *path);

/* Creates a private temporary directory named after prefix (under $TMPDIR
 * when set) into buf; returns 0 or -1. */
int make_tmpdir(const char *prefix, char *buf, size_t size);

/* One TAP test per reference block: headers and every data line must match,
 * and each block must hold expected_lines lines. todo(header) may name a known
 * difference for a block (NULL: none). Returns the number of config blocks. */
size_t placement_compare(struct tap *tap, const struct placement_output *ref,
                         const struct placement_output *other, const char *other_name,
                         size_t expected_lines, const char *(*todo)(const char *ref_header));

#endif
