/* The forward pass, top to bottom: embed -> for each layer (attention, then dense MLP or MoE) ->
 * final norm -> lm_head. Weights stay in their checkpoint dtypes (FP8 + block scales, BF16) and are
 * converted inside the kernels; activations are fp32. Every buffer is a piece of the model's
 * scratch arena (core/model_scratch.c): nothing here allocates. */
#include <math.h>
#include <string.h>
#include "core/model_internal.h"
#include "core/text_file.h"

/* ---------- small pieces ---------- */

/* The sum of squares in double (each square is exact there) over eight running sums combined in
 * a fixed order: one sum is a chain of dependent adds, n x the add latency (measured 8.0 us a row
 * at R1's 7168, 4.9 us so). */
void model_rmsnorm(const float *x, const float *w, int n, double eps, float *out)
{
#define SQ(k) ((double)x[i + k] * x[i + k])
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += SQ(0), s1 += SQ(1), s2 += SQ(2), s3 += SQ(3);
        s4 += SQ(4), s5 += SQ(5), s6 += SQ(6), s7 += SQ(7);
    }
    for (; i < n; i++) s0 += SQ(0);
#undef SQ
    double ss = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
    float inv = (float)(1.0 / sqrt(ss / n + eps));
    for (i = 0; i < n; i++) out[i] = (x[i] * inv) * w[i];
}

/* Each of nb rows of n values normalized on its own (out may be x). */
static void rmsnorm_rows(const float *x, const float *w, int n, double eps, int nb, float *out)
{
    for (int b = 0; b < nb; b++) model_rmsnorm(x + (size_t)b * n, w, n, eps, out + (size_t)b * n);
}

