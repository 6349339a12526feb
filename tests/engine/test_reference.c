/* The engine, through its public API, against transformers (float64, exactly the on-disk FP8
 * values): for every fixture, prompt and kernel path — logits of every position within
 * 1e-3 x max|logit|, identical routing, MTP logits likewise, and the greedy continuation token for
 * token, MTP off and on. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine/dsspec.h"
#include "tests/engine/engine_test.h"

static const char *paths[] = {"scalar", "avx2", "avx512"};

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

/* Routing decisions (token, MoE layer) that differ from the reference; dense layers must be
 * untouched (-1) in what dsspec_eval wrote. */
static int route_mismatches(const int *routes, const ref_prompt *p, int n_layers, int k)
{
    int bad = 0, T = p->n_ids;
    for (int l = 0; l < n_layers; l++) {
        int li = -1;
        for (int j = 0; j < p->n_moe; j++) if (p->moe_layer[j] == l) li = j;
        for (int t = 0; t < T; t++) {
            const int *got = routes + ((size_t)l * T + t) * k;
            if (li < 0) bad += got[0] != -1;
            else bad += memcmp(got, p->routes + ((size_t)li * T + t) * k, k * sizeof(int)) != 0;
        }
    }
    return bad;
}

static dsspec *open_engine(const char *dir, const char *path, int threads, int mtp, int ctx)
{
    dsspec_options o;
    dsspec_options_default(&o);
    o.model_dir = dir;
    o.cpu_features = path;
    o.threads = threads;
    o.mtp = mtp;
    o.ctx = ctx;
    o.prefill_chunk = 7; /* results must not depend on how the prompt is cut */
    o.load_tokenizer = 0;
    o.experts = DSSPEC_EXPERTS_DIRECT;
    char err[512];
    dsspec *e = dsspec_open(&o, NULL, err, sizeof err);
    CHECK(e != NULL, "%s [%s]: %s", dir, path, err);
    if (e) CHECK(!strcmp(dsspec_get_model_info(e)->kernel_path, path), "asked for the %s path, got %s", path,
                 dsspec_get_model_info(e)->kernel_path);
    return e;
}

typedef struct { int *tok; int n; } token_list;
static void collect(void *ctx, int token) { token_list *l = ctx; l->tok[l->n++] = token; }

/* Logits, routes and MTP logits of the whole prompt in one teacher-forced pass (rows of 5). */
static void check_logits(dsspec *e, const ref_prompt *p, const char *what)
{
    const dsspec_model_info *mi = dsspec_get_model_info(e);
    int T = p->n_ids, V = mi->vocab_size, k = mi->experts_per_token;
    float *logits = malloc((size_t)T * V * sizeof(float)), *mtp = malloc((size_t)T * V * sizeof(float));
    int *routes = malloc((size_t)mi->n_layers * T * k * sizeof(int));
    for (size_t i = 0; i < (size_t)mi->n_layers * T * k; i++) routes[i] = -1;
    char err[512];
    CHECK(dsspec_eval(e, p->ids, T, 5, logits, routes, mtp, err, sizeof err) == 0, "%s: eval: %s", what, err);
    double el = worst_row_error(logits, p->logits, T, V), em = worst_row_error(mtp, p->mtp_logits, T, V);
    int bad = route_mismatches(routes, p, mi->n_layers, k);
    CHECK(el <= 1e-3, "%s: logits differ from transformers by %.3g of max|logit|", what, el);
    CHECK(em <= 1e-3, "%s: MTP logits differ from the reference by %.3g of max|logit|", what, em);
    CHECK(bad == 0, "%s: %d routing decisions differ from transformers", what, bad);
    printf("%s: %d positions, logits error %.2e, MTP logits error %.2e of max|logit|\n", what, T, el, em);
    free(logits); free(mtp); free(routes);
}

static void check_greedy(dsspec *e, const ref_prompt *p, int mtp, const char *what)
{
    int out[64];
    token_list got = {out, 0};
    dsspec_generate_params g;
    dsspec_generate_params_default(&g);
    g.max_new = p->n_greedy;
    g.temperature = 0;
    g.ignore_eos = 1;
    g.on_token = collect;
    g.ctx = &got;
    dsspec_gen_stats st;
    char err[512];
    CHECK(p->n_greedy <= 64 && dsspec_generate(e, p->ids, p->n_ids, &g, &st, err, sizeof err) == 0, "%s: generate: %s", what, err);
    CHECK(got.n == p->n_greedy && !memcmp(got.tok, p->greedy, got.n * sizeof(int)),
          "%s: greedy continuation with MTP %s differs from transformers", what, mtp ? "on" : "off");
}

static void check_fixture(const char *dir, const char *path, int threads)
{
    char what[1200];
    dsspec *probe = open_engine(dir, path, threads, 0, 0);
    if (!probe) return;
    const dsspec_model_info *mi = dsspec_get_model_info(probe);
    ref_fixture f;
    if (ref_fixture_load(dir, mi->vocab_size, mi->experts_per_token, &f)) {
        CHECK(0, "%s: reference outputs missing", dir);
        dsspec_close(probe);
        return;
    }
    dsspec_close(probe);
    for (int i = 0; i < f.n_prompts; i++) {
        const ref_prompt *p = &f.prompts[i];
        snprintf(what, sizeof what, "%s prompt %d [%s, %d threads]", dir, i, path, threads);
        for (int mtp = 0; mtp <= 1; mtp++) {
            dsspec *e = open_engine(dir, path, threads, mtp, p->n_ids + p->n_greedy + 2);
            if (!e) continue;
            if (mtp) check_logits(e, p, what);
            check_greedy(e, p, mtp, what);
            dsspec_close(e);
        }
    }
    ref_fixture_free(&f);
}

int main(int argc, char **argv)
{
    int checked = 0;
    for (int i = 0; i < 3; i++) {
        char err[256];
        if (dsspec_check_cpu_features(paths[i], err, sizeof err)) { printf("kernel path %s: %s\n", paths[i], err); continue; }
        for (int a = 1; a < argc; a++) check_fixture(argv[a], paths[i], i == 0 ? 1 : 2);
        checked++;
    }
    CHECK(checked >= 1 && argc > 1, "nothing was checked");
    printf("%s\n", test_failures ? "FAILED" : "all reference checks passed");
    return test_failures ? 1 : 0;
}
