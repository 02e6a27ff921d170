/* t/placement/dump_placement.c: our side of the placement compatibility
 * test. Reads the "hashes" and "config ..." lines that ref_placement printed
 * and prints, in the same format, what libmemcached-rdma's hash and placement
 * code computes for the same fixtures. Links only our placement sources. */
#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "libmemcached-rdma/src/placement.h"

enum { HASH_ALG_COUNT = 11 };

static void print_hashes(void)
{
    char key[FIXTURE_KEY_MAX];
    printf("hashes\n");
    for (unsigned i = 0; i < FIXTURE_KEY_COUNT; i++) {
        size_t len = fixture_key(i, key);
        printf("%u", i);
        for (int alg = 0; alg < HASH_ALG_COUNT; alg++)
            if (alg != LMR_HASH_HSIEH) /* not in Debian's build, see ref_placement.c */
                printf(" %u", lmr_hash((enum lmr_hash_alg)alg, key, len));
        printf("\n");
    }
}

static int print_block(const char *line)
{
    char list_name[64];
    int dist, hash, ketama_hash, weighted;
    if (sscanf(line, "config list=%63s dist=%d hash=%d ketama_hash=%d weighted=%d", list_name,
               &dist, &hash, &ketama_hash, &weighted) != 5) {
        fprintf(stderr, "dump_placement: cannot parse: %s", line);
        return -1;
    }
    /* "point_hash=N": the key hash when libmemcached last built the
     * continuum, when the block changed HASH afterwards (else the key hash) */
    int point_hash = hash;
    const char *ph = strstr(line, " point_hash=");
    if (ph != NULL && sscanf(ph, " point_hash=%d", &point_hash) != 1) {
        fprintf(stderr, "dump_placement: cannot parse: %s", line);
        return -1;
    }
    const struct fixture_list *list = fixture_list_find(list_name);
    if (list == NULL) {
        fprintf(stderr, "dump_placement: unknown list %s\n", list_name);
        return -1;
    }
    struct lmr_placement_server servers[32];
    for (size_t s = 0; s < list->count; s++)
        servers[s] = (struct lmr_placement_server){list->servers[s].hostname, list->servers[s].port,
                                                   list->servers[s].weight};
    struct lmr_placement_config cfg = {
        .distribution = dist,
        .key_hash = (enum lmr_hash_alg)hash,
        .point_hash = (enum lmr_hash_alg)point_hash,
        .ketama_hash = (enum lmr_hash_alg)ketama_hash,
        .ketama_weighted = weighted != 0,
    };
    struct lmr_placement *p = lmr_placement_build(&cfg, servers, list->count);
    if (p == NULL) {
        fprintf(stderr, "dump_placement: out of memory\n");
        return -1;
    }
    printf("%s", line);
    char key[FIXTURE_KEY_MAX];
    for (unsigned i = 0; i < FIXTURE_KEY_COUNT; i++) {
        size_t len = fixture_key(i, key);
        printf("%u %u\n", i, lmr_placement_pick(p, key, len));
    }
    lmr_placement_free(p);
    return 0;
}

int main(void)
{
    char line[512];
    while (fgets(line, sizeof(line), stdin)) {
        if (strcmp(line, "hashes\n") == 0)
            print_hashes();
        else if (strncmp(line, "config ", 7) == 0) {
            if (print_block(line))
                return 1;
        }
    }
    return 0;
}
