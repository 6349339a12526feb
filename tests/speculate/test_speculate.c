/* Speculation invariants on the tiny reference fixtures:
 *  - a 2-row batch gives bit-identical rows to two 1-row passes (what makes MTP exact);
 *  - a rejected draft leaves no trace: the next logits equal those of a run that never saw it;
 *  - a batch or position beyond the reserved scratch is an error, not an overrun;
 *  - greedy output with MTP on and auto equals MTP off for long generations, and sampled output
 *    too for the same seed (each position's draw is keyed by the seed and the position);
 *  - the point-mass acceptance rule preserves the target distribution (chi-square), alone and
 *    end to end (second generated token, MTP on and auto vs off over many seeds);
 *  - auto's holes in the MTP KV: no draft reads a row not written for its position (caches filled
 *    with NaN beforehand), the windows are as worked out, and a run resumed from what
 *    gen_checkpoint says to store drafts as the uninterrupted one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/expert_direct.h"
#include "core/kernels.h"
#include "core/model.h"
#include "speculate/speculate.h"
#include "tests/engine/engine_test.h"

typedef struct { checkpoint *ck; thread_pool *pool; model *m; expert_direct *d; expert_provider ep; } fixture;

static const int prompt[] = {0, 208, 478, 148, 501, 335, 440, 17, 230, 11, 99, 250};
enum { NP = sizeof prompt / sizeof prompt[0] };

static int fixture_open(fixture *f, const char *dir)
{
    char err[512];
    memset(f, 0, sizeof *f);
    if (!(f->ck = checkpoint_open(dir, err, sizeof err)) || !(f->pool = thread_pool_create(1)) ||
        !(f->m = model_load(f->ck, f->pool, err, sizeof err)) || model_reserve_scratch(f->m, NP, 64, err, sizeof err)) {
        CHECK(0, "%s: %s", dir, err);
        return -1;
    }
    f->d = expert_direct_create(f->ck);
    f->ep = expert_direct_provider(f->d);
    return 0;
}

static void fixture_close(fixture *f)
{
    expert_direct_free(f->d);
    model_free(f->m);
    thread_pool_free(f->pool);
    checkpoint_close(f->ck);
}

static int prefill(fixture *f, kv_cache *kv, const int *ids, int n)
{
    int pos[64];
    char err[512];
    for (int i = 0; i < n; i++) pos[i] = i;
    forward_request req = {0};
    int rc = model_forward(f->m, kv, &f->ep, ids, pos, n, &req, err, sizeof err);
    CHECK(rc == 0, "prefill: %s", err);
    return rc;
}

static int forward_rows(fixture *f, kv_cache *kv, const int *ids, int pos0, int nb, float *logits)
{
    int pos[4] = {pos0, pos0 + 1, pos0 + 2, pos0 + 3};
    char err[512];
    forward_request req = {.logits = logits};
    int rc = model_forward(f->m, kv, &f->ep, ids, pos, nb, &req, err, sizeof err);
    CHECK(rc == 0, "forward: %s", err);
    return rc;
}

/* The arena the fixture reserved (NP rows over 64 positions) bounds every pass with an error,
 * never a write past its end; a smaller reservation keeps it, more rows grow it. */
static void scratch_limits(fixture *f)
{
    const model_config *c = model_get_config(f->m);
    kv_cache *kv = kv_cache_create(c, 0, c->num_hidden_layers, 128, DTYPE_F32);
    int ids[NP + 1] = {0}, pos[NP + 1], far = 64;
    char err[512] = "";
    for (int i = 0; i <= NP; i++) pos[i] = i;
    forward_request req = {0};
    size_t bytes = model_scratch_bytes(f->m);
    CHECK(bytes > 0, "no scratch after model_reserve_scratch");
    CHECK(model_forward(f->m, kv, &f->ep, ids, pos, NP + 1, &req, err, sizeof err) != 0 && strstr(err, "reserved"),
          "%d rows with %d reserved: '%s'", NP + 1, NP, err);
    CHECK(model_forward(f->m, kv, &f->ep, ids, &far, 1, &req, err, sizeof err) != 0 && strstr(err, "reserved"),
          "position 64 with ctx 64 reserved: '%s'", err);
    CHECK(model_reserve_scratch(f->m, 1, 1, err, sizeof err) == 0 && model_scratch_bytes(f->m) == bytes, "a smaller reservation changed the arena");
    /* No buffer grows with the context (attention keeps a running softmax): more positions are
     * allowed without a larger arena; more rows grow it. */
    CHECK(model_reserve_scratch(f->m, NP, 128, err, sizeof err) == 0 && model_scratch_bytes(f->m) == bytes,
          "reserving more positions changed the arena");
    CHECK(model_forward(f->m, kv, &f->ep, ids, &far, 1, &req, err, sizeof err) == 0, "position 64 after growing: %s", err);
    CHECK(model_reserve_scratch(f->m, NP + 1, 128, err, sizeof err) == 0 && model_scratch_bytes(f->m) > bytes, "the arena did not grow");
    kv_cache_free(kv);
}

