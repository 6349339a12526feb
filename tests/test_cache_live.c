/* The live expert cache against a fake reader that completes reads out of order after random
 * delays, with a bounded queue, poisoning a slot when a read is submitted and filling it with the
 * expert's own pattern only when the read completes. Random want/acquire/release/prefetch sequences
 * must never overwrite a pinned slot, never use more than n_slots slots, never hand out a slot
 * before its read completed, and always hand out the right expert's bytes. */
#include <errno.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "cache/expert_cache.h"
#include "tests/test_cache_check.h"

enum { SLOT_BYTES = 8192, PATTERN_BYTES = 512, MAX_OPS = 64, MAX_SEEN = 256, MAX_HELD = 64 };

typedef struct { int layer, expert; uint8_t *slot; uint64_t tag; long due; } fake_op;
typedef struct { int layer, expert; const uint8_t *slot; } held_pin;

typedef struct {
    int n_layers, n_experts, depth;
    fake_op op[MAX_OPS];
    int n_op;
    long now;
    unsigned long long rng;
    int fail_key;                 /* key whose reads fail (-1 none) */
    uint8_t *seen[MAX_SEEN];      /* distinct slot addresses ever used */
    int n_seen;
    uint8_t *lowest;
    held_pin *held;               /* the test's pins, to catch a read into a pinned slot */
    int *n_held;
    uint64_t submits;
} fake_io;

static uint8_t pattern_byte(int layer, int expert, int i) { return (uint8_t)(layer * 131 + expert * 17 + i * 7 + (i >> 8)); }

static void fill_pattern(uint8_t *slot, int layer, int expert)
{
    memcpy(slot, &layer, sizeof layer);
    memcpy(slot + 4, &expert, sizeof expert);
    for (int i = 8; i < PATTERN_BYTES; i++) slot[i] = pattern_byte(layer, expert, i);
}

static int holds_expert(const uint8_t *slot, int layer, int expert)
{
    int l, e;
    memcpy(&l, slot, sizeof l);
    memcpy(&e, slot + 4, sizeof e);
    if (l != layer || e != expert) return 0;
    for (int i = 8; i < PATTERN_BYTES; i++)
        if (slot[i] != pattern_byte(layer, expert, i)) return 0;
    return 1;
}

static int fake_submit(void *self, int layer, int expert, void *slot, uint64_t tag)
{
    fake_io *f = self;
    if (f->n_op == f->depth) return -1;
    CHECK(((uintptr_t)slot & 4095) == 0, "slot %p not 4096-aligned", slot);
    CHECK(layer >= 0 && layer < f->n_layers && expert >= 0 && expert < f->n_experts, "bad expert %d/%d", layer, expert);
    for (int i = 0; i < *f->n_held; i++)
        CHECK(f->held[i].slot != slot, "read of %d/%d into the slot pinned for %d/%d", layer, expert,
              f->held[i].layer, f->held[i].expert);
    for (int i = 0; i < f->n_op; i++) CHECK(f->op[i].slot != slot, "two reads in flight into one slot");
    int known = 0;
    for (int i = 0; i < f->n_seen; i++) known |= f->seen[i] == slot;
    if (!known && f->n_seen < MAX_SEEN) f->seen[f->n_seen++] = slot;
    if (!f->lowest || (uint8_t *)slot < f->lowest) f->lowest = slot;
    memset(slot, 0xEE, PATTERN_BYTES); /* poison: a slot handed out before completion fails the pattern */
    f->op[f->n_op++] = (fake_op){layer, expert, slot, tag, f->now + rng_below(&f->rng, 6)};
    f->submits++;
    return 0;
}

/* Completes due reads in random order; advances time until min_complete are due. */
static int fake_reap(void *self, int min_complete, uint64_t *tags, int *status, int max)
{
    fake_io *f = self;
    int got = 0;
    f->now++;
    for (;;) {
        for (int pass = 0; pass < f->n_op && got < max;) {
            int i = rng_below(&f->rng, f->n_op);
            if (f->op[i].due > f->now) { pass++; continue; }
            fake_op op = f->op[i];
            f->op[i] = f->op[--f->n_op];
            int key = op.layer * f->n_experts + op.expert;
            if (key == f->fail_key) status[got] = -EIO;
            else { fill_pattern(op.slot, op.layer, op.expert); status[got] = 0; }
            tags[got++] = op.tag;
            pass = 0;
        }
        if (got >= min_complete || f->n_op == 0) return got;
        f->now++;
    }
}

