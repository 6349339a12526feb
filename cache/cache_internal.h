/* Private to cache/: the slot arena and the telemetry counters the live cache bumps where events
 * happen. Nothing outside cache/ includes this. */
#ifndef DSSPEC_CACHE_INTERNAL_H
#define DSSPEC_CACHE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "cache/expert_cache.h"

/* One allocation of n_slots * slot_bytes, 4096-aligned so O_DIRECT reads land in place. */
typedef struct {
    uint8_t *base;
    size_t slot_bytes, bytes;
    int n_slots;
} slot_arena;

int slot_arena_init(slot_arena *a, int n_slots, size_t slot_bytes, char *err, size_t errlen);
void slot_arena_release(slot_arena *a);
static inline void *slot_arena_slot(const slot_arena *a, int i) { return a->base + (size_t)i * a->slot_bytes; }

typedef struct {
    int n_layers;
    cache_layer_stats *layer;
    uint64_t hits, misses, bytes_read, reads_completed, read_errors, evictions;
    uint64_t prefetch_issued, prefetch_used, prefetch_wasted, prefetch_ahead_ns, prefetch_guessed_missed;
    uint64_t stall_ns;
    int max_inflight;
    uint64_t inflight_sum, inflight_samples;
    uint64_t latency_hist[CACHE_LATENCY_BUCKETS];
} cache_counters;

int cache_counters_init(cache_counters *s, int n_layers);
void cache_counters_release(cache_counters *s);
void cache_counters_request(cache_counters *s, int layer, int hit);
void cache_counters_submitted(cache_counters *s, int inflight_now);
void cache_counters_completed(cache_counters *s, int layer, uint64_t bytes, uint64_t latency_ns);
/* A guess for `layer` was issued / settled (used, with ahead_ns of its read done before the
 * request; or wasted). */
void cache_counters_prefetch_issued(cache_counters *s, int layer);
void cache_counters_prefetch_settled(cache_counters *s, int layer, int used, uint64_t ahead_ns);
/* A miss of an expert the lookahead guessed but the cache did not read. */
void cache_counters_guessed_missed(cache_counters *s, int layer);
uint64_t cache_now_ns(void);
int cache_counters_snapshot(const cache_counters *s, expert_cache_stats *out);

#endif
