/* The live expert cache over the real reader on a synthetic disk, with the reader's reordering
 * test backend (expert_reader_test_reorder): reads complete out of order after random delays, a
 * destination is poisoned when its read starts and gets the expert's bytes only when the read is
 * delivered, and the queue is bounded. Random want/acquire/release/prefetch sequences must never
 * read into a pinned slot, never use more than n_slots slots, never hand out a slot before its read
 * completed, and always hand out the right expert's bytes.
 * usage: test_cache_live WORKDIR   (where the synthetic shard is written) */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "cache/expert_cache.h"
#include "tests/test_cache_check.h"

/* One expert on disk: its six tensors in 5000 bytes at a 4 KiB boundary, so a slot is 8192 bytes.
 * gate, up, down weights first (1024, 1024, 2048 bytes), then the three scale grids. */
enum { SLOT_BYTES = 8192, EXPERT_BYTES = 5000, DATA_START = 4096, MAX_SEEN = 256, MAX_HELD = 64, MAX_FLIGHT = 256 };
static const uint64_t tensor_at[EXPERT_NTENSORS] = {0, 4096, 1024, 4096 + 256, 2048, 4096 + 512};
static const uint64_t tensor_len[EXPERT_NTENSORS] = {1024, 256, 1024, 256, 2048, 392};

static const char *g_workdir = ".";

typedef struct { const uint8_t *dst; size_t length; } flight;
typedef struct { int layer, expert; const uint8_t *slot; } held_pin;

/* What the test sees of the reader's kernel reads, through the reorder hook's callbacks. */
typedef struct {
    flight in_flight[MAX_FLIGHT];
    int n_flight;
    const uint8_t *seen[MAX_SEEN]; /* distinct slot addresses ever read into */
    int n_seen;
    const uint8_t *lowest;
    held_pin *held;               /* the test's pins, to catch a read into a pinned slot */
    int *n_held;
    uint64_t submits;
} watch;

/* A one-shard checkpoint of n_layers x n_experts routed experts, every layer MoE. */
typedef struct {
    checkpoint ck;
    shard_info shard;
    tensor_info *tensors;
    expert_extent *experts;
    char path[512], file[64];
} synth_disk;

static uint8_t pattern_byte(int layer, int expert, int i) { return (uint8_t)(layer * 131 + expert * 17 + i * 7 + (i >> 8)); }

static void fill_pattern(uint8_t *x, int layer, int expert)
{
    memcpy(x, &layer, sizeof layer);
    memcpy(x + 4, &expert, sizeof expert);
    for (int i = 8; i < EXPERT_BYTES; i++) x[i] = pattern_byte(layer, expert, i);
}

static int holds_expert(const uint8_t *slot, int layer, int expert)
{
    int l, e;
    memcpy(&l, slot, sizeof l);
    memcpy(&e, slot + 4, sizeof e);
    if (l != layer || e != expert) return 0;
    for (int i = 8; i < EXPERT_BYTES; i++)
        if (slot[i] != pattern_byte(layer, expert, i)) return 0;
    return 1;
}

static void disk_add_expert(synth_disk *d, int layer, int expert, int key)
{
    static const char *suffix[EXPERT_NTENSORS] = {"gate.w", "gate.s", "up.w", "up.s", "down.w", "down.s"};
    expert_extent *x = &d->experts[key];
    uint64_t base = DATA_START + (uint64_t)key * SLOT_BYTES;
    for (int t = 0; t < EXPERT_NTENSORS; t++) {
        tensor_info *ti = &d->tensors[key * EXPERT_NTENSORS + t];
        *ti = (tensor_info){.name = (char *)suffix[t], .shard = 0, .offset = base + tensor_at[t],
                            .nbytes = tensor_len[t], .dtype = t % 2 ? DTYPE_F32 : DTYPE_F8_E4M3, .ndim = 1,
                            .shape = {(int64_t)tensor_len[t]}};
        x->t[t] = ti;
    }
    x->npieces = 1;
    x->piece[0].shard = 0;
    x->piece[0].offset = base;
    x->piece[0].length = EXPERT_BYTES;
    x->contiguous = 1;
    (void)layer; (void)expert;
}

