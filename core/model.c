/* The forward pass, top to bottom: embed -> [attention, MLP or MoE] x layers -> norm -> lm_head.
 * Weights stay in their checkpoint dtypes (FP8 + block scales, BF16) and are converted inside the
 * kernels; activations are fp32. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/model.h"
#include "core/kernels.h"
#include "core/rope.h"
#include "core/router.h"

typedef struct {
    float *input_norm, *post_norm, *q_a_norm, *kv_a_norm;
    matrix q_a, q_b, kv_a, kv_b, o;
    int is_moe;
    matrix gate, up, down;      /* dense MLP, or the shared expert of a MoE layer */
    matrix router;              /* BF16 [E][H] */
    float *router_bias;         /* [E] */
} layer_weights;

struct model {
    const checkpoint *ck;
    model_config cfg;
    thread_pool *pool;
    int n_layers;               /* main layers + MTP layers */
    layer_weights *layers;
    float *final_norm;
    matrix lm_head;
    int has_mtp;
    mtp_extras mtp;
    rope_table rope;
    double attn_scale;
    router_params router;
    size_t resident_bytes;
    void **owned;
    int n_owned, cap_owned;
};

/* ---------- loading ---------- */

static void *model_alloc(model *m, size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) return NULL;
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 256;
        void **o = realloc(m->owned, cap * sizeof *o);
        if (!o) { free(p); return NULL; }
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    m->resident_bytes += bytes;
    return p;
}

static const tensor_info *find_tensor(const model *m, const char *name, char *err, size_t errlen)
{
    const tensor_info *t = checkpoint_tensor(m->ck, name);
    if (!t) snprintf(err, errlen, "%s: tensor %s is missing", m->ck->dir, name);
    return t;
}

static void *read_tensor(model *m, const tensor_info *t, char *err, size_t errlen)
{
    void *p = model_alloc(m, t->nbytes);
    if (!p) { snprintf(err, errlen, "out of memory loading tensor %s (%llu bytes)", t->name, (unsigned long long)t->nbytes); return NULL; }
    if (checkpoint_read(m->ck, t, 0, p, t->nbytes, err, errlen) != 0) return NULL;
    return p;
}

/* A 1-D norm weight (BF16 or F32 on disk) as fp32. */
static float *load_vector(model *m, const char *name, int n, char *err, size_t errlen)
{
    const tensor_info *t = find_tensor(m, name, err, errlen);
    if (!t) return NULL;
    if (t->ndim != 1 || t->shape[0] != n || (t->dtype != DTYPE_BF16 && t->dtype != DTYPE_F32)) {
        snprintf(err, errlen, "%s: tensor %s: expected BF16/F32 [%d]", m->ck->dir, name, n);
        return NULL;
    }
    void *raw = read_tensor(m, t, err, errlen);
    if (!raw) return NULL;
    if (t->dtype == DTYPE_F32) return raw;
    float *v = model_alloc(m, (size_t)n * sizeof(float));
    if (!v) { snprintf(err, errlen, "out of memory"); return NULL; }
    for (int i = 0; i < n; i++) v[i] = bf16_to_float(((const uint16_t *)raw)[i]);
    return v;
}

static int load_matrix(model *m, matrix *w, const char *name, int rows, int cols, char *err, size_t errlen)
{
    const tensor_info *t = find_tensor(m, name, err, errlen);
    if (!t) return -1;
    if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols) {
        snprintf(err, errlen, "%s: tensor %s: expected shape [%d, %d]", m->ck->dir, name, rows, cols);
        return -1;
    }
    if (t->dtype != DTYPE_F8_E4M3 && t->dtype != DTYPE_BF16) {
        snprintf(err, errlen, "%s: tensor %s: expected F8_E4M3 or BF16, found %s", m->ck->dir, name, dtype_name(t->dtype));
        return -1;
    }
    w->dtype = t->dtype;
    w->rows = rows;
    w->cols = cols;
    w->scale = NULL;
    if (!(w->data = read_tensor(m, t, err, errlen))) return -1;
    if (t->dtype == DTYPE_F8_E4M3) {
        char sname[512];
        snprintf(sname, sizeof sname, "%s_scale_inv", name);
        const tensor_info *s = find_tensor(m, sname, err, errlen);
        if (!s) return -1;
        int64_t gr = (rows + 127) / 128, gc = (cols + 127) / 128;
        if (s->dtype != DTYPE_F32 || s->ndim != 2 || s->shape[0] != gr || s->shape[1] != gc) {
            snprintf(err, errlen, "%s: tensor %s: expected F32 [%lld, %lld]", m->ck->dir, sname, (long long)gr, (long long)gc);
            return -1;
        }
        if (!(w->scale = read_tensor(m, s, err, errlen))) return -1;
    }
    return 0;
}