static int fake_inflight(void *self) { return ((fake_io *)self)->n_op; }

static void fake_view(void *self, int layer, int expert, const void *slot, expert_weights *out)
{
    (void)self; (void)layer; (void)expert;
    const uint8_t *s = slot;
    *out = (expert_weights){.gate = s, .up = s + 1024, .down = s + 2048, .gate_scale = (const float *)(s + 4096),
                            .up_scale = (const float *)(s + 4096 + 256), .down_scale = (const float *)(s + 4096 + 512)};
}

static const char *fake_error(void *self) { (void)self; return "fake reader: injected EIO"; }
static uint64_t fake_bytes(void *self, int layer, int expert) { (void)self; (void)layer; (void)expert; return 5000; }

static const expert_cache_io fake_ops = {fake_submit, fake_reap, fake_inflight, fake_view, fake_error, fake_bytes};

typedef struct {
    fake_io io;
    held_pin held[MAX_HELD];
    int n_held;
    expert_cache *cache;
    expert_provider p;
    uint64_t requests;
} rig;

static void rig_init(rig *r, int n_layers, int n_experts, int n_slots, int depth, cache_policy_kind kind, unsigned long long seed)
{
    memset(r, 0, sizeof *r);
    r->io = (fake_io){.n_layers = n_layers, .n_experts = n_experts, .depth = depth, .rng = seed, .fail_key = -1};
    r->io.held = r->held;
    r->io.n_held = &r->n_held;
    char err[256];
    r->cache = expert_cache_create_io(&fake_ops, &r->io, n_layers, n_experts, SLOT_BYTES, n_slots, kind, err, sizeof err);
    CHECK(r->cache != NULL, "create: %s", err);
    r->p = expert_cache_provider(r->cache);
}

static void rig_release(rig *r, int i)
{
    held_pin h = r->held[i];
    CHECK(holds_expert(h.slot, h.layer, h.expert), "pinned slot of %d/%d overwritten while pinned", h.layer, h.expert);
    r->held[i] = r->held[--r->n_held]; /* before release: release may start a read into it */
    r->p.release(r->p.self, h.layer, h.expert);
}

static int rig_acquire(rig *r, int layer, int *list, int *n)
{
    int which;
    expert_weights w;
    if (r->p.acquire_any(r->p.self, layer, list, *n, &which, &w) != 0) return -1;
    CHECK(which >= 0 && which < *n, "which %d of %d", which, *n);
    int e = list[which];
    CHECK(holds_expert(w.gate, layer, e), "acquired %d/%d: slot does not hold its bytes (read not complete?)", layer, e);
    CHECK(w.down == w.gate + 2048, "view");
    r->held[r->n_held++] = (held_pin){layer, e, w.gate};
    list[which] = list[--*n];
    return 0;
}

/* A forward-pass-like random walk: decode order over layers, a union of 1..8 experts per layer,
 * pins held a while (some across layers), releases in random order, guesses for the next layer. */
