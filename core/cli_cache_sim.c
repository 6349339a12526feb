/* dsspec cache-sim: replay a routing trace through the expert cache's policies (and Belady's OPT). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "core/cli.h"
#include "cache/expert_cache.h"

enum { SIM_MAX_LIST = 64 };

typedef struct {
    const char *trace;
    int slots[SIM_MAX_LIST], n_slots;
    cache_policy_kind policy[4];
    int n_policy;
    int layer_lo, layer_hi;
    int json, lfu_halve_every;
} sim_args;

static void sim_usage(FILE *out)
{
    fprintf(out,
        "usage: dsspec cache-sim --trace FILE --slots N[,N...] [--policy P[,P...]] [flags]\n"
        "Replays a routing trace (one JSON object per token: {\"<layer>\": [expert ids], ...};\n"
        "layers visited in increasing order, experts in listed order) through the expert cache's\n"
        "replacement policy code and prints hits, misses and hit rate.\n\n"
        "  --trace FILE          routing trace (JSONL)\n"
        "  --slots N[,N...]      cache sizes in experts (a list prints a curve)\n"
        "  --policy P[,P...]     lru | lfu | arc | opt (Belady's offline optimum) | all; default all\n"
        "  --layers A-B          only MoE layers A..B (inclusive; A- or -B leave a side open)\n"
        "  --lfu-halve-every N   LFU aging: halve all counts every N requests (default 4 x keys)\n"
        "  --json                one JSON object instead of the table\n"
        "  -h, --help            this text\n");
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > (1 << 30)) return -1;
    *out = (int)v;
    return 0;
}

static int parse_slots(const char *s, sim_args *a)
{
    char buf[1024];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    a->n_slots = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (a->n_slots == SIM_MAX_LIST || parse_int(tok, 1, &a->slots[a->n_slots]) < 0) return -1;
        a->n_slots++;
    }
    return a->n_slots > 0 ? 0 : -1;
}

static int parse_policies(const char *s, sim_args *a)
{
    char buf[128];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    a->n_policy = 0;
    if (!strcmp(buf, "all")) strcpy(buf, "lru,lfu,arc,opt");
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (a->n_policy == 4 || cache_policy_parse(tok, 1, &a->policy[a->n_policy]) < 0) return -1;
        a->n_policy++;
    }
    return a->n_policy > 0 ? 0 : -1;
}

/* "A-B", "A-", "-B" or "A" (one layer). */
static int parse_layers(const char *s, int *lo, int *hi)
{
    const char *dash = strchr(s, '-');
    char left[32], right[32];
    if (!dash) {
        if (parse_int(s, 0, lo) < 0) return -1;
        *hi = *lo;
        return 0;
    }
    size_t nl = (size_t)(dash - s);
    if (nl >= sizeof left || strlen(dash + 1) >= sizeof right) return -1;
    memcpy(left, s, nl);
    left[nl] = 0;
    strcpy(right, dash + 1);
    *lo = *hi = -1;
    if (nl && parse_int(left, 0, lo) < 0) return -1;
    if (right[0] && parse_int(right, 0, hi) < 0) return -1;
    if ((!nl && !right[0]) || (*lo >= 0 && *hi >= 0 && *lo > *hi)) return -1;
    return 0;
}

/* 0 ok, 1 --help shown, 2 usage error (message printed). */
static int parse_sim_args(int argc, char **argv, sim_args *a)
{
    *a = (sim_args){.layer_lo = -1, .layer_hi = -1};
    parse_policies("all", a);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { sim_usage(stdout); return 1; }
        if (!strcmp(f, "--json")) { a->json = 1; continue; }
        int known = !strcmp(f, "--trace") || !strcmp(f, "--slots") || !strcmp(f, "--policy") ||
                    !strcmp(f, "--layers") || !strcmp(f, "--lfu-halve-every");
        if (!known) { fprintf(stderr, "dsspec cache-sim: unknown flag '%s' (see --help)\n", f); return 2; }
        if (i + 1 >= argc) { fprintf(stderr, "dsspec cache-sim: %s needs a value\n", f); return 2; }
        const char *v = argv[++i];
        if (!strcmp(f, "--trace")) a->trace = v;
        else if (!strcmp(f, "--slots") && parse_slots(v, a) < 0) {
            fprintf(stderr, "dsspec cache-sim: --slots '%s': expected positive integers separated by commas (at most %d)\n", v, SIM_MAX_LIST);
            return 2;
        } else if (!strcmp(f, "--policy") && parse_policies(v, a) < 0) {
            fprintf(stderr, "dsspec cache-sim: --policy '%s': expected lru, lfu, arc, opt or all (comma-separated)\n", v);
            return 2;
        } else if (!strcmp(f, "--layers") && parse_layers(v, &a->layer_lo, &a->layer_hi) < 0) {
            fprintf(stderr, "dsspec cache-sim: --layers '%s': expected A-B with 0 <= A <= B\n", v);
            return 2;
        } else if (!strcmp(f, "--lfu-halve-every") && parse_int(v, 1, &a->lfu_halve_every) < 0) {
            fprintf(stderr, "dsspec cache-sim: --lfu-halve-every '%s': expected a positive integer\n", v);
            return 2;
        }
    }
    if (!a->trace) { fprintf(stderr, "dsspec cache-sim: --trace FILE is required\n"); return 2; }
    if (!a->n_slots) { fprintf(stderr, "dsspec cache-sim: --slots N is required\n"); return 2; }
    return 0;
}