#define LAYER_NAME(buf, l, suffix) snprintf(buf, sizeof buf, "model.layers.%d.%s", l, suffix)

static int load_layer(model *m, int l, char *err, size_t errlen)
{
    const model_config *c = &m->cfg;
    layer_weights *lw = &m->layers[l];
    char n[256];
    int H = c->hidden_size, qk = c->qk_nope_head_dim + c->qk_rope_head_dim, heads = c->num_attention_heads;
#define VEC(field, suffix, len) do { LAYER_NAME(n, l, suffix); if (!(lw->field = load_vector(m, n, len, err, errlen))) return -1; } while (0)
#define MAT(field, suffix, r, cc) do { LAYER_NAME(n, l, suffix); if (load_matrix(m, &lw->field, n, r, cc, err, errlen)) return -1; } while (0)
    VEC(input_norm, "input_layernorm.weight", H);
    VEC(post_norm, "post_attention_layernorm.weight", H);
    VEC(q_a_norm, "self_attn.q_a_layernorm.weight", c->q_lora_rank);
    VEC(kv_a_norm, "self_attn.kv_a_layernorm.weight", c->kv_lora_rank);
    MAT(q_a, "self_attn.q_a_proj.weight", c->q_lora_rank, H);
    MAT(q_b, "self_attn.q_b_proj.weight", heads * qk, c->q_lora_rank);
    MAT(kv_a, "self_attn.kv_a_proj_with_mqa.weight", c->kv_lora_rank + c->qk_rope_head_dim, H);
    MAT(kv_b, "self_attn.kv_b_proj.weight", heads * (c->qk_nope_head_dim + c->v_head_dim), c->kv_lora_rank);
    MAT(o, "self_attn.o_proj.weight", H, heads * c->v_head_dim);
    lw->is_moe = config_layer_is_moe(c, l);
    if (!lw->is_moe) {
        MAT(gate, "mlp.gate_proj.weight", c->intermediate_size, H);
        MAT(up, "mlp.up_proj.weight", c->intermediate_size, H);
        MAT(down, "mlp.down_proj.weight", H, c->intermediate_size);
        return 0;
    }
    int I = c->moe_intermediate_size * c->n_shared_experts;
    MAT(gate, "mlp.shared_experts.gate_proj.weight", I, H);
    MAT(up, "mlp.shared_experts.up_proj.weight", I, H);
    MAT(down, "mlp.shared_experts.down_proj.weight", H, I);
    MAT(router, "mlp.gate.weight", c->n_routed_experts, H);
    LAYER_NAME(n, l, "mlp.gate.e_score_correction_bias");
    const tensor_info *b = find_tensor(m, n, err, errlen);
    if (!b) return -1;
    if (b->dtype != DTYPE_F32 || b->ndim != 1 || b->shape[0] != c->n_routed_experts) {
        snprintf(err, errlen, "%s: tensor %s: expected F32 [%d]", m->ck->dir, n, c->n_routed_experts);
        return -1;
    }
    if (!(lw->router_bias = read_tensor(m, b, err, errlen))) return -1;
#undef VEC
#undef MAT
    return 0;
}

/* The MTP layer's embed_tokens / shared_head.head are copies of the main ones in released
 * checkpoints; share them only when byte-identical, else keep the layer's own. */
static int tensors_identical(const model *m, const tensor_info *a, const tensor_info *b, char *err, size_t errlen)
{
    if (a->nbytes != b->nbytes || a->dtype != b->dtype) return 0;
    size_t chunk = 1 << 20;
    char *pa = malloc(chunk), *pb = malloc(chunk);
    int same = pa && pb;
    for (uint64_t off = 0; same && off < a->nbytes; off += chunk) {
        uint64_t n = a->nbytes - off < chunk ? a->nbytes - off : chunk;
        if (checkpoint_read(m->ck, a, off, pa, n, err, errlen) || checkpoint_read(m->ck, b, off, pb, n, err, errlen)) same = -1;
        else same = memcmp(pa, pb, n) == 0;
    }
    free(pa);
    free(pb);
    return same;
}

