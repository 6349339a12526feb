/* The embedded model against what transformers measured on it (tools/embedded/report.json, float64,
 * DeepseekV3ForCausalLM on the exported FP8 checkpoint): held-out perplexity under the recorded
 * convention, and the routing of every held-out token against the committed trace. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/expert_direct.h"
#include "core/kernels.h"
#include "core/model.h"
#include "tests/engine/engine_test.h"

typedef struct { int base, k, T, *routes; int n_layers; } route_sink;

static void record(void *ctx, int layer, int row, const int *experts, int k)
{
    route_sink *s = ctx;
    memcpy(s->routes + ((size_t)(s->base + row) * s->n_layers + layer) * s->k, experts, k * sizeof(int));
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Sum of -log p(ids[t+1] | ..) over the segment. */
static double segment_nll(const float *logits, const int *ids, int T, int V)
{
    double nll = 0;
    for (int t = 0; t + 1 < T; t++) {
        const float *l = logits + (size_t)t * V;
        double mx = l[0], sum = 0;
        for (int v = 1; v < V; v++) if (l[v] > mx) mx = l[v];
        for (int v = 0; v < V; v++) sum += exp(l[v] - mx);
        nll += mx + log(sum) - l[ids[t + 1]];
    }
    return nll;
}

/* logits [T][V] of one segment in passes of CHUNK rows over a fresh KV cache of dtype kvt; routes
 * recorded into sink (when not NULL) from its base token on. */
enum { CHUNK = 128 };
static void segment_logits(model *m, expert_provider *ep, dtype_t kvt, const int *ids, const int *pos, int T, float *logits,
                           route_sink *sink)
{
    const model_config *c = model_get_config(m);
    char err[512];
    kv_cache *kv = kv_cache_create(c, 0, c->num_hidden_layers, T, kvt);
    int base = sink ? sink->base : 0;
    for (int s = 0; s < T; s += CHUNK) {
        if (sink) sink->base = base + s;
        forward_request req = {.logits = logits + (size_t)s * c->vocab_size, .on_route = sink ? record : NULL, .route_ctx = sink};
        CHECK(model_forward(m, kv, ep, ids + s, pos + s, CHUNK < T - s ? CHUNK : T - s, &req, err, sizeof err) == 0, "%s", err);
    }
    kv_cache_free(kv);
}

/* (token, layer) pairs whose recorded experts differ from the trace's, over its first `tokens` lines
 * (*seen gets how many it had). The trace lists each token's experts in choice order; the engine
 * reports them sorted. */
static long route_mismatches(char *trace_text, const route_sink *sink, long tokens, long *seen)
{
    char *line = trace_text, *next;
    long tok = 0, mismatches = 0;
    for (; line && *line && tok < tokens; line = next, tok++) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        cJSON *obj = cJSON_Parse(line), *layer;
        cJSON_ArrayForEach(layer, obj) {
            int l = atoi(layer->string), want[MODEL_MAX_EXPERTS_PER_TOK], n = cJSON_GetArraySize(layer);
            if (n != sink->k) { mismatches++; continue; }
            for (int i = 0; i < n; i++) want[i] = cJSON_GetArrayItem(layer, i)->valueint;
            qsort(want, n, sizeof(int), cmp_int);
            if (memcmp(want, sink->routes + ((size_t)tok * sink->n_layers + l) * n, n * sizeof(int))) mismatches++;
        }
        cJSON_Delete(obj);
    }
    *seen = tok;
    return mismatches;
}

