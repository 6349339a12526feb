/* A checkpoint whose shapes disagree with its config would be read out of bounds or silently
 * misinterpreted later; every tensor is checked here, once, against the table below, and refused
 * at open with its name. */
#include <stdio.h>
#include "core/checkpoint_internal.h"
#include "core/tensor_table.h"

typedef enum { ON_MODEL, ON_ALL, ON_DENSE, ON_MOE, ON_EXPERT, ON_MTP } layers_of;
/* AS_FP8: an F8_E4M3 weight with its F32 block-scale grid; AS_NORM: a 1-D norm, BF16 or F32. */
typedef enum { AS_FP8, AS_BF16, AS_F32, AS_NORM } dtypes_of;
typedef enum {
    D_NONE, D_VOCAB, D_HIDDEN, D_2HIDDEN, D_Q_LORA, D_KV_LORA,
    D_Q_HEADS,  /* heads * (qk_nope + qk_rope): q_b's output */
    D_KV_A,     /* kv_lora_rank + qk_rope: the latent and the shared rotated key */
    D_KV_B,     /* heads * (qk_nope + v): kv_b's k_nope and v blocks */
    D_O_IN,     /* heads * v */
    D_INTER, D_MOE_INTER, D_SHARED_INTER, D_EXPERTS,
} dim;

typedef struct {
    const char *name; /* ON_MODEL: the whole name; ON_EXPERT: after "model.layers.{l}.mlp.experts.{e}.";
                       * else after "model.layers.{l}." */
    layers_of layers;
    dtypes_of dtypes;
    dim rows, cols;   /* cols D_NONE: 1-D */
} tensor_row;

static const tensor_row table[TT_COUNT] = {
    [TT_EMBED] = {"model.embed_tokens.weight", ON_MODEL, AS_BF16, D_VOCAB, D_HIDDEN},
    [TT_FINAL_NORM] = {"model.norm.weight", ON_MODEL, AS_NORM, D_HIDDEN, D_NONE},
    [TT_LM_HEAD] = {"lm_head.weight", ON_MODEL, AS_BF16, D_VOCAB, D_HIDDEN},

    [TT_INPUT_NORM] = {"input_layernorm.weight", ON_ALL, AS_NORM, D_HIDDEN, D_NONE},
    [TT_POST_NORM] = {"post_attention_layernorm.weight", ON_ALL, AS_NORM, D_HIDDEN, D_NONE},
    [TT_Q_A] = {"self_attn.q_a_proj.weight", ON_ALL, AS_FP8, D_Q_LORA, D_HIDDEN},
    [TT_Q_A_NORM] = {"self_attn.q_a_layernorm.weight", ON_ALL, AS_NORM, D_Q_LORA, D_NONE},
    [TT_Q_B] = {"self_attn.q_b_proj.weight", ON_ALL, AS_FP8, D_Q_HEADS, D_Q_LORA},
    [TT_KV_A] = {"self_attn.kv_a_proj_with_mqa.weight", ON_ALL, AS_FP8, D_KV_A, D_HIDDEN},
    [TT_KV_A_NORM] = {"self_attn.kv_a_layernorm.weight", ON_ALL, AS_NORM, D_KV_LORA, D_NONE},
    [TT_KV_B] = {"self_attn.kv_b_proj.weight", ON_ALL, AS_FP8, D_KV_B, D_KV_LORA},
    [TT_O] = {"self_attn.o_proj.weight", ON_ALL, AS_FP8, D_HIDDEN, D_O_IN},

    [TT_MLP_GATE] = {"mlp.gate_proj.weight", ON_DENSE, AS_FP8, D_INTER, D_HIDDEN},
    [TT_MLP_UP] = {"mlp.up_proj.weight", ON_DENSE, AS_FP8, D_INTER, D_HIDDEN},
    [TT_MLP_DOWN] = {"mlp.down_proj.weight", ON_DENSE, AS_FP8, D_HIDDEN, D_INTER},

    [TT_ROUTER] = {"mlp.gate.weight", ON_MOE, AS_BF16, D_EXPERTS, D_HIDDEN},
    [TT_ROUTER_BIAS] = {"mlp.gate.e_score_correction_bias", ON_MOE, AS_F32, D_EXPERTS, D_NONE},
    [TT_SHARED_GATE] = {"mlp.shared_experts.gate_proj.weight", ON_MOE, AS_FP8, D_SHARED_INTER, D_HIDDEN},
    [TT_SHARED_UP] = {"mlp.shared_experts.up_proj.weight", ON_MOE, AS_FP8, D_SHARED_INTER, D_HIDDEN},
    [TT_SHARED_DOWN] = {"mlp.shared_experts.down_proj.weight", ON_MOE, AS_FP8, D_HIDDEN, D_SHARED_INTER},
    [TT_EXPERT_GATE] = {"gate_proj.weight", ON_EXPERT, AS_FP8, D_MOE_INTER, D_HIDDEN},
    [TT_EXPERT_UP] = {"up_proj.weight", ON_EXPERT, AS_FP8, D_MOE_INTER, D_HIDDEN},
    [TT_EXPERT_DOWN] = {"down_proj.weight", ON_EXPERT, AS_FP8, D_HIDDEN, D_MOE_INTER},

    [TT_MTP_EMBED] = {"embed_tokens.weight", ON_MTP, AS_BF16, D_VOCAB, D_HIDDEN},
    [TT_MTP_ENORM] = {"enorm.weight", ON_MTP, AS_NORM, D_HIDDEN, D_NONE},
    [TT_MTP_HNORM] = {"hnorm.weight", ON_MTP, AS_NORM, D_HIDDEN, D_NONE},
    [TT_MTP_EH_PROJ] = {"eh_proj.weight", ON_MTP, AS_BF16, D_HIDDEN, D_2HIDDEN},
    [TT_MTP_HEAD_NORM] = {"shared_head.norm.weight", ON_MTP, AS_NORM, D_HIDDEN, D_NONE},
    [TT_MTP_HEAD] = {"shared_head.head.weight", ON_MTP, AS_BF16, D_VOCAB, D_HIDDEN},
};

