/* bench_prefetch_sim: router-lookahead prefetch replayed on a routing trace through the live
 * policy code (cache_policy_*), with the live cache's rules (cache/expert_cache.c): a layer's own
 * experts are never evicted while it runs, a guess never pushes out another unused guess, at most
 * half the slots hold unused guesses, a guess already holding a slot is not read again, and a
 * guess its layer does not ask for is wasted and its slot freed when that layer's requests come.
 * Reads land at once (no queue, no timing): recall here is what the guesses could catch.
 *
 * Two sources of guesses:
 *  - recorded (--lookahead FILE, tools/trace_model/guess_trace.py): the guesses dsspec's
 *    prefetch_ahead made on the model the trace comes from, ranked, for layers L+1..L+depth from
 *    layer L's residual; issued as the forward pass issues them, after layer L's own requests,
 *    depth 1 first, each depth's first N ranks;
 *  - modelled (--report report.json --genre G, or --recall R): each of layer l's real experts is
 *    guessed with probability r_l (the measured next-layer router recall), else an expert the
 *    layer did not choose, independently; depth 1 only, issued just before the layer. The
 *    independence is optimistic: misses are the rarely chosen experts, which a real lookahead
 *    also guesses worse.
 * Usage: bench_prefetch_sim (--lookahead FILE [--depth D] | --report F --genre G | --recall R)
 *                           [--guesses N[,M]] [--policy lfu|lru|arc] [--fracs F,...] TRACE */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "cache/expert_cache.h"
#include "core/text_file.h"

enum { SIM_MAX_LAYERS = 256, SIM_MAX_EXPERTS = 1024, SIM_MAX_FRACS = 16 };

typedef struct {
    const char *lookahead, *report, *genre, *trace;
    double recall, fracs[SIM_MAX_FRACS];
    int n_fracs, depth, guesses[CACHE_GUESS_MAX_DEPTH];
    cache_policy_kind policy;
} options;

typedef struct {
    const cache_trace *t;
    const cache_guesses *g;    /* recorded guesses, or NULL: modelled */
    const options *o;
    int E, slots, cap, per;
    const double *recall;      /* [n_layers], modelled */
    cache_policy *p;
    uint8_t *wanted, *guess, *guessed;   /* [keys]: this layer's keys; unused guesses; guessed, not read */
    int outstanding;
    uint64_t req, hits, misses, used, wasted, issued, guessed_missed;
    uint64_t rng;
} psim;

static double rand01(psim *s)
{
    s->rng ^= s->rng << 13; s->rng ^= s->rng >> 7; s->rng ^= s->rng << 17;
    return (double)(s->rng >> 11) / 9007199254740992.0;
}

static int evictable(void *ctx, int key)
{
    const psim *s = ctx;
    return !s->wanted[key];
}

static int evictable_for_guess(void *ctx, int key)
{
    const psim *s = ctx;
    return !s->wanted[key] && !s->guess[key];
}

/* Layer `layer`'s modelled guesses: each real expert kept with its recall, else a wrong one. */
static int model_guesses(psim *s, int layer, const int *real, int n, int *out)
{
    uint8_t taken[SIM_MAX_EXPERTS] = {0};
    for (int i = 0; i < n; i++) taken[real[i]] = 1;
    int m = 0;
    for (int i = 0; i < n && m < s->o->guesses[0]; i++) {
        if (rand01(s) < s->recall[layer]) { out[m++] = real[i]; continue; }
        int e;
        do e = (int)(rand01(s) * s->E); while (taken[e]);
        taken[e] = 1;
        out[m++] = e;
    }
    return m;
}

static void issue_guesses(psim *s, int layer, const int *experts, int n)
{
    for (int i = 0; i < n; i++) {
        int k = layer * s->E + experts[i], victim;
        if (cache_policy_contains(s->p, k)) continue;
        s->guessed[k] = 1;
        if (s->outstanding >= s->cap) continue;
        if (cache_policy_prefetch(s->p, k, evictable_for_guess, s, &victim) < 0) continue;
        if (victim >= 0 && s->guess[victim]) { s->guess[victim] = 0; s->outstanding--; }
        s->guess[k] = 1;
        s->outstanding++;
        s->issued++;
    }
}

/* One layer's requests, its keys left marked wanted: served, then its unasked guesses wasted and
 * freed (the live cache settles them when the layer's want arrives). */