static void batch_and_rollback(fixture *f)
{
    const model_config *c = model_get_config(f->m);
    int V = c->vocab_size, L = c->num_hidden_layers;
    kv_cache *a = kv_cache_create(c, 0, L, 64, DTYPE_F32), *b = kv_cache_create(c, 0, L, 64, DTYPE_F32);
    float *la = malloc(2 * (size_t)V * sizeof(float)), *lb = malloc(2 * (size_t)V * sizeof(float));
    prefill(f, a, prompt, NP);
    prefill(f, b, prompt, NP);

    /* Batch invariance: [x, y] at [n, n+1] vs x then y. */
    int rows[2] = {7, 300};
    forward_rows(f, a, rows, NP, 2, la);
    forward_rows(f, b, rows, NP, 1, lb);
    forward_rows(f, b, rows + 1, NP + 1, 1, lb + V);
    CHECK(!memcmp(la, lb, 2 * (size_t)V * sizeof(float)), "2-row batch differs from two 1-row passes");

    /* Rollback: a's row n+1 (the draft 300) is rejected, so the sequence continues at n+1 with
     * another token over a cache that still holds the draft's row there. Its logits, and the next
     * step's, must equal those of a cache that never saw the draft, bit for bit. */
    kv_cache *c1 = kv_cache_create(c, 0, L, 64, DTYPE_F32);
    prefill(f, c1, prompt, NP);
    forward_rows(f, c1, rows, NP, 1, lb);
    int next[2] = {42, 99};
    for (int i = 0; i < 2; i++) {
        forward_rows(f, a, &next[i], NP + 1 + i, 1, la);
        forward_rows(f, c1, &next[i], NP + 1 + i, 1, lb);
        CHECK(!memcmp(la, lb, (size_t)V * sizeof(float)), "logits %d step(s) after a rejected draft differ from a run without it", i + 1);
    }
    kv_cache_free(a); kv_cache_free(b); kv_cache_free(c1);
    free(la); free(lb);
}

typedef struct { int *tok; int n, cap; } token_list;
static void collect(void *ctx, int token) { token_list *l = ctx; if (l->n < l->cap) l->tok[l->n++] = token; }

/* A cache that holds a fixed part of the experts: those whose (layer + expert) is not a multiple of
 * *ctx. An auto verify pass drops its draft row before a layer where the router lookahead predicts
 * one of the others for it alone, so this exercises the dropped-row path. */
static int partly_resident(void *ctx, int layer, int expert)
{
    return (layer + expert) % *(const int *)ctx != 0;
}

static int missing_every = 0; /* 0: every expert resident (no residency hook) */

static int run_generate(fixture *f, int mtp, double temp, double top_p, uint64_t seed, int n_new, int *out, gen_stats *st)
{
    char err[512];
    sampler *s = sampler_create(model_get_config(f->m)->vocab_size, temp, top_p, seed);
    token_list got = {out, 0, n_new};
    gen_options o = {.mtp = mtp, .max_new = n_new, .eos_id = -1, .ctx = NP + n_new + 4, .prefill_chunk = 16,
                     .sampler = s, .on_token = collect, .token_ctx = &got,
                     .expert_resident = missing_every ? partly_resident : NULL, .resident_ctx = &missing_every,
                     .drop_at_first_load = 1};
    int rc = model_reserve_scratch(f->m, o.prefill_chunk, o.ctx, err, sizeof err);
    if (rc == 0) rc = generate(f->m, &f->ep, prompt, NP, &o, st, err, sizeof err);
    CHECK(rc == 0, "generate: %s", err);
    sampler_free(s);
    return got.n;
}

