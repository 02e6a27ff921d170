/* benchmarks/ohb_memlat_resilience_tables.c: ohb_memlat_resilience's
 * output: the scheme names, the tables on stdout with their ratios and
 * quartiles, and the CSV rows (--csv). */
#include "ohb_memlat_resilience.h"

const char *scheme_names[SCHEMES] = {"none", "Sync-Rep=3", "Async-Rep=3", "RS(3,2)"};
const char *csv_names[SCHEMES] = {"none", "sync-rep-3", "async-rep-3", "rs-3-2"};

void res_csv_row(const char *section, enum scheme scheme, size_t size, double value)
{
    if (csv != NULL)
        fprintf(csv, "%s,%s,%zu,%.3f\n", section, csv_names[scheme], size, value);
}

/* latency[scheme][size] for one measurement, printed with ratio[size]
 * (RS over compared_to, the median of the rounds' ratios) */
void res_print_latency(const char *title, const char *section, double latency[][MAX_SIZES],
                       const double ratio[MAX_SIZES], enum scheme compared_to)
{
    printf("\n# %s\n# %-10s", title, "Size");
    for (int s = 0; s < SCHEMES; s++)
        printf(" %13s", scheme_names[s]);
    printf(" %9s\n", compared_to == SYNC_REP ? "RS/Sync" : "RS/Async");
    for (unsigned z = 0; z < size_count; z++) {
        printf("%-12zu", sizes[z]);
        for (int s = 0; s < SCHEMES; s++) {
            printf(" %13.2f", latency[s][z]);
            res_csv_row(section, (enum scheme)s, sizes[z], latency[s][z]);
        }
        printf(" %9.2f\n", ratio[z]);
        char ratio_section[64]; /* e.g. set_rs_over_sync: one per table */
        snprintf(ratio_section, sizeof(ratio_section), "%s_rs_over_%s", section,
                 compared_to == SYNC_REP ? "sync" : "async");
        res_csv_row(ratio_section, RS, sizes[z], ratio[z]);
    }
}

/* Every round's RS / ratio_to[m] ratio of measurement m at one size, in
 * round order, and their quartiles (also as csv rows `round_ratio_M`). */
void res_print_round_ratios(enum measure m, size_t size, const double *by_round)
{
    static const char *names[MEASURES] = {"set", "get", "set_window64", "get_window64",
                                          "get_window64_cpu"};
    printf("# %s %zu: RS/%s by round:", names[m], size, ratio_to[m] == SYNC_REP ? "Sync" : "Async");
    for (unsigned r = 0; r < paired_rounds; r++)
        printf(" %.2f", by_round[r]);
    double q[3];
    res_quartiles(by_round, paired_rounds, q);
    printf("; quartiles %.2f %.2f %.2f\n", q[0], q[1], q[2]);
    if (csv != NULL)
        for (unsigned r = 0; r < paired_rounds; r++)
            fprintf(csv, "round_ratio_%s,%s,%zu,%.3f\n", names[m], csv_names[RS], size,
                    by_round[r]);
}

/* The quartiles of n values (copied, not reordered). */
void res_quartiles(const double *values, unsigned n, double q[3])
{
    struct ohb_samples sorted = {0};
    for (unsigned i = 0; i < n; i++)
        ohb_samples_add(&sorted, values[i]);
    ohb_samples_sort(&sorted);
    q[0] = ohb_samples_percentile(&sorted, 25);
    q[1] = ohb_samples_percentile(&sorted, 50);
    q[2] = ohb_samples_percentile(&sorted, 75);
    ohb_samples_free(&sorted);
}

/* The windowed tables of res_measure_rounds. */
void res_print_windows(double latency[MEASURES][SCHEMES][MAX_SIZES],
                       double ratio[MEASURES][MAX_SIZES])
{
    if (blocking_only)
        return;
    res_print_latency("Set, window of 64 (us per operation)", "set_window64", latency[SET_WINDOW],
                      ratio[SET_WINDOW], SYNC_REP);
    res_print_latency("Get, window of 64 (us per operation)", "get_window64", latency[GET_WINDOW],
                      ratio[GET_WINDOW], ASYNC_REP);
    res_print_latency("Get, window of 64: the client's processor time (us per operation)",
                      "get_window64_cpu", latency[GET_WINDOW_CPU], ratio[GET_WINDOW_CPU],
                      ASYNC_REP);
    fflush(stdout);
}

/* A degraded-gets table: table[RS or Async-Rep][servers killed][size];
 * with the latencies (`suffix` ""), RS-2 over Async-2. */
void res_print_degraded(const char *title, const char *suffix, double table[2][3][MAX_SIZES])
{
    const enum scheme kept[2] = {RS, ASYNC_REP};
    bool latency = suffix[0] == '\0';
    printf("\n# %s\n# %-10s %9s %9s %9s %9s %9s %9s %9s\n", title, "Size", "RS-0", "RS-1", "RS-2",
           "Async-0", "Async-1", "Async-2", latency ? "RS-2/A-2" : "");
    for (unsigned z = 0; z < size_count; z++) {
        printf("%-12zu", sizes[z]);
        for (int k = 0; k < 2; k++)
            for (int killed = 0; killed < 3; killed++) {
                printf(" %9.2f", table[k][killed][z]);
                char section[48];
                snprintf(section, sizeof(section), "get_degraded%d%s", killed, suffix);
                res_csv_row(section, kept[k], sizes[z], table[k][killed][z]);
            }
        if (latency)
            printf(" %9.2f", table[0][2][z] / table[1][2][z]);
        printf("\n");
    }
}