static void add_into(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

void model_bf16_matvec(model *m, const void *data, int rows, int cols, const float *x, int nb, float *y)
{
    matrix w = {DTYPE_BF16, rows, cols, data, NULL};
    matvec(m->pool, &w, x, nb, y);
}

/* nb within the reserved rows; every position inside both kv and the reserved ctx. */
static int check_batch(const model *m, const kv_cache *kv, const int *pos, int nb, const forward_request *req, char *err,
                       size_t errlen)
{
    int from = req ? req->attend_from : 0;
    if (scratch_check_rows(m, nb, err, errlen)) return -1;
    if (from < 0) {
        error_set(err, errlen, "attention from position %d: must be at least 0", from);
        return -1;
    }
    for (int b = 0; b < nb; b++) {
        if (pos[b] < from) {
            error_set(err, errlen, "position %d is below the first attended position %d", pos[b], from);
            return -1;
        }
        if (pos[b] < 0 || pos[b] >= kv->ctx) {
            error_set(err, errlen, "position %d is outside the context (--ctx %d)", pos[b], kv->ctx);
            return -1;
        }
        if (pos[b] >= m->scratch.ctx) {
            error_set(err, errlen, "position %d is beyond the %d positions reserved by model_reserve_scratch", pos[b], m->scratch.ctx);
            return -1;
        }
    }
    return 0;
}

/* ---------- embedding ---------- */

int model_embed(const model *m, const tensor_info *table, const int *tokens, int nb, float *x, char *err, size_t errlen)
{
    int H = m->cfg.hidden_size;
    uint16_t *row = m->scratch.embed_row;
    if (scratch_check_rows(m, 0, err, errlen)) return -1;
    for (int b = 0; b < nb; b++) {
        if (tokens[b] < 0 || tokens[b] >= m->cfg.vocab_size) {
            error_set(err, errlen, "token id %d is outside the vocabulary [0, %d)", tokens[b], m->cfg.vocab_size);
            return -1;
        }
        /* Rows are read on demand: the table (1.85 GB at R1 scale) is never resident. */
        if (checkpoint_read(m->ck, table, (uint64_t)tokens[b] * H * 2, row, (uint64_t)H * 2, err, errlen)) return -1;
        for (int i = 0; i < H; i++) x[(size_t)b * H + i] = bf16_to_float(row[i]);
    }
    return 0;
}

/* ---------- attention (absorbed MLA) ---------- */

/* q_a_layernorm and kv_a_layernorm use eps 1e-6 whatever rms_norm_eps says: DeepSeek's model.py
 * builds them with RMSNorm's default and transformers hard-codes the same. */
#define LATENT_NORM_EPS 1e-6

/* The latent KV entries of rows from the layer's normalized input: kv_a, the latent's norm, the
 * rotated k_rope. A row's entry depends on nothing but its own input. */
static void write_kv_rows(model *m, const layer_weights *lw, kv_cache *kv, int kv_layer, const float *xn,
                          const int *pos, int nb)
{
    int R = m->cfg.kv_lora_rank, rope = m->cfg.qk_rope_head_dim;
    float *ckv = m->scratch.ckv;
    matvec(m->pool, &lw->kv_a, xn, nb, ckv);
    for (int b = 0; b < nb; b++) {
        float *row = ckv + (size_t)b * (R + rope);
        model_rmsnorm(row, lw->kv_a_norm, R, LATENT_NORM_EPS, row);
        rope_apply(&m->rope, row + R, pos[b]);
        kv_cache_store(kv, kv_layer, pos[b], row, row + R);
    }
}

/* scratch.q = q_b(norm(q_a xn)), each head's rope part rotated to its row's position. */
static void queries(model *m, const layer_weights *lw, const float *xn, const int *pos, int nb)
{
    const model_config *c = &m->cfg;
    scratch *s = &m->scratch;
    int heads = c->num_attention_heads, nope = c->qk_nope_head_dim, qk = nope + c->qk_rope_head_dim;
    matvec(m->pool, &lw->q_a, xn, nb, s->qa);
    rmsnorm_rows(s->qa, lw->q_a_norm, c->q_lora_rank, LATENT_NORM_EPS, nb, s->qa);
    matvec(m->pool, &lw->q_b, s->qa, nb, s->q);
    for (int b = 0; b < nb; b++)
        rope_apply_heads(&m->rope, s->q + (size_t)b * heads * qk + nope, (size_t)qk, heads, pos[b]);
}

/* Absorbed MLA in three stages over a batch of rows:
 *  1. per head, for all rows at once: fold kv_b's k_nope block into the query (q_lat = W_kb^T q_nope);
 *  2. per row: scores of all heads against the cached latents and rotated keys, softmax,
 *     attention-weighted latents (core/attention.c: blocks of the cache read once per group of heads);
 *  3. per head, for all rows at once: kv_b's v block applied to the weighted latent. */
typedef struct {
    const layer_weights *lw;
    int nb, heads, nope, rope, v, R, qk;
    const float *q;        /* [nb][heads][qk], rope part rotated */
    float *q_lat, *q_rope; /* [nb][heads][R], [nb][heads][rope] */
    float *o_lat, *out;    /* [nb][heads][R], [nb][heads][v] */
} head_job;

static void absorb_query(void *arg, int h)
{
    const head_job *j = arg;
    int row0 = h * (j->nope + j->v);
    matvec_t_range(&j->lw->kv_b, row0, row0 + j->nope, j->q + (size_t)h * j->qk, j->heads * j->qk, j->nb,
                   j->q_lat + (size_t)h * j->R, j->heads * j->R);
    for (int b = 0; b < j->nb; b++)
        memcpy(j->q_rope + ((size_t)b * j->heads + h) * j->rope, j->q + ((size_t)b * j->heads + h) * j->qk + j->nope,
               j->rope * sizeof(float));
}

static void value_projection(void *arg, int h)
{
    const head_job *j = arg;
    int row0 = h * (j->nope + j->v) + j->nope;
    matvec_range(&j->lw->kv_b, row0, row0 + j->v, j->o_lat + (size_t)h * j->R, j->heads * j->R, j->nb,
                 j->out + (size_t)h * j->v, j->heads * j->v);
}

/* Stage 2 for one row: every head against positions from..pos of the cache (core/attention.c). */
static void attend_row(model *m, const kv_cache *kv, int kv_layer, const float *q_lat, const float *q_rope, int from,
                       int pos, float *o_lat)
{
    const model_config *c = &m->cfg;
    int R = c->kv_lora_rank, rope = c->qk_rope_head_dim;
    size_t es = dtype_size(kv->dtype), row0 = (size_t)kv_layer * kv->ctx + (size_t)from;
    attention_kv a = {c->num_attention_heads, R, rope, kv->dtype, (const char *)kv->latent + row0 * R * es,
                      (const char *)kv->krope + row0 * rope * es, (float)m->attn_scale};
    attention_row(m->pool, &a, pos + 1 - from, q_lat, q_rope, o_lat, m->scratch.attn);
}

/* xn: [nb][H] normalized input; out: [nb][H] attention output (before the residual add); rows
 * attend from position `from` on. */
static void attention(model *m, int layer, kv_cache *kv, const float *xn, const int *pos, int nb, int from, float *out)
{
    const model_config *c = &m->cfg;
    const layer_weights *lw = &m->layers[layer];
    scratch *s = &m->scratch;
    int heads = c->num_attention_heads, nope = c->qk_nope_head_dim, rope = c->qk_rope_head_dim, R = c->kv_lora_rank;
    int kv_layer = layer - kv->first_layer;
    queries(m, lw, xn, pos, nb);
    write_kv_rows(m, lw, kv, kv_layer, xn, pos, nb);
    head_job j = {lw, nb, heads, nope, rope, c->v_head_dim, R, nope + rope, s->q, s->q_lat, s->q_rope, s->o_lat, s->heads_out};
    thread_pool_for(m->pool, heads, absorb_query, &j);
    for (int b = 0; b < nb; b++)
        attend_row(m, kv, kv_layer, s->q_lat + (size_t)b * heads * R, s->q_rope + (size_t)b * heads * rope, from,
                   pos[b], s->o_lat + (size_t)b * heads * R);
    thread_pool_for(m->pool, heads, value_projection, &j);
    matvec(m->pool, &lw->o, s->heads_out, nb, out);
}

/* ---------- MLP and MoE ---------- */

/* out[nb][H] = down(silu(gate x) * up x), on the pool's threads, or this thread's alone when
 * pool is NULL (the same numbers: a row's products never depend on how rows are shared out). */
static void swiglu(thread_pool *pool, const matrix *gate, const matrix *up, const matrix *down, const float *x, int nb,
                   float *act, float *act2, float *out)
{
    matvec(pool, gate, x, nb, act);
    matvec(pool, up, x, nb, act2);
    for (size_t i = 0; i < (size_t)nb * gate->rows; i++) act[i] = silu(act[i]) * act2[i];
    matvec(pool, down, act, nb, out);
}

/* Predict the experts of layers l+1 .. l+depth from layer l's residual stream, normalized as each
 * of those layers will normalize its own: the stream changes little per layer, so a later layer's
 * router applied now is a cheap guess to read while layer l's experts compute. Each layer's guesses
 * go out most confident first (router_rank), the rows interleaved rank by rank, and nearer layers
 * first: their reads are needed sooner. The cache drops guesses it already holds, and a layer it
 * holds whole (every expert cached: a small model, a large budget) gets no guesses at all. */
static void prefetch_ahead(model *m, int layer, const float *resid, int nb, expert_provider *ep, const forward_request *req)
{
    scratch *s = &m->scratch;
    int E = m->cfg.n_routed_experts, per_row = req->prefetch_guesses > 0 ? req->prefetch_guesses : m->router.top_k;
    if (per_row > E) per_row = E;
    for (int d = 1; d <= req->prefetch && ep->prefetch; d++) {
        int next = layer + d;
        if (next >= m->cfg.num_hidden_layers) return;
        const layer_weights *nl = &m->layers[next];
        if (!nl->is_moe || (ep->holds_layer && ep->holds_layer(ep->self, next))) continue;
        rmsnorm_rows(resid, nl->post_norm, m->cfg.hidden_size, m->cfg.rms_norm_eps, nb, s->prefetch_xn);
        matvec(m->pool, &nl->router, s->prefetch_xn, nb, s->prefetch_logits);
        for (int b = 0; b < nb; b++)
            router_rank(&m->router, s->prefetch_logits + (size_t)b * E, nl->router_bias, s->guess + (size_t)b * E, per_row,
                        s->router_scratch);
        int n = 0;
        for (int r = 0; r < per_row; r++)
            for (int b = 0; b < nb; b++) s->uni_guess[n++] = s->guess[(size_t)b * E + r];
        ep->prefetch(ep->self, next, s->uni_guess, n);
    }
}

/* Each row's experts and weights into scratch.routes (reported to on_route); the distinct experts
 * of the batch into scratch.uni. Returns how many there are. */
static int route_rows(model *m, int layer, const float *xn, int nb, const forward_request *req)
{
    const layer_weights *lw = &m->layers[layer];
    scratch *s = &m->scratch;
    int E = m->cfg.n_routed_experts, k = m->router.top_k, nu = 0;
    matvec(m->pool, &lw->router, xn, nb, s->router_logits);
    for (int b = 0; b < nb; b++) {
        const int *ids = s->routes[b].ids;
        router_select(&m->router, s->router_logits + (size_t)b * E, lw->router_bias, s->routes[b].ids, s->routes[b].weights,
                      s->router_scratch);
        if (req && req->on_route) req->on_route(req->route_ctx, layer, b, ids, k);
        for (int i = 0; i < k; i++) {
            int seen = 0;
            for (int u = 0; u < nu; u++) seen |= s->uni[u] == ids[i];
            if (!seen) s->uni[nu++] = ids[i];
        }
    }
    return nu;
}

static matrix expert_matrix(const uint8_t *data, const float *scale, int rows, int cols)
{
    return (matrix){DTYPE_F8_E4M3, rows, cols, data, scale};
}

/* Expert e over the rows from *b on that chose it, at most cap of them: their inputs gathered into
 * xs, where each one's result goes into rows_of/slot_of, *b moved past the last. Returns how many. */
static int gather_rows(const model *m, int e, const float *xn, int nb, int *b, int cap, float *xs, int *rows_of,
                       int *slot_of)
{
    const scratch *s = &m->scratch;
    int H = m->cfg.hidden_size, k = m->router.top_k, cnt = 0;
    for (; *b < nb && cnt < cap; ++*b)
        for (int i = 0; i < k; i++)
            if (s->routes[*b].ids[i] == e) {
                rows_of[cnt] = *b;
                slot_of[cnt] = i;
                memcpy(xs + (size_t)cnt * H, xn + (size_t)*b * H, H * sizeof(float));
                cnt++;
                break; /* a row chooses an expert once */
            }
    return cnt;
}

/* Each gathered row's output to its (row, choice) slot of scratch.results. */
static void scatter_results(model *m, const float *ys, const int *rows_of, const int *slot_of, int cnt)
{
    int H = m->cfg.hidden_size, k = m->router.top_k;
    for (int r = 0; r < cnt; r++)
        memcpy(m->scratch.results + ((size_t)rows_of[r] * k + slot_of[r]) * H, ys + (size_t)r * H, H * sizeof(float));
}

static void expert_matrices(const model *m, const expert_weights *w, matrix *g, matrix *u, matrix *d)
{
    int H = m->cfg.hidden_size, I = m->cfg.moe_intermediate_size;
    *g = expert_matrix(w->gate, w->gate_scale, I, H);
    *u = expert_matrix(w->up, w->up_scale, I, H);
    *d = expert_matrix(w->down, w->down_scale, H, I);
}

/* Expert e over every row that chose it, each of its matrices shared out over the pool by rows. */
static void run_expert_on_pool(model *m, int e, const expert_weights *w, const float *xn, int nb)
{
    scratch *s = &m->scratch;
    matrix g, u, d;
    expert_matrices(m, w, &g, &u, &d);
    int b = 0, cnt = gather_rows(m, e, xn, nb, &b, nb, s->xs, s->rows_of, s->slot_of);
    swiglu(m->pool, &g, &u, &d, s->xs, cnt, s->act, s->act2, s->ys);
    scatter_results(m, s->ys, s->rows_of, s->slot_of, cnt);
}

typedef struct {
    model *m;
    const float *xn;
    int nb;
    const int *experts;             /* the experts pinned together */
    const expert_weights *w;
} taken_job;

static expert_piece *claim_piece(scratch *s, int threads)
{
    for (int t = 0;; t = (t + 1) % threads) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&s->pieces[t].busy, &expected, 1)) return &s->pieces[t];
    }
}