static void serve_layer(psim *s, int layer, const int *keys, int n)
{
    for (int i = 0; i < n; i++) s->wanted[keys[i]] = 1;
    for (int i = 0; i < n; i++) {
        int k = keys[i], victim;
        s->req++;
        if (cache_policy_contains(s->p, k)) {
            s->hits++;
            if (s->guess[k]) { s->guess[k] = 0; s->outstanding--; s->used++; cache_policy_prefetch_used(s->p, k); }
            else cache_policy_hit(s->p, k);
        } else {
            s->misses++;
            s->guessed_missed += s->guessed[k];
            if (cache_policy_miss(s->p, k, evictable, s, &victim) == 0 && victim >= 0 && s->guess[victim]) {
                s->guess[victim] = 0; /* a real read took an unused guess's slot: the guess is wasted */
                s->outstanding--;
                s->wasted++;
            }
        }
    }
    for (int e = 0; e < s->E; e++) {
        int k = layer * s->E + e;
        s->guessed[k] = 0;
        if (s->guess[k] && !s->wanted[k]) {
            s->guess[k] = 0;
            s->outstanding--;
            s->wasted++;
            cache_policy_remove(s->p, k);
        }
    }
}

static void end_layer(psim *s, const int *keys, int n)
{
    for (int i = 0; i < n; i++) s->wanted[keys[i]] = 0;
}

/* Modelled: token by token, before layer l runs the layer before it guesses l. */
static void run_modelled(psim *s)
{
    const cache_trace *t = s->t;
    int real[SIM_MAX_EXPERTS], g[SIM_MAX_EXPERTS];
    for (size_t i = 0; i < t->n;) {
        int layer = t->key[i] / s->E;
        size_t j = i;
        while (j < t->n && j - i < (size_t)s->per && t->key[j] / s->E == layer) j++;
        int n = (int)(j - i) < SIM_MAX_EXPERTS ? (int)(j - i) : SIM_MAX_EXPERTS;
        for (int q = 0; q < n; q++) real[q] = t->key[i + (size_t)q] % s->E;
        issue_guesses(s, layer, g, model_guesses(s, layer, real, n, g));
        serve_layer(s, layer, t->key + i, n);
        end_layer(s, t->key + i, n);
        i = j;
    }
}

/* The guesses model layer `src` makes: layers src+1..src+depth, depth 1 first. */
static void issue_from(psim *s, int row, int src)
{
    const cache_trace *t = s->t;
    for (int d = 1; d <= s->o->depth; d++)
        for (int i = 0; i < t->n_moe_layers; i++) {
            if (t->moe_layers[i] != src + d) continue;
            const int *g = cache_guesses_at(s->g, d, row, i);
            if (g) issue_guesses(s, i, g, s->o->guesses[d - 1]);
        }
}

/* Recorded: each row's layers in order; layer L's guesses go out after L's own requests (the
 * dense layer before the first MoE layer guesses too). */
static void run_recorded(psim *s)
{
    const cache_trace *t = s->t;
    for (int row = 0; row < t->n_tokens; row++) {
        issue_from(s, row, t->moe_layers[0] - 1);
        for (int i = 0; i < t->n_layers; i++) {
            const int *keys = t->key + ((size_t)row * t->n_layers + i) * s->per;
            serve_layer(s, i, keys, s->per);
            issue_from(s, row, t->moe_layers[i]);
            end_layer(s, keys, s->per);
        }
    }
}

/* One run at `slots`; prefetch 0 runs the same replay with no guesses. */
static int psim_one(const cache_trace *t, const cache_guesses *g, const double *recall, const options *o, int slots,
                    int prefetch, psim *s)
{
    int K = t->n_layers * t->n_experts;
    options off = *o;
    if (!prefetch) { off.depth = 0; off.guesses[0] = 0; }
    *s = (psim){.t = t, .g = g, .o = &off, .E = t->n_experts, .slots = slots, .cap = slots / 2 > 1 ? slots / 2 : 1,
                .recall = recall, .rng = 0x9E3779B97F4A7C15ull};
    /* one layer's list of one token: top_k requests when every token routes every layer */
    s->per = t->n_tokens > 0 && t->n % ((size_t)t->n_tokens * (size_t)t->n_layers) == 0
                 ? (int)(t->n / ((size_t)t->n_tokens * (size_t)t->n_layers)) : 1;
    s->p = cache_policy_create(o->policy, K, slots, 0);
    s->wanted = calloc((size_t)K, 1);
    s->guess = calloc((size_t)K, 1);
    s->guessed = calloc((size_t)K, 1);
    int rc = s->p && s->wanted && s->guess && s->guessed ? 0 : -1;
    if (rc == 0 && g) run_recorded(s);
    else if (rc == 0) run_modelled(s);
    s->o = o;
    cache_policy_free(s->p);
    free(s->wanted); free(s->guess); free(s->guessed);
    return rc;
}

