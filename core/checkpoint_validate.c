/* The tensors the forward pass reads, with the dtype and shape config.json implies. A checkpoint
 * whose shapes disagree with its config would be read out of bounds or silently misinterpreted
 * later; here it is refused at open with the tensor's name. */
#include <stdlib.h>
#include <string.h>
#include "core/checkpoint_internal.h"

typedef struct {
    const checkpoint *ck;
    char *err;
    size_t errlen;
    char prefix[96]; /* "model.layers.{l}." or "model." */
} expect_ctx;

enum { ANY_NORM = -1 }; /* a 1-D norm vector may be BF16 or F32 */

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++) k += (size_t)snprintf(buf + k, n - k, d ? ",%lld" : "%lld", (long long)shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* name = prefix + suffix must exist with dtype (or ANY_NORM) and shape {d0, d1} (d1 < 0: 1-D). */
static int expect(expect_ctx *x, const char *suffix, int dtype, int64_t d0, int64_t d1)
{
    char name[256], want[64], got[64];
    snprintf(name, sizeof name, "%s%s", x->prefix, suffix);
    int ndim = d1 < 0 ? 1 : 2;
    int64_t shape[2] = {d0, d1};
    shape_str(want, sizeof want, ndim, shape);
    const char *want_dtype = dtype == ANY_NORM ? "BF16 or F32" : dtype_name((dtype_t)dtype);
    const tensor_info *t = checkpoint_tensor(x->ck, name);
    if (!t) {
        error_set(x->err, x->errlen, "%s/model.safetensors.index.json: tensor '%s' missing (expected %s %s from config.json)", x->ck->dir,
                  name, want_dtype, want);
        return -1;
    }
    int dtype_ok = dtype == ANY_NORM ? (t->dtype == DTYPE_BF16 || t->dtype == DTYPE_F32) : t->dtype == (dtype_t)dtype;
    int shape_ok = t->ndim == ndim && t->shape[0] == d0 && (ndim == 1 || t->shape[1] == d1);
    if (!dtype_ok || !shape_ok) {
        shape_str(got, sizeof got, t->ndim, t->shape);
        error_set(x->err, x->errlen, "%s: tensor '%s' is %s %s, expected %s %s from config.json", x->ck->shards[t->shard].path, name,
                  dtype_name(t->dtype), got, want_dtype, want);
        return -1;
    }
    return 0;
}

/* An FP8 weight [rows, cols] and its F32 block scale grid [ceil(rows/128), ceil(cols/128)]. */
static int expect_fp8(expect_ctx *x, const char *base, int64_t rows, int64_t cols)
{
    const model_config *c = &x->ck->cfg;
    char w[160], s[160];
    snprintf(w, sizeof w, "%s.weight", base);
    snprintf(s, sizeof s, "%s.weight_scale_inv", base);
    return expect(x, w, DTYPE_F8_E4M3, rows, cols) ||
           expect(x, s, DTYPE_F32, (rows + c->fp8_block_rows - 1) / c->fp8_block_rows, (cols + c->fp8_block_cols - 1) / c->fp8_block_cols);
}

static int expect_attention(expect_ctx *x)
{
    const model_config *c = &x->ck->cfg;
    int64_t H = c->hidden_size, heads = c->num_attention_heads;
    return expect(x, "input_layernorm.weight", ANY_NORM, H, -1) || expect(x, "post_attention_layernorm.weight", ANY_NORM, H, -1) ||
           expect_fp8(x, "self_attn.q_a_proj", c->q_lora_rank, H) ||
           expect(x, "self_attn.q_a_layernorm.weight", ANY_NORM, c->q_lora_rank, -1) ||
           expect_fp8(x, "self_attn.q_b_proj", heads * (c->qk_nope_head_dim + c->qk_rope_head_dim), c->q_lora_rank) ||
           expect_fp8(x, "self_attn.kv_a_proj_with_mqa", c->kv_lora_rank + c->qk_rope_head_dim, H) ||
           expect(x, "self_attn.kv_a_layernorm.weight", ANY_NORM, c->kv_lora_rank, -1) ||
           expect_fp8(x, "self_attn.kv_b_proj", heads * (c->qk_nope_head_dim + c->v_head_dim), c->kv_lora_rank) ||
           expect_fp8(x, "self_attn.o_proj", H, heads * c->v_head_dim);
}

static int expect_mlp(expect_ctx *x, const char *base, int64_t inter)
{
    int64_t H = x->ck->cfg.hidden_size;
    char g[128], u[128], d[128];
    snprintf(g, sizeof g, "%s.gate_proj", base);
    snprintf(u, sizeof u, "%s.up_proj", base);
    snprintf(d, sizeof d, "%s.down_proj", base);
    return expect_fp8(x, g, inter, H) || expect_fp8(x, u, inter, H) || expect_fp8(x, d, H, inter);
}

static int expect_moe(expect_ctx *x)
{
    const model_config *c = &x->ck->cfg;
    int64_t H = c->hidden_size, E = c->n_routed_experts;
    if (expect(x, "mlp.gate.weight", DTYPE_BF16, E, H) || expect(x, "mlp.gate.e_score_correction_bias", DTYPE_F32, E, -1)) return -1;
    if (c->n_shared_experts > 0 && expect_mlp(x, "mlp.shared_experts", (int64_t)c->moe_intermediate_size * c->n_shared_experts)) return -1;
    for (int e = 0; e < c->n_routed_experts; e++) {
        char base[64];
        snprintf(base, sizeof base, "mlp.experts.%d", e);
        if (expect_mlp(x, base, c->moe_intermediate_size)) return -1;
    }
    return 0;
}

static int expect_mtp_extras(expect_ctx *x)
{
    const model_config *c = &x->ck->cfg;
    int64_t H = c->hidden_size, V = c->vocab_size;
    return expect(x, "enorm.weight", ANY_NORM, H, -1) || expect(x, "hnorm.weight", ANY_NORM, H, -1) ||
           expect(x, "eh_proj.weight", DTYPE_BF16, H, 2 * H) || expect(x, "embed_tokens.weight", DTYPE_BF16, V, H) ||
           expect(x, "shared_head.norm.weight", ANY_NORM, H, -1) || expect(x, "shared_head.head.weight", DTYPE_BF16, V, H);
}

int checkpoint_validate_tensors(checkpoint *ck, char *err, size_t errlen)
{
    const model_config *c = &ck->cfg;
    expect_ctx x = {.ck = ck, .err = err, .errlen = errlen};
    snprintf(x.prefix, sizeof x.prefix, "model.");
    if (expect(&x, "embed_tokens.weight", DTYPE_BF16, c->vocab_size, c->hidden_size) || expect(&x, "norm.weight", ANY_NORM, c->hidden_size, -1))
        return -1;
    x.prefix[0] = 0;
    if (expect(&x, "lm_head.weight", DTYPE_BF16, c->vocab_size, c->hidden_size)) return -1;
    for (int l = 0; l < config_total_layers(c); l++) {
        snprintf(x.prefix, sizeof x.prefix, "model.layers.%d.", l);
        if (expect_attention(&x)) return -1;
        if (config_layer_is_moe(c, l) ? expect_moe(&x) : expect_mlp(&x, "mlp", c->intermediate_size)) return -1;
        if (l >= c->num_hidden_layers && expect_mtp_extras(&x)) return -1;
    }
    return 0;
}
