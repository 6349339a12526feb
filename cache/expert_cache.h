/* The routed-expert cache: one arena of fixed-size 4 KiB-aligned slots, a replacement policy
 * (LRU, LFU with aging, ARC) behind one small interface, telemetry, and the trace simulator that
 * drives the same policy code offline next to Belady's optimum.
 *
 * The path to an expert: the forward pass calls core/expert_provider.h's table; this cache fills
 * it with expert_cache_want / _acquire_any / _acquire_ready / _release / _prefetch / _holds_layer /
 * _error (declared below, defined in cache/expert_cache.c), which read slots through io/expert_io.h's
 * expert_reader_*.
 *
 * Keys: the policy and the simulator see an expert as key = layer * n_experts + expert.
 *
 * Why the policy choice matters: at R1's ratio (~190 slots for 464 requests a token) an expert's
 * reuse distance is longer than the cache, so recency alone (LRU, ARC) hits almost nothing;
 * frequency with slow aging keeps a hot set. Measure against OPT (cache-sim). */
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

/* The router lookahead's guesses recorded beside a routing trace (tools/trace_model/guess_trace.py
 * writes the file): for depth d = 1..depth, the ranks[d-1] experts that layer L - d's lookahead
 * guessed for MoE layer L, most confident first, for every row of the trace. */
enum { CACHE_GUESS_MAX_DEPTH = 4 };
typedef struct {
    int rows, depth, n_layers;            /* n_layers: the trace's MoE layers (its key space) */
    int ranks[CACHE_GUESS_MAX_DEPTH];
    int *ids[CACHE_GUESS_MAX_DEPTH];      /* [rows][n_layers][ranks[d-1]]; -1 where none was recorded */
} cache_guesses;

/* The guess file of trace t (whose routes it is coded against: same rows, every row routing every
 * layer with the same k). NULL with one line in err naming the file and what was expected. */
cache_guesses *cache_guesses_load(const char *path, const cache_trace *t, char *err, size_t errlen);
/* Depth d's guesses for row `row`, trace layer index i; NULL when none were recorded. */
const int *cache_guesses_at(const cache_guesses *g, int d, int row, int i);
void cache_guesses_free(cache_guesses *g);

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

typedef struct expert_cache expert_cache;

/* The minimum slots for one layer's experts of a batch to be resident together. */
int expert_cache_min_slots(int top_k, int batch_rows);
/* Slots that `bytes` of arena buy (what --cache-gib means). */
int expert_cache_slots_for_bytes(uint64_t bytes, size_t slot_bytes);

/* n_slots >= 1 slots of expert_reader_slot_bytes(reader) each, in one arena allocated here (and
 * registered with the reader as fixed buffers). Keys cover every layer of ck, MTP included.
 * NULL with one line in err. The reader and checkpoint must outlive the cache. */
expert_cache *expert_cache_create(const checkpoint *ck, expert_reader *reader, int n_slots,
                                  cache_policy_kind policy, char *err, size_t errlen);
/* Waits for the reads still landing in the arena, then frees it; the reader stays open. */
void expert_cache_free(expert_cache *c);
int expert_cache_n_slots(const expert_cache *c);
size_t expert_cache_slot_bytes(const expert_cache *c);

/* The expert_provider table filled with the five functions below, self = c. */
expert_provider expert_cache_provider(expert_cache *c);

/* The provider entries. `cache` is the expert_cache; it is a void * so that these functions are
 * the table's entries themselves. The contract, as this cache keeps it:
 *  - one thread calls them (the forward pass); reads overlap with compute through the reader's queue;
 *  - a slot is reused only after its read completed, with no pin, and not needed by the current
 *    layer's unreleased experts; with fewer slots than the layer's union it cycles through them. */

/* Counts one request per distinct expert of the layer (a hit if it holds a slot, even one still
 * loading from a prefetch) and starts reads for the misses while free slots and queue room last. */