/* report.json routing.<genre>.<layer>.next_layer_router_recall into recall[layer index]. */
static int load_recall(const char *path, const char *genre, const cache_trace *t, double *recall)
{
    char err[512];
    char *text = text_file_read(path, NULL, err, sizeof err);
    if (!text) { fprintf(stderr, "bench_prefetch_sim: %s\n", err); return -1; }
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "routing"), genre);
    int rc = g ? 0 : -1;
    for (int i = 0; g && i < t->n_moe_layers; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", t->moe_layers[i]);
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(g, name), "next_layer_router_recall");
        if (!cJSON_IsNumber(r)) { rc = -1; break; }
        recall[i] = r->valuedouble;
    }
    if (rc) fprintf(stderr, "bench_prefetch_sim: %s: no routing.%s.<layer>.next_layer_router_recall for every layer\n", path, genre);
    cJSON_Delete(root);
    return rc;
}

static void print_header(const options *o, const cache_trace *t, const double *recall)
{
    int K = t->n_layers * t->n_experts;
    printf("\n== %s: %d rows, %d keys, %s, ", o->trace, t->n_tokens, K, cache_policy_name(o->policy));
    if (o->lookahead) {
        printf("recorded lookahead %s, depth %d, guesses", o->lookahead, o->depth);
        for (int d = 0; d < o->depth; d++) printf(" %d", o->guesses[d]);
        printf(" (depth 1..%d)\n", o->depth);
    } else {
        double mean = 0;
        for (int i = 0; i < t->n_layers; i++) mean += recall[i] / t->n_layers;
        printf("modelled lookahead recall %.1f%% (mean over layers), %d guesses per layer\n", 100 * mean, o->guesses[0]);
    }
    printf("%6s %6s | %8s %8s | %8s %8s %8s | %7s %6s %8s\n", "slots", "%keys", "hit off", "hit on", "issued", "used",
           "wasted", "recall", "waste", "ceiling");
}

static int report(const options *o, const cache_trace *t, const cache_guesses *g, const double *recall)
{
    int K = t->n_layers * t->n_experts;
    print_header(o, t, recall);
    for (int f = 0; f < o->n_fracs; f++) {
        int slots = (int)(o->fracs[f] * K + 0.5);
        psim off, on;
        if (psim_one(t, g, recall, o, slots, 0, &off) < 0 || psim_one(t, g, recall, o, slots, 1, &on) < 0) return -1;
        double wm = (double)(on.used + on.misses);
        printf("%6d %5.1f%% | %7.2f%% %7.2f%% | %8llu %8llu %8llu | %6.1f%% %6.2f %7.1f%%\n", slots, 100.0 * slots / K,
               100.0 * off.hits / off.req, 100.0 * on.hits / on.req, (unsigned long long)on.issued,
               (unsigned long long)on.used, (unsigned long long)on.wasted, 100 * on.used / wm,
               on.used ? (double)on.wasted / on.used : 0, 100 * (on.used + on.guessed_missed) / wm);
    }
    return 0;
}

static const char USAGE[] =
    "usage: bench_prefetch_sim (--lookahead FILE [--depth D] | --report report.json --genre G | --recall R)\n"
    "                          [--guesses N[,M...]] [--policy lfu|lru|arc] [--fracs F,...] TRACE\n"
    "  --lookahead FILE  the guesses recorded beside TRACE (tools/trace_model/guess_trace.py)\n"
    "  --depth D         layers L+1..L+D guessed from layer L (recorded guesses; default 1)\n"
    "  --guesses N,M     guesses per layer at depth 1, 2, ... (default 8; one value: every depth)\n"
    "  --report/--genre  modelled guesses at the trace model's measured recall per layer; --recall R: one value\n"
    "  --fracs           cache sizes as fractions of the trace's keys (default 0.013,0.03,0.10)\n";

