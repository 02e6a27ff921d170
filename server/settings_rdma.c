/*
 * settings_rdma.c: the RDMA suboptions (-o rdma_*). Numbers are whole
 * decimal strings within a range per option, and names map to values, both
 * by table; rdma_listen is repeatable and its addresses are joined. The
 * same tables give their "stats settings" lines.
 */
#include "settings_rdma.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"

/* An option whose value is an unsigned number in [min, max]. */
struct rdma_number_option {
    const char *name;
    size_t offset; /* of its unsigned field in struct settings */
    long min, max;
    const char *unit; /* said after the range in the error line */
};

#define NUMBER_FIELD(field) offsetof(struct settings, field)

static const struct rdma_number_option number_options[] = {
    {"rdma_eager_max", NUMBER_FIELD(rdma_eager_max), 1024, 1024 * 1024, " bytes"},
    {"rdma_rc_max", NUMBER_FIELD(rdma_rc_max), 0, 1000000, ""},
    {"rdma_rc_credits", NUMBER_FIELD(rdma_rc_credits), 4, 1024, ""},
    {"rdma_ud_keepalive_ms", NUMBER_FIELD(rdma_ud_keepalive_ms), 100, 3600000, ""},
    {"rdma_ack_timeout", NUMBER_FIELD(rdma_ack_timeout), 0, 31, ""},
    {"rdma_promote_rate", NUMBER_FIELD(rdma_promote_rate), 0, 100000000, ""},
    {"rdma_demote_rate", NUMBER_FIELD(rdma_demote_rate), 0, 100000000, ""},
    {"rdma_move_interval_ms", NUMBER_FIELD(rdma_move_interval_ms), 10, 3600000, ""},
};

/* An option whose value is one of a few names. */
struct rdma_choice {
    const char *word;
    int value;
};

struct rdma_choice_option {
    const char *name;
    size_t offset;                     /* of its int field in struct settings */
    const struct rdma_choice *choices; /* ends with a NULL word */
    const char *said;                  /* the choices, for the error line */
};

static const struct rdma_choice poll_choices[] = {
    {"event", 0}, {"spin", 1}, {"adaptive", 2}, {NULL, 0}};
static const struct rdma_choice transport_choices[] = {
    {"rc", RDMA_SERVE_RC}, {"ud", RDMA_SERVE_UD}, {"hybrid", RDMA_SERVE_HYBRID}, {NULL, 0}};

static const struct rdma_choice_option choice_options[] = {
    {"rdma_poll", NUMBER_FIELD(rdma_poll), poll_choices, "event, spin or adaptive"},
    {"rdma_transport", NUMBER_FIELD(rdma_transport), transport_choices, "rc, ud or hybrid"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void settings_rdma_init(struct settings *s)
{
    s->rdma_eager_max = 8192;
    s->rdma_transport = RDMA_SERVE_HYBRID;
    s->rdma_ud_keepalive_ms = 30000;
    s->rdma_promote_rate = 1000;
    s->rdma_demote_rate = 10;
    s->rdma_move_interval_ms = 1000;
}

static enum rdma_suboption_result add_listen(struct settings *s, const char *value)
{
    char *joined = NULL;
    if (asprintf(&joined, "%s%s%s", s->rdma_listen ? s->rdma_listen : "", s->rdma_listen ? " " : "",
                 value) < 0)
        return RDMA_SUBOPT_BAD;
    free(s->rdma_listen);
    s->rdma_listen = joined;
    return RDMA_SUBOPT_OK;
}

enum rdma_suboption_result settings_rdma_suboption(struct settings *s, const char *name,
                                                   const char *value, FILE *errout)
{
    if (strncmp(name, "rdma_", 5) != 0)
        return RDMA_SUBOPT_NOT_MINE;
    const struct rdma_number_option *number = NULL;
    for (size_t i = 0; i < COUNT(number_options) && !number; i++)
        if (strcmp(name, number_options[i].name) == 0)
            number = &number_options[i];
    const struct rdma_choice_option *choice = NULL;
    for (size_t i = 0; i < COUNT(choice_options) && !choice; i++)
        if (strcmp(name, choice_options[i].name) == 0)
            choice = &choice_options[i];
    bool listen = strcmp(name, "rdma_listen") == 0;
    if (!number && !choice && !listen)
        return RDMA_SUBOPT_NOT_MINE;
    if (value == NULL) {
        fprintf(errout, "Missing %s argument\n", name);
        return RDMA_SUBOPT_BAD;
    }
    if (listen)
        return add_listen(s, value);
    char *base = (char *)s;
    if (number) {
        long v;
        if (!settings_ranged_long(value, number->min, number->max, &v)) {
            fprintf(errout, "%s must be %ld..%ld%s: %s\n", name, number->min, number->max,
                    number->unit, value);
            return RDMA_SUBOPT_BAD;
        }
        *(unsigned *)(base + number->offset) = (unsigned)v;
        return RDMA_SUBOPT_OK;
    }
    for (const struct rdma_choice *c = choice->choices; c->word; c++) {
        if (strcmp(value, c->word) == 0) {
            *(int *)(base + choice->offset) = c->value;
            return RDMA_SUBOPT_OK;
        }
    }
    fprintf(errout, "%s must be %s: %s\n", name, choice->said, value);
    return RDMA_SUBOPT_BAD;
}

void settings_rdma_stats(const struct settings *s,
                         void (*emit)(void *ctx, const char *name, const char *value), void *ctx)
{
    const char *base = (const char *)s;
    char buf[24];
    for (size_t i = 0; i < COUNT(number_options); i++) {
        snprintf(buf, sizeof(buf), "%u", *(const unsigned *)(base + number_options[i].offset));
        emit(ctx, number_options[i].name, buf);
    }
    for (size_t i = 0; i < COUNT(choice_options); i++) {
        int value = *(const int *)(base + choice_options[i].offset);
        const char *word = "unknown";
        for (const struct rdma_choice *c = choice_options[i].choices; c->word; c++)
            if (c->value == value)
                word = c->word;
        emit(ctx, choice_options[i].name, word);
    }
    emit(ctx, "rdma_listen", s->rdma_listen ? s->rdma_listen : "NULL");
}
