/* The embedded model against what transformers measured on it (tools/embedded/report.json, float64,
 * DeepseekV3ForCausalLM on the exported FP8 checkpoint): held-out perplexity under the recorded
 * convention, and the routing of every held-out token against the committed trace. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine/dsspec.h"
#include "tests/engine/engine_test.h"

/* Routes of every held-out segment as dsspec_eval writes them: [segment][layer][T][k]. */
typedef struct { int k, T, n_layers; int *routes; } route_sink;

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

enum { CHUNK = 128 };

static dsspec *open_engine(const char *dir, int kv_bf16)
{
    dsspec_options o;
    dsspec_options_default(&o);
    o.model_dir = dir;
    o.threads = 2;
    o.kv_bf16 = kv_bf16;
    o.load_tokenizer = 0;
    o.experts = DSSPEC_EXPERTS_DIRECT;
    char err[512];
    dsspec *e = dsspec_open(&o, NULL, err, sizeof err);
    CHECK(e, "%s: %s", dir, err);
    return e;
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
            int l = atoi(layer->string), want[64], n = cJSON_GetArraySize(layer);
            if (n != sink->k || l < 0 || l >= sink->n_layers) { mismatches++; continue; }
            for (int i = 0; i < n; i++) want[i] = cJSON_GetArrayItem(layer, i)->valueint;
            qsort(want, n, sizeof(int), cmp_int);
            long seg = tok / sink->T, t = tok % sink->T;
            const int *got = sink->routes + (((size_t)seg * sink->n_layers + l) * sink->T + t) * n;
            if (memcmp(want, got, n * sizeof(int))) mismatches++;
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

    dsspec *e = open_engine(dir, 0), *e_bf16 = open_engine(dir, 1);
    if (!e || !e_bf16) return 1;
    const dsspec_model_info *mi = dsspec_get_model_info(e);
    int V = mi->vocab_size, k = mi->experts_per_token, L = mi->n_layers;

    const cJSON *segs = cJSON_GetObjectItem(ids_json, "segments"), *seg;
    int n_seg = cJSON_GetArraySize(segs), T = cJSON_GetArraySize(cJSON_GetArrayItem(segs, 0));
    route_sink sink = {k, T, L, malloc((size_t)n_seg * T * L * k * sizeof(int))};
    float *logits = malloc((size_t)T * V * sizeof(float));
    int *ids = malloc(T * sizeof(int)), si = 0;
    double nll = 0, nll_bf16 = 0;
    long scored = 0;
    cJSON_ArrayForEach(seg, segs) {
        CHECK(cJSON_GetArraySize(seg) == T, "segments of unequal length");
        for (int t = 0; t < T; t++) ids[t] = cJSON_GetArrayItem(seg, t)->valueint;
        /* --kv-dtype bf16 is lossy by design: its perplexity is held to 0.5% of the reference. */
        CHECK(dsspec_eval(e_bf16, ids, T, CHUNK, logits, NULL, NULL, err, sizeof err) == 0, "%s", err);
        nll_bf16 += segment_nll(logits, ids, T, V);
        int *routes = sink.routes + (size_t)si * L * T * k;
        CHECK(dsspec_eval(e, ids, T, CHUNK, logits, routes, NULL, err, sizeof err) == 0, "%s", err);
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

    free(logits); free(ids); free(sink.routes);
    dsspec_close(e);
    dsspec_close(e_bf16);
    cJSON_Delete(ids_json); cJSON_Delete(report);
    free(ids_text); free(report_text); free(trace_text);
    return test_failures ? 1 : 0;
}
