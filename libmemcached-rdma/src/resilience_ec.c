/* resilience_ec.c: erasure-coded key operations (see resilience.h and
 * erasure.h). A set cuts the value into K data chunks sent at once from the
 * caller's memory, encodes the M parity chunks while those are on their
 * way, then sends the parity; values below the threshold go whole to M + 1
 * servers instead. A get asks for position 0 first (with a threshold: a
 * value under it is a whole copy there) or, with a threshold of 0 or while
 * the client's latest gets found coded values, the K data chunks in parallel
 * and, for each chunk missing, malformed or on a server known to be down,
 * one more (the next position that may hold a whole copy, or parity); it
 * completes with the first write that K matching chunks (one, for a whole
 * copy) agree on. Delete and touch go to all K + M servers. */
#include "resilience.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "erasure.h"

enum chunk_status { CHUNK_NOT_ASKED, CHUNK_ASKED, CHUNK_GOOD, CHUNK_BAD };

struct coded_write {
    struct lmr_group g;
    uint32_t quorum; /* chunks a readable value needs */
    /* not cleared (lmr_group_create): written before they are read */
    char headers[LMR_EC_MAX_CHUNKS][LMR_EC_HEADER_LENGTH];
    char *scratch; /* parity, padded data chunks, the value's copy (bset) */
};

struct coded_read {
    struct lmr_group g;
    uint32_t k, m;
    uint8_t status[LMR_EC_MAX_CHUNKS];
    /* only position 0 asked so far: values under the threshold are whole
     * copies there, and a get of one asks no other server */
    bool probing;
    bool placing; /* placed_write is set */
    bool placed_whole;
    memcached_return_t failure; /* the first server failure */
    /* not cleared (lmr_group_create): servers[0..K+M) set with the read,
     * placed[i] when chunk i is asked, headers[i] when it answered,
     * placed_write with `placing` */
    uint32_t servers[LMR_EC_MAX_CHUNKS];
    /* payloads received in their place in the parent's value (coded_place):
     * those of one write (`placed_write`), data chunks or one whole copy */
    char *placed[LMR_EC_MAX_CHUNKS];
    struct lmr_ec_header placed_write;
    struct lmr_ec_header headers[LMR_EC_MAX_CHUNKS];
    struct lmr_op_args args;
    char key[MEMCACHED_MAX_KEY];
};

/* Whole-operation results of delete and touch, and of writes. */
struct coded_all {
    struct lmr_group g;
    uint32_t quorum;
    enum lmr_op_kind kind;
};

static memcached_return_t done_with(memcached_request_st *req, memcached_return_t rc)
{
    req->rc = rc;
    req->state = LMR_STATE_DONE;
    return rc;
}

static const int *coding_matrix(struct lmr_client *c, uint32_t k, uint32_t m)
{
    if (c->ec_matrix == NULL || c->ec_matrix_k != k || c->ec_matrix_m != m) {
        free(c->ec_matrix);
        c->ec_matrix = lmr_ec_matrix(k, m);
        c->ec_matrix_k = k;
        c->ec_matrix_m = m;
    }
    return c->ec_matrix;
}

/* ---- writes ---- */

static void coded_write_step(struct lmr_group *g)
{
    struct coded_write *w = (struct coded_write *)g;
    if (g->outstanding == 0)
        lmr_group_finish(g, lmr_resilience_combine(g, w->quorum, LMR_OP_STORE));
    else
        lmr_resilience_leave_hung(g, w->quorum);
}

static void coded_write_release(struct lmr_group *g)
{
    free(((struct coded_write *)g)->scratch);
}

static const struct lmr_group_ops coded_write_ops = {
    .step = coded_write_step,
    .release = coded_write_release,
};