static void property_walk(cache_policy_kind kind, int n_slots, int depth, unsigned long long seed)
{
    enum { LAYERS = 5, EXPERTS = 12, STEPS = 1500 };
    rig r;
    rig_init(&r, LAYERS, EXPERTS, n_slots, depth, kind, seed);
    if (!r.cache) return;
    unsigned long long rng = seed * 7 + 1;
    for (int step = 0; step < STEPS; step++) {
        int layer = step % LAYERS, list[8], n = 1 + rng_below(&rng, 8), taken[EXPERTS] = {0};
        for (int i = 0; i < n;) {
            /* skewed: low ids more popular, so hits happen */
            int a = rng_below(&rng, EXPERTS), b = rng_below(&rng, EXPERTS), e = a < b ? a : b;
            if (taken[e]) { if (rng_below(&rng, 4) == 0) n--; continue; }
            taken[e] = 1;
            list[i++] = e;
        }
        r.p.want(r.p.self, layer, list, n);
        r.requests += (uint64_t)n;
        if (rng_below(&rng, 2)) {
            int guess[3] = {rng_below(&rng, EXPERTS), rng_below(&rng, EXPERTS), rng_below(&rng, EXPERTS)};
            r.p.prefetch(r.p.self, (layer + 1) % LAYERS, guess, 3);
        }
        while (n > 0) {
            while (r.n_held > n_slots - 1) rig_release(&r, rng_below(&rng, r.n_held));
            int rc = rig_acquire(&r, layer, list, &n);
            CHECK(rc == 0, "policy %s slots %d step %d: acquire failed with %d pins held: %s", cache_policy_name(kind),
                  n_slots, step, r.n_held, r.p.error(r.p.self));
            if (rc) break;
            while (r.n_held > 0 && rng_below(&rng, 3) == 0) rig_release(&r, rng_below(&rng, r.n_held));
            if (rng_below(&rng, 5) == 0) {
                int guess = rng_below(&rng, EXPERTS);
                r.p.prefetch(r.p.self, (layer + 1) % LAYERS, &guess, 1);
            }
        }
        /* most pins end with the layer; a few outlive it */
        for (int i = r.n_held - 1; i >= 0; i--)
            if (rng_below(&rng, 8) != 0) rig_release(&r, i);
    }
    while (r.n_held) rig_release(&r, r.n_held - 1);
    CHECK(r.io.n_seen <= n_slots, "%d distinct slots used, cache has %d", r.io.n_seen, n_slots);
    for (int i = 0; i < r.io.n_seen; i++)
        CHECK(r.io.seen[i] - r.io.lowest < (ptrdiff_t)n_slots * SLOT_BYTES, "slot outside the arena");
    expert_cache_stats s;
    CHECK(expert_cache_stats_get(r.cache, &s) == 0, "stats");
    CHECK(s.hits + s.misses == r.requests, "%s: hits %llu + misses %llu != requests %llu", cache_policy_name(kind),
          (unsigned long long)s.hits, (unsigned long long)s.misses, (unsigned long long)r.requests);
    CHECK(s.prefetch_used + s.prefetch_wasted <= s.prefetch_issued, "prefetch accounting");
    CHECK(s.reads_completed <= r.io.submits && s.reads_completed + (uint64_t)depth >= r.io.submits, "reads");
    CHECK(s.max_inflight <= depth, "in flight %d > depth %d", s.max_inflight, depth);
    CHECK(s.bytes_read == s.reads_completed * 5000, "bytes read");
    uint64_t layer_hits = 0;
    for (int l = 0; l < s.n_layers; l++) layer_hits += s.layer[l].hits;
    CHECK(layer_hits == s.hits, "per-layer hits add up");
    expert_cache_stats_release(&s);
    expert_cache_free(r.cache);
}

/* One request at a time (want one expert, acquire, release), the live cache must make exactly the
 * simulator's decisions: the same policy code, nothing pinned in the way. */
static void test_matches_simulator(void)
{
    enum { LAYERS = 4, EXPERTS = 10, N = 3000 };
    unsigned long long rng = 99;
    static int keys[N];
    for (int i = 0; i < N; i++) {
        int a = rng_below(&rng, LAYERS * EXPERTS), b = rng_below(&rng, LAYERS * EXPERTS);
        keys[i] = a < b ? a : b;
    }
    cache_policy_kind kinds[] = {CACHE_POLICY_LRU, CACHE_POLICY_LFU, CACHE_POLICY_ARC};
    int sizes[] = {1, 3, 7, 16};
    for (int k = 0; k < 3; k++)
        for (int z = 0; z < 4; z++) {
            rig r;
            rig_init(&r, LAYERS, EXPERTS, sizes[z], 4, kinds[k], 5);
            if (!r.cache) continue;
            for (int i = 0; i < N; i++) {
                int layer = keys[i] / EXPERTS, e = keys[i] % EXPERTS, n = 1;
                r.p.want(r.p.self, layer, &e, 1);
                CHECK(rig_acquire(&r, layer, &e, &n) == 0, "acquire");
                rig_release(&r, 0);
            }
            cache_sim_result sim;
            cache_sim_run(keys, N, LAYERS * EXPERTS, sizes[z], kinds[k], 0, &sim, NULL, NULL);
            expert_cache_stats s;
            expert_cache_stats_get(r.cache, &s);
            CHECK(s.hits == sim.hits && s.misses == sim.misses, "%s %d slots: live %llu hits, simulator %llu",
                  cache_policy_name(kinds[k]), sizes[z], (unsigned long long)s.hits, (unsigned long long)sim.hits);
            CHECK(s.reads_completed == sim.misses, "one read per miss");
            expert_cache_stats_release(&s);
            expert_cache_free(r.cache);
        }
}