void expert_cache_want(void *cache, int layer, const int *experts, int n);
/* Pins an expert of the list that this layer has not acquired yet, else any of them, so callers
 * may pass either the remaining experts or the whole list; *which is its index. Waits (counted as
 * stall) only when none is ready. -1 with expert_cache_error() on a failed read or when every slot
 * is pinned. */
int expert_cache_acquire_any(void *cache, int layer, const int *experts, int n, int *which,
                             expert_weights *out);
/* The same without waiting: 0 pinned, 1 when none of the list is ready yet (its reads go on), -1 on
 * a failed read. */
int expert_cache_acquire_ready(void *cache, int layer, const int *experts, int n, int *which,
                               expert_weights *out);
/* 1 when every expert of the layer has a slot (READY or LOADING): a guess for it changes nothing. */
int expert_cache_holds_layer(void *cache, int layer);
/* Unpins; the slot may then take the layer's next pending read. */
void expert_cache_release(void *cache, int layer, int expert);
/* A guess for a later layer: reads start, in the order given (most confident first), into free
 * slots, or over the policy's victim when it ranks no higher than the guess; at most half of the
 * slots hold unused guesses, and nothing is guessed while the current layer still waits for a slot
 * or the reader's queue is full. Never pins. When the guessed layer comes and does not ask for the
 * expert, the guess is wasted and its slot is freed (once its read has landed). Whether to guess
 * at all is the caller's choice (forward_request.prefetch). */
void expert_cache_prefetch(void *cache, int layer, const int *experts, int n);
/* The last error line (empty when none). */
const char *expert_cache_error(void *cache);
/* Whether the expert holds a slot now (ready or loading): a request for it now would be a hit.
 * Read-only; the speculative decoder asks it before letting a draft row into a layer. */
int expert_cache_resident(const void *cache, int layer, int expert);
/* Slots holding nothing now: a load that finds one evicts nothing. */
int expert_cache_free_slots(const void *cache);

/* ---------------------------------------------------------------- telemetry */

enum { CACHE_LATENCY_BUCKETS = 48 }; /* bucket b counts reads of [2^b, 2^(b+1)) ns */

/* Per layer. A request served by a prefetched slot counts as a hit and as prefetch_used;
 * "would-be misses" are misses + prefetch_used, so prefetch recall = used / (used + misses).
 * prefetch_ahead_ns sums, over used guesses, how much of their read was done before the request
 * (the whole read when it had landed): the stall a demand read at that moment would have had to
 * cover at most. prefetch_guessed_missed counts misses of an expert the lookahead did guess but the
 * cache did not read (no room, a full queue, the layer still waiting, or the policy ranking its
 * victim higher): (used + guessed_missed) / (used + misses) is the recall with unlimited room. */
typedef struct {
    uint64_t hits, misses, bytes_read;
    uint64_t prefetch_issued, prefetch_used, prefetch_wasted, prefetch_ahead_ns, prefetch_guessed_missed;
} cache_layer_stats;

typedef struct {
    cache_policy_kind policy;
    int n_slots, n_layers;
    size_t slot_bytes;
    uint64_t hits, misses, bytes_read, reads_completed, read_errors, evictions;
    uint64_t prefetch_issued, prefetch_used, prefetch_wasted, prefetch_guessed_missed;
    uint64_t prefetch_ahead_ns;    /* sum of the layers' prefetch_ahead_ns */
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
/* now -= before: the counts, latency histogram and percentiles of what happened between two
 * snapshots of one cache (a benchmark's warm-up left out); max_inflight and mean_inflight stay
 * whole-run figures. */
void expert_cache_stats_since(expert_cache_stats *now, const expert_cache_stats *before);
/* Percentile (0..1) from a log2 histogram: the upper edge of the bucket that holds it; 0 if empty. */
uint64_t cache_latency_percentile(const uint64_t hist[CACHE_LATENCY_BUCKETS], double q);
/* For --telemetry lines and --report: caller owns the result (cJSON_Delete). */
struct cJSON *expert_cache_stats_json(const expert_cache_stats *s);
void expert_cache_stats_print(const expert_cache_stats *s, FILE *out);

#endif
