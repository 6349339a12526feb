/* What a hole in the MTP KV costs in acceptance. --mtp auto writes the KV-only MTP rows of steps
 * without a draft only when a draft follows, and keeps at most W of them waiting (gen_options
 * .mtp_window): a draft after a longer stretch without one attends to the W rows before its own
 * (then to more as drafting goes on). Here every draft attends to exactly the W rows before its own
 * (a sliding window: the worst case), against drafts over every earlier row, on sequences the
 * model generated itself (greedy, and sampled at --temp) and on held-out text, teacher-forced: the
 * main model's logits at each position are the ones a verify pass there would see. Greedy
 * acceptance is the share of positions whose draft is the main model's argmax; sampled acceptance
 * the mean probability of the draft under the target distribution (what the point-mass rule
 * accepts with).
 *
 * usage: mtp_window -m DIR --heldout FILE [-n TOKENS] [--prompts K] [--temp T] [--windows LIST] [-t THREADS]
 *   defaults: 1000 tokens, 4 prompts (the first 32 ids of held-out segments), temp 0.6 (top-p 0.95),
 *   windows 0,1,2,4,8,16,32,64,128 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cache/expert_cache.h"
#include "core/kernels.h"
#include "core/model.h"
#include "core/sampler.h"
#include "core/text_file.h"
#include "speculate/speculate.h"

enum { MAX_WINDOWS = 16, PROMPT_LEN = 32, CHUNK = 64, KINDS = 3 };

typedef struct {
    checkpoint *ck;
    thread_pool *pool;
    model *m;
    expert_reader *rd;
    expert_cache *cache;
    expert_provider ep;
    int V, H;
} engine;

static int fail(const char *what, const char *err)
{
    fprintf(stderr, "mtp_window: %s: %s\n", what, err);
    return -1;
}

/* The segments of a held-out file ({"segments": [[ids...], ...]}). */
static int load_heldout(const char *path, int ***seg, int *n_seg, int *seg_len)
{
    char err[512];
    size_t len;
    char *text = text_file_read(path, &len, err, sizeof err);
    cJSON *root = text ? cJSON_Parse(text) : NULL, *segs = root ? cJSON_GetObjectItem(root, "segments") : NULL;
    free(text);
    if (!segs || !cJSON_IsArray(segs) || cJSON_GetArraySize(segs) < 1) {
        cJSON_Delete(root);
        return fail(path, "expected {\"segments\": [[token ids], ...]}");
    }
    *n_seg = cJSON_GetArraySize(segs);
    *seg_len = cJSON_GetArraySize(cJSON_GetArrayItem(segs, 0));
    *seg = calloc(*n_seg, sizeof **seg);
    for (int s = 0; s < *n_seg; s++) {
        const cJSON *a = cJSON_GetArrayItem(segs, s);
        (*seg)[s] = malloc((size_t)*seg_len * sizeof(int));
        for (int t = 0; t < *seg_len; t++) (*seg)[s][t] = cJSON_GetArrayItem(a, t)->valueint;
    }
    cJSON_Delete(root);
    return 0;
}

/* The model with every routed expert (MTP layer's included) cachable at once: nothing evicts. */
static int engine_open(engine *e, const char *dir, int threads, int ctx)
{
    char err[1024];
    memset(e, 0, sizeof *e);
    if (!(e->ck = checkpoint_open(dir, err, sizeof err))) return fail(dir, err);
    e->pool = thread_pool_create(threads);
    if (!(e->m = model_load(e->ck, e->pool, err, sizeof err))) return fail(dir, err);
    const model_config *c = model_get_config(e->m);
    if (!model_has_mtp(e->m)) return fail(dir, "the checkpoint has no MTP layer");
    int moe = 0;
    for (int l = 0; l < config_total_layers(c); l++) moe += config_layer_is_moe(c, l);
    if (!(e->rd = expert_reader_create(e->ck, IO_BACKEND_AUTO, 16, err, sizeof err))) return fail("expert reader", err);
    if (!(e->cache = expert_cache_create(e->ck, e->rd, moe * c->n_routed_experts, CACHE_POLICY_LFU, err, sizeof err)))
        return fail("expert cache", err);
    e->ep = expert_cache_provider(e->cache);
    e->V = c->vocab_size;
    e->H = c->hidden_size;
    return model_reserve_scratch(e->m, CHUNK, ctx, err, sizeof err) ? fail("scratch", err) : 0;
}

static void engine_close(engine *e)
{
    expert_cache_free(e->cache);
    expert_reader_free(e->rd);
    model_free(e->m);
    thread_pool_free(e->pool);
    checkpoint_close(e->ck);
}

