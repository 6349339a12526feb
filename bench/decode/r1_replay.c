/* r1_replay: decode at R1's shapes driven by a real routing trace. The R1 slice's real files are
 * read through the real reader (io/) into the real expert cache (cache/), each trace layer's
 * experts run as FP8 SwiGLU GEMVs on the loaded bytes, and each layer's resident work (the MLA
 * projections and the shared expert, real weights of the slice) runs between, so reads overlap
 * compute as in a decode. The trace's layers map onto the slice's MoE layers by cycling: trace layer
 * L reads slice layer first_dense + L % (slice MoE layers), while the cache keys every trace layer
 * apart (a virtual checkpoint of first_dense + trace layers), so hit rates are the trace's own.
 *
 * Prefetch, layers L+1..L+d guessed while layer L runs (--prefetch-depth d): with --lookahead, the
 * guesses the trace model's own router lookahead made (recorded beside the trace by
 * tools/trace_model/guess_trace.py; the first --guesses of each, most confident first, the layer
 * before the first MoE layer guessing too, as core/model.c's prefetch_ahead does); without it,
 * modelled: each real top-k expert guessed with probability --recall, else a wrong one. Nothing is
 * guessed across a token boundary: the next token's route depends on the token.
 *
 * --write-iolog F records every kernel read the reader issued as a fio iolog, so that fio can
 * replay exactly this request stream as the disk's peer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>
#include "cache/expert_cache.h"
#include "core/kernels.h"
#include "core/threadpool.h"

typedef struct {
    const char *slice, *trace, *policy, *report, *lookahead, *iolog;
    int tokens, warmup, slots, depth, threads, qd, guesses[2];
    double recall;
    unsigned long long seed;
} options;

/* One resident FP8 matrix of the slice (weight + its block-scale grid), read into RAM. */
typedef struct { matrix m; void *data; float *scale; } resident_matrix;

enum { RES_QA, RES_QB, RES_KVA, RES_KVB, RES_O, RES_SG, RES_SU, RES_SD, RES_N };
static const char *RES_NAMES[RES_N] = {
    "self_attn.q_a_proj", "self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa", "self_attn.kv_b_proj",
    "self_attn.o_proj", "mlp.shared_experts.gate_proj", "mlp.shared_experts.up_proj", "mlp.shared_experts.down_proj"};

static int load_resident(const checkpoint *ck, int layer, resident_matrix *r, char *err, size_t errlen)
{
    for (int i = 0; i < RES_N; i++) {
        const tensor_info *w = checkpoint_tensorf(ck, "model.layers.%d.%s.weight", layer, RES_NAMES[i]);
        const tensor_info *s = checkpoint_tensorf(ck, "model.layers.%d.%s.weight_scale_inv", layer, RES_NAMES[i]);
        if (!w || !s || w->dtype != DTYPE_F8_E4M3 || w->ndim != 2) {
            snprintf(err, errlen, "%s: layer %d: no FP8 %s.weight with its scale", ck->dir, layer, RES_NAMES[i]);
            return -1;
        }
        r[i].data = malloc(w->nbytes);
        r[i].scale = malloc(s->nbytes);
        if (!r[i].data || !r[i].scale) { snprintf(err, errlen, "out of memory for resident weights"); return -1; }
        if (checkpoint_read(ck, w, 0, r[i].data, w->nbytes, err, errlen) < 0 ||
            checkpoint_read(ck, s, 0, r[i].scale, s->nbytes, err, errlen) < 0) return -1;
        r[i].m = (matrix){DTYPE_F8_E4M3, (int)w->shape[0], (int)w->shape[1], r[i].data, r[i].scale};
    }
    return 0;
}

/* A checkpoint whose MoE layers first_dense .. first_dense + n_virtual - 1 are the slice's MoE
 * layers cycled: the cache and reader see one layer per trace layer, the bytes are the slice's. */
static int make_virtual(const checkpoint *ck, int n_virtual, checkpoint *v)
{
    int first = ck->cfg.first_k_dense_replace, phys = ck->cfg.num_hidden_layers - first, E = ck->cfg.n_routed_experts;
    *v = *ck;
    v->cfg.num_hidden_layers = first + n_virtual;
    v->cfg.num_nextn_predict_layers = 0;
    v->experts = calloc((size_t)(first + n_virtual) * E, sizeof *v->experts);
    if (!v->experts || phys < 1) return -1;
    for (int l = 0; l < n_virtual; l++)
        memcpy(v->experts + (size_t)(first + l) * E, ck->experts + (size_t)(first + l % phys) * E, sizeof *v->experts * E);
    return 0;
}

