/* Routing traces for `dsspec cache-sim`: refused with one line naming the file and line, or
 * loaded and replayed through every policy at a few sizes. Belady's OPT is the independent
 * oracle: no demand-paging policy with the same slots can hit more often, and every replay counts
 * each request once. */
#include <stdlib.h>
#include "cache/expert_cache.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }

static void replay(const cache_trace *t)
{
    static const cache_policy_kind kinds[] = {CACHE_POLICY_LRU, CACHE_POLICY_LFU, CACHE_POLICY_ARC};
    int n_keys = t->n_layers * t->n_experts;
    for (int slots = 1; slots <= 9; slots += 4) {
        cache_sim_result opt, r;
        if (cache_sim_run(t->key, t->n, n_keys, slots, CACHE_POLICY_OPT, 0, &opt, NULL, NULL)) fuzz_fail("OPT replay failed");
        if (opt.hits + opt.misses != t->n) fuzz_fail("OPT counted %llu of %zu requests", (unsigned long long)(opt.hits + opt.misses), t->n);
        for (int k = 0; k < 3; k++) {
            if (cache_sim_run(t->key, t->n, n_keys, slots, kinds[k], 0, &r, NULL, NULL)) fuzz_fail("replay of policy %d failed", k);
            if (r.hits + r.misses != t->n) fuzz_fail("policy %d counted %llu of %zu requests", k, (unsigned long long)(r.hits + r.misses), t->n);
            if (r.hits > opt.hits) fuzz_fail("policy %d hit %llu > OPT %llu with %d slots", k, (unsigned long long)r.hits,
                                             (unsigned long long)opt.hits, slots);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_memfile(data, size);
    char err[1024] = "";
    int lo = size ? (int)(data[0] % 4) - 1 : -1; /* -1 (no bound) or layers 0..2 */
    cache_trace *t = cache_trace_load(path, lo, -1, err, sizeof err);
    if (!t) { fuzz_check_error_line("cache_trace_load", err); return 0; }
    if ((long long)t->n_layers * t->n_experts > (1 << 22)) fuzz_fail("trace accepted with %d x %d keys", t->n_layers, t->n_experts);
    replay(t);
    cache_trace_free(t);
    return 0;
}