static int disk_create(synth_disk *d, int n_layers, int n_experts)
{
    memset(d, 0, sizeof *d);
    int n_keys = n_layers * n_experts;
    uint64_t size = DATA_START + (uint64_t)n_keys * SLOT_BYTES;
    d->tensors = calloc((size_t)n_keys * EXPERT_NTENSORS, sizeof *d->tensors);
    d->experts = calloc((size_t)n_keys, sizeof *d->experts);
    uint8_t *bytes = calloc(1, size);
    snprintf(d->file, sizeof d->file, "cache_live_%dx%d.bin", n_layers, n_experts);
    snprintf(d->path, sizeof d->path, "%s/%s", g_workdir, d->file);
    FILE *f = fopen(d->path, "wb");
    CHECK(d->tensors && d->experts && bytes && f, "cannot create %s: %s", d->path, strerror(errno));
    if (!d->tensors || !d->experts || !bytes || !f) { if (f) fclose(f); free(bytes); return -1; }
    for (int l = 0; l < n_layers; l++)
        for (int e = 0; e < n_experts; e++) {
            disk_add_expert(d, l, e, l * n_experts + e);
            fill_pattern(bytes + DATA_START + (size_t)(l * n_experts + e) * SLOT_BYTES, l, e);
        }
    int ok = fwrite(bytes, 1, size, f) == size;
    ok &= fclose(f) == 0;
    free(bytes);
    CHECK(ok, "cannot write %s", d->path);
    d->shard = (shard_info){.path = d->path, .file = d->file, .fd = -1, .size = size, .header_len = DATA_START - 8};
    d->ck.dir = (char *)g_workdir;
    d->ck.cfg.num_hidden_layers = n_layers;
    d->ck.cfg.n_routed_experts = n_experts;
    d->ck.n_shards = 1;
    d->ck.shards = &d->shard;
    d->ck.n_tensors = n_keys * EXPERT_NTENSORS;
    d->ck.tensors = d->tensors;
    d->ck.experts = d->experts;
    return ok ? 0 : -1;
}

static void disk_free(synth_disk *d)
{
    remove(d->path);
    free(d->tensors);
    free(d->experts);
}

static int overlaps(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) { return a < b + blen && b < a + alen; }

static void on_start(void *ctx, const void *dst_v, size_t length)
{
    watch *w = ctx;
    const uint8_t *dst = dst_v;
    CHECK(((uintptr_t)dst & 4095) == 0, "read into %p: not 4096-aligned", dst_v);
    for (int i = 0; i < *w->n_held; i++)
        CHECK(!overlaps(dst, length, w->held[i].slot, 1), "read into the slot pinned for %d/%d",
              w->held[i].layer, w->held[i].expert);
    for (int i = 0; i < w->n_flight; i++)
        CHECK(!overlaps(dst, length, w->in_flight[i].dst, w->in_flight[i].length), "two reads in flight into one slot");
    CHECK(w->n_flight < MAX_FLIGHT, "too many reads in flight");
    if (w->n_flight < MAX_FLIGHT) w->in_flight[w->n_flight++] = (flight){dst, length};
    int known = 0;
    for (int i = 0; i < w->n_seen; i++) known |= w->seen[i] == dst;
    if (!known && w->n_seen < MAX_SEEN) w->seen[w->n_seen++] = dst;
    if (!w->lowest || dst < w->lowest) w->lowest = dst;
    w->submits++;
}

static void on_land(void *ctx, const void *dst, size_t length)
{
    watch *w = ctx;
    (void)length;
    for (int i = 0; i < w->n_flight; i++)
        if (w->in_flight[i].dst == dst) { w->in_flight[i] = w->in_flight[--w->n_flight]; return; }
    CHECK(0, "a read landed that never started");
}

typedef struct {
    synth_disk disk;
    expert_reader *reader;
    watch io;
    held_pin held[MAX_HELD];
    int n_held;
    expert_cache *cache;
    expert_provider p;
    uint64_t requests;
} rig;

/* The reader has `depth` reads in flight at most; completions come back out of order. */
static void rig_init(rig *r, int n_layers, int n_experts, int n_slots, int depth, io_backend backend,
                     cache_policy_kind kind, unsigned long long seed)
{
    memset(r, 0, sizeof *r);
    r->io.held = r->held;
    r->io.n_held = &r->n_held;
    if (disk_create(&r->disk, n_layers, n_experts) < 0) return;
    char err[256];
    r->reader = expert_reader_create(&r->disk.ck, backend, depth, err, sizeof err);
    CHECK(r->reader != NULL, "reader: %s", err);
    if (!r->reader) return;
    io_test_reorder how = {.seed = seed, .max_delay = 5, .on_start = on_start, .on_land = on_land, .ctx = &r->io};
    CHECK(expert_reader_test_reorder(r->reader, &how) == 0, "reorder: %s", expert_reader_error(r->reader));
    r->cache = expert_cache_create(&r->disk.ck, r->reader, n_slots, kind, err, sizeof err);
    CHECK(r->cache != NULL, "create: %s", err);
    CHECK(!r->cache || expert_cache_slot_bytes(r->cache) == SLOT_BYTES, "slot bytes %zu",
          r->cache ? expert_cache_slot_bytes(r->cache) : 0);
    if (r->cache) r->p = expert_cache_provider(r->cache);
}

