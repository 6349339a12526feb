/* dsspec cache-sim: replay a routing trace through the expert cache's policies (and Belady's OPT). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/flags.h"
#include "engine/dsspec.h"

enum { SIM_MAX_LIST = 64, SIM_MAX_POLICIES = 4 };

typedef struct {
    const char *trace;
    int slots[SIM_MAX_LIST], n_slots;
    const char *policy[SIM_MAX_POLICIES];
    int n_policy;
    int layer_lo, layer_hi;
    int json, lfu_halve_every;
} sim_args;

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > (1 << 30)) return -1;
    *out = (int)v;
    return 0;
}

static int parse_slots(const char *flag, const char *s, void *dst, char *err, size_t errlen)
{
    sim_args *a = dst;
    char buf[1024];
    a->n_slots = 0;
    if (strlen(s) < sizeof buf) {
        strcpy(buf, s);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (a->n_slots == SIM_MAX_LIST || parse_int(tok, 1, &a->slots[a->n_slots]) < 0) { a->n_slots = 0; break; }
            a->n_slots++;
        }
    }
    if (a->n_slots) return 0;
    snprintf(err, errlen, "%s '%s': expected positive integers separated by commas (at most %d)", flag, s, SIM_MAX_LIST);
    return -1;
}

static int parse_policies(const char *flag, const char *s, void *dst, char *err, size_t errlen)
{
    static const char *names[] = {"lru", "lfu", "arc", "opt"};
    sim_args *a = dst;
    a->n_policy = 0;
    int all = !strcmp(s, "all"), ok = 1;
    for (const char *p = s; ok && !all && *p;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < SIM_MAX_POLICIES; i++)
            if (strlen(names[i]) == len && !strncmp(p, names[i], len)) found = i;
        ok = found >= 0 && a->n_policy < SIM_MAX_POLICIES;
        if (ok) a->policy[a->n_policy++] = names[found];
        p += len + (p[len] == ',');
    }
    for (int i = 0; all && i < SIM_MAX_POLICIES; i++) a->policy[a->n_policy++] = names[i];
    if (ok && a->n_policy) return 0;
    snprintf(err, errlen, "%s '%s': expected lru, lfu, arc, opt or all (comma-separated)", flag, s);
    return -1;
}

/* "A-B", "A-", "-B" or "A" (one layer). */
static int parse_layers(const char *flag, const char *s, void *dst, char *err, size_t errlen)
{
    sim_args *a = dst;
    const char *dash = strchr(s, '-');
    char left[32] = "", right[32] = "";
    int ok = 1;
    a->layer_lo = a->layer_hi = -1;
    if (!dash) {
        ok = parse_int(s, 0, &a->layer_lo) == 0;
        a->layer_hi = a->layer_lo;
    } else {
        size_t nl = (size_t)(dash - s);
        ok = nl < sizeof left && strlen(dash + 1) < sizeof right;
        if (ok) { memcpy(left, s, nl); strcpy(right, dash + 1); }
        ok = ok && (nl || right[0]);
        if (ok && nl) ok = parse_int(left, 0, &a->layer_lo) == 0;
        if (ok && right[0]) ok = parse_int(right, 0, &a->layer_hi) == 0;
        ok = ok && !(a->layer_lo >= 0 && a->layer_hi >= 0 && a->layer_lo > a->layer_hi);
    }
    if (ok) return 0;
    snprintf(err, errlen, "%s '%s': expected A-B with 0 <= A <= B", flag, s);
    return -1;
}

static int print_json(const sim_args *a, const dsspec_trace *t, const uint64_t (*r)[2])
{
    int rows, layers, experts;
    uint64_t requests;
    dsspec_trace_shape(t, &rows, &requests, &layers, &experts);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "trace", a->trace);
    cJSON_AddNumberToObject(o, "tokens", rows);
    cJSON_AddNumberToObject(o, "requests", (double)requests);
    cJSON_AddNumberToObject(o, "layers", layers);
    cJSON_AddNumberToObject(o, "experts_per_layer", experts);
    cJSON *res = cJSON_AddArrayToObject(o, "results");
    for (int s = 0; s < a->n_slots; s++)
        for (int p = 0; p < a->n_policy; p++) {
            const uint64_t *x = r[s * a->n_policy + p];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "slots", a->slots[s]);
            cJSON_AddStringToObject(e, "policy", a->policy[p]);
            cJSON_AddNumberToObject(e, "hits", (double)x[0]);
            cJSON_AddNumberToObject(e, "misses", (double)x[1]);
            cJSON_AddNumberToObject(e, "hit_rate", (double)x[0] / (double)(x[0] + x[1]));
            cJSON_AddItemToArray(res, e);
        }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text) return -1;
    printf("%s\n", text);
    free(text);
    return 0;
}

