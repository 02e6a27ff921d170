/* t/rdma/rdma_test_shared_ctx.c: one memcached_st talking to several
 * servers over rdma:// opens the device, its protection domain and
 * completion queue and registers its send and receive pools once, for all
 * of its connections. Inside the Soft-RoCE guest:
 *   rdma_test_shared_ctx SERVER_BINARY
 *
 * Three servers. What this process holds is read from the kernel's RDMA
 * resource tracking (`rdma resource show pd|cq|mr|qp`, lines of our pid),
 * so the counts are the device's, not the library's own. Compared in the
 * same run: three clients of one server each. Then a clone (a context of
 * its own, which outlives the original), a server that goes away (its
 * connection closes, the others keep the context), memcached_quit (the
 * last connection frees it) and a reconnect. Every value read back is
 * checked. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "t/rdma/mc_server.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

#define SERVERS 3
#define KEYS 90

/* What the device holds for this process. pd counts the protection
 * domains that hold registrations: librdmacm allocates one more of its
 * own per device for a process with connection ids, which holds none. */
struct held {
    unsigned pd, pd_all, cq, mr, qp;
    unsigned long long mr_bytes;
};

/* Lines of `rdma resource show KIND` that name our pid; for MRs also the
 * sum of their lengths and the distinct protection domains they lie in. */
static unsigned count_resource(const char *kind, struct held *h)
{
    char cmd[96], line[512], pid[32];
    snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>/dev/null", kind);
    snprintf(pid, sizeof(pid), " pid %d ", (int)getpid());
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        tap_bail("cannot run %s", cmd);
    unsigned n = 0;
    unsigned long pdns[64];
    while (fgets(line, sizeof(line), p) != NULL) {
        if (strstr(line, pid) == NULL)
            continue;
        n++;
        const char *len = strstr(line, " mrlen ");
        const char *pdn = strstr(line, " pdn ");
        if (h == NULL || len == NULL || pdn == NULL)
            continue;
        h->mr_bytes += strtoull(len + 7, NULL, 10);
        unsigned long id = strtoul(pdn + 5, NULL, 10);
        bool seen = false;
        for (unsigned i = 0; i < h->pd; i++)
            seen = seen || pdns[i] == id;
        if (!seen && h->pd < 64)
            pdns[h->pd++] = id;
    }
    pclose(p);
    return n;
}

static struct held held_now(void)
{
    struct held h = {0};
    h.pd_all = count_resource("pd", NULL);
    h.cq = count_resource("cq", NULL);
    h.mr = count_resource("mr", &h);
    h.qp = count_resource("qp", NULL);
    return h;
}

static void show(const char *what, const struct held *h)
{
    tap_diag("%s: %u protection domains with registrations (%u in all), %u completion queues, "
             "%u queue pairs, %u memory registrations of %llu bytes",
             what, h->pd, h->pd_all, h->cq, h->qp, h->mr, h->mr_bytes);
}

static memcached_st *client_of(const struct server *s, unsigned count)
{
    char cfg[512];
    size_t at = 0;
    for (unsigned i = 0; i < count; i++)
        at += (size_t)snprintf(cfg + at, sizeof(cfg) - at, "--SERVER=rdma://%s:%u ", rxe,
                               s[i].rdma_port);
    memcached_st *m = memcached(cfg, strlen(cfg));
    if (m == NULL)
        tap_bail("memcached(%s) failed", cfg);
    return m;
}

static void key_of(char *key, size_t cap, const char *tag, unsigned i)
{
    snprintf(key, cap, "%s-key-%u", tag, i);
}

static void value_of(char *value, size_t cap, const char *tag, unsigned i)
{
    snprintf(value, cap, "%s-value-%u-%0*u", tag, i, (int)(i % 50), i);
}

/* Sets KEYS keys; returns how many were stored. */
static unsigned set_all(memcached_st *m, const char *tag)
{
    unsigned stored = 0;
    for (unsigned i = 0; i < KEYS; i++) {
        char key[64], value[128];
        key_of(key, sizeof(key), tag, i);
        value_of(value, sizeof(value), tag, i);
        memcached_return_t rc = memcached_set(m, key, strlen(key), value, strlen(value), 0, 0);
        if (rc == MEMCACHED_SUCCESS)
            stored++;
        else if (stored == i) /* the first failure says why */
            tap_diag("set of %s: %s", key, memcached_error(m));
    }
    return stored;
}

/* Reads the keys back: how many came back right; *per_server: which
 * server each right one lives on (NULL: not counted). */