/* "a,b,c" into v[0..max); the count, or -1 when a value does not parse or is out of [lo, hi]. */
static int parse_list(const char *s, double *v, int max, double lo, double hi)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        v[n] = strtod(s, &end);
        if (end == s || v[n] < lo || v[n] > hi || (*end && *end != ',')) return -1;
        n++;
        s = *end ? end + 1 : end;
    }
    return *s ? -1 : n;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.recall = -1, .n_fracs = 3, .fracs = {0.013, 0.03, 0.10}, .depth = 1, .guesses = {8, 8, 8, 8},
                   .policy = CACHE_POLICY_LFU};
    double v[CACHE_GUESS_MAX_DEPTH];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (a[0] != '-') { if (o->trace) { fprintf(stderr, "bench_prefetch_sim: one TRACE at a time\n"); return -1; } o->trace = a; continue; }
        if (!val) { fprintf(stderr, "bench_prefetch_sim: %s needs a value\n", a); return -1; }
        i++;
        if (!strcmp(a, "--lookahead")) o->lookahead = val;
        else if (!strcmp(a, "--report")) o->report = val;
        else if (!strcmp(a, "--genre")) o->genre = val;
        else if (!strcmp(a, "--recall")) o->recall = atof(val);
        else if (!strcmp(a, "--depth")) o->depth = atoi(val);
        else if (!strcmp(a, "--policy")) { if (cache_policy_parse(val, 0, &o->policy) < 0) { fprintf(stderr, "bench_prefetch_sim: --policy: expected lfu, lru or arc\n"); return -1; } }
        else if (!strcmp(a, "--fracs")) {
            if ((o->n_fracs = parse_list(val, o->fracs, SIM_MAX_FRACS, 1e-6, 1)) < 1) { fprintf(stderr, "bench_prefetch_sim: --fracs: expected fractions in (0, 1], comma-separated\n"); return -1; }
        } else if (!strcmp(a, "--guesses")) {
            int n = parse_list(val, v, CACHE_GUESS_MAX_DEPTH, 1, SIM_MAX_EXPERTS);
            if (n < 1) { fprintf(stderr, "bench_prefetch_sim: --guesses: expected N[,M...] >= 1\n"); return -1; }
            for (int d = 0; d < CACHE_GUESS_MAX_DEPTH; d++) o->guesses[d] = (int)v[d < n ? d : n - 1];
        } else { fprintf(stderr, "bench_prefetch_sim: unknown flag %s\n", a); return -1; }
    }
    if (!o->trace || (!o->lookahead && !o->report && (o->recall < 0 || o->recall > 1)) || (o->report && !o->genre) ||
        o->depth < 1 || o->depth > CACHE_GUESS_MAX_DEPTH || (!o->lookahead && o->depth != 1)) {
        fprintf(stderr, "bench_prefetch_sim: needs TRACE and one of --lookahead FILE, --report FILE --genre G, --recall R in [0, 1];"
                        " --depth 1..%d (modelled guesses: 1)\n", CACHE_GUESS_MAX_DEPTH);
        return -1;
    }
    return 0;
}

/* Recorded guesses loaded and checked against the asked depth and counts. */
static cache_guesses *load_lookahead(const options *o, const cache_trace *t)
{
    char err[512];
    cache_guesses *g = cache_guesses_load(o->lookahead, t, err, sizeof err);
    if (!g) { fprintf(stderr, "bench_prefetch_sim: %s\n", err); return NULL; }
    for (int d = 0; d < o->depth; d++)
        if (d >= g->depth || o->guesses[d] > g->ranks[d]) {
            fprintf(stderr, "bench_prefetch_sim: %s: depth %d needs %d guesses; the file holds %d\n", o->lookahead, d + 1,
                    o->guesses[d], d < g->depth ? g->ranks[d] : 0);
            cache_guesses_free(g);
            return NULL;
        }
    return g;
}

int main(int argc, char **argv)
{
    options o;
    int a = parse_args(argc, argv, &o);
    if (a > 0) { fputs(USAGE, stdout); return 0; }
    if (a < 0) return 2;
    char err[512];
    double recall[SIM_MAX_LAYERS];
    cache_trace *t = cache_trace_load(o.trace, -1, -1, err, sizeof err);
    if (!t) { fprintf(stderr, "bench_prefetch_sim: %s\n", err); return 1; }
    cache_guesses *g = NULL;
    int rc = 1;
    if (t->n_layers > SIM_MAX_LAYERS || t->n_experts > SIM_MAX_EXPERTS)
        fprintf(stderr, "bench_prefetch_sim: %s: at most %d layers x %d experts\n", o.trace, SIM_MAX_LAYERS, SIM_MAX_EXPERTS);
    else if (o.lookahead ? (g = load_lookahead(&o, t)) != NULL : o.report ? load_recall(o.report, o.genre, t, recall) == 0 : 1) {
        for (int l = 0; !o.lookahead && !o.report && l < t->n_layers; l++) recall[l] = o.recall;
        rc = report(&o, t, g, recall) < 0 ? 1 : 0;
    }
    cache_guesses_free(g);
    cache_trace_free(t);
    return rc;
}