static int print_json(const sim_args *a, const cache_trace *t, const cache_sim_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return -1;
    cJSON_AddStringToObject(o, "trace", a->trace);
    cJSON_AddNumberToObject(o, "tokens", t->n_tokens);
    cJSON_AddNumberToObject(o, "requests", (double)t->n);
    cJSON_AddNumberToObject(o, "layers", t->n_layers);
    cJSON_AddNumberToObject(o, "experts_per_layer", t->n_experts);
    cJSON *res = cJSON_AddArrayToObject(o, "results");
    for (int s = 0; res && s < a->n_slots; s++)
        for (int p = 0; p < a->n_policy; p++) {
            const cache_sim_result *x = &r[s * a->n_policy + p];
            cJSON *e = cJSON_CreateObject();
            if (!e) continue;
            cJSON_AddNumberToObject(e, "slots", a->slots[s]);
            cJSON_AddStringToObject(e, "policy", cache_policy_name(a->policy[p]));
            cJSON_AddNumberToObject(e, "hits", (double)x->hits);
            cJSON_AddNumberToObject(e, "misses", (double)x->misses);
            cJSON_AddNumberToObject(e, "hit_rate", (double)x->hits / (double)(x->hits + x->misses));
            cJSON_AddItemToArray(res, e);
        }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text) return -1;
    printf("%s\n", text);
    free(text);
    return 0;
}

static void print_table(const sim_args *a, const cache_trace *t, const cache_sim_result *r)
{
    int keys = t->n_layers * t->n_experts;
    printf("trace %s: %d tokens, %zu requests, %d MoE layers x %d experts = %d keys\n", a->trace,
           t->n_tokens, t->n, t->n_layers, t->n_experts, keys);
    printf("%8s %8s  %-6s %12s %12s %9s\n", "slots", "% keys", "policy", "hits", "misses", "hit rate");
    for (int s = 0; s < a->n_slots; s++)
        for (int p = 0; p < a->n_policy; p++) {
            const cache_sim_result *x = &r[s * a->n_policy + p];
            printf("%8d %7.2f%%  %-6s %12llu %12llu %8.2f%%\n", a->slots[s], 100.0 * a->slots[s] / keys,
                   cache_policy_name(a->policy[p]), (unsigned long long)x->hits, (unsigned long long)x->misses,
                   100.0 * (double)x->hits / (double)(x->hits + x->misses));
        }
}

int cli_cache_sim(int argc, char **argv)
{
    sim_args a;
    int rc = parse_sim_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    char err[512];
    cache_trace *t = cache_trace_load(a.trace, a.layer_lo, a.layer_hi, err, sizeof err);
    if (!t) { fprintf(stderr, "dsspec cache-sim: %s\n", err); return 1; }
    cache_sim_result r[SIM_MAX_LIST * 4];
    for (int s = 0; s < a.n_slots; s++)
        for (int p = 0; p < a.n_policy; p++)
            if (cache_sim_run(t->key, t->n, t->n_layers * t->n_experts, a.slots[s], a.policy[p],
                              a.lfu_halve_every, &r[s * a.n_policy + p], NULL, NULL) < 0) {
                fprintf(stderr, "dsspec cache-sim: out of memory simulating %d slots\n", a.slots[s]);
                cache_trace_free(t);
                return 1;
            }
    rc = 0;
    if (a.json) rc = print_json(&a, t, r) < 0 ? 1 : 0;
    else print_table(&a, t, r);
    cache_trace_free(t);
    return rc;
}