static void greedy_long(fixture *f, const char *dir)
{
    enum { N = 300 };
    int off[N], on[N], au[N];
    gen_stats so, sn, sa;
    int n0 = run_generate(f, GEN_MTP_OFF, 0, 1, 1, N, off, &so), n1 = run_generate(f, GEN_MTP_ON, 0, 1, 1, N, on, &sn);
    int n2 = run_generate(f, GEN_MTP_AUTO, 0, 1, 1, N, au, &sa);
    CHECK(n0 == N && n1 == N && !memcmp(off, on, sizeof off), "%s: greedy MTP on differs from MTP off over %d tokens", dir, N);
    CHECK(n2 == N && !memcmp(off, au, sizeof off), "%s: greedy MTP auto differs from MTP off over %d tokens", dir, N);
    CHECK(sn.main_passes < so.main_passes || sn.accepted == 0, "%s: pass count inconsistent", dir);
    CHECK(sn.main_passes == N - 1 - sn.accepted, "%s: %d passes for %d tokens with %d accepted", dir, sn.main_passes, N, sn.accepted);
    /* Every auto step is one pass, with or without a draft, and every pass is accounted for. */
    CHECK(sa.main_passes == N - 1 - sa.accepted && sa.drafts + sa.rows_dropped + sa.plain_steps == sa.main_passes,
          "%s: auto: %d passes = %d drafts + %d dropped + %d plain for %d tokens with %d accepted", dir, sa.main_passes,
          sa.drafts, sa.rows_dropped, sa.plain_steps, N, sa.accepted);
    CHECK(sa.plain_steps == sa.no_draft_cost + sa.no_draft_explore + sa.no_draft_end + sa.low_odds_drafts,
          "%s: auto: %d plain steps but reasons %d + %d + %d + %d", dir, sa.plain_steps, sa.no_draft_cost,
          sa.no_draft_explore, sa.no_draft_end, sa.low_odds_drafts);
    printf("%s: greedy %d tokens identical with MTP auto (%d drafts, %d dropped mid-pass, %d plain steps)\n", dir, N,
           sa.drafts, sa.rows_dropped, sa.plain_steps);
    printf("%s: greedy %d tokens identical with MTP on (%d of %d drafts accepted, %d vs %d main passes)\n",
           dir, N, sn.accepted, sn.drafts, sn.main_passes, so.main_passes);
}

/* Sampled output is the same for the same seed whatever the path: each position's token is drawn
 * with the generator keyed by the seed and the position, and a draft is accepted iff it equals it. */
static void sampled_identity(fixture *f, const char *dir)
{
    enum { N = 120 };
    for (uint64_t seed = 7; seed < 10; seed++) {
        int off[N], on[N], au[N];
        gen_stats st;
        int n0 = run_generate(f, GEN_MTP_OFF, 0.8, 0.95, seed, N, off, &st);
        int n1 = run_generate(f, GEN_MTP_ON, 0.8, 0.95, seed, N, on, &st);
        int n2 = run_generate(f, GEN_MTP_AUTO, 0.8, 0.95, seed, N, au, &st);
        CHECK(n0 == N && n1 == N && n2 == N && !memcmp(off, on, sizeof off) && !memcmp(off, au, sizeof off),
              "%s: seed %llu: sampled output differs between MTP off, on and auto", dir, (unsigned long long)seed);
    }
}

/* With part of the experts missing, auto drops draft rows mid-pass (row 0 goes on alone), and the
 * output still equals MTP off, greedy and sampled; the dropped rows are counted. */
static void dropped_rows(fixture *f, const char *dir)
{
    enum { N = 120 };
    int off[N], au[N];
    gen_stats so, sa;
    for (uint64_t seed = 7; seed < 9; seed++) {
        double temp = seed == 7 ? 0 : 0.8;
        missing_every = 0;
        int n0 = run_generate(f, GEN_MTP_OFF, temp, 0.95, seed, N, off, &so);
        missing_every = 3;
        int n2 = run_generate(f, GEN_MTP_AUTO, temp, 0.95, seed, N, au, &sa);
        missing_every = 0;
        CHECK(n0 == N && n2 == N && !memcmp(off, au, sizeof off), "%s: seed %llu: auto with dropped draft rows differs from MTP off",
              dir, (unsigned long long)seed);
        CHECK(sa.rows_dropped > 0, "%s: seed %llu: no draft row was dropped with a third of the experts missing", dir,
              (unsigned long long)seed);
        CHECK(sa.main_passes == N - 1 - sa.accepted && sa.drafts + sa.rows_dropped + sa.plain_steps == sa.main_passes,
              "%s: dropped rows: %d passes = %d drafts + %d dropped + %d plain", dir, sa.main_passes, sa.drafts,
              sa.rows_dropped, sa.plain_steps);
        printf("%s: seed %llu: auto with dropped draft rows identical to MTP off (%d dropped, %d drafts)\n", dir,
               (unsigned long long)seed, sa.rows_dropped, sa.drafts);
    }
}

