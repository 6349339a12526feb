/* The live expert cache: slots of one arena, a policy choosing victims, reads through the
 * expert reader (io/expert_io.h), served to the forward pass as an expert_provider whose entries
 * are the expert_cache_want / _acquire_any / _release / _prefetch / _error functions below.
 *
 * Safety rules, all enforced by slot_evictable(): a slot is reused only when its read has
 * completed, nobody holds a pin on it, and the layer being computed does not still need it. A
 * slot's memory is handed out only in READY state. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "cache/cache_internal.h"

enum { SLOT_FREE = 0, SLOT_LOADING, SLOT_READY };
/* Per key, for the layer being computed: wanted and not yet acquired, acquired (pinned), released. */
enum { WANT_NONE = 0, WANT_OPEN, WANT_TAKEN, WANT_DONE };
enum { REAP_BATCH = 64 };

typedef struct {
    int key;               /* -1 when free */
    uint8_t state;
    uint8_t prefetched;    /* read on a guess and not requested yet */
    uint8_t drop_on_land;  /* a wrong guess still loading: freed when its read lands */
    int pins;
    uint64_t issued_ns, landed_ns; /* landed_ns: 0 while loading */
} slot_info;

struct expert_cache {
    const checkpoint *ck;
    expert_reader *reader;
    int n_layers, n_experts, n_keys, n_slots;
    slot_arena arena;
    slot_info *slot;
    int *slot_of_key;      /* [n_keys], -1 when not resident */
    int *free_slot, n_free;
    cache_policy *policy;
    cache_policy_kind policy_kind;
    int cur_layer;
    uint8_t *want_state;   /* [n_keys], only keys of cur_layer are ever non-NONE */
    int *want_key, n_want;
    int prefetch_cap, prefetch_outstanding;
    uint8_t *guessed;      /* [n_keys] guessed and not read, until its layer comes (telemetry) */
    /* Guesses waiting for queue room, in the order they came: read when no real read of the
     * current layer waits, nearest layer first; dropped when their layer's requests arrive. */
    int *guess_queue, n_queued;
    uint8_t *queued;       /* [n_keys] in guess_queue */
    int failed_key;        /* a wanted key whose read failed, -1 */
    cache_counters stats;
    char err[512];
};

int expert_cache_min_slots(int top_k, int batch_rows)
{
    /* the union of one layer's experts over the batch can be all of top_k * rows; holding them
     * together means no expert is read twice for one layer */
    if (top_k < 1) top_k = 1;
    if (batch_rows < 1) batch_rows = 1;
    return top_k * batch_rows;
}

int expert_cache_slots_for_bytes(uint64_t bytes, size_t slot_bytes)
{
    if (slot_bytes == 0) return 0;
    uint64_t n = bytes / slot_bytes;
    return n > (uint64_t)(1 << 30) ? (1 << 30) : (int)n;
}

int expert_cache_n_slots(const expert_cache *c) { return c->n_slots; }
size_t expert_cache_slot_bytes(const expert_cache *c) { return c->arena.slot_bytes; }
/* The arrays that track slots and keys, sized once here; nothing is allocated while decoding. */
static int alloc_tables(expert_cache *c, int n_slots, cache_policy_kind policy)
{
    c->slot = calloc((size_t)n_slots, sizeof *c->slot);
    c->free_slot = malloc(sizeof(int) * (size_t)n_slots);
    c->slot_of_key = malloc(sizeof(int) * (size_t)c->n_keys);
    c->want_state = calloc((size_t)c->n_keys, 1);
    c->want_key = malloc(sizeof(int) * (size_t)c->n_keys);
    c->guessed = calloc((size_t)c->n_keys, 1);
    c->guess_queue = malloc(sizeof(int) * (size_t)c->n_keys);
    c->queued = calloc((size_t)c->n_keys, 1);
    c->policy = cache_policy_create(policy, c->n_keys, n_slots, 0);
    if (!c->slot || !c->free_slot || !c->slot_of_key || !c->want_state || !c->want_key || !c->guessed || !c->policy ||
        !c->guess_queue || !c->queued ||
        cache_counters_init(&c->stats, c->n_layers) < 0)
        return -1;
    for (int k = 0; k < c->n_keys; k++) c->slot_of_key[k] = -1;
    for (int s = 0; s < n_slots; s++) {
        c->slot[s].key = -1;
        c->free_slot[c->n_free++] = n_slots - 1 - s;
    }
    return 0;
}