int main(int argc, char **argv)
{
    if (argc != 4) { fprintf(stderr, "usage: test_embedded MODEL_DIR HELDOUT_IDS.json EMBEDDED_TOOLS_DIR\n"); return 2; }
    const char *dir = argv[1];
    char err[512], tpath[2048];
    snprintf(tpath, sizeof tpath, "%s/trace_heldout.jsonl", argv[3]);
    char rpath[2048];
    snprintf(rpath, sizeof rpath, "%s/report.json", argv[3]);
    char *ids_text = test_read_file(argv[2], NULL), *report_text = test_read_file(rpath, NULL), *trace_text = test_read_file(tpath, NULL);
    cJSON *ids_json = ids_text ? cJSON_Parse(ids_text) : NULL, *report = report_text ? cJSON_Parse(report_text) : NULL;
    CHECK(ids_json && report && trace_text, "cannot read %s / %s / %s", argv[2], rpath, tpath);
    if (test_failures) return 1;
    double want_ppl = cJSON_GetObjectItem(cJSON_GetObjectItem(report, "ppl_fp8_export_transformers_float64"), "ppl")->valuedouble;

    kernels_init(CPU_PATH_AVX512);
    checkpoint *ck = checkpoint_open(dir, err, sizeof err);
    CHECK(ck, "%s", err);
    if (!ck) return 1;
    thread_pool *pool = thread_pool_create(2);
    model *m = model_load(ck, pool, err, sizeof err);
    CHECK(m, "%s", err);
    if (!m) return 1;
    const model_config *c = model_get_config(m);
    int V = c->vocab_size, k = c->num_experts_per_tok, L = c->num_hidden_layers;
    expert_direct *d = expert_direct_create(ck);
    expert_provider ep = expert_direct_provider(d);

    const cJSON *segs = cJSON_GetObjectItem(ids_json, "segments"), *seg;
    int n_seg = cJSON_GetArraySize(segs), T = cJSON_GetArraySize(cJSON_GetArrayItem(segs, 0));
    CHECK(model_reserve_scratch(m, CHUNK, T, err, sizeof err) == 0, "%s", err);
    route_sink sink = {0, k, T, malloc((size_t)n_seg * T * L * k * sizeof(int)), L};
    float *logits = malloc((size_t)T * V * sizeof(float));
    int *ids = malloc(T * sizeof(int)), *pos = malloc(T * sizeof(int)), si = 0;
    double nll = 0, nll_bf16 = 0;
    long scored = 0;
    cJSON_ArrayForEach(seg, segs) {
        CHECK(cJSON_GetArraySize(seg) == T, "segments of unequal length");
        for (int t = 0; t < T; t++) { ids[t] = cJSON_GetArrayItem(seg, t)->valueint; pos[t] = t; }
        /* --kv-dtype bf16 is lossy by design: its perplexity is held to 0.5% of the reference. */
        segment_logits(m, &ep, DTYPE_BF16, ids, pos, T, logits, NULL);
        nll_bf16 += segment_nll(logits, ids, T, V);
        sink.base = si * T;
        segment_logits(m, &ep, DTYPE_F32, ids, pos, T, logits, &sink);
        nll += segment_nll(logits, ids, T, V);
        scored += T - 1;
        si++;
    }
    double ppl = exp(nll / scored);
    CHECK(fabs(ppl - want_ppl) <= 1e-4 * want_ppl, "held-out perplexity %.6f, transformers %.6f", ppl, want_ppl);
    printf("embedded model: held-out perplexity %.5f over %ld positions (transformers float64: %.5f)\n", ppl, scored, want_ppl);
    double ppl_bf16 = exp(nll_bf16 / scored);
    CHECK(fabs(ppl_bf16 - want_ppl) <= 5e-3 * want_ppl, "held-out perplexity with BF16 KV %.6f, reference %.6f", ppl_bf16, want_ppl);
    printf("embedded model: held-out perplexity with --kv-dtype bf16 %.5f (%+.3f%%)\n", ppl_bf16, 100 * (ppl_bf16 / want_ppl - 1));

    long tok, mismatches = route_mismatches(trace_text, &sink, (long)n_seg * T, &tok);
    CHECK(tok == (long)n_seg * T, "trace has %ld tokens, expected %d", tok, n_seg * T);
    CHECK(mismatches == 0, "%ld (token, layer) routing decisions differ from the trace", mismatches);
    printf("embedded model: routing of %ld held-out tokens identical to the training-side trace\n", tok);

    free(logits); free(ids); free(pos); free(sink.routes);
    expert_direct_free(d);
    model_free(m);
    thread_pool_free(pool);
    checkpoint_close(ck);
    cJSON_Delete(ids_json); cJSON_Delete(report);
    free(ids_text); free(report_text); free(trace_text);
    return test_failures ? 1 : 0;
}