/* One pinned expert on one pool thread, EXPERT_PIECE_ROWS rows at a time, in a piece no other
 * thread holds (at most one per thread runs at once, so one is always free). */
static void run_taken_expert(void *arg, int i)
{
    const taken_job *j = arg;
    scratch *s = &j->m->scratch;
    expert_piece *p = claim_piece(s, thread_pool_size(j->m->pool));
    int cap = s->max_rows < EXPERT_PIECE_ROWS ? s->max_rows : EXPERT_PIECE_ROWS;
    matrix g, u, d;
    expert_matrices(j->m, &j->w[i], &g, &u, &d);
    for (int b = 0, cnt; (cnt = gather_rows(j->m, j->experts[i], j->xn, j->nb, &b, cap, p->xs, p->rows_of, p->slot_of)) > 0;) {
        swiglu(NULL, &g, &u, &d, p->xs, cnt, p->act, p->act2, p->ys);
        scatter_results(j->m, p->ys, p->rows_of, p->slot_of, cnt);
    }
    atomic_store(&p->busy, 0);
}

/* The n experts pinned together (experts[], w[]). Small experts leave the pool's threads waiting
 * on each other when every matrix is shared out by rows (a 96 x 256 expert is 6 pieces of 16
 * rows), so whole experts go to threads, as many as fill every thread equally; the rest, and a
 * lone expert (from disk they come one by one), are shared out by rows. */
