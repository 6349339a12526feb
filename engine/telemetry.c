/* What the expert cache measured, for progress lines, reports and the A/B table. */
#include <cjson/cJSON.h>
#include "engine/engine_internal.h"

int dsspec_get_cache_counters(const dsspec *e, dsspec_cache_counters *out)
{
    expert_cache_stats s;
    if (!e->cache || expert_cache_stats_get(e->cache, &s)) return -1;
    *out = (dsspec_cache_counters){s.hits, s.misses, s.bytes_read, s.evictions, s.read_errors, s.prefetch_issued,
                                   s.prefetch_used, s.prefetch_wasted, s.stall_ns, s.n_slots};
    expert_cache_stats_release(&s);
    return 0;
}

cJSON *dsspec_cache_stats_json(const dsspec *e)
{
    expert_cache_stats s;
    if (!e->cache || expert_cache_stats_get(e->cache, &s)) return NULL;
    cJSON *j = expert_cache_stats_json(&s);
    expert_cache_stats_release(&s);
    return j;
}

void dsspec_cache_stats_print(const dsspec *e, FILE *out)
{
    expert_cache_stats s;
    if (!e->cache || expert_cache_stats_get(e->cache, &s)) return;
    expert_cache_stats_print(&s, out);
    expert_cache_stats_release(&s);
}
