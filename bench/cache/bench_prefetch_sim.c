/* bench_prefetch_sim: router-lookahead prefetch replayed on a routing trace through the live
 * policy code (cache_policy_*, LFU), with the live cache's rules: a layer's own experts are never
 * evicted while it runs, at most half the slots hold unused guesses, a guess its layer does not ask
 * for is wasted and its slot freed. Each layer's guesses are made before the layer before it runs.
 *
 * The traces record routes, not what a lookahead would have guessed, so the guesses are modelled:
 * each of layer l's real experts is guessed with probability r_l (the trace model's measured
 * next-layer router recall for that layer and genre, from its report.json, or one --recall value),
 * and each miss of it is replaced by an expert the layer did not choose; errors are independent of
 * the expert. That independence is optimistic: on the embedded model, where the live cache
 * measures it, the lookahead's top-k catches 51-58% of would-be misses against 67% of all
 * requests (misses are the rarely chosen experts, which the lookahead also guesses worse).
 * Usage: bench_prefetch_sim [--report report.json --genre G | --recall R] [--guesses N] TRACE... */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "cache/expert_cache.h"
#include "core/text_file.h"

enum { SIM_MAX_LAYERS = 256, SIM_MAX_EXPERTS = 1024 };

typedef struct {
    const cache_trace *t;
    int E, slots, cap, guesses;
    const double *recall;      /* [n_layers] */
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
    for (int i = 0; i < n && m < s->guesses; i++) {
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

/* One layer's requests: served, then its unasked guesses wasted and freed. */
static void run_layer(psim *s, int layer, const int *keys, int n)
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
    for (int i = 0; i < n; i++) s->wanted[keys[i]] = 0;
}

/* Token by token: before layer l runs, the layer before it guesses l (the first MoE layer is
 * guessed by the dense layer in front of it). */
static void psim_run(psim *s, int prefetch)
{
    const cache_trace *t = s->t;
    int real[SIM_MAX_EXPERTS], g[SIM_MAX_EXPERTS];
    /* one layer's list of one token: top_k requests when every token routes every layer, as here */
    size_t per = t->n_tokens > 0 && t->n % ((size_t)t->n_tokens * (size_t)t->n_layers) == 0
                     ? t->n / ((size_t)t->n_tokens * (size_t)t->n_layers) : 1;
    for (size_t i = 0; i < t->n;) {
        int layer = t->key[i] / s->E;
        size_t j = i;
        while (j < t->n && j - i < per && t->key[j] / s->E == layer) j++;
        int n = (int)(j - i) < SIM_MAX_EXPERTS ? (int)(j - i) : SIM_MAX_EXPERTS;
        for (int q = 0; q < n; q++) real[q] = t->key[i + (size_t)q] % s->E;
        if (prefetch) issue_guesses(s, layer, g, model_guesses(s, layer, real, n, g));
        run_layer(s, layer, t->key + i, n);
        i = j;
    }
}

static int psim_one(const cache_trace *t, const double *recall, int slots, int guesses, int prefetch, psim *s)
{
    int K = t->n_layers * t->n_experts;
    *s = (psim){.t = t, .E = t->n_experts, .slots = slots, .cap = slots / 2 > 1 ? slots / 2 : 1,
                .guesses = guesses, .recall = recall, .rng = 0x9E3779B97F4A7C15ull};
    s->p = cache_policy_create(CACHE_POLICY_LFU, K, slots, 0);
    s->wanted = calloc((size_t)K, 1);
    s->guess = calloc((size_t)K, 1);
    s->guessed = calloc((size_t)K, 1);
    int rc = s->p && s->wanted && s->guess && s->guessed ? 0 : -1;
    if (rc == 0) psim_run(s, prefetch);
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

static void report(const char *path, const cache_trace *t, const double *recall, int guesses)
{
    int K = t->n_layers * t->n_experts;
    double fracs[] = {0.013, 0.03, 0.10};
    double mean = 0;
    for (int i = 0; i < t->n_layers; i++) mean += recall[i] / t->n_layers;
    printf("\n== %s: %d tokens, %d keys, modelled lookahead recall %.1f%% (mean over layers), %d guesses per layer\n",
           path, t->n_tokens, K, 100 * mean, guesses);
    printf("%6s %6s | %8s %8s | %8s %8s %8s | %7s %6s %8s\n", "slots", "%keys", "hit off", "hit on", "issued", "used",
           "wasted", "recall", "waste", "ceiling");
    for (int f = 0; f < 3; f++) {
        int slots = (int)(fracs[f] * K + 0.5);
        psim off, on;
        if (psim_one(t, recall, slots, guesses, 0, &off) < 0 || psim_one(t, recall, slots, guesses, 1, &on) < 0) return;
        double wm = (double)(on.used + on.misses);
        printf("%6d %5.1f%% | %7.2f%% %7.2f%% | %8llu %8llu %8llu | %6.1f%% %6.2f %7.1f%%\n", slots, 100.0 * slots / K,
               100.0 * off.hits / off.req, 100.0 * on.hits / on.req, (unsigned long long)on.issued,
               (unsigned long long)on.used, (unsigned long long)on.wasted, 100 * on.used / wm,
               on.used ? (double)on.wasted / on.used : 0, 100 * (on.used + on.guessed_missed) / wm);
    }
}

int main(int argc, char **argv)
{
    const char *rep = NULL, *genre = NULL;
    double flat = -1;
    int guesses = 8;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench_prefetch_sim [--report report.json --genre G | --recall R] [--guesses N] TRACE...\n");
            return 0;
        }
        if (!strcmp(argv[i], "--report") && i + 1 < argc) { rep = argv[++i]; continue; }
        if (!strcmp(argv[i], "--genre") && i + 1 < argc) { genre = argv[++i]; continue; }
        if (!strcmp(argv[i], "--recall") && i + 1 < argc) { flat = atof(argv[++i]); continue; }
        if (!strcmp(argv[i], "--guesses") && i + 1 < argc) { guesses = atoi(argv[++i]); continue; }
        char err[512];
        double recall[SIM_MAX_LAYERS];
        cache_trace *t = cache_trace_load(argv[i], -1, -1, err, sizeof err);
        if (!t) { fprintf(stderr, "bench_prefetch_sim: %s\n", err); return 1; }
        if (t->n_layers > SIM_MAX_LAYERS || t->n_experts > SIM_MAX_EXPERTS || guesses < 1 ||
            (!rep && (flat < 0 || flat > 1)) || (rep && (!genre || load_recall(rep, genre, t, recall) < 0))) {
            fprintf(stderr, "bench_prefetch_sim: %s: need --report FILE --genre G, or --recall in [0, 1]; at most %d layers x %d experts\n",
                    argv[i], SIM_MAX_LAYERS, SIM_MAX_EXPERTS);
            cache_trace_free(t);
            return 2;
        }
        for (int l = 0; !rep && l < t->n_layers; l++) recall[l] = flat;
        report(argv[i], t, recall, guesses);
        cache_trace_free(t);
    }
    return 0;
}
