/* benchmarks/ohb_bursty.c: the Boldio-style bursty block I/O pattern. Each of
 * --clients client threads (its own connection) owns a block of --block
 * bytes, writes it as chunk-sized key-value pairs in bursts of --burst
 * requests issued with memcached_iset and waited for together, then reads
 * it back the same way with memcached_iget straight into a block-sized
 * buffer and compares every byte with what it wrote. For chunk sizes
 * doubling from --min-chunk to --max-chunk it prints the aggregate MB/s
 * (10^6 bytes per second, all clients' bytes over the time from the common
 * start to the last client's end) of the write and the read bursts as an
 * OSU-style table. Builds only against libmemcached-rdma (the
 * non-blocking calls are ours). */
#include "ohb_common.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char notes[] =
    "  Chunks of 1m need a server item size limit above 1m (memcached -I 2m).\n";

struct bursty_options {
    const char *servers;
    unsigned clients, burst;
    size_t block, min_chunk, max_chunk;
    const char *csv;
};

struct client {
    pthread_t thread;
    const struct bursty_options *o;
    unsigned index;
    size_t chunk;
    bool reading;
    pthread_barrier_t *start;
    char *source; /* what this client writes */
    char *dest;   /* where it reads back to */
    memcached_request_st **reqs;
    memcached_st *memc;
};

/* A byte pattern that differs by client and by position, so a chunk read
 * back from the wrong key or into the wrong place does not compare equal. */
static void fill_source(char *p, size_t size, unsigned client)
{
    uint64_t x = 0x9E3779B97F4A7C15ULL * (client + 1);
    for (size_t i = 0; i < size; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t n = size - i < 8 ? size - i : 8;
        memcpy(p + i, &x, n);
    }
}

static size_t key_of(char *key, size_t cap, unsigned client, size_t chunk_index)
{
    return (size_t)snprintf(key, cap, "ohb:bursty:%u:%zu", client, chunk_index);
}

/* Issues the chunks first .. first+n-1 and waits for all of them. */
static void burst(struct client *c, size_t first, size_t n)
{
    char key[64];
    for (size_t i = 0; i < n; i++) {
        size_t chunk_index = first + i, key_len = key_of(key, sizeof(key), c->index, chunk_index);
        size_t offset = chunk_index * c->chunk;
        memcached_return_t rc =
            c->reading
                ? memcached_iget(c->memc, key, key_len, c->dest + offset, c->chunk, c->reqs[i])
                : memcached_iset(c->memc, key, key_len, c->source + offset, c->chunk, 0, 0,
                                 c->reqs[i]);
        if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_IN_PROGRESS)
            ohb_fail(c->memc, c->reading ? "memcached_iget" : "memcached_iset", rc);
    }
    for (size_t i = 0; i < n; i++) {
        memcached_return_t rc = memcached_wait(c->memc, c->reqs[i]);
        if (rc == MEMCACHED_NOTFOUND) {
            fprintf(stderr,
                    "client %u: chunk %zu is missing (evicted? give the server more memory)\n",
                    c->index, first + i);
            exit(1);
        }
        if (rc != MEMCACHED_SUCCESS)
            ohb_fail(c->memc, c->reading ? "memcached_iget" : "memcached_iset", rc);
        if (c->reading) {
            size_t len = 0;
            const char *value = memcached_request_value(c->reqs[i], &len);
            char *want = c->dest + (first + i) * c->chunk;
            if (len != c->chunk) {
                fprintf(stderr, "client %u: chunk %zu has %zu bytes, expected %zu\n", c->index,
                        first + i, len, c->chunk);
                exit(1);
            }
            if (value != want) {
                fprintf(stderr, "client %u: chunk %zu was not read into the caller's buffer\n",
                        c->index, first + i);
                exit(1);
            }
        }
    }
}

static void *client_main(void *arg)
{
    struct client *c = arg;
    size_t chunks = c->o->block / c->chunk;
    pthread_barrier_wait(c->start);
    for (size_t first = 0; first < chunks; first += c->o->burst)
        burst(c, first, chunks - first < c->o->burst ? chunks - first : c->o->burst);
    return NULL;
}

/* All clients write (or read) their blocks at once; returns the seconds from
 * the common start to the last client's end. */
static double run_phase(struct client *clients, const struct bursty_options *o, size_t chunk,
                        bool reading)
{
    pthread_barrier_t start;
    if (pthread_barrier_init(&start, NULL, o->clients + 1) != 0) {
        fprintf(stderr, "cannot set up %u clients\n", o->clients);
        exit(1);
    }
    for (unsigned i = 0; i < o->clients; i++) {
        clients[i].chunk = chunk;
        clients[i].reading = reading;
        clients[i].start = &start;
        if (pthread_create(&clients[i].thread, NULL, client_main, &clients[i]) != 0) {
            fprintf(stderr, "cannot start client thread %u\n", i);
            exit(1);
        }
    }
    pthread_barrier_wait(&start);
    double begin = ohb_now_us();
    for (unsigned i = 0; i < o->clients; i++)
        pthread_join(clients[i].thread, NULL);
    double seconds = (ohb_now_us() - begin) / 1e6;
    pthread_barrier_destroy(&start);
    return seconds;
}

