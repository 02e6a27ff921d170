/* t/test_placement_compat.c: TAP test that our key placement agrees with
 * Debian's libmemcached exactly. It runs t/placement/ref_placement (built
 * against Debian's libmemcached) and t/placement/dump_placement (built from
 * our placement code) on the same fixtures, then compares them block by
 * block: every hash algorithm on 3000 keys, and the server picked for each key
 * under modula, consistent, ketama, ketama-spy, weighted ketama and virtual
 * buckets (no bucket table) with 1, 3, 7 and 25 servers (weighted and not) and every hash. Skips
 * when configure did not find Debian's libmemcached. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { EXPECTED_KEYS = 3000, EXPECTED_CONFIG_BLOCKS = 360 };

/* Runs argv with stdin from in_path (or /dev/null) and stdout to out_path;
 * returns the exit status or -1. */
static int run_to_file(char *const argv[], const char *in_path, const char *out_path)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int in = open(in_path ? in_path : "/dev/null", O_RDONLY);
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
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

/* Directory of this binary; the helpers live in its placement/ subdirectory. */
static void own_dir(char *buf, size_t size)
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

static int tests, failures;

static void report(int pass, const char *what, unsigned mismatches, const char *first_diff)
{
    tests++;
    failures += !pass;
    printf("%s %d - %s", pass ? "ok" : "not ok", tests, what);
    if (!pass && first_diff)
        printf("# %u lines differ, first: %s", mismatches, first_diff);
}

/* Compares the two outputs block by block (a block starts with a "hashes" or
 * "config" line). Returns the number of config blocks seen. */
static int compare(FILE *ref, FILE *ours)
{
    char ref_line[4096], our_line[4096], header[512] = "", first_diff[600] = "";
    unsigned lines = 0, mismatches = 0;
    int blocks = 0, in_block = 0;
    for (;;) {
        char *r = fgets(ref_line, sizeof(ref_line), ref);
        char *o = fgets(our_line, sizeof(our_line), ours);
        int starts = r && (strncmp(r, "config ", 7) == 0 || strcmp(r, "hashes\n") == 0);
        if (in_block && (!r || starts)) {
            char what[600];
            snprintf(what, sizeof(what), "%.*s (%u keys)\n", (int)strcspn(header, "\n"), header,
                     lines);
            report(mismatches == 0 && lines == EXPECTED_KEYS, what, mismatches, first_diff);
            in_block = 0;
        }
        if (!r) {
            if (o)
                report(0, "our output has extra lines\n", 1, o);
            return blocks;
        }
        if (starts) {
            snprintf(header, sizeof(header), "%s", r);
            lines = mismatches = 0;
            first_diff[0] = '\0';
            in_block = 1;
            blocks += strncmp(r, "config ", 7) == 0;
            if (!o || strcmp(r, o) != 0) {
                report(0, "block headers line up\n", 1, r);
                return blocks;
            }
            continue;
        }
        lines++;
        if (!o || strcmp(r, o) != 0) {
            if (mismatches++ == 0)
                snprintf(first_diff, sizeof(first_diff), "libmemcached \"%.*s\" ours \"%.*s\"\n",
                         (int)strcspn(r, "\n"), r, o ? (int)strcspn(o, "\n") : 3, o ? o : "EOF");
        }
    }
}

int main(void)
{
    char dir[PATH_MAX], ref_prog[PATH_MAX + 64], dump_prog[PATH_MAX + 64];
    own_dir(dir, sizeof(dir));
    snprintf(ref_prog, sizeof(ref_prog), "%s/placement/ref_placement", dir);
    snprintf(dump_prog, sizeof(dump_prog), "%s/placement/dump_placement", dir);
    if (access(ref_prog, X_OK) != 0) {
        printf("1..0 # SKIP Debian's libmemcached was not found at configure time\n");
        return 0;
    }

    char tmpdir[] = "/tmp/placement-compat.XXXXXX";
    if (mkdtemp(tmpdir) == NULL) {
        printf("Bail out! mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    char ref_out[64], ref_configs[64], our_out[64];
    snprintf(ref_out, sizeof(ref_out), "%s/ref", tmpdir);
    snprintf(ref_configs, sizeof(ref_configs), "%s/configs", tmpdir);
    snprintf(our_out, sizeof(our_out), "%s/ours", tmpdir);

    /* reference: hashes then placements, in one file */
    char hashes_arg[] = "hashes", placements_arg[] = "placements";
    char ref_hashes[80];
    snprintf(ref_hashes, sizeof(ref_hashes), "%s/ref-hashes", tmpdir);
    int rc1 = run_to_file((char *[]){ref_prog, hashes_arg, NULL}, NULL, ref_hashes);
    int rc2 = run_to_file((char *[]){ref_prog, placements_arg, NULL}, NULL, ref_out);
    report(rc1 == 0 && rc2 == 0, "ref_placement (Debian's libmemcached) ran\n", 0, NULL);

    /* our side replays the reference's block headers */
    FILE *in1 = fopen(ref_hashes, "r"), *in2 = fopen(ref_out, "r");
    FILE *cfg = fopen(ref_configs, "w");
    FILE *all = NULL;
    char all_path[80];
    snprintf(all_path, sizeof(all_path), "%s/ref-all", tmpdir);
    all = fopen(all_path, "w");
    if (!in1 || !in2 || !cfg || !all) {
        printf("Bail out! cannot open temporary files in %s\n", tmpdir);
        return 1;
    }
    char line[4096];
    while (fgets(line, sizeof(line), in1)) {
        fputs(line, all);
        if (strcmp(line, "hashes\n") == 0)
            fputs(line, cfg);
    }
    while (fgets(line, sizeof(line), in2)) {
        fputs(line, all);
        if (strncmp(line, "config ", 7) == 0)
            fputs(line, cfg);
    }
    fclose(all);
    fclose(cfg);
    fclose(in2);
    fclose(in1);

    int rc3 = run_to_file((char *[]){dump_prog, NULL}, ref_configs, our_out);
    report(rc3 == 0, "dump_placement (libmemcached-rdma) ran\n", 0, NULL);

    FILE *ref = fopen(all_path, "r"), *ours = fopen(our_out, "r");
    int blocks = ref && ours ? compare(ref, ours) : 0;
    report(blocks == EXPECTED_CONFIG_BLOCKS, "every configuration was compared\n", 0, NULL);
    if (blocks != EXPECTED_CONFIG_BLOCKS)
        printf("# %d configuration blocks, expected %d\n", blocks, EXPECTED_CONFIG_BLOCKS);
    if (ours)
        fclose(ours);
    if (ref)
        fclose(ref);

    unlink(our_out);
    unlink(all_path);
    unlink(ref_configs);
    unlink(ref_out);
    unlink(ref_hashes);
    rmdir(tmpdir);
    printf("1..%d\n", tests);
    return failures ? 1 : 0;
}