/* Expert-major prefill: within a chunk each MoE layer acquires (reads, with the direct provider)
 * every expert its rows chose exactly once. The reference count is the set of distinct experts the
 * route observer reports per (chunk, layer), collected independently of the model's own union. */
enum { PF_LAYERS = 8, PF_EXPERTS = 256, PF_CHUNKS = 4 };
typedef struct {
    expert_provider *inner;
    int chunk;                                   /* the chunk being processed */
    int acquired[PF_CHUNKS][PF_LAYERS];
    unsigned char routed[PF_CHUNKS][PF_LAYERS][PF_EXPERTS];
} prefill_count;

static void pc_want(void *self, int layer, const int *e, int n) { prefill_count *c = self; c->inner->want(c->inner->self, layer, e, n); }
static int pc_acquire(void *self, int layer, const int *e, int n, int *which, expert_weights *w)
{
    prefill_count *c = self;
    if (layer < PF_LAYERS) c->acquired[c->chunk][layer]++;
    return c->inner->acquire_any(c->inner->self, layer, e, n, which, w);
}
static void pc_release(void *self, int layer, int e) { prefill_count *c = self; c->inner->release(c->inner->self, layer, e); }
static const char *pc_error(void *self) { prefill_count *c = self; return c->inner->error(c->inner->self); }
static void pc_route(void *ctx, int layer, int row, const int *e, int k)
{
    prefill_count *c = ctx;
    (void)row;
    for (int i = 0; i < k; i++)
        if (layer < PF_LAYERS && e[i] < PF_EXPERTS) c->routed[c->chunk][layer][e[i]] = 1;
}
static int pc_prefill(void *ctx, int done, int n) { prefill_count *c = ctx; (void)done; (void)n; c->chunk++; return 0; }

static void prefill_reads_once(fixture *f, const char *dir)
{
    static prefill_count c;
    const model_config *cfg = model_get_config(f->m);
    int fits = cfg->num_hidden_layers <= PF_LAYERS && cfg->n_routed_experts <= PF_EXPERTS;
    CHECK(fits, "%s: fixture larger than the counters", dir);
    if (!fits) return;
    memset(&c, 0, sizeof c);
    c.inner = &f->ep;
    expert_provider ep = {.self = &c, .want = pc_want, .acquire_any = pc_acquire, .release = pc_release, .error = pc_error};
    char err[512];
    sampler *s = sampler_create(model_get_config(f->m)->vocab_size, 0, 1, 1);
    gen_options o = {.mtp = GEN_MTP_OFF, .max_new = 1, .eos_id = -1, .ctx = NP + 4, .prefill_chunk = 5, .sampler = s,
                     .on_route = pc_route, .route_ctx = &c, .on_prefill = pc_prefill, .prefill_ctx = &c};
    gen_stats st;
    int rc = model_reserve_scratch(f->m, o.prefill_chunk, o.ctx, err, sizeof err);
    if (rc == 0) rc = generate(f->m, &ep, prompt, NP, &o, &st, err, sizeof err);
    CHECK(rc == 0 && c.chunk == 3, "%s: prefill of %d rows in chunks of 5: %s (%d chunks)", dir, NP, err, c.chunk);
    int moe = 0;
    for (int ch = 0; ch < 3; ch++)
        for (int l = 0; l < PF_LAYERS; l++) {
            int distinct = 0;
            for (int e = 0; e < PF_EXPERTS; e++) distinct += c.routed[ch][l][e];
            moe += distinct > 0;
            CHECK(c.acquired[ch][l] == distinct, "%s: chunk %d layer %d: %d expert reads for %d distinct experts routed",
                  dir, ch, l, c.acquired[ch][l], distinct);
        }
    CHECK(moe > 0, "%s: no MoE layer routed anything in prefill", dir);
    sampler_free(s);
}

/* --mtp auto with holes in its MTP KV. A pinned schedule drafts while generated % 40 < 3, with a
 * window of HOLE_W rows, so each burst's first draft follows ~37 steps whose KV-only MTP rows were
 * never written but the last HOLE_W. The caches are the caller's, filled first with a pattern
 * (what an earlier request left in them is anything): NaN, or zeros. A draft that attended to a row
 * not written for its position would turn NaN under the first and not the second, so the drafts
 * and accepted counts of the two runs would part. */
enum { HOLE_W = 4, HOLE_N = 200, HOLE_MAX_B = 256 };

