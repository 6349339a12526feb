/* Telemetry: counters bumped where events happen, snapshots, JSON and a short human summary. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>
#include "cache/cache_internal.h"

uint64_t cache_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cache_counters_init(cache_counters *s, int n_layers)
{
    memset(s, 0, sizeof *s);
    s->layer = calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof *s->layer);
    s->n_layers = n_layers;
    return s->layer ? 0 : -1;
}

void cache_counters_release(cache_counters *s)
{
    free(s->layer);
    memset(s, 0, sizeof *s);
}

void cache_counters_request(cache_counters *s, int layer, int hit)
{
    if (hit) { s->hits++; s->layer[layer].hits++; }
    else { s->misses++; s->layer[layer].misses++; }
}

void cache_counters_submitted(cache_counters *s, int inflight_now)
{
    if (inflight_now > s->max_inflight) s->max_inflight = inflight_now;
    s->inflight_sum += (uint64_t)inflight_now;
    s->inflight_samples++;
}

void cache_counters_prefetch_issued(cache_counters *s, int layer)
{
    s->prefetch_issued++;
    s->layer[layer].prefetch_issued++;
}

void cache_counters_prefetch_settled(cache_counters *s, int layer, int used, uint64_t ahead_ns)
{
    cache_layer_stats *l = &s->layer[layer];
    if (used) {
        s->prefetch_used++; l->prefetch_used++;
        s->prefetch_ahead_ns += ahead_ns; l->prefetch_ahead_ns += ahead_ns;
    } else {
        s->prefetch_wasted++; l->prefetch_wasted++;
    }
}

void cache_counters_guessed_missed(cache_counters *s, int layer)
{
    s->prefetch_guessed_missed++;
    s->layer[layer].prefetch_guessed_missed++;
}

static int log2_bucket(uint64_t ns)
{
    int b = 0;
    while (ns > 1 && b < CACHE_LATENCY_BUCKETS - 1) { ns >>= 1; b++; }
    return b;
}

void cache_counters_completed(cache_counters *s, int layer, uint64_t bytes, uint64_t latency_ns)
{
    s->reads_completed++;
    s->bytes_read += bytes;
    s->layer[layer].bytes_read += bytes;
    s->latency_hist[log2_bucket(latency_ns)]++;
}

uint64_t cache_latency_percentile(const uint64_t hist[CACHE_LATENCY_BUCKETS], double q)
{
    uint64_t total = 0, seen = 0;
    for (int b = 0; b < CACHE_LATENCY_BUCKETS; b++) total += hist[b];
    if (total == 0) return 0;
    /* the smallest bucket whose cumulative count reaches q of all reads */
    double want = q * (double)total;
    for (int b = 0; b < CACHE_LATENCY_BUCKETS; b++) {
        seen += hist[b];
        if ((double)seen >= want && seen > 0) return (uint64_t)1 << (b + 1);
    }
    return (uint64_t)1 << CACHE_LATENCY_BUCKETS;
}

int cache_counters_snapshot(const cache_counters *s, expert_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    out->layer = malloc(sizeof *out->layer * (size_t)(s->n_layers > 0 ? s->n_layers : 1));
    if (!out->layer) return -1;
    memcpy(out->layer, s->layer, sizeof *out->layer * (size_t)s->n_layers);
    out->n_layers = s->n_layers;
    out->hits = s->hits; out->misses = s->misses; out->bytes_read = s->bytes_read;
    out->reads_completed = s->reads_completed; out->read_errors = s->read_errors;
    out->evictions = s->evictions;
    out->prefetch_issued = s->prefetch_issued; out->prefetch_used = s->prefetch_used;
    out->prefetch_wasted = s->prefetch_wasted;
    out->prefetch_guessed_missed = s->prefetch_guessed_missed;
    out->prefetch_ahead_ns = s->prefetch_ahead_ns;
    out->stall_ns = s->stall_ns;
    out->max_inflight = s->max_inflight;
    out->mean_inflight = s->inflight_samples ? (double)s->inflight_sum / (double)s->inflight_samples : 0;
    memcpy(out->latency_hist, s->latency_hist, sizeof out->latency_hist);
    out->latency_p50_ns = cache_latency_percentile(s->latency_hist, 0.50);
    out->latency_p90_ns = cache_latency_percentile(s->latency_hist, 0.90);
    out->latency_p99_ns = cache_latency_percentile(s->latency_hist, 0.99);
    return 0;
}

