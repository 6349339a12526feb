/* The routed-expert cache: one arena of fixed-size 4 KiB-aligned slots, a replacement policy
 * (LRU, LFU with aging, ARC) behind one small interface, telemetry, and the trace simulator that
 * drives the same policy code offline next to Belady's optimum.
 *
 * Keys: the policy and the simulator see an expert as key = layer * n_experts + expert.
 *
 * Why the policy choice matters (DESIGN.md): at R1's ratio (~190 slots for 464 requests a token)
 * an expert's reuse distance is longer than the cache, so recency alone (LRU, ARC) hits almost
 * nothing; frequency with slow aging keeps a hot set. Measure against OPT (cache-sim). */
#ifndef DSSPEC_EXPERT_CACHE_H
#define DSSPEC_EXPERT_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "core/checkpoint.h"
#include "core/expert_provider.h"
#include "io/expert_io.h"

struct cJSON;

/* ---------------------------------------------------------------- policies */

typedef enum { CACHE_POLICY_LRU = 0, CACHE_POLICY_LFU, CACHE_POLICY_ARC, CACHE_POLICY_OPT } cache_policy_kind;
const char *cache_policy_name(cache_policy_kind k);
/* "lru", "lfu", "arc"; with allow_opt also "opt" (offline only: the simulator). 0 ok, -1 unknown. */
int cache_policy_parse(const char *s, int allow_opt, cache_policy_kind *out);

/* LFU ages by halving every count once per this many accesses unless told otherwise. */
int cache_policy_default_lfu_halve_every(int n_keys);

typedef struct cache_policy cache_policy;
/* Whether the cache may evict `key` now (not pinned, not wanted, no read in flight). NULL: any. */
typedef int (*cache_evictable_fn)(void *ctx, int key);

/* capacity >= 1 resident keys out of n_keys. lfu_halve_every <= 0 picks the default. NULL on bad
 * arguments or out of memory. */
cache_policy *cache_policy_create(cache_policy_kind kind, int n_keys, int capacity, int lfu_halve_every);
void cache_policy_free(cache_policy *p);
/* A request for a resident key. */
void cache_policy_hit(cache_policy *p, int key);
/* A request for a key not resident: admit it, evicting one evictable key when full (*victim, or -1
 * when there was room). -1 (and nothing changes) when full and no resident key is evictable. */
int cache_policy_miss(cache_policy *p, int key, cache_evictable_fn evictable, void *ctx, int *victim);
/* A guess (prefetch) for a key not resident: admitted without counting as a request, and only
 * when there is room or the policy ranks its own victim no higher than the guess. -1: declined. */
int cache_policy_prefetch(cache_policy *p, int key, cache_evictable_fn evictable, void *ctx, int *victim);
/* The first real request for a prefetched key (instead of cache_policy_hit). */
void cache_policy_prefetch_used(cache_policy *p, int key);
/* Forget a resident key (its read failed). */
void cache_policy_remove(cache_policy *p, int key);
int cache_policy_contains(const cache_policy *p, int key);
int cache_policy_size(const cache_policy *p);
cache_policy_kind cache_policy_get_kind(const cache_policy *p);

/* ---------------------------------------------------------------- simulator */

/* A routing trace flattened to keys in visit order: key = i * n_experts + expert for the i-th
 * layer of moe_layers (the distinct layers seen, sorted), so the key space is just those layers. */
typedef struct {
    int n_layers, n_experts;  /* key space: n_layers * n_experts */
    int n_tokens;
    size_t n;                 /* requests */
    int *key;
    int *moe_layers;          /* sorted distinct layers seen (after --layers filtering) */
    int n_moe_layers;
} cache_trace;

/* One JSON object per line: {"3": [e, ...], "4": [...]}; layers visited in increasing order,
 * experts in the listed order. Only layers in [layer_lo, layer_hi] are kept (-1: no bound).
 * NULL with one line in err naming the file, line and what was expected. */
cache_trace *cache_trace_load(const char *path, int layer_lo, int layer_hi, char *err, size_t errlen);
void cache_trace_free(cache_trace *t);

typedef struct { uint64_t hits, misses; } cache_sim_result;

/* Replays keys[0..n) (each in [0, n_keys)) through `slots` slots with the same policy code the
 * live cache uses (or Belady's OPT). hit (optional, n bytes) gets 1/0 per request, victim
 * (optional, n ints) the key evicted at each request or -1. 0 ok, -1 bad arguments / no memory. */
int cache_sim_run(const int *keys, size_t n, int n_keys, int slots, cache_policy_kind kind,
                  int lfu_halve_every, cache_sim_result *out, uint8_t *hit, int *victim);

