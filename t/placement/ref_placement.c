/* t/placement/ref_placement.c: prints, through the public libmemcached API,
 * every fixture key's hash under each algorithm ("hashes") and, for a matrix
 * of server lists, distributions and hash settings, the server index picked
 * for each key ("placements"). Each placement block starts with a "config"
 * line naming the settings the library ended up with (or, when it refused
 * one, the requested settings and "failed="), which
 * t/placement/dump_placement replays on our placement code. Blocks that
 * change HASH after adding servers add the hash the continuum was built
 * with ("point_hash=").
 * Built twice from this source, never linking both libraries into one
 * program: t/placement/ref_placement against Debian's libmemcached (the
 * reference) and t/placement/api_placement against libmemcached-rdma (to
 * check that its API arrives at the same placement). */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"

enum { HASH_ALG_COUNT = 11, HASH_HSIEH = 7 };

/* Debian builds libmemcached without Hsieh (it refuses the setting and hashes
 * to 1), so Hsieh is left out of the comparison. */
static int hash_compared(int alg)
{
    return alg != HASH_HSIEH;
}

static void print_hashes(void)
{
    char key[FIXTURE_KEY_MAX];
    printf("hashes\n");
    for (unsigned i = 0; i < FIXTURE_KEY_COUNT; i++) {
        size_t len = fixture_key(i, key);
        printf("%u", i);
        for (int alg = 0; alg < HASH_ALG_COUNT; alg++)
            if (hash_compared(alg))
                printf(" %u", memcached_generate_hash_value(key, len, (memcached_hash_t)alg));
        printf("\n");
    }
}

/* Records the first failed setting in failure; returns nonzero on failure. */
static int check(memcached_st *memc, memcached_return_t rc, const char *what, char *failure,
                 size_t size)
{
    if (rc == MEMCACHED_SUCCESS)
        return 0;
    snprintf(failure, size, "%s:%s", what, memcached_strerror(memc, rc));
    for (char *c = failure; *c; c++)
        if (*c == ' ')
            *c = '_';
    return -1;
}

/* The server index of every fixture key; returns nonzero on failure. */
static int print_keys(memcached_st *memc, const struct fixture_list *list)
{
    char key[FIXTURE_KEY_MAX];
    for (unsigned i = 0; i < FIXTURE_KEY_COUNT; i++) {
        size_t len = fixture_key(i, key);
        uint32_t index = memcached_generate_hash(memc, key, len);
        /* memcached_server_by_key must agree with memcached_generate_hash */
        if (i % 3 == 0) {
            memcached_return_t rc;
            const memcached_instance_st *inst = memcached_server_by_key(memc, key, len, &rc);
            const struct fixture_server *fs = &list->servers[index];
            if (inst == NULL || strcmp(memcached_server_name(inst), fs->hostname) != 0 ||
                memcached_server_port(inst) != fs->port) {
                fprintf(stderr, "ref_placement: server_by_key disagrees for key %u\n", i);
                return -1;
            }
        }
        printf("%u %u\n", i, index);
    }
    return 0;
}

static memcached_return_t add_server(memcached_st *memc, const struct fixture_server *fs)
{
    return fs->port == 0
               ? memcached_server_add_unix_socket_with_weight(memc, fs->hostname, fs->weight)
               : memcached_server_add_with_weight(memc, fs->hostname, (in_port_t)fs->port,
                                                  fs->weight);
}

/* One block: sets the distribution, then the key and ketama hashes, then adds
 * the servers, as an application would. The ketama continuum is weighted for
 * CONSISTENT_WEIGHTED and, in every consistent distribution, for lists with a
 * weight above 1 (libmemcached switches weighting on as they are added). */