static int load_mtp(model *m, char *err, size_t errlen)
{
    const model_config *c = &m->cfg;
    int L = c->num_hidden_layers, H = c->hidden_size;
    char n[256];
    mtp_extras *x = &m->mtp;
    LAYER_NAME(n, L, "enorm.weight");
    if (!(x->enorm = load_vector(m, n, H, err, errlen))) return -1;
    LAYER_NAME(n, L, "hnorm.weight");
    if (!(x->hnorm = load_vector(m, n, H, err, errlen))) return -1;
    LAYER_NAME(n, L, "shared_head.norm.weight");
    if (!(x->head_norm = load_vector(m, n, H, err, errlen))) return -1;
    matrix eh;
    LAYER_NAME(n, L, "eh_proj.weight");
    if (load_matrix(m, &eh, n, H, 2 * H, err, errlen)) return -1;
    if (eh.dtype != DTYPE_BF16) { snprintf(err, errlen, "%s: tensor %s: expected BF16", m->ck->dir, n); return -1; }
    x->eh_proj_data = eh.data;

    static char embed_name[256];
    LAYER_NAME(embed_name, L, "embed_tokens.weight");
    const tensor_info *own_embed = find_tensor(m, embed_name, err, errlen), *main_embed;
    if (!own_embed || !(main_embed = find_tensor(m, "model.embed_tokens.weight", err, errlen))) return -1;
    int same = tensors_identical(m, own_embed, main_embed, err, errlen);
    if (same < 0) return -1;
    x->embed_table = same ? "model.embed_tokens.weight" : embed_name;

    LAYER_NAME(n, L, "shared_head.head.weight");
    const tensor_info *own_head = find_tensor(m, n, err, errlen);
    if (!own_head) return -1;
    same = tensors_identical(m, own_head, checkpoint_tensor(m->ck, "lm_head.weight"), err, errlen);
    if (same < 0) return -1;
    if (same) {
        x->head_data = m->lm_head.data;
    } else {
        matrix head;
        if (load_matrix(m, &head, n, c->vocab_size, H, err, errlen)) return -1;
        x->head_data = head.data;
    }
    return 0;
}

model *model_load(const checkpoint *ck, thread_pool *pool, char *err, size_t errlen)
{
    model *m = calloc(1, sizeof *m);
    if (!m) { snprintf(err, errlen, "out of memory"); return NULL; }
    m->ck = ck;
    m->cfg = ck->cfg;
    m->pool = pool;
    const model_config *c = &m->cfg;
    rope_init(&m->rope, c);
    m->attn_scale = mla_softmax_scale(c);
    m->router = (router_params){c->n_routed_experts, c->n_group, c->topk_group, c->num_experts_per_tok,
                                c->norm_topk_prob, c->routed_scaling_factor};
    m->has_mtp = c->num_nextn_predict_layers > 0;
    m->n_layers = c->num_hidden_layers + (m->has_mtp ? 1 : 0);
    m->layers = calloc(m->n_layers, sizeof *m->layers);
    if (!m->layers) { snprintf(err, errlen, "out of memory"); goto fail; }
    for (int l = 0; l < m->n_layers; l++)
        if (load_layer(m, l, err, errlen)) goto fail;
    if (!(m->final_norm = load_vector(m, "model.norm.weight", c->hidden_size, err, errlen))) goto fail;
    if (load_matrix(m, &m->lm_head, "lm_head.weight", c->vocab_size, c->hidden_size, err, errlen)) goto fail;
    if (m->has_mtp && load_mtp(m, err, errlen)) goto fail;
    return m;
fail:
    model_free(m);
    return NULL;
}

void model_free(model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    free(m);
}

const model_config *model_get_config(const model *m) { return &m->cfg; }
const checkpoint *model_get_checkpoint(const model *m) { return m->ck; }
size_t model_resident_bytes(const model *m) { return m->resident_bytes; }
int model_has_mtp(const model *m) { return m->has_mtp; }
const mtp_extras *model_mtp_extras(const model *m) { return m->has_mtp ? &m->mtp : NULL; }

/* ---------- KV cache ---------- */

size_t kv_cache_bytes(const model_config *c, int n_layers, int ctx, dtype_t dtype)
{
    return (size_t)n_layers * ctx * (c->kv_lora_rank + c->qk_rope_head_dim) * dtype_size(dtype);
}

