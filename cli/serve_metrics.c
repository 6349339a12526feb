/* /metrics in Prometheus' text exposition format (version 0.0.4): the server's request and token
 * counters, the decode worker's state, and the expert cache's own counters (per layer, bytes,
 * stall, the read-latency histogram) as of the worker's last refresh. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/serve.h"

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0) sbuf_append(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void family(sbuf *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void single(sbuf *b, const char *name, const char *type, const char *help, double v)
{
    family(b, name, type, help);
    put(b, "%s %.17g\n", name, v);
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void server_metrics(sbuf *b, const serve_stats *s)
{
    family(b, "dsspec_requests_total", "counter", "HTTP responses sent, by status code");
    for (int i = 0; i < s->n_codes; i++) put(b, "dsspec_requests_total{code=\"%d\"} %llu\n", s->codes[i], (unsigned long long)s->code_counts[i]);
    family(b, "dsspec_generations_total", "counter", "generations run, by outcome (cancelled: the client went away)");
    put(b, "dsspec_generations_total{outcome=\"finished\"} %llu\n", (unsigned long long)s->finished);
    put(b, "dsspec_generations_total{outcome=\"cancelled\"} %llu\n", (unsigned long long)s->cancelled);
    put(b, "dsspec_generations_total{outcome=\"failed\"} %llu\n", (unsigned long long)s->failed);
    single(b, "dsspec_prompt_tokens_total", "counter", "prompt tokens prefilled", (double)s->prompt_tokens);
    single(b, "dsspec_generated_tokens_total", "counter", "tokens generated", (double)s->generated_tokens);
    single(b, "dsspec_prefill_seconds_total", "counter", "seconds spent in prefill", s->prefill_seconds);
    single(b, "dsspec_decode_seconds_total", "counter", "seconds spent decoding", s->decode_seconds);
    single(b, "dsspec_decode_tokens_per_second", "gauge", "decode speed of the last finished generation", s->last_decode_tps);
    single(b, "dsspec_mtp_drafts_total", "counter", "MTP drafts verified", (double)s->drafts);
    single(b, "dsspec_mtp_accepted_total", "counter", "MTP drafts accepted", (double)s->accepted);
    single(b, "dsspec_queue_length", "gauge", "requests waiting for the decode worker", s->waiting);
    single(b, "dsspec_requests_running", "gauge", "requests being decoded (0 or 1)", s->running);
}

/* One per-layer family from the cache's "layers" array. */
static void per_layer(sbuf *b, const cJSON *layers, const char *name, const char *key, const char *help)
{
    family(b, name, "counter", help);
    for (const cJSON *l = layers ? layers->child : NULL; l; l = l->next)
        put(b, "%s{layer=\"%d\"} %.17g\n", name, (int)num(l, "layer"), num(l, key));
}

/* read_latency_log2_ns_hist[k] counts reads of [2^k, 2^(k+1)) ns: integer nanoseconds, so the
 * bucket's inclusive upper bound is 2^(k+1) - 1 ns. The cache keeps no latency sum, so the
 * histogram has no _sum series. */
static void latency_histogram(sbuf *b, const cJSON *hist)
{
    const char *name = "dsspec_expert_read_latency_seconds";
    family(b, name, "histogram", "expert read latency, submission to completion");
    double cum = 0;
    int k = 0;
    for (const cJSON *h = hist ? hist->child : NULL; h; h = h->next, k++) {
        cum += cJSON_IsNumber(h) ? h->valuedouble : 0;
        put(b, "%s_bucket{le=\"%.10g\"} %.17g\n", name, ((double)(1ull << (k + 1)) - 1) * 1e-9, cum);
    }
    put(b, "%s_bucket{le=\"+Inf\"} %.17g\n%s_count %.17g\n", name, cum, name, cum);
}

static void cache_metrics(sbuf *b, const cJSON *c)
{
    const cJSON *pf = cJSON_GetObjectItemCaseSensitive(c, "prefetch");
    single(b, "dsspec_expert_cache_slots", "gauge", "expert cache slots", num(c, "slots"));
    per_layer(b, cJSON_GetObjectItemCaseSensitive(c, "layers"), "dsspec_expert_cache_hits_total", "hits", "expert cache hits by MoE layer");
    per_layer(b, cJSON_GetObjectItemCaseSensitive(c, "layers"), "dsspec_expert_cache_misses_total", "misses", "expert cache misses by MoE layer");
    per_layer(b, cJSON_GetObjectItemCaseSensitive(c, "layers"), "dsspec_expert_read_bytes_by_layer_total", "bytes_read", "bytes read from the checkpoint by MoE layer");
    single(b, "dsspec_expert_read_bytes_total", "counter", "bytes read from the checkpoint for experts", num(c, "bytes_read"));
    single(b, "dsspec_expert_reads_total", "counter", "expert reads completed", num(c, "reads_completed"));
    single(b, "dsspec_expert_read_errors_total", "counter", "expert reads that failed", num(c, "read_errors"));
    single(b, "dsspec_expert_cache_evictions_total", "counter", "experts evicted", num(c, "evictions"));
    single(b, "dsspec_io_stall_seconds_total", "counter", "seconds compute waited for an expert read", num(c, "stall_ns") * 1e-9);
    single(b, "dsspec_expert_prefetch_issued_total", "counter", "router-lookahead prefetches issued", num(pf, "issued"));
    single(b, "dsspec_expert_prefetch_used_total", "counter", "prefetched experts used", num(pf, "used"));
    single(b, "dsspec_expert_prefetch_wasted_total", "counter", "prefetched experts evicted unused", num(pf, "wasted"));
    latency_histogram(b, cJSON_GetObjectItemCaseSensitive(c, "read_latency_log2_ns_hist"));
}

/* A label value with \\, " and newlines escaped, as the format requires. */
static void label_value(char *out, size_t len, const char *v)
{
    size_t o = 0;
    for (; *v && o + 3 < len; v++) {
        if (*v == '\\' || *v == '"') out[o++] = '\\';
        if (*v == '\n') { out[o++] = '\\'; out[o++] = 'n'; continue; }
        out[o++] = *v;
    }
    out[o] = 0;
}

char *serve_metrics_text(const serve_stats *s, const serve_config *cfg)
{
    sbuf b = {0};
    char model[256];
    label_value(model, sizeof model, cfg->model_name);
    family(&b, "dsspec_info", "gauge", "the server's build and model");
    put(&b, "dsspec_info{version=\"%s\",commit=\"%s\",model=\"%s\"} 1\n", dsspec_version(), dsspec_git_commit(), model);
    server_metrics(&b, s);
    if (s->cache) cache_metrics(&b, s->cache);
    return b.p;
}