static void run_taken_experts(model *m, const int *experts, const expert_weights *w, int n, const float *xn, int nb)
{
    int threads = thread_pool_size(m->pool), whole = n - n % threads;
    if (whole < 2) whole = 0;
    taken_job j = {m, xn, nb, experts, w};
    thread_pool_for(m->pool, whole, run_taken_expert, &j);
    for (int i = whole; i < n; i++) run_expert_on_pool(m, experts[i], &w[i], xn, nb);
}

/* The nu experts of scratch.uni, taken in whatever order the provider has them ready: one waited
 * for, then every other already there, run together and released. Each one taken is swapped to
 * the front of what is left, so a group is left[0..n) and the next search starts past it. */
static int routed_experts(model *m, int layer, const float *xn, int nb, int nu, expert_provider *ep, char *err, size_t errlen)
{
    int *left = m->scratch.uni;
    expert_weights *w = m->scratch.taken;
    for (int remaining = nu; remaining > 0;) {
        int which, n = 0, rc = ep->acquire_any(ep->self, layer, left, remaining, &which, &w[0]);
        while (rc == 0) {
            int e = left[n + which];
            left[n + which] = left[n];
            left[n++] = e;
            if (!ep->acquire_ready || n == remaining) break;
            rc = ep->acquire_ready(ep->self, layer, left + n, remaining - n, &which, &w[n]);
        }
        if (rc < 0) {
            for (int i = 0; i < n; i++) ep->release(ep->self, layer, left[i]);
            error_set(err, errlen, "layer %d: %s", layer, ep->error ? ep->error(ep->self) : "expert read failed");
            return -1;
        }
        run_taken_experts(m, left, w, n, xn, nb);
        for (int i = 0; i < n; i++) ep->release(ep->self, layer, left[i]);
        left += n;
        remaining -= n;
    }
    return 0;
}

