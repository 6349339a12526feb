/* The live cache over the real reader (io/expert_io.h) on the R1-format fixtures: a decode-like walk
 * of random expert unions per MoE layer through a cache smaller than one layer's union, prefetch
 * guesses included, once with completions reordered; every acquired expert's six tensors must equal
 * checkpoint_read of them (a plain pread, independent of the cache and io_uring).
 * usage: test_cache_reader FIXTURE_DIR... */
#include <string.h>
#include "cache/expert_cache.h"
#include "tests/test_cache_check.h"

static int weights_match(const checkpoint *ck, int layer, int expert, const expert_weights *w)
{
    const void *got[EXPERT_NTENSORS] = {w->gate, w->gate_scale, w->up, w->up_scale, w->down, w->down_scale};
    const expert_extent *x = checkpoint_expert(ck, layer, expert);
    for (int k = 0; k < EXPERT_NTENSORS; k++) {
        uint8_t *want = malloc(x->t[k]->nbytes);
        char err[512];
        int ok = want && checkpoint_read(ck, x->t[k], 0, want, x->t[k]->nbytes, err, sizeof err) == 0 &&
                 memcmp(want, got[k], x->t[k]->nbytes) == 0;
        free(want);
        if (!ok) { fprintf(stderr, "  %s differs from checkpoint_read\n", x->t[k]->name); return 0; }
    }
    return 1;
}

/* reorder: completions come back late and out of order (the reader's reordering test backend). */
static void walk(const checkpoint *ck, io_backend backend, cache_policy_kind kind, int n_slots, int reorder)
{
    char err[512];
    expert_reader *r = expert_reader_create(ck, backend, 4, err, sizeof err);
    CHECK(r != NULL, "reader: %s", err);
    if (!r) return;
    io_test_reorder how = {.seed = 12345, .max_delay = 3};
    CHECK(!reorder || expert_reader_test_reorder(r, &how) == 0, "reorder: %s", expert_reader_error(r));
    expert_cache *c = expert_cache_create(ck, r, n_slots, kind, err, sizeof err);
    CHECK(c != NULL, "cache: %s", err);
    if (!c) { expert_reader_free(r); return; }
    CHECK(expert_cache_slot_bytes(c) == expert_reader_slot_bytes(r), "slot size");
    expert_provider p = expert_cache_provider(c);
    const model_config *cfg = &ck->cfg;
    int layers = config_total_layers(cfg), k = cfg->num_experts_per_tok, E = cfg->n_routed_experts;
    unsigned long long rng = 77 + (unsigned long long)kind;
    uint64_t requests = 0, expert_bytes = 0;
    for (int step = 0; step < 12; step++)
        for (int l = 0; l < layers; l++) {
            if (!config_layer_is_moe(cfg, l)) continue;
            int list[64], n = 0, taken[1024] = {0};
            while (n < 2 * k && n < E) { /* two rows' union, popular low ids */
                int a = rng_below(&rng, E), b = rng_below(&rng, E), e = a < b ? a : b;
                if (!taken[e]) { taken[e] = 1; list[n++] = e; }
            }
            p.want(p.self, l, list, n);
            requests += (uint64_t)n;
            int guess[4] = {rng_below(&rng, E), rng_below(&rng, E), 0, 1};
            p.prefetch(p.self, l + 1 < layers ? l + 1 : l, guess, 4);
            /* On odd steps as the forward pass takes them: one waited for, then every other one
             * ready now, all pinned together, each still intact once the last is pinned. */
            while (n > 0) {
                int which, held[64], nh = 0;
                expert_weights w[64];
                int rc = p.acquire_any(p.self, l, list, n, &which, &w[0]);
                CHECK(rc == 0, "acquire: %s", p.error(p.self));
                if (rc) break;
                do {
                    held[nh++] = list[which];
                    list[which] = list[--n];
                } while (step % 2 && n > 0 && (rc = p.acquire_ready(p.self, l, list, n, &which, &w[nh])) == 0);
                CHECK(rc >= 0, "acquire_ready: %s", p.error(p.self));
                CHECK(nh <= n_slots, "%d experts pinned in %d slots", nh, n_slots);
                for (int i = 0; i < nh; i++) {
                    CHECK(weights_match(ck, l, held[i], &w[i]), "layer %d expert %d (%d of %d pinned together)", l,
                          held[i], i + 1, nh);
                    p.release(p.self, l, held[i]);
                }
                if (rc < 0) break;
            }
        }
    expert_cache_stats s;
    expert_cache_stats_get(c, &s);
    CHECK(s.hits + s.misses == requests, "requests");
    CHECK(s.read_errors == 0, "read errors");
    const expert_extent *x = checkpoint_expert(ck, layers - 1, 0);
    for (int t = 0; t < EXPERT_NTENSORS; t++) expert_bytes += x->t[t]->nbytes;
    CHECK(s.bytes_read == s.reads_completed * expert_bytes, "bytes read %llu for %llu reads of %llu bytes",
          (unsigned long long)s.bytes_read, (unsigned long long)s.reads_completed, (unsigned long long)expert_bytes);
    CHECK(s.reads_completed >= s.misses, "every miss read");
    expert_cache_stats_release(&s);
    expert_cache_free(c);
    expert_reader_free(r);
}