kv_cache *kv_cache_create(const model_config *c, int first_layer, int n_layers, int ctx, dtype_t dtype)
{
    if (dtype != DTYPE_F32 && dtype != DTYPE_BF16) return NULL;
    kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return NULL;
    kv->dtype = dtype;
    kv->first_layer = first_layer;
    kv->n_layers = n_layers;
    kv->ctx = ctx;
    kv->latent_dim = c->kv_lora_rank;
    kv->rope_dim = c->qk_rope_head_dim;
    kv->latent = malloc((size_t)n_layers * ctx * kv->latent_dim * dtype_size(dtype));
    kv->krope = malloc((size_t)n_layers * ctx * kv->rope_dim * dtype_size(dtype));
    if (!kv->latent || !kv->krope) { kv_cache_free(kv); return NULL; }
    return kv;
}

void kv_cache_free(kv_cache *kv)
{
    if (!kv) return;
    free(kv->latent);
    free(kv->krope);
    free(kv);
}

/* One position's normalized latent and rotated k_rope into the cache, in its dtype. */
static void kv_cache_store(kv_cache *kv, int kv_layer, int pos, const float *latent, const float *krope)
{
    size_t lo = ((size_t)kv_layer * kv->ctx + pos) * kv->latent_dim, ro = ((size_t)kv_layer * kv->ctx + pos) * kv->rope_dim;
    if (kv->dtype == DTYPE_F32) {
        memcpy((float *)kv->latent + lo, latent, kv->latent_dim * sizeof(float));
        memcpy((float *)kv->krope + ro, krope, kv->rope_dim * sizeof(float));
        return;
    }
    for (int i = 0; i < kv->latent_dim; i++) ((uint16_t *)kv->latent)[lo + i] = float_to_bf16(latent[i]);
    for (int i = 0; i < kv->rope_dim; i++) ((uint16_t *)kv->krope)[ro + i] = float_to_bf16(krope[i]);
}

void kv_cache_truncate(kv_cache *kv, int len)
{
    if (len < kv->len) kv->len = len < 0 ? 0 : len;
}

/* ---------- small pieces ---------- */

void model_rmsnorm(const float *x, const float *w, int n, double eps, float *out)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) out[i] = (x[i] * inv) * w[i];
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

int model_embed(const model *m, const char *table, const int *tokens, int nb, float *x, char *err, size_t errlen)
{
    const tensor_info *t = checkpoint_tensor(m->ck, table);
    int H = m->cfg.hidden_size;
    if (!t) { snprintf(err, errlen, "%s: tensor %s is missing", m->ck->dir, table); return -1; }
    uint16_t *row = malloc((size_t)H * sizeof *row);
    if (!row) { snprintf(err, errlen, "out of memory"); return -1; }
    int rc = 0;
    for (int b = 0; b < nb && rc == 0; b++) {
        if (tokens[b] < 0 || tokens[b] >= m->cfg.vocab_size) {
            snprintf(err, errlen, "token id %d is outside the vocabulary [0, %d)", tokens[b], m->cfg.vocab_size);
            rc = -1;
            break;
        }
        /* Rows are read on demand: the table (1.85 GB at R1 scale) is never resident. */
        rc = checkpoint_read(m->ck, t, (uint64_t)tokens[b] * H * 2, row, (uint64_t)H * 2, err, errlen);
        for (int i = 0; i < H && rc == 0; i++) x[(size_t)b * H + i] = bf16_to_float(row[i]);
    }
    free(row);
    return rc;
}

void model_bf16_matvec(model *m, const void *data, int rows, int cols, const float *x, int nb, float *y)
{
    matrix w = {DTYPE_BF16, rows, cols, data, NULL};
    matvec(m->pool, &w, x, nb, y);
}

/* ---------- attention (absorbed MLA) ---------- */

/* q_a_layernorm and kv_a_layernorm use eps 1e-6 whatever rms_norm_eps says: DeepSeek's model.py
 * builds them with RMSNorm's default and transformers hard-codes the same. */
#define LATENT_NORM_EPS 1e-6

/* Absorbed MLA in three stages over a batch of rows:
 *  1. per head, for all rows at once: fold kv_b's k_nope block into the query (q_lat = W_kb^T q_nope);
 *  2. per row: scores of all heads against the cached latents and rotated keys (one product over
 *     the cache, read once for every head), softmax, attention-weighted latents;
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

/* Stage 2 for one group of heads of one row: the cache is read once per group, not per head. */
enum { HEADS_PER_GROUP = 16 };
typedef struct {
    const matrix *latent;
    const float *probs;    /* [heads][n] */
    float *o_lat;          /* [heads][R] of this row */
    int heads, n, R;
} weighted_latent_job;

