/* Belady's OPT against an exhaustive search over every eviction choice on small random traces,
 * and every online policy at or below OPT on random traces (no online policy beats the optimum). */
#include "cache/expert_cache.h"
#include "tests/test_cache_check.h"

enum { MAX_KEYS = 8, MAX_LEN = 16 };

/* Fewest misses from request i on, with `resident` (bitmask of keys) holding `count` keys: on a
 * miss with a full cache, try every resident key as the victim. */
static int brute_min_misses(const int *keys, int n, int i, unsigned resident, int count, int slots)
{
    if (i == n) return 0;
    unsigned bit = 1u << keys[i];
    if (resident & bit) return brute_min_misses(keys, n, i + 1, resident, count, slots);
    if (count < slots) return 1 + brute_min_misses(keys, n, i + 1, resident | bit, count + 1, slots);
    int best = n + 1;
    for (int v = 0; v < MAX_KEYS; v++) {
        if (!(resident & (1u << v))) continue;
        int m = brute_min_misses(keys, n, i + 1, (resident & ~(1u << v)) | bit, count, slots);
        if (m < best) best = m;
    }
    return 1 + best;
}

static void test_opt_vs_brute_force(void)
{
    unsigned long long seed = 0x9e3779b97f4a7c15ull;
    for (int trial = 0; trial < 400; trial++) {
        int n_keys = 2 + rng_below(&seed, MAX_KEYS - 1), n = 1 + rng_below(&seed, MAX_LEN);
        int slots = 1 + rng_below(&seed, 4), keys[MAX_LEN];
        for (int i = 0; i < n; i++) keys[i] = rng_below(&seed, n_keys);
        cache_sim_result r;
        CHECK(belady_run(keys, (size_t)n, n_keys, slots, &r, NULL, NULL) == 0, "belady run");
        int brute = brute_min_misses(keys, n, 0, 0, 0, slots);
        CHECK((int)r.misses == brute, "trial %d (n %d, keys %d, slots %d): belady %llu misses, exhaustive %d",
              trial, n, n_keys, slots, (unsigned long long)r.misses, brute);
    }
}

static void test_policies_at_most_opt(void)
{
    unsigned long long seed = 12345;
    cache_policy_kind kinds[] = {CACHE_POLICY_LRU, CACHE_POLICY_LFU, CACHE_POLICY_ARC};
    static int keys[4000];
    for (int trial = 0; trial < 60; trial++) {
        int n_keys = 4 + rng_below(&seed, 120), n = 200 + rng_below(&seed, 3800);
        int slots = 1 + rng_below(&seed, n_keys);
        /* skewed draws (min of two uniforms) so the policies have something to find */
        for (int i = 0; i < n; i++) {
            int a = rng_below(&seed, n_keys), b = rng_below(&seed, n_keys);
            keys[i] = a < b ? a : b;
        }
        cache_sim_result opt;
        CHECK(cache_sim_run(keys, (size_t)n, n_keys, slots, CACHE_POLICY_OPT, 0, &opt, NULL, NULL) == 0, "opt");
        for (int k = 0; k < 3; k++) {
            cache_sim_result r;
            int halve = 1 + rng_below(&seed, 500);
            CHECK(cache_sim_run(keys, (size_t)n, n_keys, slots, kinds[k], halve, &r, NULL, NULL) == 0, "run");
            CHECK(r.hits + r.misses == (uint64_t)n, "requests");
            CHECK(r.hits <= opt.hits, "trial %d: %s %llu hits > OPT %llu (keys %d slots %d)", trial,
                  cache_policy_name(kinds[k]), (unsigned long long)r.hits, (unsigned long long)opt.hits, n_keys, slots);
        }
        /* with room for every key, every policy misses exactly once per distinct key */
        int distinct = 0;
        unsigned char seen[128] = {0};
        for (int i = 0; i < n; i++) if (!seen[keys[i]]) { seen[keys[i]] = 1; distinct++; }
        for (int k = 0; k < 3; k++) {
            cache_sim_result r;
            cache_sim_run(keys, (size_t)n, n_keys, n_keys, kinds[k], 0, &r, NULL, NULL);
            CHECK(r.misses == (uint64_t)distinct, "%s compulsory misses %llu != %d", cache_policy_name(kinds[k]),
                  (unsigned long long)r.misses, distinct);
        }
    }
}

int main(void)
{
    test_opt_vs_brute_force();
    test_policies_at_most_opt();
    return check_report("test_cache_opt");
}