static unsigned check_all(memcached_st *m, const char *tag, unsigned per_server[SERVERS])
{
    unsigned right = 0;
    for (unsigned i = 0; i < KEYS; i++) {
        char key[64], want[128];
        key_of(key, sizeof(key), tag, i);
        value_of(want, sizeof(want), tag, i);
        size_t len = 0;
        uint32_t flags = 0;
        memcached_return_t rc;
        char *v = memcached_get(m, key, strlen(key), &len, &flags, &rc);
        if (rc == MEMCACHED_SUCCESS && v != NULL && len == strlen(want) &&
            memcmp(v, want, len) == 0) {
            right++;
            if (per_server != NULL) {
                uint32_t at = memcached_generate_hash(m, key, strlen(key));
                if (at < SERVERS)
                    per_server[at]++;
            }
        }
        free(v);
    }
    return right;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        tap_bail("usage: rdma_test_shared_ctx SERVER_BINARY");
    rxe = getenv("RXE_VM_ADDR");
    if (rxe == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    server_bin = argv[1];
    signal(SIGPIPE, SIG_IGN);
    unsigned base = 26000 + (unsigned)(getpid() % 500) * 8;
    struct server s[SERVERS];
    for (unsigned i = 0; i < SERVERS; i++)
        server_start(&s[i], base + 2 * i, base + 2 * i + 1);

    struct held none = held_now();
    show("before any client", &none);
    tap_ok(none.pd_all == 0 && none.cq == 0 && none.mr == 0 && none.qp == 0,
           "no RDMA resources held before a client connects");

    /* one client, three servers */
    memcached_st *m = client_of(s, SERVERS);
    tap_ok(set_all(m, "one") == KEYS, "one client: %u sets to %u servers stored", KEYS, SERVERS);
    unsigned per_server[SERVERS] = {0};
    tap_ok(check_all(m, "one", per_server) == KEYS, "one client: every value read back");
    tap_ok(per_server[0] > 0 && per_server[1] > 0 && per_server[2] > 0,
           "keys live on all three servers (%u, %u, %u)", per_server[0], per_server[1],
           per_server[2]);
    struct held shared = held_now();
    show("one client of three servers", &shared);
    tap_ok(shared.qp == SERVERS, "one queue pair per server (%u)", shared.qp);
    tap_ok(shared.pd == 1, "one protection domain for the three connections (%u)", shared.pd);
    tap_ok(shared.cq == 1, "one completion queue for the three connections (%u)", shared.cq);

    /* three clients of one server each, beside it */
    memcached_st *single[SERVERS];
    for (unsigned i = 0; i < SERVERS; i++) {
        single[i] = client_of(&s[i], 1);
        char tag[16];
        snprintf(tag, sizeof(tag), "single%u", i);
        if (set_all(single[i], tag) != KEYS || check_all(single[i], tag, NULL) != KEYS)
            tap_diag("single-server client %u: values did not come back", i);
    }
    struct held both = held_now();
    for (unsigned i = 0; i < SERVERS; i++)
        memcached_free(single[i]);
    struct held separate = {.pd = both.pd - shared.pd,
                            .pd_all = both.pd_all - shared.pd_all,
                            .cq = both.cq - shared.cq,
                            .mr = both.mr - shared.mr,
                            .qp = both.qp - shared.qp,
                            .mr_bytes = both.mr_bytes - shared.mr_bytes};
    show("three clients of one server each", &separate);
    tap_ok(separate.pd == SERVERS && separate.cq == SERVERS,
           "three clients of one server each hold three protection domains and completion "
           "queues");
    /* a context registers its pools a connection's credits at a time:
     * receives per connection in both layouts, and one chunk of send
     * buffers per context (these clients never have a chunk's worth
     * waiting); per connection the landing and request buffers are
     * registered alike in both layouts */
    tap_ok(separate.mr == shared.mr + (SERVERS - 1),
           "the shared context registers its send buffers once: %u registrations against %u",
           shared.mr, separate.mr);
    tap_ok(shared.mr_bytes < separate.mr_bytes,
           "registered bytes: %llu shared against %llu separate", shared.mr_bytes,
           separate.mr_bytes);
    struct held after_singles = held_now();
    tap_ok(after_singles.pd == shared.pd && after_singles.mr == shared.mr &&
               after_singles.cq == shared.cq,
           "freeing the other clients leaves the shared context as it was");

    /* a clone has a context of its own and outlives the original */
    memcached_st *clone = memcached_clone(NULL, m);
    tap_ok(clone != NULL && check_all(clone, "one", NULL) == KEYS,
           "the clone reads every value back");
    struct held two = held_now();
    tap_ok(two.pd == 2 && two.cq == 2, "the clone has a context of its own (%u protection domains)",
           two.pd);
    memcached_free(m);
    struct held clone_only = held_now();
    tap_ok(clone_only.pd == 1 && clone_only.cq == 1 && clone_only.mr == shared.mr,
           "freeing the original leaves the clone's context whole (%u registrations)",
           clone_only.mr);
    tap_ok(set_all(clone, "clone") == KEYS && check_all(clone, "clone", NULL) == KEYS,
           "the clone still stores and reads back after the original was freed");

    /* a server that goes away: its connection closes, the others keep
     * the context */
    server_stop(&s[SERVERS - 1], SIGTERM);
    unsigned right = check_all(clone, "clone", per_server);
    struct held two_left = held_now();
    show("after one server stopped", &two_left);
    tap_ok(right > 0 && right < KEYS, "keys of the stopped server fail, the others read back (%u)",
           right);
    tap_ok(two_left.qp == SERVERS - 1 && two_left.pd == 1 && two_left.cq == 1,
           "the stopped server's connection is gone (%u queue pairs), the context stays",
           two_left.qp);

    /* the last connection's close frees the context; a reconnect makes
     * a new one */
    memcached_quit(clone);
    struct held quit = held_now();
    tap_ok(quit.pd_all == 0 && quit.cq == 0 && quit.mr == 0 && quit.qp == 0,
           "memcached_quit: the last connection's close freed the context");
    unsigned again = check_all(clone, "clone", NULL);
    struct held reconnected = held_now();
    tap_ok(again == right && reconnected.pd == 1 && reconnected.qp == SERVERS - 1,
           "after memcached_quit the client reconnects on one new context (%u values, %u "
           "protection domains)",
           again, reconnected.pd);
    memcached_free(clone);
    struct held end = held_now();
    tap_ok(end.pd_all == 0 && end.cq == 0 && end.mr == 0 && end.qp == 0,
           "memcached_free released everything");

    for (unsigned i = 0; i < SERVERS - 1; i++)
        server_stop(&s[i], SIGTERM);
    tap_no_plan_end();
    return tap_failed == 0 ? 0 : 1;
}
