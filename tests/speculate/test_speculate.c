/* Speculation invariants on the tiny reference fixtures:
 *  - a 2-row batch gives bit-identical rows to two 1-row passes (what makes MTP exact);
 *  - a rejected draft leaves no trace: the next logits equal those of a run that never saw it;
 *  - a batch or position beyond the reserved scratch is an error, not an overrun;
 *  - greedy output with MTP on and auto equals MTP off for long generations, and sampled output
 *    too for the same seed (each position's draw is keyed by the seed and the position);
 *  - the point-mass acceptance rule preserves the target distribution (chi-square), alone and
 *    end to end (second generated token, MTP on and auto vs off over many seeds). */
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
        if (i == 1) sampling_end_to_end(&f, 1);
        fixture_close(&f);
    }
    CHECK(argc > 1, "no fixture given");
    printf("%s\n", test_failures ? "FAILED" : "speculation: all checks passed");
    return test_failures ? 1 : 0;
}