typedef struct {
    int n, len[HOLE_MAX_B], draft[HOLE_MAX_B], from[HOLE_MAX_B], to[HOLE_MAX_B], fresh[HOLE_MAX_B];
    /* the rows an observer that keeps the KV has stored so far (NaN where none), and their state
     * at boundary snap_at, to resume from */
    kv_cache *kv, *mtp_kv, *snap_kv, *snap_mtp;
    int snap_at;
    gen_checkpoint snap;
} boundary_log;

static int bursts(void *ctx, int generated) { (void)ctx; return generated % 40 < 3; }

static void kv_fill(kv_cache *kv, float v)
{
    size_t rows = (size_t)kv->n_layers * kv->ctx;
    for (size_t i = 0; i < rows * kv->latent_dim; i++) ((float *)kv->latent)[i] = v;
    for (size_t i = 0; i < rows * kv->rope_dim; i++) ((float *)kv->krope)[i] = v;
}

static void kv_copy_rows(kv_cache *dst, const kv_cache *src, int from, int to)
{
    for (int l = 0; src && l < src->n_layers && from < to; l++) {
        size_t row0 = (size_t)l * src->ctx + from, n = (size_t)(to - from);
        memcpy((float *)dst->latent + row0 * src->latent_dim, (const float *)src->latent + row0 * src->latent_dim,
               n * src->latent_dim * sizeof(float));
        memcpy((float *)dst->krope + row0 * src->rope_dim, (const float *)src->krope + row0 * src->rope_dim,
               n * src->rope_dim * sizeof(float));
    }
}

/* Stores what gen_checkpoint says is new (main rows since the previous boundary, MTP rows
 * [mtp_new, mtp_to)), as a session does, and logs the boundary. */
static int log_boundary(void *ctx, const gen_checkpoint *cp, const kv_cache *kv, const kv_cache *mtp_kv, char *err, size_t errlen)
{
    boundary_log *b = ctx;
    (void)err; (void)errlen;
    if (b->n >= HOLE_MAX_B) return 0;
    kv_copy_rows(b->kv, kv, b->n ? b->len[b->n - 1] : 0, cp->len);
    kv_copy_rows(b->mtp_kv, mtp_kv, cp->mtp_new, cp->mtp_to);
    b->len[b->n] = cp->len;
    b->draft[b->n] = cp->draft;
    b->from[b->n] = cp->mtp_from;
    b->to[b->n] = cp->mtp_to;
    b->fresh[b->n] = cp->mtp_new;
    if (b->n++ == b->snap_at) {
        kv_copy_rows(b->snap_kv, b->kv, 0, b->kv->ctx);
        kv_copy_rows(b->snap_mtp, b->mtp_kv, 0, b->mtp_kv->ctx);
        b->snap = *cp;
    }
    return 0;
}

static int restore_snapshot(void *ctx, kv_cache *kv, kv_cache *mtp_kv, char *err, size_t errlen)
{
    boundary_log *b = ctx;
    (void)err; (void)errlen;
    kv_copy_rows(kv, b->snap_kv, 0, kv->ctx);
    kv_copy_rows(mtp_kv, b->snap_mtp, 0, mtp_kv->ctx);
    return 0;
}

/* One run with holes over caches filled with `fill`; from b->snap when resume is set. */
static int run_holes(fixture *f, int mtp, double temp, uint64_t seed, float fill, boundary_log *b, int resume, int *out,
                     gen_stats *st)
{
    const model_config *c = model_get_config(f->m);
    char err[512];
    int ctx = NP + HOLE_N + 4;
    sampler *s = sampler_create(c->vocab_size, temp, 0.95, seed);
    kv_cache *kv = kv_cache_create(c, 0, c->num_hidden_layers, ctx, DTYPE_F32);
    kv_cache *mkv = kv_cache_create(c, c->num_hidden_layers, 1, ctx, DTYPE_F32);
    kv_fill(kv, fill);
    kv_fill(mkv, fill);
    token_list got = {out, 0, HOLE_N};
    gen_options o = {.mtp = mtp, .max_new = HOLE_N, .eos_id = -1, .ctx = ctx, .prefill_chunk = 16, .sampler = s,
                     .on_token = collect, .token_ctx = &got, .mtp_window = HOLE_W,
                     .draft_schedule = mtp == GEN_MTP_AUTO ? bursts : NULL, .kv = kv, .mtp_kv = mkv,
                     .on_checkpoint = resume ? NULL : log_boundary, .checkpoint_ctx = b,
                     .resume = resume ? &b->snap : NULL, .restore_kv = restore_snapshot};
    int rc = model_reserve_scratch(f->m, o.prefill_chunk, o.ctx, err, sizeof err);
    if (rc == 0) rc = generate(f->m, &f->ep, prompt, NP, &o, st, err, sizeof err);
    CHECK(rc == 0, "generate with holes: %s", err);
    sampler_free(s);
    kv_cache_free(kv);
    kv_cache_free(mkv);
    return got.n;
}

