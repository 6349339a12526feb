/* bench_cache_curve: hit rate vs cache size (1%-25% of the keys) for LRU, LFU, ARC next to Belady's
 * OPT (the peer every policy is measured against, computed in the same run), on routing traces
 * (plain or .gz): the embedded model's held-out trace when it exists, any trace files given, and
 * (unless --no-synthetic) a synthetic R1-scale trace. Beside them, what bounds any online policy:
 * OPT on the token-shuffled trace (shufO) and the static top-S keys (top-S, top/O).
 * Also what a miss rate means at R1 scale: expert bytes read per token. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cache/expert_cache.h"
#include "bench/cache/synth_trace.h"

#ifndef DSSPEC_SOURCE_DIR
#define DSSPEC_SOURCE_DIR "."
#endif

/* One routed expert of R1: three 2048x7168 FP8 matrices (44,040,192 bytes) and their F32 scale
 * grids (3 x 16 x 56 x 4 = 10,752 bytes). */
static const double R1_EXPERT_BYTES = 44050944.0;

/* The same tokens in a random order (each token's requests kept together): no temporal structure
 * is left, so no online policy can beat keeping the S most frequent keys, while OPT still reads
 * the future. Its hit rate there is the part of OPT that is clairvoyance, not locality. NULL when
 * tokens do not all have the same number of requests. */
static int *shuffled_tokens(const cache_trace *t)
{
    if (t->n_tokens < 2 || t->n % (size_t)t->n_tokens) return NULL;
    size_t per = t->n / (size_t)t->n_tokens;
    int *order = malloc(sizeof(int) * (size_t)t->n_tokens), *keys = malloc(sizeof(int) * t->n);
    if (!order || !keys) { free(order); free(keys); return NULL; }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < t->n_tokens; i++) order[i] = i;
    for (int i = t->n_tokens - 1; i > 0; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        int j = (int)(x % (uint64_t)(i + 1)), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    for (int i = 0; i < t->n_tokens; i++) memcpy(keys + (size_t)i * per, t->key + (size_t)order[i] * per, per * sizeof(int));
    free(order);
    return keys;
}

static int by_count_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Hits of the S keys most requested over the whole trace, held all along: an upper bound for any
 * policy that ranks by frequency alone (and the best online policy on the shuffled trace). */
static double static_top_rate(const cache_trace *t, int keys, int slots)
{
    uint64_t *count = calloc((size_t)keys, sizeof *count), hits = 0;
    if (!count) return 0;
    for (size_t i = 0; i < t->n; i++) count[t->key[i]]++;
    qsort(count, (size_t)keys, sizeof *count, by_count_desc);
    for (int i = 0; i < slots && i < keys; i++) hits += count[i];
    free(count);
    return (double)hits / (double)t->n;
}

static double sim_rate(const int *keys, size_t n, int n_keys, int slots, cache_policy_kind kind, int halve, double *miss)
{
    cache_sim_result r;
    if (cache_sim_run(keys, n, n_keys, slots, kind, halve, &r, NULL, NULL) < 0) return -1;
    if (miss) *miss = (double)r.misses;
    return (double)r.hits / (double)n;
}