static int64_t dim_size(const model_config *c, dim d)
{
    int64_t heads = c->num_attention_heads;
    switch (d) {
    case D_NONE: return -1;
    case D_VOCAB: return c->vocab_size;
    case D_HIDDEN: return c->hidden_size;
    case D_2HIDDEN: return 2 * (int64_t)c->hidden_size;
    case D_Q_LORA: return c->q_lora_rank;
    case D_KV_LORA: return c->kv_lora_rank;
    case D_Q_HEADS: return heads * (c->qk_nope_head_dim + c->qk_rope_head_dim);
    case D_KV_A: return (int64_t)c->kv_lora_rank + c->qk_rope_head_dim;
    case D_KV_B: return heads * (c->qk_nope_head_dim + c->v_head_dim);
    case D_O_IN: return heads * c->v_head_dim;
    case D_INTER: return c->intermediate_size;
    case D_MOE_INTER: return c->moe_intermediate_size;
    case D_SHARED_INTER: return (int64_t)c->moe_intermediate_size * c->n_shared_experts;
    case D_EXPERTS: return c->n_routed_experts;
    }
    return -1;
}

static void tensor_name(const tensor_row *r, int layer, int expert, int scale, char *buf, size_t n)
{
    const char *tail = scale ? "_scale_inv" : ""; /* an FP8 weight's scale is "<weight name>_scale_inv" */
    if (r->layers == ON_MODEL) snprintf(buf, n, "%s%s", r->name, tail);
    else if (r->layers == ON_EXPERT) snprintf(buf, n, "model.layers.%d.mlp.experts.%d.%s%s", layer, expert, r->name, tail);
    else snprintf(buf, n, "model.layers.%d.%s%s", layer, r->name, tail);
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++) k += (size_t)snprintf(buf + k, n - k, d ? ",%lld" : "%lld", (long long)shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

static int dtype_allowed(dtypes_of want, dtype_t got)
{
    switch (want) {
    case AS_FP8: return got == DTYPE_F8_E4M3;
    case AS_BF16: return got == DTYPE_BF16;
    case AS_F32: return got == DTYPE_F32;
    case AS_NORM: return got == DTYPE_BF16 || got == DTYPE_F32;
    }
    return 0;
}

static const char *const dtypes_text[] = {[AS_FP8] = "F8_E4M3", [AS_BF16] = "BF16", [AS_F32] = "F32", [AS_NORM] = "BF16 or F32"};

/* name must exist with an allowed dtype and shape {d0} (d1 < 0) or {d0, d1}. */
static const tensor_info *expect(const checkpoint *ck, const char *name, dtypes_of dtypes, int64_t d0, int64_t d1,
                                 char *err, size_t errlen)
{
    char want[64], got[64];
    int ndim = d1 < 0 ? 1 : 2;
    int64_t shape[2] = {d0, d1};
    shape_str(want, sizeof want, ndim, shape);
    const tensor_info *t = checkpoint_tensor(ck, name);
    if (!t) {
        error_set(err, errlen, "%s/model.safetensors.index.json: tensor '%s' missing (expected %s %s from config.json)", ck->dir, name,
                  dtypes_text[dtypes], want);
        return NULL;
    }
    int shape_ok = t->ndim == ndim && t->shape[0] == d0 && (ndim == 1 || t->shape[1] == d1);
    if (!dtype_allowed(dtypes, t->dtype) || !shape_ok) {
        shape_str(got, sizeof got, t->ndim, t->shape);
        error_set(err, errlen, "%s: tensor '%s' is %s %s, expected %s %s from config.json", ck->shards[t->shard].path, name,
                  dtype_name(t->dtype), got, dtypes_text[dtypes], want);
        return NULL;
    }
    return t;
}

const tensor_info *tensor_table_find(const checkpoint *ck, tensor_kind kind, int layer, int expert,
                                     const tensor_info **scale, char *err, size_t errlen)
{
    const model_config *c = &ck->cfg;
    const tensor_row *r = &table[kind];
    int64_t rows = dim_size(c, r->rows), cols = dim_size(c, r->cols);
    char name[256];
    if (scale) *scale = NULL;
    tensor_name(r, layer, expert, 0, name, sizeof name);
    const tensor_info *t = expect(ck, name, r->dtypes, rows, cols, err, errlen);
    if (!t || r->dtypes != AS_FP8) return t;
    tensor_name(r, layer, expert, 1, name, sizeof name);
    int64_t grid_rows = (rows + c->fp8_block_rows - 1) / c->fp8_block_rows, grid_cols = (cols + c->fp8_block_cols - 1) / c->fp8_block_cols;
    const tensor_info *s = expect(ck, name, AS_F32, grid_rows, grid_cols, err, errlen);
    if (!s) return NULL;
    if (scale) *scale = s;
    return t;
}

/* A kind with a zero dimension does not exist in this model (no shared experts). */
static int applies(const model_config *c, const tensor_row *r, int layer)
{
    int moe = config_layer_is_moe(c, layer);
    if (dim_size(c, r->rows) == 0 || dim_size(c, r->cols) == 0) return 0;
    switch (r->layers) {
    case ON_MODEL: return 0;
    case ON_ALL: return 1;
    case ON_DENSE: return !moe;
    case ON_MOE:
    case ON_EXPERT: return moe;
    case ON_MTP: return layer >= c->num_hidden_layers;
    }
    return 0;
}

int tensor_table_validate(const checkpoint *ck, char *err, size_t errlen)
{
    const model_config *c = &ck->cfg;
    for (int k = 0; k < TT_COUNT; k++)
        if (table[k].layers == ON_MODEL && !tensor_table_find(ck, (tensor_kind)k, 0, 0, NULL, err, errlen)) return -1;
    for (int l = 0; l < config_total_layers(c); l++)
        for (int k = 0; k < TT_COUNT; k++) {
            if (!applies(c, &table[k], l)) continue;
            int copies = table[k].layers == ON_EXPERT ? c->n_routed_experts : 1;
            for (int e = 0; e < copies; e++)
                if (!tensor_table_find(ck, (tensor_kind)k, l, e, NULL, err, errlen)) return -1;
        }
    return 0;
}