static void rig_free(rig *r)
{
    expert_cache_free(r->cache);
    CHECK(r->io.n_flight == 0, "%d reads still in flight after the cache is gone", r->io.n_flight);
    expert_reader_free(r->reader);
    disk_free(&r->disk);
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
static void property_walk(cache_policy_kind kind, int n_slots, int depth, io_backend backend, unsigned long long seed)
{
    enum { LAYERS = 5, EXPERTS = 12, STEPS = 1500 };
    rig r;
    rig_init(&r, LAYERS, EXPERTS, n_slots, depth, backend, kind, seed);
    if (!r.cache) { rig_free(&r); return; }
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
    CHECK(s.bytes_read == s.reads_completed * EXPERT_BYTES, "bytes read");
    uint64_t layer_hits = 0;
    for (int l = 0; l < s.n_layers; l++) layer_hits += s.layer[l].hits;
    CHECK(layer_hits == s.hits, "per-layer hits add up");
    expert_cache_stats_release(&s);
    rig_free(&r);
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
            rig_init(&r, LAYERS, EXPERTS, sizes[z], 4, IO_BACKEND_AUTO, kinds[k], 5);
            if (!r.cache) { rig_free(&r); continue; }
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
            rig_free(&r);
        }
}

/* Fewer slots than a layer wants: the cache cycles through them, each expert read once. */
static void test_cycles_small_cache(void)
{
    rig r;
    rig_init(&r, 2, 16, 1, 2, IO_BACKEND_AUTO, CACHE_POLICY_LFU, 3);
    if (!r.cache) { rig_free(&r); return; }
    int list[6] = {0, 3, 5, 7, 9, 11}, n = 6;
    r.p.want(r.p.self, 1, list, n);
    while (n > 0) {
        CHECK(rig_acquire(&r, 1, list, &n) == 0, "acquire: %s", r.p.error(r.p.self));
        rig_release(&r, 0);
    }
    CHECK(r.io.submits == 6 && r.io.n_seen == 1, "%llu reads into %d slots", (unsigned long long)r.io.submits, r.io.n_seen);
    rig_free(&r);
}

/* Every slot pinned: one clear error, no hang; fine again once released. */
static void test_all_pinned(void)
{
    rig r;
    rig_init(&r, 2, 8, 2, 4, IO_BACKEND_PREAD, CACHE_POLICY_LRU, 4);
    if (!r.cache) { rig_free(&r); return; }
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
    rig_free(&r);
}

/* A failed read: acquire reports it (naming layer and expert), the slot is freed, later layers work. */
static void test_read_error(void)
{
    rig r;
    rig_init(&r, 3, 8, 4, 4, IO_BACKEND_AUTO, CACHE_POLICY_ARC, 5);
    if (!r.cache) { rig_free(&r); return; }
    expert_reader_test_fail_expert(r.reader, 1, 6);
    int list[3] = {2, 6, 7}, n = 3, rc = 0;
    r.p.want(r.p.self, 1, list, n);
    while (n > 0 && (rc = rig_acquire(&r, 1, list, &n)) == 0) {}
    CHECK(rc == -1, "a failed read must fail acquire");
    CHECK(strstr(r.p.error(r.p.self), "layer 1 expert 6") != NULL, "error names the expert: %s", r.p.error(r.p.self));
    while (r.n_held) rig_release(&r, 0);
    expert_reader_test_fail_expert(r.reader, -1, -1);
    int more[2] = {6, 3}, m = 2;
    r.p.want(r.p.self, 2, more, m);
    while (m > 0) CHECK(rig_acquire(&r, 2, more, &m) == 0, "after error: %s", r.p.error(r.p.self));
    while (r.n_held) rig_release(&r, 0);
    expert_cache_stats s;
    expert_cache_stats_get(r.cache, &s);
    CHECK(s.read_errors == 1, "read errors %llu", (unsigned long long)s.read_errors);
    expert_cache_stats_release(&s);
    rig_free(&r);
}

