/* The trace simulator: replays keys through the very policy code the live cache runs
 * (cache_policy_*), with every key evictable since nothing is pinned offline. */
#include <stdlib.h>
#include "cache/expert_cache.h"

int cache_sim_run(const int *keys, size_t n, int n_keys, int slots, cache_policy_kind kind,
                  int lfu_halve_every, cache_sim_result *out, uint8_t *hit, int *victim)
{
    if (!out || n_keys < 1 || slots < 1) return -1;
    if (kind == CACHE_POLICY_OPT) return belady_run(keys, n, n_keys, slots, out, hit, victim);
    cache_policy *p = cache_policy_create(kind, n_keys, slots, lfu_halve_every);
    if (!p) return -1;
    *out = (cache_sim_result){0, 0};
    for (size_t i = 0; i < n; i++) {
        int k = keys[i], v = -1;
        if (k < 0 || k >= n_keys) { cache_policy_free(p); return -1; }
        int was_hit = cache_policy_contains(p, k);
        if (was_hit) {
            cache_policy_hit(p, k);
            out->hits++;
        } else {
            cache_policy_miss(p, k, NULL, NULL, &v); /* cannot fail: every key is evictable */
            out->misses++;
        }
        if (hit) hit[i] = (uint8_t)was_hit;
        if (victim) victim[i] = v;
    }
    cache_policy_free(p);
    return 0;
}