typedef struct {
    thread_pool *pool;
    float *x, *q, *q2, *kv, *kv2, *o, *act, *act2, *y;
} work;

/* The attention's projections: before the router, so before the layer's reads can start. */
static void run_attention(work *w, resident_matrix *r)
{
    matvec(w->pool, &r[RES_QA].m, w->x, 1, w->q);
    matvec(w->pool, &r[RES_QB].m, w->q, 1, w->q2);
    matvec(w->pool, &r[RES_KVA].m, w->x, 1, w->kv);
    matvec(w->pool, &r[RES_KVB].m, w->kv, 1, w->kv2);
    matvec(w->pool, &r[RES_O].m, w->kv2, 1, w->o);  /* o_proj's input width (heads x v) <= kv_b's rows */
}

/* The shared expert: after the routed ones, as core/model.c's moe() runs it. */
static void run_shared(work *w, resident_matrix *r)
{
    matvec(w->pool, &r[RES_SG].m, w->x, 1, w->act);
    matvec(w->pool, &r[RES_SU].m, w->x, 1, w->act2);
    matvec(w->pool, &r[RES_SD].m, w->act, 1, w->y);
}

static void run_expert(work *w, const expert_weights *e, int H, int I)
{
    matrix g = {DTYPE_F8_E4M3, I, H, e->gate, e->gate_scale}, u = {DTYPE_F8_E4M3, I, H, e->up, e->up_scale};
    matrix d = {DTYPE_F8_E4M3, H, I, e->down, e->down_scale};
    matvec(w->pool, &g, w->x, 1, w->act);
    matvec(w->pool, &u, w->x, 1, w->act2);
    for (int i = 0; i < I; i++) w->act[i] = w->act[i] / (1.0f + expf(-w->act[i])) * w->act2[i];
    matvec(w->pool, &d, w->act, 1, w->y);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static unsigned long long rng(unsigned long long *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

/* A lookahead guess of k experts for a layer whose real route is real[0..k). */
static void simulate_guess(const int *real, int k, int E, double recall, unsigned long long *seed, int *guess)
{
    for (int i = 0; i < k; i++) {
        if ((double)(rng(seed) % 1000000) < recall * 1e6) { guess[i] = real[i]; continue; }
        for (;;) {
            int e = (int)(rng(seed) % (unsigned long long)E), taken = 0;
            for (int j = 0; j < k; j++) taken |= real[j] == e;
            for (int j = 0; j < i; j++) taken |= guess[j] == e;
            if (!taken) { guess[i] = e; break; }
        }
    }
}

typedef struct {
    const cache_trace *t;
    const cache_guesses *g;     /* recorded guesses, or NULL: modelled */
    int first, k, phys;
    expert_cache *cache;
    resident_matrix (*res)[RES_N];
    work *w;
    const options *o;
    int H, I;
    unsigned long long seed;
    uint64_t resident_ns, expert_ns; /* compute time, to show how much of a run the reads hide */
    char err[512];
} replay;

/* The route of trace layer L of token tok: k expert ids. */
static const int *route(const replay *r, int tok, int L, int *buf)
{
    const int *keys = r->t->key + ((size_t)tok * (size_t)r->t->n_layers + (size_t)L) * (size_t)r->k;
    for (int i = 0; i < r->k; i++) buf[i] = keys[i] - L * r->t->n_experts;
    return buf;
}

/* The guesses trace layer L (-1: the dense layer before the first MoE layer) hands the cache for
 * L+1..L+depth, nearer layers first. */
static void lookahead(replay *r, int tok, int L)
{
    for (int d = 1; d <= r->o->depth && L + d < r->t->n_layers; d++) {
        int next[64], guess[64];
        if (!r->g) {
            if (L < 0) continue;
            simulate_guess(route(r, tok, L + d, next), r->k, r->t->n_experts, r->o->recall, &r->seed, guess);
            expert_cache_prefetch(r->cache, r->first + L + d, guess, r->k);
            continue;
        }
        const int *g = cache_guesses_at(r->g, d, tok, L + d);
        if (g) expert_cache_prefetch(r->cache, r->first + L + d, g, r->o->guesses[d - 1]);
    }
}

static int replay_layer(replay *r, int tok, int L)
{
    int real[64], vl = r->first + L, k = r->k;
    route(r, tok, L, real);
    if (L == 0) lookahead(r, tok, -1); /* while the dense layer in front computes */
    uint64_t t = now_ns();
    run_attention(r->w, r->res[L % r->phys]);
    r->resident_ns += now_ns() - t;
    expert_cache_want(r->cache, vl, real, k);
    lookahead(r, tok, L);
    for (int remaining = k; remaining > 0; remaining--) {
        int which;
        expert_weights ew;
        if (expert_cache_acquire_any(r->cache, vl, real, remaining, &which, &ew) < 0) {
            snprintf(r->err, sizeof r->err, "layer %d: %s", vl, expert_cache_error(r->cache));
            return -1;
        }
        int e = real[which];
        t = now_ns();
        run_expert(r->w, &ew, r->H, r->I);
        r->expert_ns += now_ns() - t;
        expert_cache_release(r->cache, vl, e);
        real[which] = real[remaining - 1];
        real[remaining - 1] = e;
    }
    t = now_ns();
    run_shared(r->w, r->res[L % r->phys]);
    r->resident_ns += now_ns() - t;
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.policy = "lfu", .tokens = 16, .slots = 66, .depth = 0, .threads = 2, .qd = 8, .recall = 0.84, .seed = 1,
                   .guesses = {8, 8}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) return 1;
        if (!v) { fprintf(stderr, "r1_replay: %s needs a value\n", a); return -1; }
        if (!strcmp(a, "--slice")) o->slice = v;
        else if (!strcmp(a, "--trace")) o->trace = v;
        else if (!strcmp(a, "--policy")) o->policy = v;
        else if (!strcmp(a, "--report")) o->report = v;
        else if (!strcmp(a, "--tokens")) o->tokens = atoi(v);
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(v);
        else if (!strcmp(a, "--slots")) o->slots = atoi(v);
        else if (!strcmp(a, "--prefetch-depth")) o->depth = atoi(v);
        else if (!strcmp(a, "--recall")) o->recall = atof(v);
        else if (!strcmp(a, "--threads")) o->threads = atoi(v);
        else if (!strcmp(a, "--qd")) o->qd = atoi(v);
        else if (!strcmp(a, "--lookahead")) o->lookahead = v;
        else if (!strcmp(a, "--write-iolog")) o->iolog = v;
        else if (!strcmp(a, "--guesses")) {
            int n = sscanf(v, "%d,%d", &o->guesses[0], &o->guesses[1]);
            if (n == 1) o->guesses[1] = o->guesses[0];
            if (n < 1 || o->guesses[0] < 1 || o->guesses[1] < 1) { fprintf(stderr, "r1_replay: --guesses: expected N or N,M >= 1\n"); return -1; }
        }
        else { fprintf(stderr, "r1_replay: unknown flag %s\n", a); return -1; }
        i++;
    }
    if (!o->slice || !o->trace || o->tokens < 1 || o->warmup < 0 || o->slots < 8 || o->depth < 0 || o->depth > 2 || o->threads < 1 ||
        o->qd < 1 || o->recall < 0 || o->recall > 1) {
        fprintf(stderr, "r1_replay: needs --slice DIR --trace FILE; --tokens >= 1, --warmup >= 0, --slots >= 8, --prefetch-depth 0..2, --recall 0..1\n");
        return -1;
    }
    return 0;
}