/* Guesses: a right one counts used (and as a hit), a wrong one wasted when its layer comes. */
static void test_prefetch_accounting(void)
{
    rig r;
    rig_init(&r, 3, 8, 8, 8, IO_BACKEND_AUTO, CACHE_POLICY_LRU, 6);
    if (!r.cache) { rig_free(&r); return; }
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
    /* the guesses were for layer 1: 2 issued, expert 3 used, expert 4 wasted; the used one's read
     * started before layer 1 asked for it */
    CHECK(s.layer[1].prefetch_issued == 2 && s.layer[1].prefetch_used == 1 && s.layer[1].prefetch_wasted == 1 &&
          s.layer[0].prefetch_issued == 0, "per-layer prefetch counts");
    CHECK(s.layer[1].prefetch_ahead_ns > 0 && s.prefetch_ahead_ns == s.layer[1].prefetch_ahead_ns, "read time ahead of demand");
    CHECK(s.reads_completed == 5, "reads %llu", (unsigned long long)s.reads_completed);
    /* the cache honours every guess it has room for (whether to guess is the forward pass's choice) */
    int g = 7;
    r.p.prefetch(r.p.self, 2, &g, 1);
    expert_cache_stats t;
    expert_cache_stats_get(r.cache, &t);
    CHECK(t.prefetch_issued == 3, "a guess with free slots is read: issued %llu", (unsigned long long)t.prefetch_issued);

    cJSON *j = expert_cache_stats_json(&s);
    char *text = cJSON_PrintUnformatted(j);
    cJSON *back = cJSON_Parse(text);
    CHECK(back && cJSON_GetObjectItem(back, "hits")->valuedouble == (double)s.hits, "json hits");
    CHECK(!strcmp(cJSON_GetObjectItem(back, "policy")->valuestring, "lru"), "json policy");
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(back, "prefetch"), "wasted")->valuedouble == 1, "json prefetch");
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(back, "layers")) == 2, "json layers");
    /* recall = used / (used + misses): layer 1 caught 1 of its 2 would-be misses; overall 1 of 4
     * (layer 0's 2 misses count too); wasted per useful 1 / 1 */
    cJSON *pf = cJSON_GetObjectItem(back, "prefetch");
    cJSON *layer1 = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(back, "layers"), 1), "prefetch");
    CHECK(pf && cJSON_GetObjectItem(pf, "recall")->valuedouble == 0.25 && cJSON_GetObjectItem(pf, "wasted_per_useful")->valuedouble == 1,
          "json prefetch recall / waste");
    CHECK(layer1 && cJSON_GetObjectItem(layer1, "recall")->valuedouble == 0.5 && cJSON_GetObjectItem(layer1, "issued")->valuedouble == 2,
          "json layer 1 prefetch");
    cJSON_Delete(back);
    cJSON_free(text);
    cJSON_Delete(j);
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) { expert_cache_stats_print(&s, devnull); fclose(devnull); }
    expert_cache_stats_release(&t);
    expert_cache_stats_release(&s);
    rig_free(&r);
}

/* A guess that finds no queue room waits and is read once the layer's own reads have room, before
 * its layer comes; one whose layer comes first is dropped unread. Worked: queue depth 2; layer 0
 * asks for 0, 1, 2 (two reads queued, 2 waits), guesses 3, 4 for layer 1 wait behind it; once
 * layer 0 is served they are read (issued 2), 3 is used, 4 wasted. Then layer 1 asks for 0, 1, 2
 * (again two reads queued, one waiting), guess 0 for layer 2 waits behind them, and layer 2
 * arrives first: the guess is never read, and layer 2's 0 is a miss the lookahead had guessed. */