expert_cache *expert_cache_create(const checkpoint *ck, expert_reader *reader, int n_slots,
                                  cache_policy_kind policy, char *err, size_t errlen)
{
    if (!ck || !reader) { snprintf(err, errlen, "expert cache: no checkpoint or reader"); return NULL; }
    int n_layers = config_total_layers(&ck->cfg), n_experts = ck->cfg.n_routed_experts;
    if (n_layers < 1 || n_experts < 1 || (int64_t)n_layers * n_experts > (1 << 28)) {
        snprintf(err, errlen, "expert cache: bad key space %d layers x %d experts", n_layers, n_experts);
        return NULL;
    }
    if (policy == CACHE_POLICY_OPT || cache_policy_name(policy)[0] == '?') {
        snprintf(err, errlen, "expert cache: policy must be lru, lfu or arc (opt needs the future: cache-sim only)");
        return NULL;
    }
    expert_cache *c = calloc(1, sizeof *c);
    if (!c) { snprintf(err, errlen, "expert cache: out of memory"); return NULL; }
    c->ck = ck;
    c->reader = reader;
    c->n_layers = n_layers;
    c->n_experts = n_experts;
    c->n_keys = n_layers * n_experts;
    c->n_slots = n_slots;
    c->policy_kind = policy;
    c->cur_layer = -1;
    c->failed_key = -1;
    /* Half: on the embedded model (bench/cache/prefetch_sweep.sh) a quarter starved two-layer
     * lookahead in small caches (recall 6% vs 13% at 7 slots), and no cap at all let a prefill
     * pass's many rows of guesses flush the whole cache. */
    c->prefetch_cap = n_slots / 2 > 1 ? n_slots / 2 : 1;
    if (slot_arena_init(&c->arena, n_slots, expert_reader_slot_bytes(reader), err, errlen) < 0) { free(c); return NULL; }
    if (alloc_tables(c, n_slots, policy) < 0) {
        snprintf(err, errlen, "expert cache: out of memory for %d slots", n_slots);
        expert_cache_free(c);
        return NULL;
    }
    /* Fixed buffers let io_uring pin the arena once instead of on every read (a large CPU saving at
     * low queue depth). Refused registration (memlock limits) only costs that saving. */
    (void)expert_reader_register_slots(reader, c->arena.base, n_slots);
    return c;
}

/* Reads still in flight write into the arena: they must land before it is unmapped. */
static void drain_reads(expert_cache *c)
{
    uint64_t tags[REAP_BATCH];
    int status[REAP_BATCH];
    while (expert_reader_inflight(c->reader) > 0)
        if (expert_reader_reap(c->reader, 1, tags, status, REAP_BATCH) < 0) break;
}

void expert_cache_free(expert_cache *c)
{
    if (!c) return;
    if (c->slot) drain_reads(c);
    cache_policy_free(c->policy);
    slot_arena_release(&c->arena);
    cache_counters_release(&c->stats);
    free(c->slot); free(c->free_slot); free(c->slot_of_key); free(c->want_state); free(c->want_key); free(c->guessed);
    free(c->guess_queue); free(c->queued);
    free(c);
}

/* ------------------------------------------------------------------ slots */

static int slot_evictable(void *ctx, int key)
{
    const expert_cache *c = ctx;
    int s = c->slot_of_key[key];
    if (s < 0) return 0;
    const slot_info *si = &c->slot[s];
    return si->state == SLOT_READY && si->pins == 0 && (c->want_state[key] == WANT_NONE || c->want_state[key] == WANT_DONE);
}

/* For a guess: also never push out another guess that has not been used yet. */
static int slot_evictable_for_prefetch(void *ctx, int key)
{
    const expert_cache *c = ctx;
    return slot_evictable(ctx, key) && !c->slot[c->slot_of_key[key]].prefetched;
}