void expert_cache_stats_since(expert_cache_stats *now, const expert_cache_stats *before)
{
#define SINCE(f) now->f -= before->f
    SINCE(hits); SINCE(misses); SINCE(bytes_read); SINCE(reads_completed); SINCE(read_errors); SINCE(evictions);
    SINCE(prefetch_issued); SINCE(prefetch_used); SINCE(prefetch_wasted); SINCE(prefetch_guessed_missed);
    SINCE(prefetch_ahead_ns); SINCE(stall_ns);
    for (int b = 0; b < CACHE_LATENCY_BUCKETS; b++) SINCE(latency_hist[b]);
    for (int l = 0; l < now->n_layers && l < before->n_layers; l++) {
        SINCE(layer[l].hits); SINCE(layer[l].misses); SINCE(layer[l].bytes_read);
        SINCE(layer[l].prefetch_issued); SINCE(layer[l].prefetch_used); SINCE(layer[l].prefetch_wasted);
        SINCE(layer[l].prefetch_ahead_ns); SINCE(layer[l].prefetch_guessed_missed);
    }
#undef SINCE
    now->latency_p50_ns = cache_latency_percentile(now->latency_hist, 0.50);
    now->latency_p90_ns = cache_latency_percentile(now->latency_hist, 0.90);
    now->latency_p99_ns = cache_latency_percentile(now->latency_hist, 0.99);
}

void expert_cache_stats_release(expert_cache_stats *s)
{
    if (!s) return;
    free(s->layer);
    s->layer = NULL;
}

static double ratio(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : 0.0; }

/* recall: share of would-be misses a guess caught; wasted per useful read; read time ahead; the
 * recall the guesses would have had with room to read every one of them. */
static void add_prefetch_quality(cJSON *o, uint64_t issued, uint64_t used, uint64_t wasted, uint64_t misses, uint64_t ahead_ns,
                                 uint64_t guessed_missed)
{
    cJSON_AddNumberToObject(o, "guessed_not_read", (double)guessed_missed);
    cJSON_AddNumberToObject(o, "guess_recall", ratio(used + guessed_missed, used + misses));
    cJSON_AddNumberToObject(o, "issued", (double)issued);
    cJSON_AddNumberToObject(o, "used", (double)used);
    cJSON_AddNumberToObject(o, "wasted", (double)wasted);
    cJSON_AddNumberToObject(o, "recall", ratio(used, used + misses));
    cJSON_AddNumberToObject(o, "wasted_per_useful", ratio(wasted, used));
    cJSON_AddNumberToObject(o, "read_ns_ahead_of_demand", (double)ahead_ns);
}

