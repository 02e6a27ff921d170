/* t/test_placement_compat.c: TAP test that our placement code agrees with
 * Debian's libmemcached exactly. It runs t/placement/ref_placement (built
 * against Debian's libmemcached) and replays its block headers through
 * t/placement/dump_placement (built from our placement code only), then
 * compares block by block: every hash algorithm on 3000 keys, and the server
 * picked for each key under modula, consistent, ketama, ketama-spy, weighted
 * ketama and virtual buckets (no bucket table) with 1, 3, 7 and 25 servers
 * (weighted, unweighted, and with a weight of 0) and every hash. Skips when configure did not find
 * Debian's libmemcached. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "placement/compare.h"
#include "placement/fixtures.h"

enum { EXPECTED_CONFIG_BLOCKS = 708 };

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

    char tmpdir[PATH_MAX];
    if (make_tmpdir("placement-compat", tmpdir, sizeof(tmpdir)) != 0) {
        printf("Bail out! mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    char ref_out[PATH_MAX + 16], headers[PATH_MAX + 16], our_out[PATH_MAX + 16];
    snprintf(ref_out, sizeof(ref_out), "%s/ref", tmpdir);
    snprintf(headers, sizeof(headers), "%s/headers", tmpdir);
    snprintf(our_out, sizeof(our_out), "%s/ours", tmpdir);

    struct tap tap = {0, 0};
    char hashes_arg[] = "hashes", placements_arg[] = "placements";
    int rc1 = run_to_file((char *[]){ref_prog, hashes_arg, NULL}, NULL, ref_out);
    int rc2 = run_to_file((char *[]){ref_prog, placements_arg, NULL}, NULL, ref_out);
    tap_result(&tap, rc1 == 0 && rc2 == 0, NULL, "ref_placement (Debian's libmemcached) runs");

    struct placement_output ref, ours;
    int read_ref = placement_output_read(ref_out, &ref);
    tap_result(&tap, read_ref == 0 && placement_headers_write(&ref, headers) == 0, NULL,
               "reference output read");
    int rc3 = run_to_file((char *[]){dump_prog, NULL}, headers, our_out);
    tap_result(&tap, rc3 == 0, NULL, "dump_placement (libmemcached-rdma placement) runs");
    int read_ours = placement_output_read(our_out, &ours);

    size_t configs = 0;
    if (read_ref == 0 && read_ours == 0)
        configs = placement_compare(&tap, &ref, &ours, "ours", FIXTURE_KEY_COUNT, NULL);
    tap_result(&tap, configs == EXPECTED_CONFIG_BLOCKS, NULL,
               "every configuration was compared (%zu of %d)", configs, EXPECTED_CONFIG_BLOCKS);

    placement_output_free(&ours);
    placement_output_free(&ref);
    unlink(our_out);
    unlink(headers);
    unlink(ref_out);
    rmdir(tmpdir);
    printf("1..%d\n", tap.tests);
    return tap.failures ? 1 : 0;
}