static void prefetch_settle(expert_cache *c, slot_info *si, int used)
{
    if (!si->prefetched) return;
    si->prefetched = 0;
    c->prefetch_outstanding--;
    uint64_t ahead = used ? (si->landed_ns ? si->landed_ns : cache_now_ns()) - si->issued_ns : 0;
    cache_counters_prefetch_settled(&c->stats, si->key / c->n_experts, used, ahead);
}

static void slot_clear(expert_cache *c, int s)
{
    slot_info *si = &c->slot[s];
    prefetch_settle(c, si, 0);
    if (si->key >= 0) c->slot_of_key[si->key] = -1;
    *si = (slot_info){.key = -1};
    c->free_slot[c->n_free++] = s;
}

/* A wrong guess gives its slot back (or will, once its read lands): a free slot is the cheapest
 * room for the next read, where keeping the guess would make the policy evict something it chose
 * to keep. */
static void drop_guess(expert_cache *c, int s)
{
    if (c->slot[s].state == SLOT_LOADING) { c->slot[s].drop_on_land = 1; return; }
    cache_policy_remove(c->policy, c->slot[s].key);
    slot_clear(c, s);
}

/* The slot for a key the policy has just admitted: the victim's, or a free one. */
static int slot_take(expert_cache *c, int victim)
{
    if (victim >= 0) {
        c->stats.evictions++;
        slot_clear(c, c->slot_of_key[victim]);
    }
    return c->free_slot[--c->n_free];
}

/* Fill slot s with key; on a full queue the admission is undone. 0 submitted, -1 queue full. */
static int slot_submit(expert_cache *c, int s, int key, int prefetched)
{
    int layer = key / c->n_experts, expert = key % c->n_experts;
    c->slot[s] = (slot_info){.key = key, .state = SLOT_LOADING, .prefetched = (uint8_t)prefetched,
                             .issued_ns = cache_now_ns()};
    c->slot_of_key[key] = s;
    if (expert_reader_submit(c->reader, layer, expert, slot_arena_slot(&c->arena, s), (uint64_t)s) < 0) {
        cache_policy_remove(c->policy, key);
        c->slot[s].prefetched = 0;
        slot_clear(c, s);
        return -1;
    }
    if (prefetched) { cache_counters_prefetch_issued(&c->stats, layer); c->prefetch_outstanding++; }
    cache_counters_submitted(&c->stats, expert_reader_inflight(c->reader));
    return 0;
}

/* Start the read of a requested key. 1 started, 0 no evictable slot now, -1 queue full. */
static int start_read(expert_cache *c, int key)
{
    int victim;
    if (expert_reader_queue_room(c->reader) == 0) return -1; /* before a victim is given up */
    if (cache_policy_miss(c->policy, key, slot_evictable, c, &victim) < 0) return 0;
    return slot_submit(c, slot_take(c, victim), key, 0) < 0 ? -1 : 1;
}

static void read_failed(expert_cache *c, int s, int status)
{
    int key = c->slot[s].key;
    const char *why = expert_reader_error(c->reader);
    c->stats.read_errors++;
    if (c->want_state[key] != WANT_NONE && c->failed_key < 0) {
        c->failed_key = key;
        /* The reader's message names the read that failed first (file, offset, errno text); it may
         * be another expert's, so it is relayed alone rather than under this expert's name. */
        if (why && *why) snprintf(c->err, sizeof c->err, "expert cache: %s", why);
        else snprintf(c->err, sizeof c->err, "expert cache: read of layer %d expert %d failed: %s", key / c->n_experts,
                      key % c->n_experts, strerror(status < 0 ? -status : EIO));
    }
    cache_policy_remove(c->policy, key);
    slot_clear(c, s);
}

/* What the checkpoint stores of one expert, not the 4 KiB-widened transfer: the decode cost. */
static uint64_t payload_bytes(const checkpoint *ck, int layer, int expert)
{
    const expert_extent *x = checkpoint_expert(ck, layer, expert);
    uint64_t n = 0;
    for (int i = 0; x && i < x->npieces; i++) n += x->piece[i].length;
    return n;
}