static void boundary_log_init(fixture *f, boundary_log *b, int snap_at)
{
    const model_config *c = model_get_config(f->m);
    memset(b, 0, sizeof *b);
    int ctx = NP + HOLE_N + 4;
    b->kv = kv_cache_create(c, 0, c->num_hidden_layers, ctx, DTYPE_F32);
    b->snap_kv = kv_cache_create(c, 0, c->num_hidden_layers, ctx, DTYPE_F32);
    b->mtp_kv = kv_cache_create(c, c->num_hidden_layers, 1, ctx, DTYPE_F32);
    b->snap_mtp = kv_cache_create(c, c->num_hidden_layers, 1, ctx, DTYPE_F32);
    kv_fill(b->kv, NAN);
    kv_fill(b->mtp_kv, NAN);
    b->snap_at = snap_at;
}

static void boundary_log_free(boundary_log *b)
{
    kv_cache_free(b->kv); kv_cache_free(b->snap_kv); kv_cache_free(b->mtp_kv); kv_cache_free(b->snap_mtp);
}

/* The valid MTP rows the loop reports: within the KV, the new ones among them, and after a draft
 * that follows more than HOLE_W steps without one, exactly the window's rows and the draft's own
 * (worked out from the schedule: the ring holds the HOLE_W rows before the draft row). */
static int check_windows(const boundary_log *b, const char *dir)
{
    int holes = 0;
    for (int i = 0; i < b->n; i++) {
        CHECK(0 <= b->from[i] && b->from[i] <= b->fresh[i] && b->fresh[i] <= b->to[i] && b->to[i] <= b->len[i],
              "%s: boundary %d: MTP rows [%d, %d), new from %d, KV length %d", dir, i, b->from[i], b->to[i], b->fresh[i], b->len[i]);
        int quiet = i > HOLE_W + 1;
        for (int k = 1; k <= HOLE_W + 1 && quiet; k++) quiet = b->draft[i - k] < 0;
        if (b->draft[i] < 0 || !quiet) continue;
        holes++;
        CHECK(b->to[i] == b->len[i] && b->to[i] - b->from[i] == HOLE_W + 1,
              "%s: boundary %d, a draft after a hole: MTP rows [%d, %d) at KV length %d, want the last %d", dir, i, b->from[i],
              b->to[i], b->len[i], HOLE_W + 1);
    }
    return holes;
}

/* Holes: output as MTP off's, greedy and sampled; the same drafts, boundary by boundary, over NaN-
 * and zero-filled caches; drafts accepted (by the trained model: the fixtures' random MTP layers
 * draft nothing the main model takes); the windows as worked out. */
static void mtp_holes(fixture *f, const char *dir, int trained)
{
    for (int round = 0; round < 2; round++) {
        double temp = round ? 0.8 : 0;
        uint64_t seed = 11 + round;
        int out[3][HOLE_N], n[3], holes = 0;
        gen_stats st[3];
        boundary_log b[3];
        for (int r = 0; r < 3; r++) {
            boundary_log_init(f, &b[r], -1);
            n[r] = run_holes(f, r ? GEN_MTP_AUTO : GEN_MTP_OFF, temp, seed, r == 1 ? NAN : 0, &b[r], 0, out[r], &st[r]);
        }
        holes = check_windows(&b[1], dir);
        int same_drafts = b[1].n == b[2].n && !memcmp(b[1].draft, b[2].draft, (size_t)b[1].n * sizeof(int));
        CHECK(n[0] == HOLE_N && n[1] == HOLE_N && n[2] == HOLE_N && !memcmp(out[0], out[1], sizeof out[0]) &&
              !memcmp(out[0], out[2], sizeof out[0]), "%s: temp %.1f: auto with holes in the MTP KV differs from MTP off", dir, temp);
        CHECK(same_drafts && st[1].accepted == st[2].accepted,
              "%s: temp %.1f: drafts over NaN-filled caches differ from those over zero-filled ones (%d vs %d accepted): a "
              "draft read an MTP row not written for its position", dir, temp, st[1].accepted, st[2].accepted);
        CHECK((st[1].accepted > 0 || !trained) && holes >= 3, "%s: temp %.1f: %d drafts accepted, %d drafts after a hole",
              dir, temp, st[1].accepted, holes);
        if (same_drafts)
            printf("%s: temp %.1f: auto with %d holes in the MTP KV (window %d) identical to MTP off, %d of %d drafts "
                   "accepted, the same drafts over NaN- and zero-filled caches\n", dir, temp, holes, HOLE_W, st[1].accepted,
                   st[1].drafts);
        for (int r = 0; r < 3; r++) boundary_log_free(&b[r]);
    }
}