static void weighted_latents(void *arg, int g)
{
    const weighted_latent_job *j = arg;
    int h0 = g * HEADS_PER_GROUP, nh = j->heads - h0 < HEADS_PER_GROUP ? j->heads - h0 : HEADS_PER_GROUP;
    matvec_t_range(j->latent, 0, j->n, j->probs + (size_t)h0 * j->n, j->n, nh, j->o_lat + (size_t)h0 * j->R, j->R);
}

static void attend_row(model *m, const kv_cache *kv, int kv_layer, const float *q_lat, const float *q_rope, int pos,
                       float *scores, float *o_lat)
{
    const model_config *c = &m->cfg;
    int heads = c->num_attention_heads, rope = c->qk_rope_head_dim, R = c->kv_lora_rank, n = pos + 1;
    float *rope_scores = scores + (size_t)heads * n;
    size_t es = dtype_size(kv->dtype);
    matrix latent = {kv->dtype, n, R, (const char *)kv->latent + (size_t)kv_layer * kv->ctx * R * es, NULL};
    matrix krope = {kv->dtype, n, rope, (const char *)kv->krope + (size_t)kv_layer * kv->ctx * rope * es, NULL};
    matvec(m->pool, &latent, q_lat, heads, scores);
    matvec(m->pool, &krope, q_rope, heads, rope_scores);
    float scale = (float)m->attn_scale;
    for (int h = 0; h < heads; h++) {
        float *s = scores + (size_t)h * n, *sr = rope_scores + (size_t)h * n, mx = -INFINITY;
        for (int t = 0; t < n; t++) {
            s[t] = (s[t] + sr[t]) * scale;
            if (s[t] > mx) mx = s[t];
        }
        double sum = 0;
        for (int t = 0; t < n; t++) { s[t] = expf(s[t] - mx); sum += s[t]; }
        float inv = (float)(1.0 / sum);
        for (int t = 0; t < n; t++) s[t] *= inv;
    }
    weighted_latent_job w = {&latent, scores, o_lat, heads, n, R};
    thread_pool_for(m->pool, (heads + HEADS_PER_GROUP - 1) / HEADS_PER_GROUP, weighted_latents, &w);
}

/* The latent KV entries of rows from the layer's normalized input: kv_a, the latent's norm, the
 * rotated k_rope. A row's entry depends on nothing but its own input. ckv: [nb][R + rope] scratch. */
static void write_kv_rows(model *m, const layer_weights *lw, kv_cache *kv, int kv_layer, const float *xn,
                          const int *pos, int nb, float *ckv)
{
    int R = m->cfg.kv_lora_rank, rope = m->cfg.qk_rope_head_dim;
    matvec(m->pool, &lw->kv_a, xn, nb, ckv);
    for (int b = 0; b < nb; b++) {
        float *row = ckv + (size_t)b * (R + rope);
        model_rmsnorm(row, lw->kv_a_norm, R, LATENT_NORM_EPS, row);
        rope_apply(&m->rope, row + R, pos[b]);
        kv_cache_store(kv, kv_layer, pos[b], row, row + R);
    }
}

static int check_positions(const kv_cache *kv, const int *pos, int nb, int *max_pos, char *err, size_t errlen)
{
    *max_pos = 0;
    for (int b = 0; b < nb; b++) {
        if (pos[b] < 0 || pos[b] >= kv->ctx) { snprintf(err, errlen, "position %d is outside the context (--ctx %d)", pos[b], kv->ctx); return -1; }
        if (pos[b] > *max_pos) *max_pos = pos[b];
    }
    return 0;
}

