/* What MTP buys when nothing waits on disk: the time of a 2-row verify pass against a 1-row pass
 * of the main model on a checkpoint whose routed experts are all held in the cache (pre-read
 * before timing), at decode positions. With acceptance a, MTP yields 1 + a tokens per 2-row pass
 * (plus one MTP-layer pass), against 1 token per 1-row pass. Run it on an R1-shaped slice
 * (build/bench/make_r1_slice) to see R1's weight shapes, where a pass streams GBs from DRAM.
 *
 * --touched-only: the cache holds 32 experts a MoE layer (not all 256: an R1 slice's experts are
 * 11 GB a layer), every timed pass of a kind runs the same tokens, and one untimed pass of each
 * kind first reads the experts those tokens route to; the timed passes then hit the cache as with
 * every expert cached, on a machine that cannot hold them all.
 *
 * usage: bench_verify_cost -m DIR [-t THREADS] [--passes N] [--cpu-features P] [--touched-only] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cache/expert_cache.h"
#include "core/kernels.h"
#include "core/model.h"
#include "speculate/speculate.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int fail(const char *what, const char *err)
{
    fprintf(stderr, "bench_verify_cost: %s: %s\n", what, err);
    return 1;
}

/* Every routed expert of every layer read into the cache once, so timed passes never wait on I/O. */
static int prewarm(const model_config *c, expert_provider *ep)
{
    for (int l = 0; l < config_total_layers(c); l++) {
        if (!config_layer_is_moe(c, l)) continue;
        for (int e = 0; e < c->n_routed_experts; e++) {
            int which;
            expert_weights w;
            ep->want(ep->self, l, &e, 1);
            if (ep->acquire_any(ep->self, l, &e, 1, &which, &w)) return -1;
            ep->release(ep->self, l, e);
        }
    }
    return 0;
}

/* Best time of `passes` main-model passes of nb rows at positions 64, 65 (the rows' KV entries are
 * rewritten each time); -1 on an error. */