static void curve(const char *name, const char *path, int lfu_halve_every)
{
    char err[512];
    cache_trace *t = cache_trace_load(path, -1, -1, err, sizeof err);
    if (!t) { fprintf(stderr, "bench_cache_curve: %s\n", err); return; }
    int keys = t->n_layers * t->n_experts;
    double per_token = (double)t->n / t->n_tokens;
    int *shuffled = shuffled_tokens(t);
    printf("\n== %s: %d tokens, %d MoE layers x %d experts = %d keys, %.0f requests/token\n", name,
           t->n_tokens, t->n_layers, t->n_experts, keys, per_token);
    /* bytes only mean something for an R1-shaped trace (58 layers x 256 experts, top-8) */
    int r1_shaped = t->n_layers == 58 && t->n_experts == 256 && per_token > 463 && per_token < 465;
    printf("%6s %6s | %6s %6s %6s %6s | %5s %5s %5s | %6s %6s %5s | %s\n", "slots", "%keys", "lru", "lfu", "arc", "opt",
           "lru/o", "lfu/o", "arc/o", "shufO", "top-S", "top/O",
           r1_shaped ? "missed GiB/token (lfu, opt)" : "missed experts/token (lfu, opt)");
    /* fractions of the key space; 1.28% is R1's ~190 slots of 14,848 experts */
    double fracs[] = {0.01, 0.0128, 0.02, 0.03, 0.05, 0.10, 0.15, 0.25};
    cache_policy_kind kinds[] = {CACHE_POLICY_LRU, CACHE_POLICY_LFU, CACHE_POLICY_ARC, CACHE_POLICY_OPT};
    for (size_t f = 0; f < sizeof fracs / sizeof fracs[0]; f++) {
        int slots = (int)(fracs[f] * keys + 0.5);
        if (slots < 1) slots = 1;
        double rate[4], miss[4];
        for (int k = 0; k < 4; k++) rate[k] = sim_rate(t->key, t->n, keys, slots, kinds[k], lfu_halve_every, &miss[k]);
        double shuf = shuffled ? sim_rate(shuffled, t->n, keys, slots, CACHE_POLICY_OPT, 0, NULL) : 0;
        double top = static_top_rate(t, keys, slots), unit = r1_shaped ? R1_EXPERT_BYTES / (1 << 30) : 1;
        printf("%6d %5.2f%% | %5.2f%% %5.2f%% %5.2f%% %5.2f%% | %5.2f %5.2f %5.2f | %5.2f%% %5.2f%% %5.2f | %.2f, %.2f\n", slots,
               100.0 * slots / keys, 100 * rate[0], 100 * rate[1], 100 * rate[2], 100 * rate[3],
               rate[3] > 0 ? rate[0] / rate[3] : 0, rate[3] > 0 ? rate[1] / rate[3] : 0, rate[3] > 0 ? rate[2] / rate[3] : 0,
               100 * shuf, 100 * top, rate[3] > 0 ? top / rate[3] : 0,
               miss[1] / t->n_tokens * unit, miss[3] / t->n_tokens * unit);
    }
    free(shuffled);
    cache_trace_free(t);
}

int main(int argc, char **argv)
{
    int tokens = 1000, halve = 0, synthetic = 1;
    int n_files = 0;
    const char *files[32];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench_cache_curve [--tokens N] [--lfu-halve-every N] [--no-synthetic] [trace.jsonl[.gz] ...]\n");
            return 0;
        } else if (!strcmp(argv[i], "--no-synthetic")) synthetic = 0; else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lfu-halve-every") && i + 1 < argc) halve = atoi(argv[++i]);
        else if (n_files < 32) files[n_files++] = argv[i];
    }
    const char *heldout = DSSPEC_SOURCE_DIR "/tools/embedded/trace_heldout.jsonl";
    if (access(heldout, R_OK) == 0) curve("embedded model, held-out text", heldout, halve);
    else printf("(no %s yet: the embedded model's trace appears when it is trained)\n", heldout);
    for (int i = 0; i < n_files; i++) curve(files[i], files[i], halve);
    if (!synthetic) return 0;

    char path[] = "/tmp/bench_cache_synth_XXXXXX";
    int fd = mkstemp(path);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    synth_params p = synth_r1_defaults();
    p.tokens = tokens;
    if (!out || synth_write(&p, out) < 0) { fprintf(stderr, "bench_cache_curve: cannot write %s\n", path); return 1; }
    fclose(out);
    char name[256];
    snprintf(name, sizeof name, "synthetic R1 (zipf %.2f, reuse %.2f, drift %d swaps/%d tokens)", p.zipf_s,
             p.reuse_p, p.drift_swaps, p.drift_every);
    curve(name, path, halve);
    unlink(path);
    return 0;
}