/* Collect finished reads; waits for one only when min_complete > 0. -1 when the reader fails. */
static int reap(expert_cache *c, int min_complete)
{
    uint64_t tags[REAP_BATCH];
    int status[REAP_BATCH];
    int got = expert_reader_reap(c->reader, min_complete, tags, status, REAP_BATCH);
    if (got < 0) {
        const char *why = expert_reader_error(c->reader);
        snprintf(c->err, sizeof c->err, "expert cache: reader failed: %s", why && *why ? why : "unknown error");
        return -1;
    }
    uint64_t now = cache_now_ns();
    for (int i = 0; i < got; i++) {
        int s = (int)tags[i];
        if (s < 0 || s >= c->n_slots || c->slot[s].state != SLOT_LOADING) continue;
        if (status[i] < 0) { read_failed(c, s, status[i]); continue; }
        int key = c->slot[s].key;
        c->slot[s].state = SLOT_READY;
        c->slot[s].landed_ns = now;
        int layer = key / c->n_experts;
        cache_counters_completed(&c->stats, layer, payload_bytes(c->ck, layer, key % c->n_experts),
                                 now - c->slot[s].issued_ns);
        if (c->slot[s].drop_on_land && c->slot[s].pins == 0 && c->want_state[key] == WANT_NONE) drop_guess(c, s);
    }
    return got;
}

/* ------------------------------------------------------------------ the provider */

static int key_of(const expert_cache *c, int layer, int expert)
{
    if (layer < 0 || layer >= c->n_layers || expert < 0 || expert >= c->n_experts) return -1;
    return layer * c->n_experts + expert;
}

static int layer_has_pending(const expert_cache *c)
{
    for (int i = 0; i < c->n_want; i++)
        if (c->want_state[c->want_key[i]] == WANT_OPEN && c->slot_of_key[c->want_key[i]] < 0) return 1;
    return 0;
}

/* The queued guess of the nearest layer ahead (the earliest queued of it), removed; -1 if none. */
static int pop_guess(expert_cache *c)
{
    int best = -1;
    for (int i = 0; i < c->n_queued; i++)
        if (best < 0 || c->guess_queue[i] / c->n_experts < c->guess_queue[best] / c->n_experts) best = i;
    if (best < 0) return -1;
    int k = c->guess_queue[best];
    memmove(c->guess_queue + best, c->guess_queue + best + 1, sizeof(int) * (size_t)(c->n_queued - best - 1));
    c->n_queued--;
    c->queued[k] = 0;
    return k;
}

static void unpop_guess(expert_cache *c, int k)
{
    memmove(c->guess_queue + 1, c->guess_queue, sizeof(int) * (size_t)c->n_queued);
    c->guess_queue[0] = k;
    c->n_queued++;
    c->queued[k] = 1;
}

/* Queued guesses into free queue room: a free slot, or the policy's own victim when it ranks it no
 * higher than the guess (cache_policy_prefetch); never while the current layer still waits for a
 * slot, never more than prefetch_cap unused guesses. A guess that finds no room stays queued. */
static void start_guesses(expert_cache *c)
{
    if (layer_has_pending(c)) return;
    while (c->prefetch_outstanding < c->prefetch_cap && expert_reader_queue_room(c->reader) > 0) {
        int k = pop_guess(c), victim;
        if (k < 0) return;
        if (c->slot_of_key[k] >= 0) continue;
        if (cache_policy_prefetch(c->policy, k, slot_evictable_for_prefetch, c, &victim) < 0) { unpop_guess(c, k); return; }
        if (slot_submit(c, slot_take(c, victim), k, 1) < 0) return;
    }
}

/* The wanted keys of this layer that have no slot yet, in request order; stops when no slot or
 * no queue room is left. Queued guesses take what room is left. */
static void start_pending_reads(expert_cache *c)
{
    for (int i = 0; i < c->n_want; i++) {
        int k = c->want_key[i];
        if (c->want_state[k] == WANT_OPEN && c->slot_of_key[k] < 0 && start_read(c, k) <= 0) return;
    }
    start_guesses(c);
}

static void begin_layer(expert_cache *c, int layer)
{
    for (int i = 0; i < c->n_want; i++) c->want_state[c->want_key[i]] = WANT_NONE;
    c->n_want = 0;
    c->cur_layer = layer;
    c->failed_key = -1;
}