/* A run resumed from what an observer stored as gen_checkpoint says (main rows since the previous
 * boundary, MTP rows [mtp_new, mtp_to)), into NaN-filled caches: from the boundary of a draft after
 * a hole (nothing waits in the ring) it must end with the uninterrupted run's output and drafts;
 * from one inside a stretch without drafts (rows waiting, lost with the process), with the output,
 * and with the same drafts whether the caches held NaN or zeros. */
static void mtp_resume(fixture *f, const char *dir)
{
    int full[HOLE_N], got[HOLE_N];
    gen_stats sf, sr, sz;
    boundary_log b;
    boundary_log_init(f, &b, -1);
    run_holes(f, GEN_MTP_AUTO, 0.8, 21, NAN, &b, 0, full, &sf);
    int at_draft = -1, inside = -1;
    for (int i = HOLE_W + 2; i < b.n; i++) {
        int quiet = 1;
        for (int k = 1; k <= HOLE_W + 1; k++) quiet &= b.draft[i - k] < 0;
        if (at_draft < 0 && quiet && b.draft[i] >= 0 && i > b.n / 3) at_draft = i;
        if (inside < 0 && quiet && b.draft[i] < 0 && b.to[i] < b.len[i] && i > b.n / 2) inside = i;
    }
    boundary_log_free(&b);
    CHECK(at_draft > 0 && inside > 0, "%s: no boundary to resume from (%d, %d)", dir, at_draft, inside);
    if (at_draft < 0 || inside < 0) return;
    for (int pass = 0; pass < 2; pass++) {
        int at = pass ? inside : at_draft, skip;
        boundary_log_init(f, &b, at);
        run_holes(f, GEN_MTP_AUTO, 0.8, 21, NAN, &b, 0, got, &sr);
        skip = b.snap.generated;
        int n = run_holes(f, GEN_MTP_AUTO, 0.8, 21, NAN, &b, 1, got, &sr);
        CHECK(n == HOLE_N - skip && !memcmp(got, full + skip, (size_t)n * sizeof(int)),
              "%s: resumed at boundary %d (generated %d): output differs", dir, at, skip);
        if (!pass)
            CHECK(sr.drafts == sf.drafts && sr.accepted == sf.accepted,
                  "%s: resumed at a draft's boundary %d: %d of %d drafts accepted, uninterrupted %d of %d: the MTP rows it "
                  "restored are not the ones it had", dir, at, sr.accepted, sr.drafts, sf.accepted, sf.drafts);
        else {
            run_holes(f, GEN_MTP_AUTO, 0.8, 21, 0, &b, 1, got, &sz);
            CHECK(sr.drafts == sz.drafts && sr.accepted == sz.accepted,
                  "%s: resumed inside a stretch, boundary %d: NaN- and zero-filled caches give %d vs %d accepted", dir, at,
                  sr.accepted, sz.accepted);
        }
        printf("%s: resumed at boundary %d (%s, MTP rows [%d, %d) of %d): %d of %d drafts accepted, output identical\n", dir,
               at, pass ? "rows waiting in the ring lost" : "a draft after a hole", b.snap.mtp_from, b.snap.mtp_to, b.snap.len,
               sr.accepted, sr.drafts);
        boundary_log_free(&b);
    }
}

/* Upper tail critical value of chi-square with df degrees of freedom at p = 1e-4 (Wilson-Hilferty). */
static double chi2_critical(int df)
{
    double z = 3.719;
    double h = 2.0 / (9.0 * df);
    return df * pow(1 - h + z * sqrt(h), 3);
}