typedef struct { int *tok; int n; } token_list;
static void collect(void *ctx, int token) { token_list *l = ctx; l->tok[l->n++] = token; }

/* prompt + n tokens the model generates after it, MTP off (greedy when temp is 0). */
static int generate_sequence(engine *e, const int *prompt, int np, int n, double temp, uint64_t seed, int *out)
{
    char err[512];
    sampler *s = sampler_create(e->V, temp, 0.95, seed);
    memcpy(out, prompt, (size_t)np * sizeof(int));
    token_list got = {out + np, 0};
    gen_options o = {.mtp = GEN_MTP_OFF, .max_new = n, .eos_id = -1, .ctx = np + n + 4, .prefill_chunk = CHUNK,
                     .sampler = s, .on_token = collect, .token_ctx = &got};
    gen_stats st;
    int rc = generate(e->m, &e->ep, prompt, np, &o, &st, err, sizeof err);
    sampler_free(s);
    return rc || got.n != n ? fail("generate", rc ? err : "fewer tokens than asked") : 0;
}

/* Main-model hidden states and logits of every position of seq, and every MTP KV row (row p pairs
 * h_p with seq[p + 1]). */
static int teacher_forced(engine *e, kv_cache *kv, kv_cache *mkv, const int *seq, int T, int *pos, float *hidden,
                          float *logits)
{
    char err[512];
    for (int s = 0; s < T; s += CHUNK) {
        int nb = T - s < CHUNK ? T - s : CHUNK;
        forward_request req = {.hidden = hidden + (size_t)s * e->H, .logits = logits + (size_t)s * e->V};
        if (model_forward(e->m, kv, &e->ep, seq + s, pos + s, nb, &req, err, sizeof err)) return fail("main pass", err);
    }
    for (int s = 0; s < T - 1; s += CHUNK) {
        int nb = T - 1 - s < CHUNK ? T - 1 - s : CHUNK;
        if (mtp_forward(e->m, mkv, &e->ep, hidden + (size_t)s * e->H, seq + s + 1, pos + s, nb, NULL, 0, 0, err, sizeof err))
            return fail("MTP rows", err);
    }
    return 0;
}

typedef struct {
    int windows[MAX_WINDOWS], nw;  /* rows before a draft's own it attends to; -1: all */
    double greedy[KINDS][MAX_WINDOWS], sampled[KINDS][MAX_WINDOWS];
    long count[KINDS];
} tally;

/* The drafts of rows p0 .. T-2 under every window, scored against the main model's logits of the
 * next position: greedy (equal to its argmax) and sampled (its probability under s). */
static int score(engine *e, kv_cache *mkv, const int *seq, int T, int p0, const float *hidden, const float *logits,
                 sampler *s, float *mtp_logits, tally *t, int kind)
{
    char err[512];
    for (int p = p0; p <= T - 2; p++) {
        const float *target = logits + (size_t)(p + 1) * e->V;
        int best = sampler_argmax(target, e->V), full = -1;
        const float *probs = sampler_distribution(s, target);
        for (int w = 0; w < t->nw; w++) {
            int W = t->windows[w], from = W < 0 || W >= p ? 0 : p - W, draft = full;
            if (from > 0 || full < 0) {
                if (mtp_forward(e->m, mkv, &e->ep, hidden + (size_t)p * e->H, seq + p + 1, &p, 1, mtp_logits, 0, from, err,
                                sizeof err))
                    return fail("MTP draft", err);
                draft = sampler_argmax(mtp_logits, e->V);
                if (from == 0) full = draft;
            }
            t->greedy[kind][w] += draft == best;
            t->sampled[kind][w] += probs[draft];
        }
        t->count[kind]++;
    }
    return 0;
}

typedef struct {
    const char *dir, *heldout;
    int n, prompts, threads;
    double temp;
    tally t;
} args;

static int parse_windows(const char *list, tally *t)
{
    t->nw = 0;
    t->windows[t->nw++] = -1;
    for (const char *p = list; *p && t->nw < MAX_WINDOWS;) {
        char *end;
        long w = strtol(p, &end, 10);
        if (end == p || w < 0) return -1;
        t->windows[t->nw++] = (int)w;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    a->n = 1000;
    a->prompts = 4;
    a->threads = 1;
    a->temp = 0.6;
    const char *windows = "0,1,2,4,8,16,32,64,128";
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-m") && v) a->dir = argv[++i];
        else if (!strcmp(argv[i], "--heldout") && v) a->heldout = argv[++i];
        else if (!strcmp(argv[i], "-n") && v) a->n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompts") && v) a->prompts = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--temp") && v) a->temp = atof(argv[++i]);
        else if (!strcmp(argv[i], "--windows") && v) windows = argv[++i];
        else if (!strcmp(argv[i], "-t") && v) a->threads = atoi(argv[++i]);
        else return -1;
    }
    if (!a->dir || !a->heldout || a->n < 2 || a->prompts < 1 || a->threads < 1 || a->temp <= 0) return -1;
    return parse_windows(windows, &a->t);
}