/* xn: [nb][H] normalized input; out: [nb][H] attention output (before the residual add). */
static int attention(model *m, int layer, kv_cache *kv, const float *xn, const int *pos, int nb, float *out,
                     char *err, size_t errlen)
{
    const model_config *c = &m->cfg;
    const layer_weights *lw = &m->layers[layer];
    int heads = c->num_attention_heads, nope = c->qk_nope_head_dim, rope = c->qk_rope_head_dim;
    int qk = nope + rope, R = c->kv_lora_rank, ql = c->q_lora_rank;
    int kv_layer = layer - kv->first_layer, max_pos;
    if (check_positions(kv, pos, nb, &max_pos, err, errlen)) return -1;
    float *qa = malloc((size_t)nb * ql * sizeof(float));
    float *q = malloc((size_t)nb * heads * qk * sizeof(float));
    float *ckv = malloc((size_t)nb * (R + rope) * sizeof(float));
    float *heads_out = malloc((size_t)nb * heads * c->v_head_dim * sizeof(float));
    float *lat = malloc((size_t)nb * heads * (2 * R + rope) * sizeof(float)); /* q_lat | o_lat | q_rope */
    float *scores = malloc((size_t)heads * 2 * (max_pos + 1) * sizeof(float));
    int rc = -1;
    if (!qa || !q || !ckv || !heads_out || !lat || !scores) { snprintf(err, errlen, "out of memory in attention"); goto done; }

    matvec(m->pool, &lw->q_a, xn, nb, qa);
    for (int b = 0; b < nb; b++) model_rmsnorm(qa + (size_t)b * ql, lw->q_a_norm, ql, LATENT_NORM_EPS, qa + (size_t)b * ql);
    matvec(m->pool, &lw->q_b, qa, nb, q);
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < heads; h++) rope_apply(&m->rope, q + ((size_t)b * heads + h) * qk + nope, pos[b]);
    write_kv_rows(m, lw, kv, kv_layer, xn, pos, nb, ckv);
    float *q_lat = lat, *o_lat = lat + (size_t)nb * heads * R, *q_rope = o_lat + (size_t)nb * heads * R;
    head_job j = {lw, nb, heads, nope, rope, c->v_head_dim, R, qk, q, q_lat, q_rope, o_lat, heads_out};
    thread_pool_for(m->pool, heads, absorb_query, &j);
    for (int b = 0; b < nb; b++)
        attend_row(m, kv, kv_layer, q_lat + (size_t)b * heads * R, q_rope + (size_t)b * heads * rope, pos[b], scores,
                   o_lat + (size_t)b * heads * R);
    thread_pool_for(m->pool, heads, value_projection, &j);
    matvec(m->pool, &lw->o, heads_out, nb, out);
    rc = 0;
done:
    free(qa); free(q); free(ckv); free(heads_out); free(lat); free(scores);
    return rc;
}

/* ---------- MLP and MoE ---------- */

/* out[nb][H] = down(silu(gate x) * up x); act: [nb][I] scratch twice. */
static void swiglu(model *m, const matrix *gate, const matrix *up, const matrix *down, const float *x, int nb,
                   float *act, float *act2, float *out)
{
    int I = gate->rows;
    matvec(m->pool, gate, x, nb, act);
    matvec(m->pool, up, x, nb, act2);
    for (size_t i = 0; i < (size_t)nb * I; i++) act[i] = silu(act[i]) * act2[i];
    matvec(m->pool, down, act, nb, out);
}

static matrix expert_matrix(const uint8_t *data, const float *scale, int rows, int cols)
{
    return (matrix){DTYPE_F8_E4M3, rows, cols, data, scale};
}

typedef struct {
    int ids[64];
    float weights[64];
} row_route;

/* Predict layer l+1's experts from layer l's residual stream (after its attention), normalized
 * as layer l+1 will normalize its own: the stream changes little per layer, so the next router
 * applied now is a cheap, good guess to prefetch while layer l's experts compute. */
static void prefetch_next_layer(model *m, int layer, const float *resid, int nb, expert_provider *ep)
{
    int next = layer + 1;
    if (next >= m->cfg.num_hidden_layers || !m->layers[next].is_moe || !ep->prefetch) return;
    int E = m->cfg.n_routed_experts, k = m->router.top_k, H = m->cfg.hidden_size;
    float *logits = malloc((size_t)nb * E * sizeof(float)), *scratch = malloc(2 * (size_t)E * sizeof(float));
    float *xn = calloc((size_t)nb * H, sizeof(float)); /* calloc: GCC cannot see rmsnorm fills it */
    int *guess = malloc((size_t)nb * k * sizeof(int));
    float w[64];
    if (logits && scratch && guess && xn) {
        for (int b = 0; b < nb; b++)
            model_rmsnorm(resid + (size_t)b * H, m->layers[next].post_norm, H, m->cfg.rms_norm_eps, xn + (size_t)b * H);
        matvec(m->pool, &m->layers[next].router, xn, nb, logits);
        for (int b = 0; b < nb; b++)
            router_select(&m->router, logits + (size_t)b * E, m->layers[next].router_bias, guess + b * k, w, scratch);
        ep->prefetch(ep->self, next, guess, nb * k);
    }
    free(logits); free(scratch); free(guess); free(xn);
}

