/* What BF16 latent KV costs against F32, measured on a real model: held-out perplexity (each
 * segment from position 0, and all segments as one long sequence, so the positions reach
 * thousands), the largest logit difference, and greedy agreement over long generations (first
 * position where the two precisions pick different tokens, and the share of positions that agree),
 * beside the same measures between two F32 runs that differ only in summation order.
 *
 * usage: kv_precision [-m MODEL] [--heldout FILE] [-n TOKENS] [--prompts K] [-t THREADS]
 *   defaults: the embedded model, tools/embedded/heldout_ids.json, 4096 tokens, 4 prompts, 2 threads */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/dsspec.h"

typedef struct { int **seg; int n_seg, seg_len; } heldout;

static int load_heldout(const char *path, heldout *h)
{
    char err[512];
    char *text = dsspec_read_file(path, NULL, err, sizeof err);
    cJSON *root = text ? cJSON_Parse(text) : NULL, *segs = root ? cJSON_GetObjectItem(root, "segments") : NULL;
    free(text);
    if (!segs || !cJSON_IsArray(segs)) { fprintf(stderr, "kv_precision: %s: no \"segments\" array\n", path); cJSON_Delete(root); return -1; }
    h->n_seg = cJSON_GetArraySize(segs);
    h->seg_len = cJSON_GetArraySize(cJSON_GetArrayItem(segs, 0));
    h->seg = calloc(h->n_seg, sizeof *h->seg);
    for (int s = 0; s < h->n_seg; s++) {
        const cJSON *a = cJSON_GetArrayItem(segs, s);
        h->seg[s] = malloc(h->seg_len * sizeof(int));
        for (int t = 0; t < h->seg_len; t++) h->seg[s][t] = cJSON_GetArrayItem(a, t)->valueint;
    }
    cJSON_Delete(root);
    return 0;
}

/* One precision and kernel path: the kernel path is process-wide, so configurations run one at a
 * time, each with its own engine. */
typedef struct { const char *name, *path; int bf16; } config;

static dsspec *open_engine(const char *model, const config *cf, int ctx, int threads)
{
    dsspec_options o;
    char err[1024];
    dsspec_options_default(&o);
    o.model_dir = model;
    o.kv_bf16 = cf->bf16;
    o.cpu_features = cf->path;
    o.ctx = ctx;
    o.threads = threads;
    o.mtp = 0;
    dsspec *e = dsspec_open(&o, NULL, err, sizeof err);
    if (!e) fprintf(stderr, "kv_precision: %s\n", err);
    return e;
}

/* Sum of -log p(ids[t] | ids[:t]) over t >= 1. */
static double nll(const float *logits, const int *ids, int T, int V)
{
    double s = 0;
    for (int t = 1; t < T; t++) {
        const float *l = logits + (size_t)(t - 1) * V;
        double mx = -INFINITY, z = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, l[v]);
        for (int v = 0; v < V; v++) z += exp(l[v] - mx);
        s += mx + log(z) - l[ids[t]];
    }
    return s;
}

typedef struct { int *tok, n; } collected;
static void collect(void *ctx, int token) { collected *c = ctx; c->tok[c->n++] = token; }

static int greedy(dsspec *e, const int *prompt, int np, int n, int *out)
{
    collected c = {out, 0};
    char err[1024];
    dsspec_generate_params p;
    dsspec_gen_stats st;
    dsspec_generate_params_default(&p);
    p.max_new = n;
    p.temperature = 0;
    p.ignore_eos = 1;
    p.on_token = collect;
    p.ctx = &c;
    if (dsspec_generate(e, prompt, np, &p, &st, err, sizeof err)) { fprintf(stderr, "kv_precision: %s\n", err); exit(1); }
    return c.n;
}

typedef struct {
    double ppl_seg, ppl_long, max_diff;  /* max |logit - the first configuration's| over the long sequence */
    int *tokens;                          /* [prompts][n] greedy continuations */
} result;

