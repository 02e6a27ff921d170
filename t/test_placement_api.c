/* t/test_placement_api.c: TAP test that libmemcached-rdma's public API
 * arrives at the same placement as Debian's libmemcached. The same program,
 * t/placement/ref_placement.c, is built against each library
 * (t/placement/ref_placement and t/placement/api_placement); it sets the
 * distribution, hashes and weighted servers through memcached_behavior_set
 * and memcached_server_add_with_weight as an application would, and prints
 * memcached_generate_hash_value / memcached_generate_hash for 3000 keys,
 * also for programs that change HASH after adding servers. The two outputs
 * must be identical, settings included; any difference fails. Skips when
 * configure did not find Debian's libmemcached. */
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
    char dir[PATH_MAX], ref_prog[PATH_MAX + 64], api_prog[PATH_MAX + 64];
    own_dir(dir, sizeof(dir));
    snprintf(ref_prog, sizeof(ref_prog), "%s/placement/ref_placement", dir);
    snprintf(api_prog, sizeof(api_prog), "%s/placement/api_placement", dir);
    if (access(ref_prog, X_OK) != 0 || access(api_prog, X_OK) != 0) {
        printf("1..0 # SKIP needs Debian's libmemcached and libmemcached-rdma\n");
        return 0;
    }

    char tmpdir[PATH_MAX];
    if (make_tmpdir("placement-api", tmpdir, sizeof(tmpdir)) != 0) {
        printf("Bail out! mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    char ref_out[PATH_MAX + 16], api_out[PATH_MAX + 16];
    snprintf(ref_out, sizeof(ref_out), "%s/ref", tmpdir);
    snprintf(api_out, sizeof(api_out), "%s/api", tmpdir);

    struct tap tap = {0, 0};
    char hashes_arg[] = "hashes", placements_arg[] = "placements";
    int rc = run_to_file((char *[]){ref_prog, hashes_arg, NULL}, NULL, ref_out);
    if (rc == 0)
        rc = run_to_file((char *[]){ref_prog, placements_arg, NULL}, NULL, ref_out);
    tap_result(&tap, rc == 0, NULL, "ref_placement (Debian's libmemcached) runs");
    rc = run_to_file((char *[]){api_prog, hashes_arg, NULL}, NULL, api_out);
    if (rc == 0)
        rc = run_to_file((char *[]){api_prog, placements_arg, NULL}, NULL, api_out);
    tap_result(&tap, rc == 0, NULL, "api_placement (libmemcached-rdma) runs");

    struct placement_output ref, api;
    int read_ref = placement_output_read(ref_out, &ref);
    int read_api = placement_output_read(api_out, &api);
    size_t configs = 0;
    if (read_ref == 0 && read_api == 0)
        configs = placement_compare(&tap, &ref, &api, "libmemcached-rdma", FIXTURE_KEY_COUNT, NULL);
    tap_result(&tap, configs == EXPECTED_CONFIG_BLOCKS, NULL,
               "every configuration was compared (%zu of %d)", configs, EXPECTED_CONFIG_BLOCKS);

    placement_output_free(&api);
    placement_output_free(&ref);
    unlink(api_out);
    unlink(ref_out);
    rmdir(tmpdir);
    printf("1..%d\n", tap.tests);
    return tap.failures ? 1 : 0;
}