/* Routed experts: the union over the batch is announced to the provider, then experts are taken in
 * whatever order they become ready; each one runs once over all rows that chose it. Every
 * (row, choice) result lands in its own buffer and rows sum their choices in ascending expert id,
 * so neither readiness order nor batch composition changes a row's numbers. */
static int moe(model *m, int layer, const float *xn, const float *resid, int nb, float *out, expert_provider *ep,
               const forward_request *req, char *err, size_t errlen)
{
    const layer_weights *lw = &m->layers[layer];
    scratch *s = &m->scratch;
    int H = m->cfg.hidden_size, k = m->router.top_k;
    int nu = route_rows(m, layer, xn, nb, req);
    ep->want(ep->self, layer, s->uni, nu);
    if (req && req->prefetch > 0) prefetch_ahead(m, layer, resid, nb, ep, req);
    if (routed_experts(m, layer, xn, nb, nu, ep, err, errlen)) return -1;
    swiglu(m->pool, &lw->gate, &lw->up, &lw->down, xn, nb, s->act, s->act2, out); /* the shared expert */
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < k; i++) {
            const float *y = s->results + ((size_t)b * k + i) * H;
            float wi = s->routes[b].weights[i];
            for (int h = 0; h < H; h++) out[(size_t)b * H + h] += wi * y[h];
        }
    return 0;
}

