/* The engine against transformers (float64, exactly the on-disk FP8 values): for every fixture,
 * prompt and kernel path — logits of every position within 1e-3 x max|logit|, identical routing,
 * MTP logits likewise, and the 16-token greedy continuation token for token, MTP off and on. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/expert_direct.h"
#include "core/kernels.h"
#include "core/model.h"
#include "speculate/speculate.h"
#include "tests/engine/engine_test.h"

typedef struct { const ref_prompt *p; int top_k, base, mismatches; } route_check;

static void check_route(void *ctx, int layer, int row, const int *experts, int k)
{
    route_check *rc = ctx;
    for (int li = 0; li < rc->p->n_moe; li++) {
        if (rc->p->moe_layer[li] != layer) continue;
        const int *want = rc->p->routes + ((size_t)li * rc->p->n_ids + rc->base + row) * rc->top_k;
        if (memcmp(want, experts, k * sizeof(int))) rc->mismatches++;
        return;
    }
    rc->mismatches++; /* a MoE layer the reference does not have */
}

static double max_abs(const float *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) if (fabs(v[i]) > m) m = fabs(v[i]);
    return m;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) if (fabs((double)a[i] - b[i]) > m) m = fabs((double)a[i] - b[i]);
    return m;
}

/* Worst per-row ratio max|diff| / max|ref| over rows. */
static double worst_row_error(const float *got, const float *ref, int rows, int V)
{
    double worst = 0;
    for (int t = 0; t < rows; t++) {
        double r = max_diff(got + (size_t)t * V, ref + (size_t)t * V, V) / max_abs(ref + (size_t)t * V, V);
        if (r > worst) worst = r;
    }
    return worst;
}

typedef struct { int *tok; int n; } token_list;
static void collect(void *ctx, int token) { token_list *l = ctx; l->tok[l->n++] = token; }

static void check_prompt(model *m, expert_provider *ep, const ref_prompt *p, const char *what)
{
    const model_config *c = model_get_config(m);
    int T = p->n_ids, V = c->vocab_size, H = c->hidden_size;
    float *logits = malloc((size_t)T * V * sizeof(float)), *hidden = malloc((size_t)T * H * sizeof(float));
    int *pos = malloc(T * sizeof(int)), *next = malloc(T * sizeof(int));
    kv_cache *kv = kv_cache_create(c, 0, c->num_hidden_layers, T + 1, DTYPE_F32);
    kv_cache *mkv = kv_cache_create(c, c->num_hidden_layers, 1, T + 1, DTYPE_F32);
    char err[512];
    route_check rc = {p, c->num_experts_per_tok, 0, 0};
    for (int t = 0; t < T; t++) pos[t] = t;
    /* T rows for the MTP pass below over the whole prompt, 7 for generate's prefill chunks. */
    CHECK(model_reserve_scratch(m, T > 7 ? T : 7, T + p->n_greedy + 2, err, sizeof err) == 0, "%s: %s", what, err);
    for (int s = 0; s < T; s += 5) { /* chunks of 5 rows: results must not depend on batching */
        int nb = T - s < 5 ? T - s : 5;
        rc.base = s;
        forward_request req = {.hidden = hidden + (size_t)s * H, .logits = logits + (size_t)s * V, .on_route = check_route, .route_ctx = &rc};
        CHECK(model_forward(m, kv, ep, p->ids + s, pos + s, nb, &req, err, sizeof err) == 0, "%s: forward: %s", what, err);
    }
    double e = worst_row_error(logits, p->logits, T, V);
    CHECK(e <= 1e-3, "%s: logits differ from transformers by %.3g of max|logit|", what, e);
    CHECK(rc.mismatches == 0, "%s: %d routing decisions differ from transformers", what, rc.mismatches);

    for (int t = 0; t + 1 < T; t++) next[t] = p->ids[t + 1];
    next[T - 1] = p->greedy[0];
    CHECK(mtp_forward(m, mkv, ep, hidden, next, pos, T, logits, 0, err, sizeof err) == 0, "%s: mtp: %s", what, err);
    double em = worst_row_error(logits, p->mtp_logits, T, V);
    CHECK(em <= 1e-3, "%s: MTP logits differ from the reference by %.3g of max|logit|", what, em);
    printf("%s: %d positions, logits error %.2e, MTP logits error %.2e of max|logit|\n", what, T, e, em);

    for (int mtp = 0; mtp <= 1; mtp++) {
        sampler *s = sampler_create(V, 0, 1, 1);
        int out[64];
        token_list got = {out, 0};
        gen_options o = {.mtp = mtp, .max_new = p->n_greedy, .eos_id = -1, .ctx = T + p->n_greedy + 2, .prefill_chunk = 7,
                         .sampler = s, .on_token = collect, .token_ctx = &got};
        gen_stats st;
        CHECK(generate(m, ep, p->ids, T, &o, &st, err, sizeof err) == 0, "%s: generate: %s", what, err);
        CHECK(got.n == p->n_greedy && !memcmp(got.tok, p->greedy, got.n * sizeof(int)),
              "%s: greedy continuation with MTP %s differs from transformers", what, mtp ? "on" : "off");
        sampler_free(s);
    }
    free(logits); free(hidden); free(pos); free(next);
    kv_cache_free(kv);
    kv_cache_free(mkv);
}

static void check_fixture(const char *dir, cpu_path path, int threads)
{
    char err[512], what[1200];
    checkpoint *ck = checkpoint_open(dir, err, sizeof err);
    CHECK(ck != NULL, "%s", err);
    if (!ck) return;
    thread_pool *pool = thread_pool_create(threads);
    model *m = model_load(ck, pool, err, sizeof err);
    CHECK(m != NULL, "%s", err);
    ref_fixture f;
    if (m && ref_fixture_load(dir, ck->cfg.vocab_size, ck->cfg.num_experts_per_tok, &f) == 0) {
        expert_direct *d = expert_direct_create(ck);
        expert_provider ep = expert_direct_provider(d);
        for (int i = 0; i < f.n_prompts; i++) {
            snprintf(what, sizeof what, "%s prompt %d [%s, %d threads]", dir, i, cpu_path_name(path), threads);
            check_prompt(m, &ep, &f.prompts[i], what);
        }
        expert_direct_free(d);
        ref_fixture_free(&f);
    } else {
        CHECK(0, "%s: reference outputs missing", dir);
    }
    model_free(m);
    thread_pool_free(pool);
    checkpoint_close(ck);
}

int main(int argc, char **argv)
{
    int paths = 0;
    for (int p = CPU_PATH_SCALAR; p <= CPU_PATH_AVX512; p++) {
        if (!cpu_path_available((cpu_path)p)) { printf("kernel path %s: not on this CPU\n", cpu_path_name((cpu_path)p)); continue; }
        kernels_init((cpu_path)p);
        CHECK(kernels_path() == (cpu_path)p, "kernels_init(%s) chose %s", cpu_path_name((cpu_path)p), cpu_path_name(kernels_path()));
        for (int i = 1; i < argc; i++) check_fixture(argv[i], (cpu_path)p, p == CPU_PATH_SCALAR ? 1 : 2);
        paths++;
    }
    CHECK(paths >= 1 && argc > 1, "nothing was checked");
    printf("%s\n", test_failures ? "FAILED" : "all reference checks passed");
    return test_failures ? 1 : 0;
}