/* Routed experts: the union over the batch is announced to the provider, then experts are taken in
 * whatever order they become ready; each one runs once over all rows that chose it. Every
 * (row, choice) result lands in its own buffer and rows sum their choices in ascending expert id,
 * so neither readiness order nor batch composition changes a row's numbers. */
static int moe(model *m, int layer, const float *xn, const float *resid, int nb, float *out, expert_provider *ep,
               forward_request *req, char *err, size_t errlen)
{
    const model_config *c = &m->cfg;
    const layer_weights *lw = &m->layers[layer];
    int H = c->hidden_size, E = c->n_routed_experts, k = c->num_experts_per_tok, I = c->moe_intermediate_size;
    int Ish = I * c->n_shared_experts;
    int rc = -1, nu = 0;
    row_route *routes = calloc(nb, sizeof *routes);
    float *logits = malloc((size_t)nb * E * sizeof(float)), *scratch = malloc(2 * (size_t)E * sizeof(float));
    int *uni = malloc((size_t)nb * k * sizeof(int));
    float *results = malloc((size_t)nb * k * H * sizeof(float));   /* [nb][k][H] */
    int big = Ish > I ? Ish : I;
    float *xs = malloc((size_t)nb * H * sizeof(float)), *ys = malloc((size_t)nb * H * sizeof(float));
    float *act = malloc((size_t)nb * big * sizeof(float)), *act2 = malloc((size_t)nb * big * sizeof(float));
    int *rows_of = malloc((size_t)nb * sizeof(int)), *slot_of = malloc((size_t)nb * sizeof(int));
    if (!routes || !logits || !scratch || !uni || !results || !xs || !ys || !act || !act2 || !rows_of || !slot_of) {
        snprintf(err, errlen, "out of memory in MoE layer %d", layer);
        goto done;
    }

    matvec(m->pool, &lw->router, xn, nb, logits);
    for (int b = 0; b < nb; b++) {
        router_select(&m->router, logits + (size_t)b * E, lw->router_bias, routes[b].ids, routes[b].weights, scratch);
        if (req && req->on_route) req->on_route(req->route_ctx, layer, b, routes[b].ids, k);
        for (int i = 0; i < k; i++) {
            int seen = 0;
            for (int u = 0; u < nu; u++) seen |= uni[u] == routes[b].ids[i];
            if (!seen) uni[nu++] = routes[b].ids[i];
        }
    }
    ep->want(ep->self, layer, uni, nu);
    if (req && req->prefetch) prefetch_next_layer(m, layer, resid, nb, ep);

    for (int remaining = nu; remaining > 0; remaining--) {
        int which;
        expert_weights w;
        if (ep->acquire_any(ep->self, layer, uni, remaining, &which, &w) != 0) {
            snprintf(err, errlen, "layer %d: %s", layer, ep->error ? ep->error(ep->self) : "expert read failed");
            goto done;
        }
        int e = uni[which], cnt = 0;
        for (int b = 0; b < nb; b++)
            for (int i = 0; i < k; i++)
                if (routes[b].ids[i] == e) {
                    rows_of[cnt] = b;
                    slot_of[cnt] = i;
                    memcpy(xs + (size_t)cnt * H, xn + (size_t)b * H, H * sizeof(float));
                    cnt++;
                }
        matrix g = expert_matrix(w.gate, w.gate_scale, I, H), u = expert_matrix(w.up, w.up_scale, I, H);
        matrix d = expert_matrix(w.down, w.down_scale, H, I);
        swiglu(m, &g, &u, &d, xs, cnt, act, act2, ys);
        ep->release(ep->self, layer, e);
        for (int r = 0; r < cnt; r++)
            memcpy(results + ((size_t)rows_of[r] * k + slot_of[r]) * H, ys + (size_t)r * H, H * sizeof(float));
        uni[which] = uni[remaining - 1]; /* done: swap it out of the list */
        uni[remaining - 1] = e;
    }

    swiglu(m, &lw->gate, &lw->up, &lw->down, xn, nb, act, act2, out);
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < k; i++) {
            const float *y = results + ((size_t)b * k + i) * H;
            float wi = routes[b].weights[i];
            for (int h = 0; h < H; h++) out[(size_t)b * H + h] += wi * y[h];
        }
    rc = 0;
done:
    free(routes); free(logits); free(scratch); free(uni); free(results);
    free(xs); free(ys); free(act); free(act2); free(rows_of); free(slot_of);
    return rc;
}

/* ---------- one decoder layer, the whole model ---------- */

