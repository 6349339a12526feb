/* bench_cache_curve: hit rate vs cache size for LRU, LFU, ARC next to Belady's OPT (the peer every
 * policy is measured against, computed in the same run), on routing traces: the embedded model's
 * held-out trace when it exists, any trace files given, and a synthetic R1-scale trace.
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

static void curve(const char *name, const char *path, int lfu_halve_every)
{
    char err[512];
    cache_trace *t = cache_trace_load(path, -1, -1, err, sizeof err);
    if (!t) { fprintf(stderr, "bench_cache_curve: %s\n", err); return; }
    int keys = t->n_layers * t->n_experts;
    double per_token = (double)t->n / t->n_tokens;
    printf("\n== %s: %d tokens, %d MoE layers x %d experts = %d keys, %.0f requests/token\n", name,
           t->n_tokens, t->n_layers, t->n_experts, keys, per_token);
    /* bytes only mean something for an R1-shaped trace (58 layers x 256 experts, top-8) */
    int r1_shaped = t->n_layers == 58 && t->n_experts == 256 && per_token > 463 && per_token < 465;
    printf("%7s %7s | %7s %7s %7s %7s | %6s %6s %6s | %s\n", "slots", "%keys", "lru", "lfu", "arc", "opt",
           "lru/o", "lfu/o", "arc/o", r1_shaped ? "missed GiB/token at 44.05 MB/expert (lfu, opt)" : "missed experts/token (lfu, opt)");
    /* fractions of the key space; 1.28% is R1's ~190 slots of 14,848 experts */
    double fracs[] = {0.005, 0.0128, 0.025, 0.05, 0.10, 0.25, 0.50};
    cache_policy_kind kinds[] = {CACHE_POLICY_LRU, CACHE_POLICY_LFU, CACHE_POLICY_ARC, CACHE_POLICY_OPT};
    for (size_t f = 0; f < sizeof fracs / sizeof fracs[0]; f++) {
        int slots = (int)(fracs[f] * keys + 0.5);
        if (slots < 1) slots = 1;
        double rate[4], miss_per_token[4];
        for (int k = 0; k < 4; k++) {
            cache_sim_result r;
            cache_sim_run(t->key, t->n, keys, slots, kinds[k], lfu_halve_every, &r, NULL, NULL);
            rate[k] = (double)r.hits / (double)t->n;
            miss_per_token[k] = (double)r.misses / t->n_tokens;
        }
        printf("%7d %6.2f%% | %6.2f%% %6.2f%% %6.2f%% %6.2f%% | %6.2f %6.2f %6.2f | %.2f, %.2f\n", slots,
               100.0 * slots / keys, 100 * rate[0], 100 * rate[1], 100 * rate[2], 100 * rate[3],
               rate[3] > 0 ? rate[0] / rate[3] : 0, rate[3] > 0 ? rate[1] / rate[3] : 0, rate[3] > 0 ? rate[2] / rate[3] : 0,
               miss_per_token[1] * (r1_shaped ? R1_EXPERT_BYTES / (1 << 30) : 1),
               miss_per_token[3] * (r1_shaped ? R1_EXPERT_BYTES / (1 << 30) : 1));
    }
    cache_trace_free(t);
}

int main(int argc, char **argv)
{
    int tokens = 1000, halve = 0;
    int n_files = 0;
    const char *files[32];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench_cache_curve [--tokens N] [--lfu-halve-every N] [trace.jsonl ...]\n");
            return 0;
        } else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lfu-halve-every") && i + 1 < argc) halve = atoi(argv[++i]);
        else if (n_files < 32) files[n_files++] = argv[i];
    }
    const char *heldout = DSSPEC_SOURCE_DIR "/tools/embedded/trace_heldout.jsonl";
    if (access(heldout, R_OK) == 0) curve("embedded model, held-out text", heldout, halve);
    else printf("(no %s yet: the embedded model's trace appears when it is trained)\n", heldout);
    for (int i = 0; i < n_files; i++) curve(files[i], files[i], halve);

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