/* One request of the layer: counted once, a hit when the key holds a slot (even one still loading). */
static void request_key(expert_cache *c, int key)
{
    if (c->want_state[key] != WANT_NONE) return; /* listed twice */
    c->want_state[key] = WANT_OPEN;
    c->want_key[c->n_want++] = key;
    int s = c->slot_of_key[key];
    cache_counters_request(&c->stats, key / c->n_experts, s >= 0);
    if (s < 0 && c->guessed[key]) cache_counters_guessed_missed(&c->stats, key / c->n_experts);
    c->guessed[key] = 0;
    if (s < 0) return;
    c->slot[s].drop_on_land = 0;
    if (c->slot[s].prefetched) {
        prefetch_settle(c, &c->slot[s], 1);
        cache_policy_prefetch_used(c->policy, key);
    } else {
        cache_policy_hit(c->policy, key);
    }
}

/* Guesses for this layer that it did not ask for were wrong: settled as wasted and dropped; the
 * ones never read leave the queue. */
static void settle_layer_guesses(expert_cache *c, int layer)
{
    int kept = 0;
    for (int i = 0; i < c->n_queued; i++) {
        int k = c->guess_queue[i];
        if (k / c->n_experts == layer) c->queued[k] = 0;
        else c->guess_queue[kept++] = k;
    }
    c->n_queued = kept;
    for (int e = 0; e < c->n_experts; e++) {
        int s = c->slot_of_key[layer * c->n_experts + e];
        c->guessed[layer * c->n_experts + e] = 0;
        if (s >= 0 && c->slot[s].prefetched && c->want_state[c->slot[s].key] == WANT_NONE) {
            prefetch_settle(c, &c->slot[s], 0);
            if (c->slot[s].pins == 0) drop_guess(c, s);
        }
    }
}

void expert_cache_want(void *cache, int layer, const int *experts, int n)
{
    expert_cache *c = cache;
    if (reap(c, 0) < 0) return; /* the error is reported by acquire_any */
    if (layer < 0 || layer >= c->n_layers) return;
    begin_layer(c, layer);
    for (int i = 0; i < n; i++) {
        int k = key_of(c, layer, experts[i]);
        if (k >= 0) request_key(c, k);
    }
    settle_layer_guesses(c, layer);
    start_pending_reads(c);
}

/* Among the listed keys: one READY that this layer has not taken yet; failing that (every listed
 * key already taken), any READY one. -1 if none. */
static int pick_ready(const expert_cache *c, int layer, const int *experts, int n, int *open_left)
{
    int any = -1;
    *open_left = 0;
    for (int i = 0; i < n; i++) {
        int k = key_of(c, layer, experts[i]), s = c->slot_of_key[k];
        int open = c->want_state[k] == WANT_OPEN;
        *open_left |= open;
        if (s < 0 || c->slot[s].state != SLOT_READY) continue;
        if (open) return i;
        if (any < 0) any = i;
    }
    return *open_left ? -1 : any;
}

/* The list checked and marked wanted (a no-op for keys already wanted); -1 with c->err. */
static int begin_acquire(expert_cache *c, int layer, const int *experts, int n)
{
    if (n <= 0) { snprintf(c->err, sizeof c->err, "expert cache: acquire with an empty list"); return -1; }
    for (int i = 0; i < n; i++)
        if (key_of(c, layer, experts[i]) < 0) {
            snprintf(c->err, sizeof c->err, "expert cache: no expert %d in layer %d (%d layers x %d experts)",
                     experts[i], layer, c->n_layers, c->n_experts);
            return -1;
        }
    if (layer != c->cur_layer) begin_layer(c, layer);
    for (int i = 0; i < n; i++) request_key(c, key_of(c, layer, experts[i]));
    return 0;
}

/* Pins a ready expert of the list: 0, or 1 when none is ready. */
static int pin_ready(expert_cache *c, int layer, const int *experts, int n, int *which, expert_weights *out)
{
    int open_left, i = pick_ready(c, layer, experts, n, &open_left);
    if (i < 0) return 1;
    int k = key_of(c, layer, experts[i]), s = c->slot_of_key[k];
    c->slot[s].pins++;
    if (c->want_state[k] == WANT_OPEN) c->want_state[k] = WANT_TAKEN;
    expert_reader_view(c->reader, layer, experts[i], slot_arena_slot(&c->arena, s), out);
    *which = i;
    return 0;
}