static int print_block(const struct fixture_list *list, int dist, int hash, int ketama_hash)
{
    memcached_st *memc = memcached_create(NULL);
    if (memc == NULL)
        return -1;
    char failure[128];
    int failed =
        check(memc, memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION, (uint64_t)dist),
              "distribution", failure, sizeof(failure));
    if (!failed)
        failed = check(memc, memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_HASH, (uint64_t)hash),
                       "hash", failure, sizeof(failure));
    if (!failed)
        failed = check(
            memc,
            memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_HASH, (uint64_t)ketama_hash),
            "ketama_hash", failure, sizeof(failure));
    for (size_t s = 0; !failed && s < list->count; s++) {
        failed = check(memc, add_server(memc, &list->servers[s]), "server_add", failure,
                       sizeof(failure));
    }
    if (failed) {
        /* the library refused a setting: say so and go on with the matrix */
        printf("config list=%s dist=%d hash=%d ketama_hash=%d failed=%s\n", list->name, dist, hash,
               ketama_hash, failure);
        memcached_free(memc);
        return 0;
    }

    printf("config list=%s dist=%llu hash=%llu ketama_hash=%llu weighted=%llu\n", list->name,
           (unsigned long long)memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION),
           (unsigned long long)memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_HASH),
           (unsigned long long)memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_KETAMA_HASH),
           (unsigned long long)memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED));
    int rc = print_keys(memc, list);
    memcached_free(memc);
    return rc;
}

static int print_placements(void)
{
    static const int dists[] = {
        MEMCACHED_DISTRIBUTION_MODULA,
        MEMCACHED_DISTRIBUTION_CONSISTENT,
        MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA,
        MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY,
        MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED,
        MEMCACHED_DISTRIBUTION_VIRTUAL_BUCKET,
    };
    for (size_t l = 0; l < FIXTURE_LIST_COUNT; l++)
        for (size_t d = 0; d < sizeof(dists) / sizeof(dists[0]); d++)
            for (int hash = 0; hash < HASH_ALG_COUNT; hash++) {
                if (!hash_compared(hash))
                    continue;
                int ketama_hash = (hash + 3) % HASH_ALG_COUNT;
                if (!hash_compared(ketama_hash))
                    ketama_hash = 0;
                if (print_block(&fixture_lists[l], dists[d], hash, ketama_hash))
                    return -1;
            }
    return 0;
}

/* Blocks that change HASH after the continuum was built. libmemcached hashes
 * unweighted continuum points with the key hash of the moment it builds the
 * continuum (adding servers, setting a distribution or SORT_HOSTS, cloning)
 * and does not rebuild when HASH changes, so points and keys can use
 * different hashes. Each block sets HASH=first, adds servers, sets
 * HASH=second, then does its scenario's step; its config line adds
 * point_hash=, the hash the continuum's points were built with. */
enum late_step {
    LATE_NOTHING,      /* points keep the first hash */
    LATE_KETAMA_HASH,  /* KETAMA_HASH does not rebuild either */
    LATE_DISTRIBUTION, /* setting the distribution again rebuilds */
    LATE_SORT_HOSTS,   /* so does SORT_HOSTS (set to 0: the order stays) */
    LATE_ADD,          /* the last server is added after HASH changed */
    LATE_PUSH,         /* ... through memcached_server_push */
    LATE_CLONE,        /* a clone builds its own continuum */
    LATE_FROM_MODULA,  /* servers added under modula, then consistent */
};
static const char *const late_step_names[] = {
    "late",     "late-ketama-hash", "late-redistribute", "late-sort-hosts",
    "late-add", "late-push",        "late-clone",        "late-from-modula",
};
enum { LATE_STEP_COUNT = sizeof(late_step_names) / sizeof(late_step_names[0]) };