static void test_guess_waits_for_room(void)
{
    rig r;
    rig_init(&r, 3, 8, 8, 2, IO_BACKEND_AUTO, CACHE_POLICY_LRU, 9);
    if (!r.cache) { rig_free(&r); return; }
    int l0[3] = {0, 1, 2}, n = 3, guess[2] = {3, 4};
    r.p.want(r.p.self, 0, l0, n);
    r.p.prefetch(r.p.self, 1, guess, 2);
    expert_cache_stats s;
    expert_cache_stats_get(r.cache, &s);
    CHECK(s.prefetch_issued == 0, "guesses read while layer 0 still waits for room: issued %llu", (unsigned long long)s.prefetch_issued);
    expert_cache_stats_release(&s);
    while (n > 0) rig_acquire(&r, 0, l0, &n);
    while (r.n_held) rig_release(&r, 0);
    int l1[3] = {3, 5, 6};
    n = 3;
    r.p.want(r.p.self, 1, l1, n);
    while (n > 0) rig_acquire(&r, 1, l1, &n);
    while (r.n_held) rig_release(&r, 0);
    expert_cache_stats_get(r.cache, &s);
    CHECK(s.prefetch_issued == 2 && s.prefetch_used == 1 && s.prefetch_wasted == 1, "waiting guesses %llu/%llu/%llu",
          (unsigned long long)s.prefetch_issued, (unsigned long long)s.prefetch_used, (unsigned long long)s.prefetch_wasted);
    expert_cache_stats_release(&s);
    int l1b[3] = {0, 1, 2}, g2 = 0, l2 = 0;
    r.p.want(r.p.self, 1, l1b, 3);
    r.p.prefetch(r.p.self, 2, &g2, 1);
    r.p.want(r.p.self, 2, &l2, 1);
    n = 1;
    CHECK(rig_acquire(&r, 2, &l2, &n) == 0, "acquire: %s", r.p.error(r.p.self));
    while (r.n_held) rig_release(&r, 0);
    expert_cache_stats_get(r.cache, &s);
    CHECK(s.prefetch_issued == 2 && s.layer[2].misses == 1 && s.prefetch_guessed_missed == 1,
          "a guess overtaken by its layer: issued %llu, layer 2 misses %llu, guessed misses %llu",
          (unsigned long long)s.prefetch_issued, (unsigned long long)s.layer[2].misses,
          (unsigned long long)s.prefetch_guessed_missed);
    expert_cache_stats_release(&s);
    rig_free(&r);
}

/* A wrong guess gives its slot back once its read has landed: asked for later, it is a miss that
 * needs no eviction (kept, it would have been a hit on a slot the policy never chose). Worked:
 * 4 slots; layer 0 takes expert 0; guesses 3 and 4 for layer 1 take two more; layer 1 asks for 3
 * only, so 4 is wasted and freed; then 4 itself is a miss read into a free slot. */
static void test_wrong_guess_freed(void)
{
    rig r;
    rig_init(&r, 3, 8, 4, 8, IO_BACKEND_AUTO, CACHE_POLICY_LFU, 7);
    if (!r.cache) { rig_free(&r); return; }
    int l0 = 0, n = 1;
    r.p.want(r.p.self, 0, &l0, 1);
    rig_acquire(&r, 0, &l0, &n);
    rig_release(&r, 0);
    int guess[2] = {3, 4};
    r.p.prefetch(r.p.self, 1, guess, 2);
    int l1 = 3;
    n = 1;
    r.p.want(r.p.self, 1, &l1, 1);
    rig_acquire(&r, 1, &l1, &n);
    rig_release(&r, 0);
    /* let every read land (the wrong guess may still have been loading when layer 1 came) */
    for (int spin = 0; spin < 20000 && expert_reader_inflight(r.reader) > 0; spin++) {
        r.p.want(r.p.self, 2, NULL, 0);
        usleep(100);
    }
    int again = 4;
    n = 1;
    r.p.want(r.p.self, 1, &again, 1);
    CHECK(rig_acquire(&r, 1, &again, &n) == 0, "acquire: %s", r.p.error(r.p.self));
    rig_release(&r, 0);
    expert_cache_stats s;
    expert_cache_stats_get(r.cache, &s);
    CHECK(s.prefetch_issued == 2 && s.prefetch_used == 1 && s.prefetch_wasted == 1, "prefetch %llu/%llu/%llu",
          (unsigned long long)s.prefetch_issued, (unsigned long long)s.prefetch_used, (unsigned long long)s.prefetch_wasted);
    CHECK(s.layer[1].hits == 1 && s.layer[1].misses == 1, "expert 4 after its wasted guess: layer 1 hits %llu misses %llu",
          (unsigned long long)s.layer[1].hits, (unsigned long long)s.layer[1].misses);
    CHECK(s.evictions == 0, "the freed slot took it: evictions %llu", (unsigned long long)s.evictions);
    expert_cache_stats_release(&s);
    rig_free(&r);
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
    synth_disk d;
    if (disk_create(&d, 2, 8) < 0) return;
    expert_reader *rd = expert_reader_create(&d.ck, IO_BACKEND_AUTO, 4, err, sizeof err);
    CHECK(rd != NULL, "reader: %s", err);
    if (rd) {
        CHECK(expert_reader_slot_bytes(rd) % 4096 == 0, "slot size must be 4096-aligned");
        CHECK(expert_cache_create(&d.ck, rd, 0, CACHE_POLICY_LRU, err, sizeof err) == NULL, "zero slots");
        CHECK(expert_cache_create(&d.ck, rd, 2, CACHE_POLICY_OPT, err, sizeof err) == NULL, "opt is offline");
        CHECK(expert_cache_create(&d.ck, NULL, 2, CACHE_POLICY_LRU, err, sizeof err) == NULL, "no reader");
        CHECK(expert_cache_create(NULL, rd, 2, CACHE_POLICY_LRU, err, sizeof err) == NULL, "no checkpoint");
        expert_cache *c = expert_cache_create(&d.ck, rd, 3, CACHE_POLICY_LFU, err, sizeof err);
        CHECK(c && expert_cache_n_slots(c) == 3 && expert_cache_slot_bytes(c) == expert_reader_slot_bytes(rd), "create: %s", err);
        expert_cache_free(c);
        expert_reader_free(rd);
    }
    disk_free(&d);
}