int expert_cache_acquire_any(void *cache, int layer, const int *experts, int n, int *which, expert_weights *out)
{
    expert_cache *c = cache;
    if (begin_acquire(c, layer, experts, n)) return -1;
    for (;;) {
        if (reap(c, 0) < 0) return -1;
        if (pin_ready(c, layer, experts, n, which, out) == 0) return 0;
        start_pending_reads(c);
        if (c->failed_key >= 0) return -1;
        if (expert_reader_inflight(c->reader) == 0) {
            snprintf(c->err, sizeof c->err, "expert cache: layer %d cannot load an expert: all %d slots are pinned "
                     "or needed by this layer (release some, or give the cache more slots)", layer, c->n_slots);
            return -1;
        }
        uint64_t t0 = cache_now_ns();
        int got = reap(c, 1);
        c->stats.stall_ns += cache_now_ns() - t0;
        if (got < 0) return -1;
    }
}

int expert_cache_acquire_ready(void *cache, int layer, const int *experts, int n, int *which, expert_weights *out)
{
    expert_cache *c = cache;
    if (begin_acquire(c, layer, experts, n) || reap(c, 0) < 0) return -1;
    if (pin_ready(c, layer, experts, n, which, out) == 0) return 0;
    start_pending_reads(c);
    return c->failed_key >= 0 ? -1 : 1;
}

void expert_cache_release(void *cache, int layer, int expert)
{
    expert_cache *c = cache;
    int k = key_of(c, layer, expert);
    if (k < 0 || c->slot_of_key[k] < 0) return;
    slot_info *si = &c->slot[c->slot_of_key[k]];
    if (si->pins > 0) si->pins--;
    if (si->pins == 0 && c->want_state[k] == WANT_TAKEN) c->want_state[k] = WANT_DONE;
    start_pending_reads(c);
}

/* Guesses wait in the queue (nearest layer first, then in the order given) and are read as queue
 * room and slots allow (start_guesses); a guess already holding a slot or queued is not added. */
void expert_cache_prefetch(void *cache, int layer, const int *experts, int n)
{
    expert_cache *c = cache;
    for (int i = 0; i < n; i++) {
        int k = key_of(c, layer, experts[i]);
        if (k < 0 || c->slot_of_key[k] >= 0) continue;
        c->guessed[k] = 1; /* cleared when its layer comes */
        if (!c->queued[k]) { c->queued[k] = 1; c->guess_queue[c->n_queued++] = k; }
    }
    if (reap(c, 0) < 0) return;
    start_guesses(c);
}

const char *expert_cache_error(void *cache)
{
    return ((expert_cache *)cache)->err;
}

int expert_cache_resident(const void *cache, int layer, int expert)
{
    const expert_cache *c = cache;
    int k = key_of(c, layer, expert);
    return k >= 0 && c->slot_of_key[k] >= 0;
}

int expert_cache_holds_layer(void *cache, int layer)
{
    const expert_cache *c = cache;
    if (layer < 0 || layer >= c->n_layers) return 0;
    for (int e = 0; e < c->n_experts; e++)
        if (c->slot_of_key[layer * c->n_experts + e] < 0) return 0;
    return 1;
}

int expert_cache_free_slots(const void *cache)
{
    return ((const expert_cache *)cache)->n_free;
}

expert_provider expert_cache_provider(expert_cache *c)
{
    return (expert_provider){.self = c, .want = expert_cache_want, .acquire_any = expert_cache_acquire_any,
                             .acquire_ready = expert_cache_acquire_ready,
                             .release = expert_cache_release, .prefetch = expert_cache_prefetch,
                             .holds_layer = expert_cache_holds_layer,
                             .error = expert_cache_error};
}

int expert_cache_stats_get(const expert_cache *c, expert_cache_stats *out)
{
    if (cache_counters_snapshot(&c->stats, out) < 0) return -1;
    out->policy = c->policy_kind;
    out->n_slots = c->n_slots;
    out->slot_bytes = c->arena.slot_bytes;
    return 0;
}