/* Fewer slots than a layer wants: the cache cycles through them, each expert read once. */
static void test_cycles_small_cache(void)
{
    rig r;
    rig_init(&r, 2, 16, 1, 2, CACHE_POLICY_LFU, 3);
    int list[6] = {0, 3, 5, 7, 9, 11}, n = 6;
    r.p.want(r.p.self, 1, list, n);
    while (n > 0) {
        CHECK(rig_acquire(&r, 1, list, &n) == 0, "acquire: %s", r.p.error(r.p.self));
        rig_release(&r, 0);
    }
    CHECK(r.io.submits == 6 && r.io.n_seen == 1, "%llu reads into %d slots", (unsigned long long)r.io.submits, r.io.n_seen);
    expert_cache_free(r.cache);
}

/* Every slot pinned: one clear error, no hang; fine again once released. */
static void test_all_pinned(void)
{
    rig r;
    rig_init(&r, 2, 8, 2, 4, CACHE_POLICY_LRU, 4);
    int list[2] = {1, 2}, n = 2;
    r.p.want(r.p.self, 0, list, n);
    rig_acquire(&r, 0, list, &n);
    rig_acquire(&r, 0, list, &n);
    int e = 5, one = 1;
    r.p.want(r.p.self, 1, &e, 1);
    CHECK(rig_acquire(&r, 1, &e, &one) == -1, "acquire with every slot pinned should fail");
    CHECK(strstr(r.p.error(r.p.self), "pinned") != NULL, "error: %s", r.p.error(r.p.self));
    rig_release(&r, 0);
    CHECK(rig_acquire(&r, 1, &e, &one) == 0, "after a release: %s", r.p.error(r.p.self));
    while (r.n_held) rig_release(&r, 0);
    expert_cache_free(r.cache);
}

/* A failed read: acquire reports it (naming layer and expert), the slot is freed, later layers work. */
static void test_read_error(void)
{
    rig r;
    rig_init(&r, 3, 8, 4, 4, CACHE_POLICY_ARC, 5);
    r.io.fail_key = 1 * 8 + 6;
    int list[3] = {2, 6, 7}, n = 3, rc = 0;
    r.p.want(r.p.self, 1, list, n);
    while (n > 0 && (rc = rig_acquire(&r, 1, list, &n)) == 0) {}
    CHECK(rc == -1, "a failed read must fail acquire");
    CHECK(strstr(r.p.error(r.p.self), "layer 1 expert 6") != NULL, "error names the expert: %s", r.p.error(r.p.self));
    while (r.n_held) rig_release(&r, 0);
    r.io.fail_key = -1;
    int more[2] = {6, 3}, m = 2;
    r.p.want(r.p.self, 2, more, m);
    while (m > 0) CHECK(rig_acquire(&r, 2, more, &m) == 0, "after error: %s", r.p.error(r.p.self));
    while (r.n_held) rig_release(&r, 0);
    expert_cache_stats s;
    expert_cache_stats_get(r.cache, &s);
    CHECK(s.read_errors == 1, "read errors %llu", (unsigned long long)s.read_errors);
    expert_cache_stats_release(&s);
    expert_cache_free(r.cache);
}