/* Belady's MIN: on a miss with a full cache evict the resident key whose next use is farthest. */
int belady_run(const int *keys, size_t n, int n_keys, int slots, cache_sim_result *out,
               uint8_t *hit, int *victim);

/* ---------------------------------------------------------------- the live cache */

/* The provider's contract (core/expert_provider.h), as this cache keeps it:
 *  - one thread calls it (the forward pass); reads overlap with compute through the reader's queue;
 *  - want(l, E) counts one request per distinct expert (a hit if it holds a slot, even one still
 *    loading from a prefetch) and starts reads for the misses while slots and queue room last;
 *  - acquire_any(l, list) prefers an expert of the list this layer has not acquired yet, so callers
 *    may pass either the remaining experts or the whole list; it waits (counted as stall) only
 *    when none of them is ready; -1 with error() on a failed read or when every slot is pinned;
 *  - a slot is reused only after its read completed, with no pin, and not needed by the current
 *    layer's unreleased experts; with fewer slots than the layer's union it cycles through them. */
typedef struct expert_cache expert_cache;

/* How the cache reads a slot. expert_cache_create wraps io/expert_io.h; tests pass their own. */
typedef struct {
    int (*submit)(void *io, int layer, int expert, void *slot, uint64_t tag); /* 0, or -1 queue full */
    int (*reap)(void *io, int min_complete, uint64_t *tags, int *status, int max);
    int (*inflight)(void *io);
    void (*view)(void *io, int layer, int expert, const void *slot, expert_weights *out);
    const char *(*error)(void *io);
    uint64_t (*expert_bytes)(void *io, int layer, int expert); /* payload bytes of one read */
} expert_cache_io;

/* The minimum slots for one layer's experts of a batch to be resident together. */
int expert_cache_min_slots(int top_k, int batch_rows);
/* Slots that `bytes` of arena buy (what --cache-gib means). */
int expert_cache_slots_for_bytes(uint64_t bytes, size_t slot_bytes);

/* n_slots >= 1 slots of expert_reader_slot_bytes(reader) each, in one arena allocated here.
 * NULL with one line in err. The reader and checkpoint must outlive the cache. */
expert_cache *expert_cache_create(const checkpoint *ck, expert_reader *reader, int n_slots,
                                  cache_policy_kind policy, char *err, size_t errlen);
/* The same over any reader: keys are layer * n_experts + expert for layer < n_layers. */
expert_cache *expert_cache_create_io(const expert_cache_io *io, void *io_self, int n_layers,
                                     int n_experts, size_t slot_bytes, int n_slots,
                                     cache_policy_kind policy, char *err, size_t errlen);
void expert_cache_free(expert_cache *c);
/* Prefetch off makes prefetch() a no-op (the A/B switch --prefetch). */
void expert_cache_set_prefetch(expert_cache *c, int enabled);
expert_provider expert_cache_provider(expert_cache *c);
int expert_cache_n_slots(const expert_cache *c);
size_t expert_cache_slot_bytes(const expert_cache *c);

/* ---------------------------------------------------------------- telemetry */

enum { CACHE_LATENCY_BUCKETS = 48 }; /* bucket b counts reads of [2^b, 2^(b+1)) ns */

typedef struct { uint64_t hits, misses, bytes_read; } cache_layer_stats;

typedef struct {
    cache_policy_kind policy;
    int n_slots, n_layers;
    size_t slot_bytes;
    uint64_t hits, misses, bytes_read, reads_completed, read_errors, evictions;
    uint64_t prefetch_issued, prefetch_used, prefetch_wasted;
    uint64_t stall_ns;             /* time acquire_any waited for a read with nothing ready */
    int max_inflight;
    double mean_inflight;          /* reads in flight, sampled just after each submit */
    uint64_t latency_hist[CACHE_LATENCY_BUCKETS];
    uint64_t latency_p50_ns, latency_p90_ns, latency_p99_ns; /* upper edge of the bucket */
    cache_layer_stats *layer;      /* [n_layers], owned by this snapshot */
} expert_cache_stats;

/* A snapshot; free it with expert_cache_stats_release. 0, or -1 out of memory. */
int expert_cache_stats_get(const expert_cache *c, expert_cache_stats *out);
void expert_cache_stats_release(expert_cache_stats *s);
/* Percentile (0..1) from a log2 histogram: the upper edge of the bucket that holds it; 0 if empty. */
uint64_t cache_latency_percentile(const uint64_t hist[CACHE_LATENCY_BUCKETS], double q);
/* For --telemetry lines and --report: caller owns the result (cJSON_Delete). */
struct cJSON *expert_cache_stats_json(const expert_cache_stats *s);
void expert_cache_stats_print(const expert_cache_stats *s, FILE *out);

#endif