static void print_table(const sim_args *a, const dsspec_trace *t, const uint64_t (*r)[2])
{
    int rows, layers, experts;
    uint64_t requests;
    dsspec_trace_shape(t, &rows, &requests, &layers, &experts);
    int keys = layers * experts;
    printf("trace %s: %d tokens, %llu requests, %d MoE layers x %d experts = %d keys\n", a->trace, rows,
           (unsigned long long)requests, layers, experts, keys);
    printf("%8s %8s  %-6s %12s %12s %9s\n", "slots", "% keys", "policy", "hits", "misses", "hit rate");
    for (int s = 0; s < a->n_slots; s++)
        for (int p = 0; p < a->n_policy; p++) {
            const uint64_t *x = r[s * a->n_policy + p];
            printf("%8d %7.2f%%  %-6s %12llu %12llu %8.2f%%\n", a->slots[s], 100.0 * a->slots[s] / keys, a->policy[p],
                   (unsigned long long)x[0], (unsigned long long)x[1], 100.0 * (double)x[0] / (double)(x[0] + x[1]));
        }
}

static int simulate(const sim_args *a)
{
    char err[512];
    dsspec_trace *t = dsspec_trace_load(a->trace, a->layer_lo, a->layer_hi, err, sizeof err);
    if (!t) { fprintf(stderr, "dsspec cache-sim: %s\n", err); return 1; }
    static uint64_t r[SIM_MAX_LIST * SIM_MAX_POLICIES][2];
    int rc = 0;
    for (int s = 0; s < a->n_slots && !rc; s++)
        for (int p = 0; p < a->n_policy && !rc; p++)
            if (dsspec_trace_simulate(t, a->policy[p], a->slots[s], a->lfu_halve_every, &r[s * a->n_policy + p][0],
                                      &r[s * a->n_policy + p][1])) {
                fprintf(stderr, "dsspec cache-sim: out of memory simulating %d slots\n", a->slots[s]);
                rc = 1;
            }
    if (!rc && a->json) rc = print_json(a, t, (const uint64_t (*)[2])r) < 0 ? 1 : 0;
    else if (!rc) print_table(a, t, (const uint64_t (*)[2])r);
    dsspec_trace_free(t);
    return rc;
}

int cli_cache_sim(int argc, char **argv)
{
    sim_args a = {.layer_lo = -1, .layer_hi = -1};
    char unused[8];
    parse_policies("--policy", "all", &a, unused, sizeof unused);
    const flag flags[] = {
        {FLAG_STRING, "--trace", "FILE", &a.trace, .help = "routing trace (JSONL)"},
        {FLAG_CUSTOM, "--slots", "N[,N...]", &a, .parse = parse_slots, .help = "cache sizes in experts (a list prints a curve)"},
        {FLAG_CUSTOM, "--policy", "P[,P...]", &a, .parse = parse_policies, .help = "lru | lfu | arc | opt (Belady's offline optimum) | all; default all"},
        {FLAG_CUSTOM, "--layers", "A-B", &a, .parse = parse_layers, .help = "only MoE layers A..B (inclusive; A- or -B leave a side open)"},
        {FLAG_INT, "--lfu-halve-every", "N", &a.lfu_halve_every, 1, 1 << 30, .help = "LFU aging: halve all counts every N requests (default: the number of keys)"},
        {FLAG_SWITCH, "--json", NULL, &a.json, .help = "one JSON object instead of the table"},
    };
    int rc = flags_parse("cache-sim", "usage: dsspec cache-sim --trace FILE --slots N[,N...] [--policy P[,P...]] [flags]\n"
                         "Replays a routing trace (one JSON object per token: {\"<layer>\": [expert ids], ...};\n"
                         "layers visited in increasing order, experts in listed order) through the expert cache's\n"
                         "replacement policy code and prints hits, misses and hit rate.\n",
                         flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : rc;
    if (!a.trace) return flags_usage_error("cache-sim", "--trace FILE is required");
    if (!a.n_slots) return flags_usage_error("cache-sim", "--slots N is required");
    return simulate(&a);
}
