/* Synthetic R1 routing. Assumptions, not measurements (real traces replace them when they exist):
 *  - skew: each layer has its own random popularity order; rank r has Zipf weight 1/(r+1)^s, s = 0.8
 *    by default (aux-loss-free balancing keeps R1's corpus-wide load flat-ish; within one text the
 *    load is skewed, which is what a cache sees);
 *  - temporal reuse: each of a token's 8 picks at a layer repeats one of the previous token's experts
 *    at that layer with probability p = 0.3;
 *  - drift: every 64 tokens 8 random pairs of ranks swap in every layer (the topic moves), which is
 *    what LFU's aging must follow. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "bench/cache/synth_trace.h"

synth_params synth_r1_defaults(void)
{
    return (synth_params){.first_layer = 3, .n_layers = 58, .n_experts = 256, .top_k = 8, .tokens = 1000,
                          .zipf_s = 0.8, .reuse_p = 0.3, .drift_every = 64, .drift_swaps = 8, .seed = 1};
}

static unsigned long long next_u64(unsigned long long *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}
static double next_unit(unsigned long long *s) { return (double)(next_u64(s) >> 11) / 9007199254740992.0; }
static int next_below(unsigned long long *s, int n) { return (int)(next_u64(s) % (unsigned long long)n); }

typedef struct {
    int *expert_of_rank;  /* [n_layers][n_experts] */
    int *prev;            /* [n_layers][top_k] previous token's picks */
    double *cdf;          /* [n_experts] cumulative Zipf weights */
} synth_state;

static int sample_rank(const synth_state *st, int n, unsigned long long *rng)
{
    double u = next_unit(rng) * st->cdf[n - 1];
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (st->cdf[mid] < u) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static void pick_layer(const synth_params *p, synth_state *st, int l, int first_token, unsigned long long *rng, int *out)
{
    int n = 0, *prev = st->prev + (size_t)l * p->top_k;
    while (n < p->top_k) {
        int e;
        if (!first_token && next_unit(rng) < p->reuse_p) e = prev[next_below(rng, p->top_k)];
        else e = st->expert_of_rank[(size_t)l * p->n_experts + sample_rank(st, p->n_experts, rng)];
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= out[i] == e;
        if (!dup) out[n++] = e;
    }
    memcpy(prev, out, sizeof(int) * (size_t)p->top_k);
}

static void drift(const synth_params *p, synth_state *st, unsigned long long *rng)
{
    for (int l = 0; l < p->n_layers; l++)
        for (int s = 0; s < p->drift_swaps; s++) {
            int *r = st->expert_of_rank + (size_t)l * p->n_experts;
            int a = next_below(rng, p->n_experts), b = next_below(rng, p->n_experts), t = r[a];
            r[a] = r[b];
            r[b] = t;
        }
}

int synth_write(const synth_params *p, FILE *out)
{
    if (p->n_layers < 1 || p->n_experts < 1 || p->top_k < 1 || p->top_k > p->n_experts || p->tokens < 1 ||
        p->reuse_p < 0 || p->reuse_p > 1 || p->zipf_s < 0) {
        fprintf(stderr, "synthetic trace: bad parameters\n");
        return -1;
    }
    synth_state st = {
        .expert_of_rank = malloc(sizeof(int) * (size_t)p->n_layers * p->n_experts),
        .prev = calloc((size_t)p->n_layers * p->top_k, sizeof(int)),
        .cdf = malloc(sizeof(double) * (size_t)p->n_experts),
    };
    int *picks = malloc(sizeof(int) * (size_t)p->top_k);
    if (!st.expert_of_rank || !st.prev || !st.cdf || !picks) {
        free(st.expert_of_rank); free(st.prev); free(st.cdf); free(picks);
        fprintf(stderr, "synthetic trace: out of memory\n");
        return -1;
    }
    unsigned long long rng = p->seed * 0x9e3779b97f4a7c15ull + 1;
    double acc = 0;
    for (int r = 0; r < p->n_experts; r++) st.cdf[r] = acc += pow(r + 1.0, -p->zipf_s);
    for (int l = 0; l < p->n_layers; l++) {
        int *perm = st.expert_of_rank + (size_t)l * p->n_experts;
        for (int e = 0; e < p->n_experts; e++) perm[e] = e;
        for (int e = p->n_experts - 1; e > 0; e--) { int j = next_below(&rng, e + 1), t = perm[e]; perm[e] = perm[j]; perm[j] = t; }
    }
    for (int t = 0; t < p->tokens; t++) {
        if (t > 0 && p->drift_every > 0 && t % p->drift_every == 0) drift(p, &st, &rng);
        fputc('{', out);
        for (int l = 0; l < p->n_layers; l++) {
            pick_layer(p, &st, l, t == 0, &rng, picks);
            fprintf(out, "%s\"%d\":[", l ? "," : "", p->first_layer + l);
            for (int i = 0; i < p->top_k; i++) fprintf(out, "%s%d", i ? "," : "", picks[i]);
            fputc(']', out);
        }
        fputs("}\n", out);
    }
    free(st.expert_of_rank); free(st.prev); free(st.cdf); free(picks);
    return ferror(out) ? -1 : 0;
}

int routes_to_trace(const char *path, FILE *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "%s: cannot open\n", path); return -1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    size_t got = text ? fread(text, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!text || got != (size_t)n) { free(text); fprintf(stderr, "%s: read error\n", path); return -1; }
    text[n] = 0;
    cJSON *o = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(o)) { cJSON_Delete(o); fprintf(stderr, "%s: expected {\"<layer>\": [[ids], ...]}\n", path); return -1; }
    int tokens = -1;
    cJSON *layer;
    cJSON_ArrayForEach(layer, o) {
        if (!cJSON_IsArray(layer)) { cJSON_Delete(o); fprintf(stderr, "%s: layer %s is not an array\n", path, layer->string); return -1; }
        int t = cJSON_GetArraySize(layer);
        if (tokens < 0 || t < tokens) tokens = t;
    }
    for (int t = 0; t < tokens; t++) {
        fputc('{', out);
        int first = 1;
        cJSON_ArrayForEach(layer, o) {
            char *ids = cJSON_PrintUnformatted(cJSON_GetArrayItem(layer, t));
            if (ids) fprintf(out, "%s\"%s\":%s", first ? "" : ",", layer->string, ids);
            free(ids);
            first = 0;
        }
        fputs("}\n", out);
    }
    cJSON_Delete(o);
    return 0;
}