static void verify_rule_distribution(void)
{
    enum { V = 8, N = 200000 };
    float logits[V] = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -1.0f, 1.5f, 0.3f};
    double tp[][2] = {{1.0, 1.0}, {0.7, 0.8}};
    for (int c = 0; c < 2; c++) {
        for (int draft = 0; draft < V; draft += 3) {
            sampler *s = sampler_create(V, tp[c][0], tp[c][1], 1234 + draft);
            float p[V];
            memcpy(p, sampler_distribution(s, logits), sizeof p);
            long count[V] = {0};
            for (int i = 0; i < N; i++) {
                int tok;
                verify_draft(s, logits, draft, &tok);
                count[tok]++;
            }
            double chi = 0;
            int df = -1;
            for (int t = 0; t < V; t++) {
                if (p[t] == 0) { CHECK(count[t] == 0, "token %d outside the nucleus was emitted", t); continue; }
                double e = p[t] * N;
                chi += (count[t] - e) * (count[t] - e) / e;
                df++;
            }
            CHECK(chi < chi2_critical(df), "verify rule (temp %.1f top-p %.1f draft %d): chi-square %.1f, df %d", tp[c][0], tp[c][1], draft, chi, df);
            sampler_free(s);
        }
    }
}

/* Two-sample chi-square over categories; rare ones pooled. */
static double two_sample_chi(const long *a, const long *b, int V, int *df_out)
{
    double chi = 0;
    int df = -1;
    long pa = 0, pb = 0; /* categories too rare to test are pooled */
    for (int t = 0; t < V; t++) {
        if (a[t] + b[t] < 10) { pa += a[t]; pb += b[t]; continue; }
        chi += (double)(a[t] - b[t]) * (a[t] - b[t]) / (a[t] + b[t]);
        df++;
    }
    if (pa + pb >= 10) { chi += (double)(pa - pb) * (pa - pb) / (pa + pb); df++; }
    *df_out = df;
    return chi;
}

/* The second generated token, MTP off vs on and vs auto, each over its own seeds (a run of 3 tokens
 * verifies its first draft on the second token: auto drafts its first step to measure it). */
/* (Both branches of the rule are forced in verify_rule_distribution; here the whole loop runs.) */
static void sampling_end_to_end(fixture *f, int require_both)
{
    enum { SEEDS = 600 };
    int V = model_get_config(f->m)->vocab_size;
    long *count[3];
    for (int m = 0; m < 3; m++) count[m] = calloc(V, sizeof *count[m]);
    int out[3];
    gen_stats st;
    long accepted[3] = {0}, drafts[3] = {0};
    for (int s = 0; s < SEEDS; s++)
        for (int m = 0; m < 3; m++) {
            if (run_generate(f, m, 0.5, 0.9, 1000 + 4000 * m + s, 3, out, &st) == 3) count[m][out[1]]++;
            accepted[m] += st.accepted;
            drafts[m] += st.drafts;
        }
    for (int m = 1; m < 3; m++) {
        const char *name = m == GEN_MTP_ON ? "on" : "auto";
        int df;
        double chi = two_sample_chi(count[0], count[m], V, &df);
        CHECK(df >= 1, "too few categories (%d)", df);
        CHECK(drafts[m] == SEEDS, "every MTP %s run must verify one draft (%ld of %d)", name, drafts[m], SEEDS);
        if (require_both)
            CHECK(accepted[m] > 0 && accepted[m] < drafts[m], "this model must see both accepted and rejected drafts (%ld of %ld)",
                  accepted[m], drafts[m]);
        CHECK(chi < chi2_critical(df), "second-token distribution MTP %s vs off: chi-square %.1f with df %d", name, chi, df);
        printf("sampling: second-token distributions MTP %s vs off agree (chi-square %.1f, df %d; %ld of %ld drafts accepted)\n",
               name, chi, df, accepted[m], drafts[m]);
    }
    for (int m = 0; m < 3; m++) free(count[m]);
}

/* usage: test_speculate TRAINED_MODEL FIXTURE...  The trained model (real MTP acceptance) gets the
 * end-to-end sampling test with both branches required; every model gets the other checks. */
int main(int argc, char **argv)
{
    kernels_init(CPU_PATH_AVX512);
    verify_rule_distribution();
    for (int i = 1; i < argc; i++) {
        fixture f;
        if (fixture_open(&f, argv[i])) continue;
        scratch_limits(&f);
        batch_and_rollback(&f);
        greedy_long(&f, argv[i]);
        sampled_identity(&f, argv[i]);
        dropped_rows(&f, argv[i]);
        prefill_reads_once(&f, argv[i]);
        mtp_holes(&f, argv[i], i == 1);
        mtp_resume(&f, argv[i]);
        if (i == 1) sampling_end_to_end(&f, 1);
        fixture_close(&f);
    }
    CHECK(argc > 1, "no fixture given");
    printf("%s\n", test_failures ? "FAILED" : "speculation: all checks passed");
    return test_failures ? 1 : 0;
}