int model_decoder_layer(model *m, int layer, kv_cache *kv, expert_provider *ep, float *x, const int *pos, int nb,
                        forward_request *req, char *err, size_t errlen)
{
    const model_config *c = &m->cfg;
    const layer_weights *lw = &m->layers[layer];
    int H = c->hidden_size, rc = -1;
    float *xn = malloc((size_t)nb * H * sizeof(float)), *y = malloc((size_t)nb * H * sizeof(float));
    int I = c->intermediate_size;
    float *act = NULL, *act2 = NULL;
    if (!xn || !y) { snprintf(err, errlen, "out of memory"); goto done; }

    for (int b = 0; b < nb; b++) model_rmsnorm(x + (size_t)b * H, lw->input_norm, H, c->rms_norm_eps, xn + (size_t)b * H);
    if (attention(m, layer, kv, xn, pos, nb, y, err, errlen)) goto done;
    for (size_t i = 0; i < (size_t)nb * H; i++) x[i] += y[i];

    for (int b = 0; b < nb; b++) model_rmsnorm(x + (size_t)b * H, lw->post_norm, H, c->rms_norm_eps, xn + (size_t)b * H);
    if (lw->is_moe) {
        if (moe(m, layer, xn, x, nb, y, ep, req, err, errlen)) goto done;
    } else {
        /* A dense layer just before a MoE layer still gets that layer's experts read in while its
         * own MLP computes (R1's layer 2 -> 3). */
        if (req && req->prefetch) prefetch_next_layer(m, layer, x, nb, ep);
        act = malloc((size_t)nb * I * sizeof(float));
        act2 = malloc((size_t)nb * I * sizeof(float));
        if (!act || !act2) { snprintf(err, errlen, "out of memory"); goto done; }
        swiglu(m, &lw->gate, &lw->up, &lw->down, xn, nb, act, act2, y);
    }
    for (size_t i = 0; i < (size_t)nb * H; i++) x[i] += y[i];
    rc = 0;
done:
    free(xn); free(y); free(act); free(act2);
    return rc;
}

int model_layer_write_kv(model *m, int layer, kv_cache *kv, const float *x, const int *pos, int nb, char *err, size_t errlen)
{
    const model_config *c = &m->cfg;
    const layer_weights *lw = &m->layers[layer];
    int H = c->hidden_size, max_pos;
    if (check_positions(kv, pos, nb, &max_pos, err, errlen)) return -1;
    float *xn = malloc((size_t)nb * H * sizeof(float));
    float *ckv = malloc((size_t)nb * (c->kv_lora_rank + c->qk_rope_head_dim) * sizeof(float));
    int rc = xn && ckv ? 0 : -1;
    if (rc) snprintf(err, errlen, "out of memory");
    for (int b = 0; rc == 0 && b < nb; b++) model_rmsnorm(x + (size_t)b * H, lw->input_norm, H, c->rms_norm_eps, xn + (size_t)b * H);
    if (rc == 0) write_kv_rows(m, lw, kv, layer - kv->first_layer, xn, pos, nb, ckv);
    free(xn);
    free(ckv);
    return rc;
}

int model_forward(model *m, kv_cache *kv, expert_provider *ep, const int *tokens, const int *pos, int nb,
                  forward_request *req, char *err, size_t errlen)
{
    const model_config *c = &m->cfg;
    int H = c->hidden_size, rc = -1, max_pos = 0;
    float *x = malloc((size_t)nb * H * sizeof(float));
    if (!x) { snprintf(err, errlen, "out of memory"); return -1; }
    if (model_embed(m, "model.embed_tokens.weight", tokens, nb, x, err, errlen)) goto done;
    for (int l = 0; l < c->num_hidden_layers; l++)
        if (model_decoder_layer(m, l, kv, ep, x, pos, nb, req, err, errlen)) goto done;
    for (int b = 0; b < nb; b++) {
        model_rmsnorm(x + (size_t)b * H, m->final_norm, H, c->rms_norm_eps, x + (size_t)b * H);
        if (pos[b] > max_pos) max_pos = pos[b];
    }
    if (max_pos + 1 > kv->len) kv->len = max_pos + 1;
    if (req && req->hidden) memcpy(req->hidden, x, (size_t)nb * H * sizeof(float));
    if (req && req->logits && req->logits_from < nb)
        matvec(m->pool, &m->lm_head, x + (size_t)req->logits_from * H, nb - req->logits_from, req->logits);
    rc = 0;
done:
    free(x);
    return rc;
}