/* ---------- one decoder layer, the whole model ---------- */

static int decoder_layer(model *m, int layer, kv_cache *kv, expert_provider *ep, float *x, const int *pos, int nb,
                         const forward_request *req, char *err, size_t errlen)
{
    const model_config *c = &m->cfg;
    const layer_weights *lw = &m->layers[layer];
    float *xn = m->scratch.xn, *y = m->scratch.y;
    int H = c->hidden_size;

    rmsnorm_rows(x, lw->input_norm, H, c->rms_norm_eps, nb, xn);
    attention(m, layer, kv, xn, pos, nb, req ? req->attend_from : 0, y);
    add_into(x, y, (size_t)nb * H);

    rmsnorm_rows(x, lw->post_norm, H, c->rms_norm_eps, nb, xn);
    if (lw->is_moe) {
        if (moe(m, layer, xn, x, nb, y, ep, req, err, errlen)) return -1;
    } else {
        /* A dense layer just before a MoE layer still gets that layer's experts read in while its
         * own MLP computes (R1's layer 2 -> 3). */
        if (req && req->prefetch > 0) prefetch_ahead(m, layer, x, nb, ep, req);
        swiglu(m->pool, &lw->gate, &lw->up, &lw->down, xn, nb, m->scratch.act, m->scratch.act2, y);
    }
    add_into(x, y, (size_t)nb * H);
    return 0;
}

int model_decoder_layer(model *m, int layer, kv_cache *kv, expert_provider *ep, float *x, const int *pos, int nb,
                        forward_request *req, char *err, size_t errlen)
{
    if (check_batch(m, kv, pos, nb, req, err, errlen)) return -1;
    return decoder_layer(m, layer, kv, ep, x, pos, nb, req, err, errlen);
}

int model_layer_write_kv(model *m, int layer, kv_cache *kv, const float *x, const int *pos, int nb, char *err, size_t errlen)
{
    const layer_weights *lw = &m->layers[layer];
    if (check_batch(m, kv, pos, nb, NULL, err, errlen)) return -1;
    rmsnorm_rows(x, lw->input_norm, m->cfg.hidden_size, m->cfg.rms_norm_eps, nb, m->scratch.xn);
    write_kv_rows(m, lw, kv, layer - kv->first_layer, m->scratch.xn, pos, nb);
    return 0;
}

int model_forward(model *m, kv_cache *kv, expert_provider *ep, const int *tokens, const int *pos, int nb,
                  forward_request *req, char *err, size_t errlen)
{
    const model_config *c = &m->cfg;
    float *x = m->scratch.x;
    int H = c->hidden_size;
    if (check_batch(m, kv, pos, nb, req, err, errlen)) return -1;
    if (model_embed(m, m->embed, tokens, nb, x, err, errlen)) return -1;
    for (int l = 0; l < c->num_hidden_layers; l++) {
        if (l > 0 && req && req->keep_rows) {
            int keep = req->keep_rows(req->keep_ctx, l, nb);
            nb = keep < 1 ? 1 : keep < nb ? keep : nb;
        }
        if (decoder_layer(m, l, kv, ep, x, pos, nb, req, err, errlen)) return -1;
    }
    rmsnorm_rows(x, m->final_norm, H, c->rms_norm_eps, nb, x);
    if (req && req->hidden) memcpy(req->hidden, x, (size_t)nb * H * sizeof(float));
    if (req && req->logits && req->logits_from < nb)
        matvec(m->pool, &m->lm_head, x + (size_t)req->logits_from * H, nb - req->logits_from, req->logits);
    return 0;
}
