/* t/placement/fixtures.h: the server lists and keys shared by the placement
 * reference program (built against Debian's libmemcached) and our dumper, so
 * both describe exactly the same inputs. Header-only; no library calls. */
#ifndef PLACEMENT_FIXTURES_H
#define PLACEMENT_FIXTURES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct fixture_server {
    const char *hostname;
    unsigned port; /* 0: unix socket, hostname is the path */
    uint32_t weight;
};

struct fixture_list {
    const char *name;
    size_t count;
    const struct fixture_server *servers;
};

static const struct fixture_server fixture_one[] = {
    {"10.0.1.1", 11211, 1},
};
static const struct fixture_server fixture_three[] = {
    {"10.0.1.1", 11211, 1},
    {"10.0.1.2", 11212, 1},
    {"cache-c.example", 11211, 1},
};
static const struct fixture_server fixture_seven[] = {
    {"10.0.1.1", 11211, 1},        {"10.0.1.2", 11211, 1}, {"10.0.1.3", 22122, 1},
    {"localhost", 11213, 1},       {"10.0.1.5", 11211, 1}, {"/var/run/memcached.sock", 0, 1},
    {"cache-g.example", 11211, 1},
};
static const struct fixture_server fixture_three_weighted[] = {
    {"10.0.1.1", 11211, 1},
    {"10.0.1.2", 11212, 3},
    {"cache-c.example", 11211, 2},
};
static const struct fixture_server fixture_seven_weighted[] = {
    {"10.0.1.1", 11211, 5},        {"10.0.1.2", 11211, 1}, {"10.0.1.3", 22122, 2},
    {"localhost", 11213, 7},       {"10.0.1.5", 11211, 3}, {"/var/run/memcached.sock", 0, 1},
    {"cache-g.example", 11211, 4},
};

/* weight 0 counts as 1 */
static const struct fixture_server fixture_three_zero_weight[] = {
    {"10.0.3.1", 11211, 0},
    {"10.0.3.2", 11211, 3},
    {"10.0.3.3", 11400, 1},
};
/* 25 equal servers: the size where libmemcached's single-precision weighting
 * gives 156 points per server instead of 160. */
static const struct fixture_server fixture_twenty_five[] = {
    {"10.0.2.1", 11211, 1},  {"10.0.2.2", 11301, 1},  {"10.0.2.3", 11211, 1},
    {"10.0.2.4", 11303, 1},  {"10.0.2.5", 11211, 1},  {"10.0.2.6", 11305, 1},
    {"10.0.2.7", 11211, 1},  {"10.0.2.8", 11307, 1},  {"10.0.2.9", 11211, 1},
    {"10.0.2.10", 11309, 1}, {"10.0.2.11", 11211, 1}, {"10.0.2.12", 11311, 1},
    {"10.0.2.13", 11211, 1}, {"10.0.2.14", 11313, 1}, {"10.0.2.15", 11211, 1},
    {"10.0.2.16", 11315, 1}, {"10.0.2.17", 11211, 1}, {"10.0.2.18", 11317, 1},
    {"10.0.2.19", 11211, 1}, {"10.0.2.20", 11319, 1}, {"10.0.2.21", 11211, 1},
    {"10.0.2.22", 11321, 1}, {"10.0.2.23", 11211, 1}, {"10.0.2.24", 11323, 1},
    {"10.0.2.25", 11211, 1},
};

#define FIXTURE_LIST(name, array)                                                                  \
    {                                                                                              \
        name, sizeof(array) / sizeof(array[0]), array                                              \
    }
static const struct fixture_list fixture_lists[] = {
    FIXTURE_LIST("one", fixture_one),
    FIXTURE_LIST("three", fixture_three),
    FIXTURE_LIST("seven", fixture_seven),
    FIXTURE_LIST("three-weighted", fixture_three_weighted),
    FIXTURE_LIST("seven-weighted", fixture_seven_weighted),
    FIXTURE_LIST("three-zero-weight", fixture_three_zero_weight),
    FIXTURE_LIST("twenty-five", fixture_twenty_five),
};
enum { FIXTURE_LIST_COUNT = sizeof(fixture_lists) / sizeof(fixture_lists[0]) };

static inline const struct fixture_list *fixture_list_find(const char *name)
{
    for (size_t i = 0; i < FIXTURE_LIST_COUNT; i++)
        if (strcmp(fixture_lists[i].name, name) == 0)
            return &fixture_lists[i];
    return NULL;
}

enum { FIXTURE_KEY_COUNT = 3000, FIXTURE_KEY_MAX = 250 };

/* Deterministic key number i into buf (FIXTURE_KEY_MAX bytes); returns its
 * length. A third are "user:N"-style names, a third random printable bytes,
 * a third arbitrary bytes including >= 0x80 (which some hashes widen as
 * signed char); lengths run from 1 to 250. */
static inline size_t fixture_key(unsigned i, char *buf)
{
    if (i % 3 == 0) {
        static const char *prefixes[] = {"user:", "cart/", "k", "obj:cache:", ""};
        const char *prefix = prefixes[(i / 3) % 5];
        size_t len = strlen(prefix);
        memcpy(buf, prefix, len);
        unsigned n = i;
        char digits[16];
        size_t nd = 0;
        do {
            digits[nd++] = (char)('0' + n % 10);
            n /= 10;
        } while (n);
        while (nd)
            buf[len++] = digits[--nd];
        return len;
    }
    uint64_t state = 0x9e3779b97f4a7c15ull * (i + 1);
    size_t len = 1 + (size_t)((state >> 33) % (i % 7 == 1 ? FIXTURE_KEY_MAX : 40));
    for (size_t k = 0; k < len; k++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        unsigned byte = (unsigned)(state >> 56);
        buf[k] = (char)(i % 3 == 1 ? 33 + byte % 94 : byte);
    }
    return len;
}

#endif