static void measure(dsspec *e, const heldout *h, const int *all, int n, int prompts, float *lg, float *lg_first, result *r)
{
    int V = dsspec_get_model_info(e)->vocab_size, long_T = h->n_seg * h->seg_len;
    char err[1024];
    double s = 0;
    for (int i = 0; i < h->n_seg; i++) {
        if (dsspec_eval(e, h->seg[i], h->seg_len, 64, lg, NULL, NULL, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(1); }
        s += nll(lg, h->seg[i], h->seg_len, V);
    }
    r->ppl_seg = exp(s / ((double)h->n_seg * (h->seg_len - 1)));
    if (dsspec_eval(e, all, long_T, 64, lg, NULL, NULL, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(1); }
    r->ppl_long = exp(nll(lg, all, long_T, V) / (long_T - 1));
    r->max_diff = 0;
    for (size_t i = 0; lg_first && i < (size_t)long_T * V; i++) r->max_diff = fmax(r->max_diff, fabs((double)lg[i] - lg_first[i]));
    for (int p = 0; p < prompts; p++) greedy(e, h->seg[p], 64, n, r->tokens + (size_t)p * n);
}

/* First differing generated token and the share of agreeing positions, against the first configuration. */
static void print_agreement(const result *a, const result *b, int prompts, int n)
{
    for (int p = 0; p < prompts; p++) {
        const int *x = a->tokens + (size_t)p * n, *y = b->tokens + (size_t)p * n;
        int first = n, same = 0;
        for (int t = 0; t < n; t++) {
            if (x[t] == y[t]) same++;
            else if (first == n) first = t;
        }
        printf("    prompt %d: first different token at %5d of %d; %5.1f%% of positions agree\n", p, first, n, 100.0 * same / n);
    }
}

int main(int argc, char **argv)
{
    const char *model = NULL, *path = "tools/embedded/heldout_ids.json";
    int n = 4096, prompts = 4, threads = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--heldout")) path = argv[i + 1];
        else if (!strcmp(argv[i], "-n")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompts")) prompts = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else { fprintf(stderr, "kv_precision: unknown option '%s'\n", argv[i]); return 2; }
    }
    heldout h;
    if (load_heldout(path, &h)) return 1;
    if (prompts > h.n_seg) prompts = h.n_seg;
    int long_T = h.n_seg * h.seg_len, ctx = (long_T > n + 64 ? long_T : n + 64) + 8, V = 0;
    int *all = malloc((size_t)long_T * sizeof(int));
    for (int s = 0; s < h.n_seg; s++) memcpy(all + (size_t)s * h.seg_len, h.seg[s], h.seg_len * sizeof(int));
    /* The peer: F32 on the next kernel path down, whose sums run in another order: how far two
     * equally exact runs drift apart is the floor BF16 is judged against. */
    config cfg[3] = {{"f32", "avx512", 0}, {"bf16", "avx512", 1}, {"f32, avx2 (reduction order only)", "avx2", 0}};
    float *lg = NULL, *lg_first = NULL;
    result r[3];
    for (int c = 0; c < 3; c++) {
        dsspec *e = open_engine(model, &cfg[c], ctx, threads);
        if (!e) return 1;
        if (!lg) {
            V = dsspec_get_model_info(e)->vocab_size;
            lg = malloc((size_t)long_T * V * sizeof(float));
            lg_first = malloc((size_t)long_T * V * sizeof(float));
        }
        r[c].tokens = malloc((size_t)prompts * n * sizeof(int));
        measure(e, &h, all, n, prompts, lg, c ? lg_first : NULL, &r[c]);
        if (c == 0) memcpy(lg_first, lg, (size_t)long_T * V * sizeof(float));
        dsspec_close(e);
    }
    printf("latent KV precision on %s: held-out perplexity (%d segments of %d tokens, each from position 0; and all\n"
           "as one %d-position sequence), max |logit diff| to f32 over that sequence, greedy agreement over %d tokens\n",
           model ? model : "the embedded model", h.n_seg, h.seg_len, long_T, n);
    for (int c = 0; c < 3; c++) {
        printf("  %-34s ppl %8.4f (%+.3f%%)  long ppl %9.3f (%+.3f%%)  max |logit diff| %.3g\n", cfg[c].name, r[c].ppl_seg,
               100 * (r[c].ppl_seg / r[0].ppl_seg - 1), r[c].ppl_long, 100 * (r[c].ppl_long / r[0].ppl_long - 1), r[c].max_diff);
        if (c) print_agreement(&r[0], &r[c], prompts, n);
    }
    return 0;
}