static const char USAGE[] =
    "usage: r1_replay --slice DIR --trace FILE [--policy lfu|lru|arc] [--slots N] [--tokens N] [--warmup N]\n"
    "                 [--prefetch-depth 0|1|2] [--lookahead FILE [--guesses N[,M]] | --recall R]\n"
    "                 [--threads N] [--qd N] [--write-iolog FILE] [--report FILE]\n"
    "Replays a routing trace's tokens over an R1 slice (build/bench/make_r1_slice) through the real\n"
    "reader, expert cache and FP8 GEMVs; prints one JSON line (tokens/s, GB read/token, hit rate,\n"
    "stall share, the cache's stats). --prefetch-depth d guesses layers L+1..L+d while layer L runs:\n"
    "--lookahead FILE replays the guesses recorded beside the trace (the first N at depth 1, M at depth\n"
    "2; default 8, the top-k), else each real expert is guessed with probability --recall (default 0.84).\n"
    "--write-iolog FILE: every read the reader issued, as a fio v2 iolog (fio --read_iolog).\n";

static void report(const replay *r, const expert_cache_stats *warm, double seconds, FILE *out, const char *path)
{
    expert_cache_stats st;
    if (expert_cache_stats_get(r->cache, &st) < 0) return;
    expert_cache_stats_since(&st, warm);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "policy", r->o->policy);
    cJSON_AddNumberToObject(o, "prefetch_depth", r->o->depth);
    if (r->g) {
        cJSON_AddStringToObject(o, "lookahead", r->o->lookahead);
        cJSON_AddNumberToObject(o, "guesses_depth1", r->o->guesses[0]);
        cJSON_AddNumberToObject(o, "guesses_depth2", r->o->guesses[1]);
    } else {
        cJSON_AddNumberToObject(o, "recall_simulated", r->o->recall);
    }
    cJSON_AddNumberToObject(o, "tokens", r->o->tokens);
    cJSON_AddNumberToObject(o, "warmup_tokens", r->o->warmup);
    cJSON_AddNumberToObject(o, "seconds", seconds);
    cJSON_AddNumberToObject(o, "tokens_per_s", r->o->tokens / seconds);
    cJSON_AddNumberToObject(o, "gb_read_per_token", st.bytes_read / 1e9 / r->o->tokens);
    cJSON_AddNumberToObject(o, "hit_rate", st.hits + st.misses ? (double)st.hits / (double)(st.hits + st.misses) : 0);
    cJSON_AddNumberToObject(o, "stall_share", st.stall_ns / 1e9 / seconds);
    cJSON_AddNumberToObject(o, "resident_compute_s", r->resident_ns / 1e9);
    cJSON_AddNumberToObject(o, "expert_compute_s", r->expert_ns / 1e9);
    cJSON_AddItemToObject(o, "cache", expert_cache_stats_json(&st));
    char *s = cJSON_PrintUnformatted(o);
    if (s) fprintf(out, "%s\n", s);
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f && s) { fprintf(f, "%s\n", s); fclose(f); }
    free(s);
    cJSON_Delete(o);
    expert_cache_stats_release(&st);
}