static void verify(const struct client *c)
{
    if (memcmp(c->dest, c->source, c->o->block) == 0)
        return;
    size_t at = 0;
    while (c->dest[at] == c->source[at])
        at++;
    fprintf(stderr, "client %u: byte %zu read back differs from what was written (chunk %zu)\n",
            c->index, at, at / c->chunk);
    exit(1);
}

static void parse(int argc, char **argv, struct bursty_options *o)
{
    *o = (struct bursty_options){.servers = "127.0.0.1:11211",
                                 .clients = 2,
                                 .burst = 16,
                                 .block = 128u << 20,
                                 .min_chunk = 64u << 10,
                                 .max_chunk = 1u << 20};
    const struct ohb_option table[] = {
        OHB_OPTION_SERVERS(&o->servers),
        {"clients", OHB_OPT_UNSIGNED, &o->clients, "N", "client threads, a connection each", NULL},
        {"block", OHB_OPT_SIZE, &o->block, "SIZE", "bytes each client writes and reads back", NULL},
        {"min-chunk", OHB_OPT_SIZE, &o->min_chunk, "SIZE", "the first chunk size", NULL},
        {"max-chunk", OHB_OPT_SIZE, &o->max_chunk, "SIZE", "the last chunk size (sizes double)",
         NULL},
        {"burst", OHB_OPT_UNSIGNED, &o->burst, "N", "requests issued together", NULL},
        OHB_OPTION_CSV(&o->csv),
    };
    const struct ohb_command cmd = {"ohb_bursty", table, sizeof(table) / sizeof(table[0]), notes};
    ohb_command_parse(&cmd, argc, argv);
    if (o->clients == 0 || o->clients > 256 || o->burst == 0 || o->min_chunk == 0 ||
        o->max_chunk < o->min_chunk || o->block < o->max_chunk)
        ohb_usage_error();
    if (o->block % o->max_chunk != 0 ||
        (o->max_chunk / o->min_chunk) * o->min_chunk != o->max_chunk) {
        fputs("ohb_bursty: --block must be a multiple of every chunk size (powers of two "
              "work)\n",
              stderr);
        exit(2);
    }
    ohb_clock_calibrate();
}

int main(int argc, char **argv)
{
    struct bursty_options o;
    parse(argc, argv, &o);
    FILE *csv = NULL;
    if (o.csv && (csv = fopen(o.csv, "w")) == NULL) {
        perror(o.csv);
        return 1;
    }
    if (csv)
        fprintf(csv, "chunk,write_mb_per_sec,read_mb_per_sec,bytes\n");
    struct client *clients = calloc(o.clients, sizeof(*clients));
    if (clients == NULL) {
        fprintf(stderr, "out of memory for %u clients\n", o.clients);
        return 1;
    }
    for (unsigned i = 0; i < o.clients; i++) {
        struct client *c = &clients[i];
        *c = (struct client){.o = &o,
                             .index = i,
                             .source = malloc(o.block),
                             .dest = malloc(o.block),
                             .reqs = calloc(o.burst, sizeof(*c->reqs)),
                             .memc = ohb_connect(o.servers)};
        if (c->source == NULL || c->dest == NULL || c->reqs == NULL) {
            fprintf(stderr, "out of memory for client %u's %zu-byte blocks\n", i, o.block);
            return 1;
        }
        for (unsigned r = 0; r < o.burst; r++)
            if ((c->reqs[r] = memcached_request_create(c->memc)) == NULL)
                ohb_fail(c->memc, "memcached_request_create", MEMCACHED_MEMORY_ALLOCATION_FAILURE);
        fill_source(c->source, o.block, i);
    }

    double total = (double)o.block * o.clients;
    printf("# OHB Bursty Block I/O Test\n");
    printf("# Servers: %s  Clients: %u  Block: %zu bytes each  Burst: %u requests  Clock: %s\n",
           o.servers, o.clients, o.block, o.burst, ohb_clock_name());
    printf("# %-10s %14s %14s\n", "Chunk", "Write(MB/s)", "Read(MB/s)");
    fflush(stdout);
    for (size_t chunk = o.min_chunk; chunk <= o.max_chunk; chunk *= 2) {
        double write_s = run_phase(clients, &o, chunk, false);
        for (unsigned i = 0; i < o.clients; i++)
            memset(clients[i].dest, 0, o.block);
        double read_s = run_phase(clients, &o, chunk, true);
        for (unsigned i = 0; i < o.clients; i++)
            verify(&clients[i]);
        double write_mbs = total / write_s / 1e6, read_mbs = total / read_s / 1e6;
        printf("%-12zu %14.1f %14.1f\n", chunk, write_mbs, read_mbs);
        fflush(stdout);
        if (csv)
            fprintf(csv, "%zu,%.1f,%.1f,%.0f\n", chunk, write_mbs, read_mbs, total);
        if (chunk > o.max_chunk / 2)
            break;
    }

    for (unsigned i = o.clients; i-- > 0;) {
        struct client *c = &clients[i];
        for (unsigned r = o.burst; r-- > 0;)
            memcached_request_free(c->reqs[r]);
        memcached_free(c->memc);
        free(c->reqs);
        free(c->dest);
        free(c->source);
    }
    free(clients);
    if (csv)
        fclose(csv);
    return 0;
}