cJSON *expert_cache_stats_json(const expert_cache_stats *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "policy", cache_policy_name(s->policy));
    cJSON_AddNumberToObject(o, "slots", s->n_slots);
    cJSON_AddNumberToObject(o, "slot_bytes", (double)s->slot_bytes);
    cJSON_AddNumberToObject(o, "hits", (double)s->hits);
    cJSON_AddNumberToObject(o, "misses", (double)s->misses);
    cJSON_AddNumberToObject(o, "hit_rate", ratio(s->hits, s->hits + s->misses));
    cJSON_AddNumberToObject(o, "bytes_read", (double)s->bytes_read);
    cJSON_AddNumberToObject(o, "reads_completed", (double)s->reads_completed);
    cJSON_AddNumberToObject(o, "read_errors", (double)s->read_errors);
    cJSON_AddNumberToObject(o, "evictions", (double)s->evictions);
    cJSON_AddNumberToObject(o, "stall_ns", (double)s->stall_ns);
    cJSON_AddNumberToObject(o, "max_inflight", s->max_inflight);
    cJSON_AddNumberToObject(o, "mean_inflight", s->mean_inflight);
    cJSON_AddNumberToObject(o, "read_latency_p50_ns", (double)s->latency_p50_ns);
    cJSON_AddNumberToObject(o, "read_latency_p90_ns", (double)s->latency_p90_ns);
    cJSON_AddNumberToObject(o, "read_latency_p99_ns", (double)s->latency_p99_ns);
    cJSON *pf = cJSON_AddObjectToObject(o, "prefetch");
    if (pf) {
        add_prefetch_quality(pf, s->prefetch_issued, s->prefetch_used, s->prefetch_wasted, s->misses, s->prefetch_ahead_ns,
                             s->prefetch_guessed_missed);
    }
    /* log2 buckets: hist[b] counts reads of [2^b, 2^(b+1)) ns; trailing zeros trimmed */
    int last = CACHE_LATENCY_BUCKETS - 1;
    while (last >= 0 && s->latency_hist[last] == 0) last--;
    cJSON *h = cJSON_AddArrayToObject(o, "read_latency_log2_ns_hist");
    for (int b = 0; h && b <= last; b++) cJSON_AddItemToArray(h, cJSON_CreateNumber((double)s->latency_hist[b]));
    cJSON *layers = cJSON_AddArrayToObject(o, "layers");
    for (int l = 0; layers && l < s->n_layers; l++) {
        const cache_layer_stats *ls = &s->layer[l];
        if (!ls->hits && !ls->misses && !ls->bytes_read) continue;
        cJSON *lo = cJSON_CreateObject();
        if (!lo) break;
        cJSON_AddNumberToObject(lo, "layer", l);
        cJSON_AddNumberToObject(lo, "hits", (double)ls->hits);
        cJSON_AddNumberToObject(lo, "misses", (double)ls->misses);
        cJSON_AddNumberToObject(lo, "bytes_read", (double)ls->bytes_read);
        cJSON *lp = cJSON_AddObjectToObject(lo, "prefetch");
        if (lp) add_prefetch_quality(lp, ls->prefetch_issued, ls->prefetch_used, ls->prefetch_wasted, ls->misses, ls->prefetch_ahead_ns,
                                     ls->prefetch_guessed_missed);
        cJSON_AddItemToArray(layers, lo);
    }
    return o;
}

void expert_cache_stats_print(const expert_cache_stats *s, FILE *out)
{
    uint64_t req = s->hits + s->misses;
    fprintf(out, "expert cache: %s, %d slots x %.1f MiB = %.2f GiB\n", cache_policy_name(s->policy),
            s->n_slots, (double)s->slot_bytes / (1 << 20), (double)s->slot_bytes * s->n_slots / (1u << 30));
    fprintf(out, "  requests %llu: hits %llu (%.1f%%), misses %llu; evictions %llu\n",
            (unsigned long long)req, (unsigned long long)s->hits, 100 * ratio(s->hits, req),
            (unsigned long long)s->misses, (unsigned long long)s->evictions);
    fprintf(out, "  read %.2f GiB in %llu reads (%llu errors); latency p50/p90/p99 <= %.2f/%.2f/%.2f ms\n",
            (double)s->bytes_read / (1u << 30), (unsigned long long)s->reads_completed,
            (unsigned long long)s->read_errors, s->latency_p50_ns / 1e6, s->latency_p90_ns / 1e6,
            s->latency_p99_ns / 1e6);
    fprintf(out, "  in flight max %d mean %.1f; compute stalled on I/O %.3f s\n", s->max_inflight,
            s->mean_inflight, s->stall_ns / 1e9);
    fprintf(out, "  prefetch issued %llu, used %llu, wasted %llu: recall %.1f%% of would-be misses, %.2f wasted per useful, "
            "%.3f s of reads ahead of demand\n", (unsigned long long)s->prefetch_issued,
            (unsigned long long)s->prefetch_used, (unsigned long long)s->prefetch_wasted,
            100 * ratio(s->prefetch_used, s->prefetch_used + s->misses), ratio(s->prefetch_wasted, s->prefetch_used),
            s->prefetch_ahead_ns / 1e9);
}