static work *work_create(const model_config *c, int threads)
{
    work *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    size_t big = (size_t)c->num_attention_heads * (c->qk_nope_head_dim + c->v_head_dim) + (size_t)c->hidden_size;
    w->pool = thread_pool_create(threads);
    float **bufs[] = {&w->x, &w->q, &w->q2, &w->kv, &w->kv2, &w->o, &w->act, &w->act2, &w->y};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        *bufs[i] = calloc(big, sizeof(float));
        if (!*bufs[i]) return w; /* work_free handles the partial state */
    }
    for (int h = 0; h < c->hidden_size; h++) w->x[h] = 0.01f * (float)((h * 37) % 101 - 50);
    return w;
}

static void work_free(work *w)
{
    if (!w) return;
    thread_pool_free(w->pool);
    free(w->x); free(w->q); free(w->q2); free(w->kv); free(w->kv2); free(w->o); free(w->act); free(w->act2); free(w->y);
    free(w);
}

static int run(const options *o, checkpoint *ck, const cache_trace *t, const cache_guesses *g, char *err, size_t errlen)
{
    cache_policy_kind kind;
    int first = ck->cfg.first_k_dense_replace, phys = ck->cfg.num_hidden_layers - first, k = ck->cfg.num_experts_per_tok;
    if (cache_policy_parse(o->policy, 0, &kind) < 0) { snprintf(err, errlen, "--policy: expected lfu, lru or arc"); return -1; }
    if (phys < 1 || t->n_experts > ck->cfg.n_routed_experts || t->n != (size_t)t->n_tokens * t->n_layers * k) {
        snprintf(err, errlen, "%s: needs %d experts per layer per token (the slice's top-k) over <= %d experts and a slice with MoE layers",
                 o->trace, k, ck->cfg.n_routed_experts);
        return -1;
    }
    checkpoint virt = {0};
    FILE *iolog = NULL;
    if (o->iolog && !(iolog = fopen(o->iolog, "w"))) { snprintf(err, errlen, "--write-iolog %s: cannot create", o->iolog); return -1; }
    resident_matrix (*res)[RES_N] = calloc((size_t)phys, sizeof *res);
    int rc = -1;
    expert_reader *reader = NULL;
    expert_cache *cache = NULL;
    work *w = NULL;
    expert_cache_stats warm = {0};
    if (!res || make_virtual(ck, t->n_layers, &virt) < 0) { snprintf(err, errlen, "out of memory"); goto done; }
    for (int p = 0; p < phys; p++)
        if (load_resident(ck, first + p, res[p], err, errlen) < 0) goto done;
    if (!(reader = expert_reader_create(&virt, IO_BACKEND_AUTO, o->qd, err, errlen))) goto done;
    if (iolog) expert_reader_log_reads(reader, iolog);
    if (!(cache = expert_cache_create(&virt, reader, o->slots, kind, err, errlen))) goto done;
    if (!(w = work_create(&ck->cfg, o->threads)) || !w->y) { snprintf(err, errlen, "out of memory"); goto done; }
    replay r = {.t = t, .g = g, .first = first, .k = k, .phys = phys, .cache = cache, .res = res, .w = w, .o = o,
                .H = ck->cfg.hidden_size, .I = ck->cfg.moe_intermediate_size, .seed = o->seed * 0x9E3779B97F4A7C15ull | 1};
    /* The warm-up tokens fill the cache and fault the slots' pages in (on this VM the first pass
     * over freshly mapped memory runs several times slower); the report covers the tokens after. */
    uint64_t t0 = 0;
    for (int tok = 0; tok < o->warmup + o->tokens; tok++) {
        if (tok == o->warmup) {
            expert_cache_stats_release(&warm);
            if (expert_cache_stats_get(cache, &warm) < 0) { snprintf(err, errlen, "out of memory"); goto done; }
            r.resident_ns = r.expert_ns = 0;
            t0 = now_ns();
        }
        for (int L = 0; L < t->n_layers; L++)
            if (replay_layer(&r, tok % t->n_tokens, L) < 0) { snprintf(err, errlen, "%s", r.err); goto done; }
    }
    report(&r, &warm, (now_ns() - t0) / 1e9, stdout, o->report);
    rc = 0;
done:
    if (iolog) {
        if (reader) expert_reader_log_reads(reader, NULL);
        if (fclose(iolog) != 0 && rc == 0) { snprintf(err, errlen, "%s: cannot write", o->iolog); rc = -1; }
    }
    expert_cache_stats_release(&warm);
    work_free(w);
    expert_cache_free(cache);
    expert_reader_free(reader);
    for (int p = 0; res && p < phys; p++)
        for (int i = 0; i < RES_N; i++) { free(res[p][i].data); free(res[p][i].scale); }
    free(res);
    free(virt.experts);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    int a = parse_args(argc, argv, &o);
    if (a > 0) { fputs(USAGE, stdout); return 0; }
    if (a < 0) return 2;
    kernels_init(CPU_PATH_AVX512);
    char err[512];
    checkpoint *ck = checkpoint_open(o.slice, err, sizeof err);
    if (!ck) { fprintf(stderr, "r1_replay: %s\n", err); return 1; }
    cache_trace *t = cache_trace_load(o.trace, -1, -1, err, sizeof err);
    if (!t) { fprintf(stderr, "r1_replay: %s\n", err); checkpoint_close(ck); return 1; }
    cache_guesses *g = o.lookahead ? cache_guesses_load(o.lookahead, t, err, sizeof err) : NULL;
    int rc = -1;
    if (o.lookahead && !g) { /* err says why */ }
    else if (g && (o.depth > g->depth || o.guesses[0] > g->ranks[0] || (o.depth > 1 && o.guesses[1] > g->ranks[1])))
        snprintf(err, sizeof err, "%s: holds depth %d with %d / %d guesses; asked depth %d with %d / %d", o.lookahead, g->depth,
                 g->ranks[0], g->depth > 1 ? g->ranks[1] : 0, o.depth, o.guesses[0], o.guesses[1]);
    else rc = run(&o, ck, t, g, err, sizeof err);
    if (rc < 0) fprintf(stderr, "r1_replay: %s\n", err);
    cache_guesses_free(g);
    cache_trace_free(t);
    checkpoint_close(ck);
    return rc < 0 ? 1 : 0;
}