/* One sequence of each kind per prompt: generated greedy, generated sampled, the held-out text. */
static int run(engine *e, args *a, int **seg, int n_seg, int seg_len)
{
    int T = PROMPT_LEN + a->n > seg_len ? PROMPT_LEN + a->n : seg_len, rc = 0;
    const model_config *c = model_get_config(e->m);
    kv_cache *kv = kv_cache_create(c, 0, c->num_hidden_layers, T + 4, DTYPE_F32);
    kv_cache *mkv = kv_cache_create(c, c->num_hidden_layers, 1, T + 4, DTYPE_F32);
    int *seq = malloc((size_t)T * sizeof(int)), *pos = malloc((size_t)T * sizeof(int));
    float *hidden = malloc((size_t)T * e->H * sizeof(float)), *logits = malloc((size_t)T * e->V * sizeof(float));
    float *mtp_logits = malloc((size_t)e->V * sizeof(float));
    sampler *hot = sampler_create(e->V, a->temp, 0.95, 1);
    if (!kv || !mkv || !seq || !pos || !hidden || !logits || !mtp_logits) rc = fail("buffers", "out of memory");
    for (int i = 0; i < T; i++) pos[i] = i;
    for (int k = 0; k < a->prompts && k < n_seg && rc == 0; k++)
        for (int kind = 0; kind < KINDS && rc == 0; kind++) {
            int len = kind == 2 ? seg_len : PROMPT_LEN + a->n;
            if (kind == 2) memcpy(seq, seg[k], (size_t)seg_len * sizeof(int));
            else rc = generate_sequence(e, seg[k], PROMPT_LEN, a->n, kind ? a->temp : 0, 100 + k, seq);
            if (rc == 0) rc = teacher_forced(e, kv, mkv, seq, len, pos, hidden, logits);
            if (rc == 0) rc = score(e, mkv, seq, len, PROMPT_LEN - 1, hidden, logits, hot, mtp_logits, &a->t, kind);
        }
    sampler_free(hot);
    free(seq); free(pos); free(hidden); free(logits); free(mtp_logits);
    kv_cache_free(kv);
    kv_cache_free(mkv);
    return rc;
}

static void print_table(const args *a)
{
    const tally *t = &a->t;
    printf("drafts per kind: %ld greedy-generated, %ld sampled at temp %.2f (top-p 0.95), %ld held-out positions\n",
           t->count[0], t->count[1], a->temp, t->count[2]);
    printf("%8s %22s %22s %22s %22s\n", "window", "greedy gen: accept", "sampled gen: accept", "held-out: greedy",
           "held-out: sampled");
    for (int w = 0; w < t->nw; w++) {
        char name[16];
        snprintf(name, sizeof name, t->windows[w] < 0 ? "all" : "%d", t->windows[w]);
        printf("%8s", name);
        for (int col = 0; col < 4; col++) {
            int kind = col < 2 ? col : 2, greedy = col != 1 && col != 3;
            const double *v = greedy ? t->greedy[kind] : t->sampled[kind];
            double n = t->count[kind] ? t->count[kind] : 1;
            printf("   %6.1f%% (%6.3f x)", 100 * v[w] / n, v[0] > 0 ? v[w] / v[0] : 0);
        }
        printf("\n");
    }
}

int main(int argc, char **argv)
{
    args a;
    if (parse_args(argc, argv, &a)) {
        fprintf(stderr, "usage: mtp_window -m DIR --heldout FILE [-n TOKENS] [--prompts K] [--temp T] [--windows LIST] [-t THREADS]\n");
        return 2;
    }
    kernels_init(CPU_PATH_AVX512);
    int **seg = NULL, n_seg = 0, seg_len = 0;
    if (load_heldout(a.heldout, &seg, &n_seg, &seg_len)) return 1;
    if (seg_len <= PROMPT_LEN + 1) {
        fail(a.heldout, "segments shorter than the 33 ids a prompt and a draft need");
        return 1;
    }
    engine e;
    int T = PROMPT_LEN + a.n > seg_len ? PROMPT_LEN + a.n : seg_len;
    int rc = engine_open(&e, a.dir, a.threads, T + 4) || run(&e, &a, seg, n_seg, seg_len);
    if (rc == 0) print_table(&a);
    if (e.m) engine_close(&e);
    for (int s = 0; s < n_seg; s++) free(seg[s]);
    free(seg);
    return rc ? 1 : 0;
}