/* A warm-up left out: two hand-made snapshots, the second 7 hits, 3 misses (300 bytes), 3 reads in
 * [4096, 8192) ns and layer 1's 2 misses later; every percentile then falls in bucket 12 -> 8192. */
static void test_stats_since(void)
{
    cache_layer_stats lb[2] = {{.hits = 3, .misses = 1}, {.misses = 4, .bytes_read = 400}};
    cache_layer_stats ln[2] = {{.hits = 10, .misses = 2}, {.misses = 6, .bytes_read = 600, .prefetch_used = 2}};
    expert_cache_stats before = {.n_layers = 2, .hits = 3, .misses = 5, .bytes_read = 500, .stall_ns = 40, .layer = lb};
    expert_cache_stats now = {.n_layers = 2, .hits = 10, .misses = 8, .bytes_read = 800, .stall_ns = 100,
                              .prefetch_used = 2, .layer = ln};
    before.latency_hist[10] = 5;
    now.latency_hist[10] = 5;
    now.latency_hist[12] = 3;
    expert_cache_stats_since(&now, &before);
    CHECK(now.hits == 7 && now.misses == 3 && now.bytes_read == 300 && now.stall_ns == 60 && now.prefetch_used == 2,
          "since: hits %llu misses %llu bytes %llu stall %llu", (unsigned long long)now.hits, (unsigned long long)now.misses,
          (unsigned long long)now.bytes_read, (unsigned long long)now.stall_ns);
    CHECK(now.latency_hist[10] == 0 && now.latency_hist[12] == 3 && now.latency_p50_ns == 8192 && now.latency_p99_ns == 8192,
          "since: latency p50 %llu", (unsigned long long)now.latency_p50_ns);
    CHECK(ln[0].hits == 7 && ln[0].misses == 1 && ln[1].misses == 2 && ln[1].bytes_read == 200 && ln[1].prefetch_used == 2,
          "since: layers %llu %llu %llu", (unsigned long long)ln[0].hits, (unsigned long long)ln[1].misses,
          (unsigned long long)ln[1].bytes_read);
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: test_cache_live WORKDIR\n"); return 2; }
    g_workdir = argv[1];
    cache_policy_kind kinds[] = {CACHE_POLICY_LRU, CACHE_POLICY_LFU, CACHE_POLICY_ARC};
    int sizes[] = {1, 2, 3, 5, 9, 24};
    for (int k = 0; k < 3; k++)
        for (int z = 0; z < 6; z++)
            property_walk(kinds[k], sizes[z], 1 + (z % 4) * 2, z % 2 ? IO_BACKEND_PREAD : IO_BACKEND_AUTO,
                          1000 + (unsigned long long)(k * 10 + z));
    test_matches_simulator();
    test_cycles_small_cache();
    test_all_pinned();
    test_read_error();
    test_prefetch_accounting();
    test_wrong_guess_freed();
    test_guess_waits_for_room();
    test_small_functions();
    test_stats_since();
    return check_report("test_cache_live");
}