static int print_late_block(const struct fixture_list *list, int dist, int first, int second,
                            enum late_step step)
{
    memcached_st *memc = memcached_create(NULL);
    if (memc == NULL)
        return -1;
    memcached_return_t rc = memcached_behavior_set(
        memc, MEMCACHED_BEHAVIOR_DISTRIBUTION,
        (uint64_t)(step == LATE_FROM_MODULA ? MEMCACHED_DISTRIBUTION_MODULA : dist));
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_HASH, (uint64_t)first);
    size_t before = step == LATE_ADD || step == LATE_PUSH ? list->count - 1 : list->count;
    for (size_t s = 0; rc == MEMCACHED_SUCCESS && s < before; s++)
        rc = add_server(memc, &list->servers[s]);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_HASH, (uint64_t)second);
    int point_hash = first;
    memcached_st *clone = NULL;
    const struct fixture_server *last = &list->servers[list->count - 1];
    if (rc == MEMCACHED_SUCCESS) {
        switch (step) {
        case LATE_NOTHING:
            break;
        case LATE_KETAMA_HASH:
            rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_HASH,
                                        (uint64_t)MEMCACHED_HASH_CRC);
            break;
        case LATE_DISTRIBUTION:
        case LATE_FROM_MODULA:
            rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION, (uint64_t)dist);
            point_hash = second;
            break;
        case LATE_SORT_HOSTS:
            rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SORT_HOSTS, 0);
            point_hash = second;
            break;
        case LATE_ADD:
            rc = add_server(memc, last);
            point_hash = second;
            break;
        case LATE_PUSH: {
            memcached_server_list_st one = memcached_server_list_append_with_weight(
                NULL, last->hostname, (in_port_t)last->port, last->weight, &rc);
            if (one != NULL)
                rc = memcached_server_push(memc, one);
            memcached_server_list_free(one);
            point_hash = second;
            break;
        }
        case LATE_CLONE:
            clone = memcached_clone(NULL, memc);
            if (clone == NULL)
                rc = MEMCACHED_MEMORY_ALLOCATION_FAILURE;
            point_hash = second;
            break;
        }
    }
    if (rc != MEMCACHED_SUCCESS) {
        fprintf(stderr, "ref_placement: %s on %s failed: %s\n", late_step_names[step], list->name,
                memcached_strerror(memc, rc));
        memcached_free(memc);
        return -1;
    }
    memcached_st *used = clone != NULL ? clone : memc;
    printf("config list=%s dist=%llu hash=%llu ketama_hash=%llu weighted=%llu point_hash=%d "
           "scenario=%s\n",
           list->name,
           (unsigned long long)memcached_behavior_get(used, MEMCACHED_BEHAVIOR_DISTRIBUTION),
           (unsigned long long)memcached_behavior_get(used, MEMCACHED_BEHAVIOR_HASH),
           (unsigned long long)memcached_behavior_get(used, MEMCACHED_BEHAVIOR_KETAMA_HASH),
           (unsigned long long)memcached_behavior_get(used, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED),
           point_hash, late_step_names[step]);
    int failed = print_keys(used, list);
    memcached_free(clone);
    memcached_free(memc);
    return failed;
}

static int print_late_placements(void)
{
    static const char *const lists[] = {"three", "seven", "three-weighted"};
    static const int dists[] = {
        MEMCACHED_DISTRIBUTION_CONSISTENT,
        MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA,
        MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY,
    };
    static const int hash_pairs[][2] = {
        {MEMCACHED_HASH_DEFAULT, MEMCACHED_HASH_MD5},
        {MEMCACHED_HASH_MD5, MEMCACHED_HASH_CRC},
        {MEMCACHED_HASH_MURMUR, MEMCACHED_HASH_FNV1A_32},
        {MEMCACHED_HASH_JENKINS, MEMCACHED_HASH_DEFAULT},
    };
    for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++)
        for (size_t d = 0; d < sizeof(dists) / sizeof(dists[0]); d++)
            for (size_t h = 0; h < sizeof(hash_pairs) / sizeof(hash_pairs[0]); h++)
                for (int step = 0; step < LATE_STEP_COUNT; step++)
                    if (print_late_block(fixture_list_find(lists[l]), dists[d], hash_pairs[h][0],
                                         hash_pairs[h][1], (enum late_step)step))
                        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "hashes") == 0) {
        print_hashes();
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "placements") == 0)
        return print_placements() || print_late_placements() ? 1 : 0;
    fprintf(stderr, "usage: ref_placement hashes|placements\n");
    return 2;
}