static double best_pass(model *m, kv_cache *kv, expert_provider *ep, int nb, int passes, int same_tokens, float *logits,
                        float *hidden, char *err, size_t errlen)
{
    const model_config *c = model_get_config(m);
    double best = 1e30;
    for (int i = 0; i < passes; i++) {
        int v = same_tokens ? 0 : i;
        int rows[2] = {(v * 31 + 5) % c->vocab_size, (v * 57 + 9) % c->vocab_size}, p[2] = {64, 65};
        forward_request req = {.logits = logits, .hidden = hidden};
        double t0 = now();
        if (model_forward(m, kv, ep, rows, p, nb, &req, err, errlen)) return -1;
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* Best time of `passes` 2-row MTP passes (the second row's logits wanted, as in decoding). */
static double best_mtp_pass(model *m, kv_cache *mkv, expert_provider *ep, int passes, float *logits, const float *hidden,
                            char *err, size_t errlen)
{
    double best = 1e30;
    for (int i = 0; i < passes; i++) {
        int next[2] = {1, 2}, p[2] = {0, 1};
        double t0 = now();
        if (mtp_forward(m, mkv, ep, hidden, next, p, 2, logits, 1, 0, err, errlen)) return -1;
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *cpu = NULL;
    int threads = 1, passes = 8, touched_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--passes") && i + 1 < argc) passes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cpu-features") && i + 1 < argc) cpu = argv[++i];
        else if (!strcmp(argv[i], "--touched-only")) touched_only = 1;
        else { fprintf(stderr, "usage: bench_verify_cost -m DIR [-t THREADS] [--passes N] [--cpu-features P] [--touched-only]\n"); return 2; }
    }
    if (!dir || threads < 1 || passes < 1) { fprintf(stderr, "usage: bench_verify_cost -m DIR [-t THREADS] [--passes N]\n"); return 2; }
    cpu_path max = CPU_PATH_AVX512;
    if (cpu && cpu_path_parse(cpu, &max)) return fail("--cpu-features", "expected scalar, avx2 or avx512");
    kernels_init(max);
    char err[1024];
    checkpoint *ck = checkpoint_open(dir, err, sizeof err);
    if (!ck) return fail(dir, err);
    thread_pool *pool = thread_pool_create(threads);
    model *m = model_load(ck, pool, err, sizeof err);
    if (!m) return fail(dir, err);
    const model_config *c = model_get_config(m);
    expert_reader *rd = expert_reader_create(ck, IO_BACKEND_AUTO, 16, err, sizeof err);
    if (!rd) return fail("expert reader", err);
    int moe_layers = 0;
    for (int l = 0; l < config_total_layers(c); l++) moe_layers += config_layer_is_moe(c, l);
    int per_layer = touched_only && c->n_routed_experts > 32 ? 32 : c->n_routed_experts;
    expert_cache *cache = expert_cache_create(ck, rd, moe_layers * per_layer, CACHE_POLICY_LFU, err, sizeof err);
    if (!cache) return fail("expert cache (all experts must fit in RAM; see --touched-only)", err);
    expert_provider ep = expert_cache_provider(cache);
    if (!touched_only && prewarm(c, &ep)) return fail("pre-reading experts", ep.error(ep.self));

    int ctx = 64 + 2 * passes + 4;
    if (model_reserve_scratch(m, 64, ctx, err, sizeof err)) return fail("scratch", err);
    kv_cache *kv = kv_cache_create(c, 0, c->num_hidden_layers, ctx, DTYPE_F32);
    kv_cache *mkv = model_has_mtp(m) ? kv_cache_create(c, c->num_hidden_layers, 1, ctx, DTYPE_F32) : NULL;
    float *logits = malloc(2 * (size_t)c->vocab_size * sizeof(float)), *hidden = malloc(2 * (size_t)c->hidden_size * sizeof(float));
    int prompt[64], pos[64];
    for (int i = 0; i < 64; i++) { prompt[i] = (i * 7919 + 13) % c->vocab_size; pos[i] = i; }
    forward_request pre = {0};
    if (model_forward(m, kv, &ep, prompt, pos, 64, &pre, err, sizeof err)) return fail("prefill", err);

    double t_pass[3] = {0}, t_mtp = 0;
    for (int nb = 1; nb <= 2 && touched_only; nb++)  /* the untimed passes that read the touched experts */
        if (best_pass(m, kv, &ep, nb, 1, 1, logits, hidden, err, sizeof err) < 0) return fail("warm-up pass", err);
    for (int nb = 1; nb <= 2; nb++)
        if ((t_pass[nb] = best_pass(m, kv, &ep, nb, passes, touched_only, logits, hidden, err, sizeof err)) < 0)
            return fail("pass", err);
    if (mkv && (t_mtp = best_mtp_pass(m, mkv, &ep, passes, logits, hidden, err, sizeof err)) < 0) return fail("mtp pass", err);
    if (touched_only)
        printf("%s, %d thread(s), %s, the passes' experts cached (same tokens every pass); best of %d passes at position 64:\n",
               dir, threads, cpu_path_name(kernels_path()), passes);
    else
        printf("%s, %d thread(s), %s, all %d experts cached; best of %d passes at position 64:\n", dir, threads,
               cpu_path_name(kernels_path()), moe_layers * c->n_routed_experts, passes);
    printf("  1-row pass %.2f ms, 2-row verify pass %.2f ms (x%.2f)", t_pass[1] * 1e3, t_pass[2] * 1e3, t_pass[2] / t_pass[1]);
    if (mkv) printf(", 2-row MTP pass %.2f ms", t_mtp * 1e3);
    printf("\n  MTP speedup over MTP off at acceptance a: (1 + a) x t1 / (t2 + t_mtp)\n");
    const double acc[] = {0.6, 0.8, 0.9, 0.95};
    for (int i = 0; i < 4; i++)
        printf("    a = %.2f: %.2fx%s\n", acc[i], (1 + acc[i]) * t_pass[1] / (t_pass[2] + t_mtp), mkv ? "" : " (MTP layer not in this checkpoint: its pass not counted)");
    free(logits); free(hidden);
    kv_cache_free(kv); kv_cache_free(mkv);
    expert_cache_free(cache); expert_reader_free(rd);
    model_free(m); thread_pool_free(pool); checkpoint_close(ck);
    return 0;
}