/* Every expert of layer l (E <= 256) read through the cache, one at a time. */
static void read_whole_layer(expert_provider *p, int l, int E)
{
    int list[256] = {0}, n;
    for (n = 0; n < E; n++) list[n] = n;
    p->want(p->self, l, list, n);
    while (n > 0) {
        int which;
        expert_weights w;
        if (p->acquire_any(p->self, l, list, n, &which, &w)) { CHECK(0, "acquire: %s", p->error(p->self)); return; }
        p->release(p->self, l, list[which]);
        list[which] = list[--n];
    }
}

/* holds_layer: 0 for a layer with an expert never read, 1 once every expert of the layer has been
 * read into the cache (as many slots as a layer has experts), 0 again after one is pushed out. */
static void holds_layer(const checkpoint *ck)
{
    char err[512];
    const model_config *cfg = &ck->cfg;
    int E = cfg->n_routed_experts, layers = config_total_layers(cfg), a = -1, b = -1;
    for (int l = 0; l < layers; l++)
        if (config_layer_is_moe(cfg, l)) { if (a < 0) a = l; else if (b < 0) b = l; }
    CHECK(b >= 0 && E <= 256, "%s: holds_layer needs two MoE layers of at most 256 experts (%d experts)", ck->dir, E);
    if (b < 0 || E > 256) return;
    expert_reader *r = expert_reader_create(ck, IO_BACKEND_AUTO, 4, err, sizeof err);
    expert_cache *c = r ? expert_cache_create(ck, r, E, CACHE_POLICY_LRU, err, sizeof err) : NULL;
    CHECK(c != NULL, "cache: %s", err);
    if (!c) { expert_reader_free(r); return; }
    expert_provider p = expert_cache_provider(c);
    CHECK(!p.holds_layer(p.self, a), "layer %d held before any read", a);
    read_whole_layer(&p, a, E);
    CHECK(p.holds_layer(p.self, a), "layer %d not held after reading all %d experts into %d slots", a, E, E);
    read_whole_layer(&p, b, E);
    CHECK(!p.holds_layer(p.self, a), "layer %d still held after layer %d's %d experts took every slot", a, b, E);
    CHECK(p.holds_layer(p.self, b), "layer %d not held after reading all of it", b);
    expert_cache_free(c);
    expert_reader_free(r);
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: test_cache_reader FIXTURE_DIR...\n"); return 2; }
    for (int i = 1; i < argc; i++) {
        char err[512];
        checkpoint *ck = checkpoint_open(argv[i], err, sizeof err);
        CHECK(ck != NULL, "%s", err);
        if (!ck) continue;
        walk(ck, IO_BACKEND_AUTO, CACHE_POLICY_LFU, 5, 0);
        walk(ck, IO_BACKEND_PREAD, CACHE_POLICY_ARC, 3, 0);
        walk(ck, IO_BACKEND_AUTO, CACHE_POLICY_LRU, 40, 0);
        walk(ck, IO_BACKEND_AUTO, CACHE_POLICY_LFU, 4, 1);
        holds_layer(ck);
        checkpoint_close(ck);
    }
    return check_report("test_cache_reader");
}