/* Sends chunk i: w->headers[i] and the payload. */
static void issue_chunk(struct coded_write *w, uint32_t i, memcached_instance_st *srv,
                        const struct lmr_op_args *args, const char *payload, size_t payload_length)
{
    struct lmr_op_args chunk = *args;
    chunk.value = payload;
    chunk.value_length = payload_length;
    chunk.value_prefix = w->headers[i];
    chunk.value_prefix_length = LMR_EC_HEADER_LENGTH;
    chunk.copy_value = false; /* the payload is the caller's or the group's */
    lmr_group_issue(&w->g, i, srv, LMR_OP_STORE, &chunk);
}

/* The bytes every data chunk of a value of `length` has in the value, a
 * multiple of 16 (the region gf-complete codes at once): the shortest
 * data chunk's length (the last one's) rounded down; parity for them is
 * coded straight from the value, the rest from padded copies. */
static size_t in_every_data_chunk(size_t length, uint32_t k, size_t chunk_size)
{
    size_t before_last = (size_t)(k - 1) * chunk_size;
    size_t last = length > before_last ? length - before_last : 0;
    return last & ~(size_t)15;
}

static memcached_return_t coded_store(struct lmr_client *c, memcached_request_st *req,
                                      const uint32_t *servers, const struct lmr_op_args *args)
{
    uint32_t k = c->behaviors.ec_data_chunks, m = c->behaviors.ec_parity_chunks;
    size_t length = args->value_length;
    bool whole = length < c->behaviors.ec_threshold;
    const int *matrix = whole ? NULL : coding_matrix(c, k, m);
    if (!whole && matrix == NULL)
        return done_with(req, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
    uint32_t count = whole ? m + 1 : k + m;
    size_t chunk_size = whole ? 0 : lmr_ec_chunk_size(length, k);
    size_t in_value = whole ? 0 : in_every_data_chunk(length, k, chunk_size);
    size_t tail = chunk_size - in_value;
    size_t copy_at = (size_t)m * chunk_size + (size_t)k * tail;
    /* 16 spare bytes: parity and padded tails start at the value's
     * address modulo 16, as gf-complete wants */
    char *scratch = malloc(copy_at + (args->copy_value ? length : 0) + 16);
    struct coded_write *w =
        scratch == NULL
            ? NULL
            : (struct coded_write *)lmr_group_create(c, req, &coded_write_ops, sizeof(*w),
                                                     offsetof(struct coded_write, headers), count);
    if (w == NULL) {
        free(scratch);
        return done_with(req, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
    }
    w->scratch = scratch;
    w->g.count_failures = true;
    w->quorum = whole ? 1 : k;
    lmr_resilience_arm_write(&w->g);
    const char *value = args->value;
    char *base = scratch;                 /* where parity and padded chunks go */
    if (args->copy_value && length > 0) { /* bset: the caller may reuse its buffer */
        memcpy(base + copy_at, value, length);
        value = base + copy_at;
    } else {
        base += ((uintptr_t)value - (uintptr_t)scratch) & 15;
    }
    if (whole) {
        lmr_resilience_copy_headers(c, w->headers, count, args);
        for (uint32_t i = 0; i < count; i++)
            issue_chunk(w, i, c->servers[servers[i]], args, value, length);
        return MEMCACHED_SUCCESS;
    }
    struct lmr_ec_header h = {
        .k = k,
        .m = m,
        .value_length = length,
        .stamp = lmr_resilience_next_stamp(c),
        .flags = args->flags,
    };
    /* data chunks go out first, straight from the value; the first
     * in_value bytes of each are coded from there too, the rest (the
     * short and empty chunks' ends) from zero-padded copies of the tails */
    char *data[LMR_EC_MAX_CHUNKS], *coding[LMR_EC_MAX_CHUNKS];
    char *tails[LMR_EC_MAX_CHUNKS], *coding_tails[LMR_EC_MAX_CHUNKS];
    char *padded = base + (size_t)m * chunk_size;
    for (uint32_t i = 0; i < k; i++) {
        h.index = i;
        size_t payload = lmr_ec_payload_length(&h);
        const char *start = payload > 0 ? value + (size_t)i * chunk_size : value;
        data[i] = (char *)start;
        tails[i] = padded + (size_t)i * tail;
        size_t tail_payload = payload > in_value ? payload - in_value : 0;
        if (tail_payload > 0)
            memcpy(tails[i], start + in_value, tail_payload);
        memset(tails[i] + tail_payload, 0, tail - tail_payload);
        lmr_ec_header_write(w->headers[i], &h, start, payload);
        issue_chunk(w, i, c->servers[servers[i]], args, start, payload);
    }
    for (uint32_t j = 0; j < m; j++) {
        coding[j] = base + (size_t)j * chunk_size;
        coding_tails[j] = coding[j] + in_value;
    }
    if (in_value > 0)
        lmr_ec_encode(k, m, matrix, data, coding, in_value);
    if (tail > 0)
        lmr_ec_encode(k, m, matrix, tails, coding_tails, tail);
    for (uint32_t j = 0; j < m; j++) {
        h.index = k + j;
        lmr_ec_header_write(w->headers[k + j], &h, coding[j], chunk_size);
        issue_chunk(w, k + j, c->servers[servers[k + j]], args, coding[j], chunk_size);
    }
    return MEMCACHED_SUCCESS;
}

/* ---- delete, touch ---- */

static void coded_all_step(struct lmr_group *g)
{
    struct coded_all *a = (struct coded_all *)g;
    if (g->outstanding == 0)
        lmr_group_finish(g, lmr_resilience_combine(g, a->quorum, a->kind));
    else
        lmr_resilience_leave_hung(g, a->quorum);
}

static const struct lmr_group_ops coded_all_ops = {.step = coded_all_step};

static memcached_return_t coded_everywhere(struct lmr_client *c, memcached_request_st *req,
                                           enum lmr_op_kind kind, const uint32_t *servers,
                                           const struct lmr_op_args *args)
{
    uint32_t count = c->behaviors.ec_data_chunks + c->behaviors.ec_parity_chunks;
    struct coded_all *a =
        (struct coded_all *)lmr_group_create(c, req, &coded_all_ops, sizeof(*a), sizeof(*a), count);
    if (a == NULL)
        return done_with(req, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
    a->g.count_failures = true;
    a->quorum = 1;
    a->kind = kind;
    for (uint32_t i = 0; i < count; i++)
        lmr_group_issue(&a->g, i, c->servers[servers[i]], kind, args);
    lmr_resilience_arm_write(&a->g);
    return MEMCACHED_SUCCESS;
}

/* ---- reads ---- */

static bool same_write(const struct lmr_ec_header *a, const struct lmr_ec_header *b)
{
    return a->stamp == b->stamp && a->k == b->k && a->value_length == b->value_length &&
           a->flags == b->flags;
}

static const char *payload_of(const struct coded_read *r, uint32_t i)
{
    return r->placed[i] != NULL ? r->placed[i]
                                : r->g.children[i]->lib_buffer + LMR_EC_HEADER_LENGTH;
}

/* Where chunk i's payload goes once its header (`prefix`) arrived: a data
 * chunk of the write placed first, or the first whole copy, straight into
 * its place in the parent's value, so that a get whose data chunks all
 * arrive copies nothing; anything else into the child's buffer. The
 * header is checked (not the checksum: classify does that, and a bad chunk
 * placed is rebuilt by deliver). */
static char *coded_place(struct lmr_group *g, uint32_t i, const char *prefix, size_t value_length)
{
    struct coded_read *r = (struct coded_read *)g;
    struct lmr_ec_header h;
    if (g->parent->kind != LMR_OP_GET || r->placed_whole ||
        !lmr_ec_header_parse(prefix, value_length, &h) || h.index != i || h.m != r->m ||
        (h.k != r->k && h.k != 1) || (h.k == r->k && i >= r->k) ||
        (r->placing && (h.k == 1 || !same_write(&h, &r->placed_write))))
        return NULL;
    size_t at = h.k == 1 ? 0 : (size_t)i * lmr_ec_chunk_size(h.value_length, h.k);
    char *room = lmr_resilience_place(g->parent, &h, at, value_length - LMR_EC_HEADER_LENGTH);
    if (room == NULL)
        return NULL;
    r->placing = true;
    r->placed_write = h;
    r->placed_whole = h.k == 1;
    r->placed[i] = room;
    return room;
}

/* A get found a coded value (coded) or a whole copy: the count that
 * decides whether the next get asks all K data chunks at once. */
static void note_coded(struct lmr_client *c, bool coded)
{
    if (coded && c->ec_coded_recent < LMR_EC_CODED_RECENT_MAX)
        c->ec_coded_recent++;
    else if (!coded && c->ec_coded_recent > 0)
        c->ec_coded_recent--;
}

/* Completes the parent with the value of the write chunk `first` belongs
 * to, which has enough good chunks. */
static void deliver(struct coded_read *r, uint32_t first)
{
    struct lmr_group *g = &r->g;
    memcached_request_st *parent = g->parent;
    const struct lmr_ec_header *h = &r->headers[first];
    if (parent->kind == LMR_OP_EXIST) {
        lmr_group_finish(g, MEMCACHED_SUCCESS);
        return;
    }
    size_t length = (size_t)h->value_length;
    memcached_return_t rc;
    char *dest = lmr_resilience_value_destination(parent, length, &rc);
    parent->flags = h->flags;
    parent->cas = 0;
    if (dest == NULL) {
        lmr_group_finish(g, rc);
        return;
    }
    note_coded(g->client, h->k > 1);
    if (h->k == 1) {
        if (payload_of(r, first) != dest) /* unless it arrived there */
            memcpy(dest, payload_of(r, first), length);
        lmr_group_finish(g, MEMCACHED_SUCCESS);
        return;
    }
    uint32_t n = r->k + r->m;
    size_t chunk_size = lmr_ec_chunk_size(length, r->k);
    bool have_data = true;
    for (uint32_t i = 0; i < r->k; i++)
        have_data = have_data && r->status[i] == CHUNK_GOOD && same_write(&r->headers[i], h);
    if (have_data) {
        for (uint32_t i = 0; i < r->k; i++) {
            size_t payload = lmr_ec_payload_length(&r->headers[i]);
            if (payload > 0 && payload_of(r, i) != dest + (size_t)i * chunk_size)
                memcpy(dest + (size_t)i * chunk_size, payload_of(r, i), payload);
        }
        lmr_group_finish(g, MEMCACHED_SUCCESS);
        return;
    }
    /* good chunks of full length are decoded from where they arrived
     * (library buffers: 16-byte aligned, as gf-complete wants); erased
     * and short ones get a slot of their own */
    char *slots[LMR_EC_MAX_CHUNKS];
    bool in_place[LMR_EC_MAX_CHUNKS];
    size_t own_slots = 0;
    for (uint32_t i = 0; i < n; i++) {
        in_place[i] = r->status[i] == CHUNK_GOOD && same_write(&r->headers[i], h) &&
                      lmr_ec_payload_length(&r->headers[i]) == chunk_size &&
                      ((uintptr_t)payload_of(r, i) & 15) == 0;
        own_slots += !in_place[i];
    }
    char *work = aligned_alloc(16, own_slots * chunk_size);
    if (work == NULL) {
        lmr_group_finish(g, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
        return;
    }
    int erasures[LMR_EC_MAX_CHUNKS + 1];
    int erased = 0;
    size_t next_slot = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (in_place[i]) {
            slots[i] = (char *)payload_of(r, i);
            continue;
        }
        slots[i] = work + next_slot++ * chunk_size;
        if (r->status[i] == CHUNK_GOOD && same_write(&r->headers[i], h)) {
            size_t payload = lmr_ec_payload_length(&r->headers[i]);
            memcpy(slots[i], payload_of(r, i), payload);
            memset(slots[i] + payload, 0, chunk_size - payload);
        } else {
            erasures[erased++] = (int)i;
        }
    }
    erasures[erased] = -1;
    const int *matrix = coding_matrix(g->client, r->k, r->m);
    rc = MEMCACHED_FAILURE;
    if (matrix != NULL &&
        lmr_ec_decode(r->k, r->m, matrix, erasures, slots, slots + r->k, chunk_size)) {
        for (uint32_t i = 0; i < r->k; i++) {
            size_t at = (size_t)i * chunk_size;
            if (at < length && slots[i] != dest + at)
                memcpy(dest + at, slots[i], length - at < chunk_size ? length - at : chunk_size);
        }
        rc = MEMCACHED_SUCCESS;
    }
    free(work);
    lmr_group_finish(g, rc);
}

/* Looks at the chunks that arrived: good or bad. */
static void classify(struct coded_read *r)
{
    struct lmr_group *g = &r->g;
    for (uint32_t i = 0; i < r->k + r->m; i++) {
        memcached_request_st *child = g->children[i];
        if (r->status[i] != CHUNK_ASKED || child->state != LMR_STATE_DONE)
            continue;
        struct lmr_ec_header *h = &r->headers[i];
        bool good =
            child->rc == MEMCACHED_SUCCESS &&
            lmr_ec_header_read_split(child->lib_buffer, payload_of(r, i), child->value_length, h) &&
            h->index == i && h->m == r->m && (h->k == r->k || h->k == 1);
        r->status[i] = good ? CHUNK_GOOD : CHUNK_BAD;
        if (lmr_group_is_failure(child->rc) && r->failure == MEMCACHED_SUCCESS)
            r->failure = child->rc;
    }
}

/* A good chunk whose write has enough good chunks for the value, or -1. */
static int complete_write(const struct coded_read *r)
{
    uint32_t n = r->k + r->m;
    for (uint32_t i = 0; i < n; i++) {
        if (r->status[i] != CHUNK_GOOD)
            continue;
        uint32_t agreeing = 0;
        for (uint32_t j = 0; j < n; j++)
            agreeing += r->status[j] == CHUNK_GOOD && same_write(&r->headers[j], &r->headers[i]);
        if (agreeing >= r->headers[i].k)
            return (int)i;
    }
    return -1;
}

/* Whether good chunks of two different writes arrived (concurrent
 * writers). */
static bool writes_differ(const struct coded_read *r)
{
    const struct lmr_ec_header *first = NULL;
    for (uint32_t i = 0; i < r->k + r->m; i++) {
        if (r->status[i] != CHUNK_GOOD)
            continue;
        if (first != NULL && r->headers[i].stamp != first->stamp)
            return true;
        first = &r->headers[i];
    }
    return false;
}

/* Whether chunk i may still help: good, or asked for and in flight on a
 * server worth waiting for (not one that failed at once, stopped
 * answering or is connecting again after a failed connect). */
static bool hopeful(const struct coded_read *r, uint32_t i)
{
    return r->status[i] == CHUNK_GOOD ||
           (r->status[i] == CHUNK_ASKED && r->g.children[i]->state == LMR_STATE_QUEUED &&
            !lmr_group_child_doubtful(&r->g, i));
}

static void ask(struct coded_read *r, uint32_t i)
{
    r->status[i] = CHUNK_ASKED;
    r->placed[i] = NULL;
    lmr_group_issue_read(&r->g, i, r->g.client->servers[r->servers[i]], &r->args);
}

/* Asks for the chunks the read needs next; true if it asked. A chunk
 * asked for whose server is known to be down fails at once (not
 * hopeful), and the next is asked for in the same pass: a known erasure
 * costs no round trip.
 * - `hedge` (a server stopped answering) or good chunks of two writes:
 *   every chunk not asked yet.
 * - While probing (a threshold is set and no coded chunk arrived yet):
 *   one position that may hold a whole copy (0..M), the first not known
 *   to be down; all of them once one of them answered a miss (the key
 *   may be missing everywhere: M + 1 misses say so).
 * - Else K hopeful chunks, in position order (data chunks first, parity
 *   in place of those missing), while a write can still have K. */
static bool ask_more(struct coded_read *r, bool hedge)
{
    struct lmr_group *g = &r->g;
    uint32_t n = r->k + r->m;
    bool asked = false;
    if (hedge || writes_differ(r)) {
        r->probing = false;
        for (uint32_t i = 0; i < n; i++)
            if (r->status[i] == CHUNK_NOT_ASKED) {
                ask(r, i);
                asked = true;
            }
        return asked;
    }
    for (uint32_t i = 0; i < n; i++)
        if (r->status[i] == CHUNK_GOOD && r->headers[i].k > 1)
            r->probing = false; /* a coded value: K chunks */
    if (r->probing) {
        bool missed = false;
        uint32_t hope = 0;
        for (uint32_t i = 0; i <= r->m; i++) {
            missed =
                missed || (r->status[i] == CHUNK_BAD && !lmr_group_is_failure(g->children[i]->rc));
            hope += hopeful(r, i);
        }
        for (uint32_t i = 0; i <= r->m && (missed || hope == 0); i++)
            if (r->status[i] == CHUNK_NOT_ASKED) {
                ask(r, i);
                asked = true;
                hope += hopeful(r, i);
            }
        if (asked || hope > 0)
            return asked;
        r->probing = false; /* none of 0..M can give a whole copy: K chunks */
    }
    uint32_t hope = 0, bad = 0;
    for (uint32_t i = 0; i < n; i++) {
        hope += hopeful(r, i);
        bad += r->status[i] == CHUNK_BAD;
    }
    if (n - bad < r->k)
        return false; /* no write can have K chunks any more */
    for (uint32_t i = 0; i < n && hope < r->k; i++)
        if (r->status[i] == CHUNK_NOT_ASKED) {
            ask(r, i);
            asked = true;
            hope += hopeful(r, i);
        }
    return asked;
}

/* The hedge timer fired: whether a chunk asked for is on a server that
 * completed nothing since (else the timer is set again while chunks are
 * left to ask for). */
static bool hedge_now(struct coded_read *r)
{
    struct lmr_group *g = &r->g;
    if (!g->woke)
        return false;
    g->woke = false;
    bool stalled = false, left = false;
    for (uint32_t i = 0; i < r->k + r->m; i++) {
        /* every stalled server is marked (no short cut) */
        bool this_stalled =
            r->status[i] == CHUNK_ASKED &&
            lmr_group_child_stalled(g, i, (int)g->client->behaviors.hedge_timeout_ms);
        stalled = stalled || this_stalled;
        left = left || r->status[i] == CHUNK_NOT_ASKED;
    }
    if (!stalled && left)
        lmr_group_wake_after(g, (int)g->client->behaviors.hedge_timeout_ms);
    return stalled;
}

/* Whether the chunks still in flight are all on servers that stopped
 * answering (or connect again) and could not change the answer: no write reaches its K with
 * them, and none is at a position that may hold a whole copy (0..M). Then
 * the read completes without them; otherwise it waits for them. */
static bool only_useless_hung_left(const struct coded_read *r)
{
    const struct lmr_group *g = &r->g;
    uint32_t n = r->k + r->m, hung = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (r->status[i] != CHUNK_ASKED || g->children[i]->state != LMR_STATE_QUEUED)
            continue; /* not asked (not set up, group.h), or answered */
        if (!lmr_group_child_doubtful(g, i) || i <= r->m)
            return false;
        hung++;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (r->status[i] != CHUNK_GOOD)
            continue;
        uint32_t agreeing = 0;
        for (uint32_t j = 0; j < n; j++)
            agreeing += r->status[j] == CHUNK_GOOD && same_write(&r->headers[j], &r->headers[i]);
        if (agreeing + hung >= r->headers[i].k)
            return false;
    }
    return true;
}

static void coded_read_step(struct lmr_group *g)
{
    struct coded_read *r = (struct coded_read *)g;
    uint32_t n = r->k + r->m;
    bool hedge = hedge_now(r);
    for (;;) {
        classify(r);
        int first = complete_write(r);
        if (first >= 0) {
            deliver(r, (uint32_t)first);
            return;
        }
        bool asked = ask_more(r, hedge);
        hedge = false;
        if (!asked)
            break;
    }
    /* nothing more worth asking for, and everything asked answered (or
     * left to servers that cannot help): not enough */
    if (g->outstanding == 0 || only_useless_hung_left(r)) {
        /* servers taken as erasures because their connect failed: asked
         * for real before the read fails */
        uint32_t again = lmr_group_ask_avoided(g, r->servers, &r->args);
        for (uint32_t i = 0; i < n; i++)
            if (again & (UINT32_C(1) << i))
                r->status[i] = CHUNK_ASKED;
        if (again == 0)
            lmr_group_finish(g, r->failure != MEMCACHED_SUCCESS ? r->failure : MEMCACHED_NOTFOUND);
    }
}

static const struct lmr_group_ops coded_read_ops = {
    .step = coded_read_step,
    .place = coded_place,
    .prefix_length = LMR_EC_HEADER_LENGTH,
};

static memcached_return_t coded_read(struct lmr_client *c, memcached_request_st *req,
                                     const uint32_t *servers, const struct lmr_op_args *args)
{
    uint32_t k = c->behaviors.ec_data_chunks, m = c->behaviors.ec_parity_chunks;
    struct coded_read *r = (struct coded_read *)lmr_group_create(
        c, req, &coded_read_ops, sizeof(*r), offsetof(struct coded_read, servers), k + m);
    if (r == NULL)
        return done_with(req, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
    r->k = k;
    r->m = m;
    memcpy(r->servers, servers, (k + m) * sizeof(*servers));
    memcpy(r->key, args->key, args->key_length);
    r->args = (struct lmr_op_args){
        .key = r->key, .key_length = args->key_length, .sink = LMR_SINK_LIBRARY};
    /* with a threshold, position 0 alone first: a value under it is a
     * whole copy there (one request, as a replicated get); a coded one
     * asks the other data chunks once chunk 0 says so, a second round trip
     * (about 2x a replicated get at 128 KiB). So while the latest gets
     * mostly found coded values (ec_coded_recent), all K at once: one
     * round trip for a coded value, and for a whole copy K requests where
     * one would do (positions 1..K-1 hold whole copies too, or nothing:
     * the first answer completes the get); doc/resilience.md */
    uint32_t first =
        c->behaviors.ec_threshold > 0 && c->ec_coded_recent < LMR_EC_CODED_RECENT_ALL ? 1 : k;
    r->probing = first < k;
    for (uint32_t i = 0; i < first; i++)
        ask(r, i);
    if (c->behaviors.hedge_timeout_ms > 0)
        lmr_group_wake_after(&r->g, (int)c->behaviors.hedge_timeout_ms);
    /* one on a server that stopped answering or is connecting again: the
     * others now (one that failed at once is stepped by the caller) */
    for (uint32_t i = 0; i < first; i++)
        if (lmr_group_child_doubtful(&r->g, i)) {
            r->g.ops->step(&r->g);
            break;
        }
    return MEMCACHED_SUCCESS;
}

memcached_return_t lmr_ec_issue(struct lmr_client *c, memcached_request_st *req,
                                enum lmr_op_kind kind, const uint32_t *servers,
                                const struct lmr_op_args *args)
{
    switch (kind) {
    case LMR_OP_STORE:
        return coded_store(c, req, servers, args);
    case LMR_OP_GET:
    case LMR_OP_EXIST:
        return coded_read(c, req, servers, args);
    default:
        return coded_everywhere(c, req, kind, servers, args);
    }
}