/* Guesses: a right one counts used (and as a hit), a wrong one wasted when its layer comes. */
static void test_prefetch_accounting(void)
{
    rig r;
    rig_init(&r, 3, 8, 8, 8, CACHE_POLICY_LRU, 6);
    int l0[2] = {0, 1}, n = 2;
    r.p.want(r.p.self, 0, l0, n);
    int guess[2] = {3, 4};
    r.p.prefetch(r.p.self, 1, guess, 2);
    while (n > 0) rig_acquire(&r, 0, l0, &n);
    while (r.n_held) rig_release(&r, 0);
    int l1[2] = {3, 5};
    n = 2;
    r.p.want(r.p.self, 1, l1, n);
    while (n > 0) rig_acquire(&r, 1, l1, &n);
    while (r.n_held) rig_release(&r, 0);
    expert_cache_stats s;
    expert_cache_stats_get(r.cache, &s);
    CHECK(s.prefetch_issued == 2 && s.prefetch_used == 1 && s.prefetch_wasted == 1, "prefetch %llu/%llu/%llu",
          (unsigned long long)s.prefetch_issued, (unsigned long long)s.prefetch_used, (unsigned long long)s.prefetch_wasted);
    CHECK(s.layer[1].hits == 1 && s.layer[1].misses == 1 && s.layer[0].misses == 2, "layer counts");
    CHECK(s.reads_completed == 5, "reads %llu", (unsigned long long)s.reads_completed);
    /* prefetch off: a no-op */
    expert_cache_set_prefetch(r.cache, 0);
    int g = 7;
    r.p.prefetch(r.p.self, 2, &g, 1);
    expert_cache_stats t;
    expert_cache_stats_get(r.cache, &t);
    CHECK(t.prefetch_issued == 2, "prefetch while disabled");

    cJSON *j = expert_cache_stats_json(&s);
    char *text = cJSON_PrintUnformatted(j);
    cJSON *back = cJSON_Parse(text);
    CHECK(back && cJSON_GetObjectItem(back, "hits")->valuedouble == (double)s.hits, "json hits");
    CHECK(!strcmp(cJSON_GetObjectItem(back, "policy")->valuestring, "lru"), "json policy");
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(back, "prefetch"), "wasted")->valuedouble == 1, "json prefetch");
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(back, "layers")) == 2, "json layers");
    cJSON_Delete(back);
    cJSON_free(text);
    cJSON_Delete(j);
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) { expert_cache_stats_print(&s, devnull); fclose(devnull); }
    expert_cache_stats_release(&t);
    expert_cache_stats_release(&s);
    expert_cache_free(r.cache);
}

static void test_small_functions(void)
{
    CHECK(expert_cache_min_slots(8, 2) == 16 && expert_cache_min_slots(8, 1) == 8, "min slots");
    CHECK(expert_cache_slots_for_bytes(10ull * 12288 + 5, 12288) == 10, "slots for bytes");
    /* log2 histogram: 50 reads in [1024, 2048) ns, 40 in [4096, 8192), 10 in [2^20, 2^21):
     * p50 reached in bucket 10 -> 2048; p90 in bucket 12 -> 8192; p99 in bucket 20 -> 2^21 */
    uint64_t h[CACHE_LATENCY_BUCKETS] = {0};
    h[10] = 50; h[12] = 40; h[20] = 10;
    CHECK(cache_latency_percentile(h, 0.5) == 2048, "p50 %llu", (unsigned long long)cache_latency_percentile(h, 0.5));
    CHECK(cache_latency_percentile(h, 0.9) == 8192, "p90");
    CHECK(cache_latency_percentile(h, 0.99) == (1u << 21), "p99");
    char err[256];
    int dummy;
    CHECK(expert_cache_create_io(&fake_ops, &dummy, 2, 8, 1000, 4, CACHE_POLICY_LRU, err, sizeof err) == NULL, "slot size must be 4096-aligned");
    CHECK(expert_cache_create_io(&fake_ops, &dummy, 2, 8, 4096, 0, CACHE_POLICY_LRU, err, sizeof err) == NULL, "zero slots");
    CHECK(expert_cache_create_io(&fake_ops, &dummy, 2, 8, 4096, 2, CACHE_POLICY_OPT, err, sizeof err) == NULL, "opt is offline");
}

int main(void)
{
    cache_policy_kind kinds[] = {CACHE_POLICY_LRU, CACHE_POLICY_LFU, CACHE_POLICY_ARC};
    int sizes[] = {1, 2, 3, 5, 9, 24};
    for (int k = 0; k < 3; k++)
        for (int z = 0; z < 6; z++)
            property_walk(kinds[k], sizes[z], 1 + (z % 4) * 2, 1000 + (unsigned long long)(k * 10 + z));
    test_matches_simulator();
    test_cycles_small_cache();
    test_all_pinned();
    test_read_error();
    test_prefetch_accounting();
    test_small_functions();
    return check_report("test_cache_live");
}
