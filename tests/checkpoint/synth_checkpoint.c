/* Writer for synthetic R1-format checkpoints (see synth_checkpoint.h). Independent of the reader:
 * it lays tensors out itself, from its own list of R1's tensors, in R1 storage order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/checkpoint/synth_checkpoint.h"

typedef struct {
    char name[96];
    const char *dtype;
    int ndim;
    int64_t shape[2];
    size_t esize;
    int shard;
    uint64_t begin, end;
} synth_tensor;

typedef struct {
    synth_tensor *t;
    int n, cap;
} synth_list;

model_config synth_small_config(void)
{
    model_config c = {0};
    c.vocab_size = 96; c.hidden_size = 64; c.intermediate_size = 96; c.moe_intermediate_size = 32;
    c.num_hidden_layers = 5; c.num_nextn_predict_layers = 1; c.num_attention_heads = 2;
    c.q_lora_rank = 48; c.kv_lora_rank = 32; c.qk_nope_head_dim = 16; c.qk_rope_head_dim = 8; c.v_head_dim = 16;
    c.n_routed_experts = 8; c.n_shared_experts = 1; c.num_experts_per_tok = 2; c.n_group = 4; c.topk_group = 2;
    c.first_k_dense_replace = 2; c.moe_layer_freq = 1; c.norm_topk_prob = 1; c.routed_scaling_factor = 2.5;
    c.rms_norm_eps = 1e-6; c.rope_theta = 10000; c.max_position_embeddings = 4096;
    c.yarn = (yarn_config){1, 40, 4096, 32, 1, 1, 1};
    c.bos_token_id = 0; c.eos_token_id = 1; c.fp8_block_rows = c.fp8_block_cols = 128;
    return c;
}

model_config synth_r1_layout_config(void)
{
    model_config c = synth_small_config();
    c.vocab_size = 8; c.hidden_size = 8; c.intermediate_size = 8; c.moe_intermediate_size = 4;
    c.num_hidden_layers = 61; c.num_nextn_predict_layers = 1; c.num_attention_heads = 1;
    c.q_lora_rank = 4; c.kv_lora_rank = 4; c.qk_nope_head_dim = 2; c.qk_rope_head_dim = 2; c.v_head_dim = 2;
    c.n_routed_experts = 256; c.n_group = 8; c.topk_group = 4; c.num_experts_per_tok = 8; c.first_k_dense_replace = 3;
    return c;
}

static void add(synth_list *L, const char *prefix, const char *suffix, const char *dtype, int64_t d0, int64_t d1)
{
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 1024;
        L->t = realloc(L->t, (size_t)L->cap * sizeof *L->t);
        if (!L->t) { perror("synth"); exit(1); }
    }
    synth_tensor *t = &L->t[L->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s%s", prefix, suffix);
    t->dtype = dtype;
    t->ndim = d1 < 0 ? 1 : 2;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->esize = !strcmp(dtype, "F8_E4M3") ? 1 : !strcmp(dtype, "BF16") ? 2 : 4;
}

static void add_fp8(synth_list *L, const char *prefix, const char *base, int64_t r, int64_t c)
{
    char w[128], s[128];
    snprintf(w, sizeof w, "%s.weight", base);
    snprintf(s, sizeof s, "%s.weight_scale_inv", base);
    add(L, prefix, w, "F8_E4M3", r, c);
    add(L, prefix, s, "F32", (r + 127) / 128, (c + 127) / 128);
}

static void add_mlp(synth_list *L, const char *prefix, const char *base, int64_t inter, int64_t H)
{
    char b[128];
    snprintf(b, sizeof b, "%s.gate_proj", base); add_fp8(L, prefix, b, inter, H);
    snprintf(b, sizeof b, "%s.up_proj", base); add_fp8(L, prefix, b, inter, H);
    snprintf(b, sizeof b, "%s.down_proj", base); add_fp8(L, prefix, b, H, inter);
}

static void add_layer(synth_list *L, const model_config *c, int l)
{
    char p[64];
    snprintf(p, sizeof p, "model.layers.%d.", l);
    int64_t H = c->hidden_size, nh = c->num_attention_heads;
    int mtp = l >= c->num_hidden_layers;
    if (mtp) {
        add(L, p, "embed_tokens.weight", "BF16", c->vocab_size, H);
        add(L, p, "enorm.weight", "BF16", H, -1);
        add(L, p, "hnorm.weight", "BF16", H, -1);
        add(L, p, "eh_proj.weight", "BF16", H, 2 * H);
    }
    add(L, p, "input_layernorm.weight", "BF16", H, -1);
    add_fp8(L, p, "self_attn.q_a_proj", c->q_lora_rank, H);
    add(L, p, "self_attn.q_a_layernorm.weight", "BF16", c->q_lora_rank, -1);
    add_fp8(L, p, "self_attn.q_b_proj", nh * (c->qk_nope_head_dim + c->qk_rope_head_dim), c->q_lora_rank);
    add_fp8(L, p, "self_attn.kv_a_proj_with_mqa", c->kv_lora_rank + c->qk_rope_head_dim, H);
    add(L, p, "self_attn.kv_a_layernorm.weight", "BF16", c->kv_lora_rank, -1);
    add_fp8(L, p, "self_attn.kv_b_proj", nh * (c->qk_nope_head_dim + c->v_head_dim), c->kv_lora_rank);
    add_fp8(L, p, "self_attn.o_proj", H, nh * c->v_head_dim);
    add(L, p, "post_attention_layernorm.weight", "BF16", H, -1);
    if (config_layer_is_moe(c, l)) {
        add(L, p, "mlp.gate.weight", "BF16", c->n_routed_experts, H);
        add(L, p, "mlp.gate.e_score_correction_bias", "F32", c->n_routed_experts, -1);
        for (int e = 0; e < c->n_routed_experts; e++) {
            char b[48];
            snprintf(b, sizeof b, "mlp.experts.%d", e);
            add_mlp(L, p, b, c->moe_intermediate_size, H);
        }
        add_mlp(L, p, "mlp.shared_experts", (int64_t)c->moe_intermediate_size * c->n_shared_experts, H);
    } else {
        add_mlp(L, p, "mlp", c->intermediate_size, H);
    }
    if (mtp) {
        add(L, p, "shared_head.norm.weight", "BF16", H, -1);
        add(L, p, "shared_head.head.weight", "BF16", c->vocab_size, H);
    }
}

static int write_config(const char *dir, const model_config *c)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\n  \"architectures\": [\"DeepseekV3ForCausalLM\"],\n  \"model_type\": \"deepseek_v3\",\n"
               "  \"vocab_size\": %d, \"hidden_size\": %d, \"intermediate_size\": %d, \"moe_intermediate_size\": %d,\n"
               "  \"num_hidden_layers\": %d, \"num_nextn_predict_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d,\n"
               "  \"q_lora_rank\": %d, \"kv_lora_rank\": %d, \"qk_nope_head_dim\": %d, \"qk_rope_head_dim\": %d, \"v_head_dim\": %d,\n"
               "  \"n_routed_experts\": %d, \"n_shared_experts\": %d, \"num_experts_per_tok\": %d, \"n_group\": %d, \"topk_group\": %d,\n"
               "  \"first_k_dense_replace\": %d, \"moe_layer_freq\": %d, \"norm_topk_prob\": %s, \"routed_scaling_factor\": %g,\n"
               "  \"rms_norm_eps\": %g, \"rope_theta\": %g, \"max_position_embeddings\": %d,\n"
               "  \"rope_scaling\": {\"type\": \"yarn\", \"factor\": %g, \"original_max_position_embeddings\": %d, \"beta_fast\": %g,"
               " \"beta_slow\": %g, \"mscale\": %g, \"mscale_all_dim\": %g},\n"
               "  \"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]},\n"
               "  \"hidden_act\": \"silu\", \"scoring_func\": \"sigmoid\", \"topk_method\": \"noaux_tc\", \"tie_word_embeddings\": false,\n"
               "  \"bos_token_id\": %d, \"eos_token_id\": %d, \"torch_dtype\": \"bfloat16\"\n}\n",
            c->vocab_size, c->hidden_size, c->intermediate_size, c->moe_intermediate_size, c->num_hidden_layers,
            c->num_nextn_predict_layers, c->num_attention_heads, c->num_attention_heads, c->q_lora_rank, c->kv_lora_rank,
            c->qk_nope_head_dim, c->qk_rope_head_dim, c->v_head_dim, c->n_routed_experts, c->n_shared_experts,
            c->num_experts_per_tok, c->n_group, c->topk_group, c->first_k_dense_replace, c->moe_layer_freq,
            c->norm_topk_prob ? "true" : "false", c->routed_scaling_factor, c->rms_norm_eps, c->rope_theta,
            c->max_position_embeddings, c->yarn.factor, c->yarn.original_max_position_embeddings, c->yarn.beta_fast,
            c->yarn.beta_slow, c->yarn.mscale, c->yarn.mscale_all_dim, c->bos_token_id, c->eos_token_id);
    fclose(f);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"_from_model_config\": true, \"bos_token_id\": 0, \"eos_token_id\": 1, \"do_sample\": true, \"temperature\": 0.6, \"top_p\": 0.95}\n");
    fclose(f);
    return 0;
}

static void shard_name(char *buf, size_t n, int s, int nshards)
{
    snprintf(buf, n, "model-%05d-of-%06d.safetensors", s + 1, nshards);
}

/* Header JSON padded with spaces to a multiple of 8, as the safetensors writer does. */
static char *shard_header(const synth_list *L, int s, uint64_t *len_out)
{
    size_t cap = 4096, len = 0;
    char *h = malloc(cap);
    len += (size_t)snprintf(h, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < L->n; i++) {
        const synth_tensor *t = &L->t[i];
        if (t->shard != s) continue;
        if (cap - len < 512) { cap *= 2; h = realloc(h, cap); }
        len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld", t->name, t->dtype, (long long)t->shape[0]);
        if (t->ndim == 2) len += (size_t)snprintf(h + len, cap - len, ",%lld", (long long)t->shape[1]);
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->begin, (unsigned long long)t->end);
    }
    if (cap - len < 16) { cap += 16; h = realloc(h, cap); }
    h[len++] = '}';
    while (len % 8) h[len++] = ' ';
    *len_out = len;
    return h;
}

static int write_shard(const char *dir, const synth_list *L, int s, int nshards)
{
    char fname[64], path[1024];
    shard_name(fname, sizeof fname, s, nshards);
    snprintf(path, sizeof path, "%s/%s", dir, fname);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint64_t n;
    char *h = shard_header(L, s, &n);
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)(n >> (8 * i));
    fwrite(lenb, 1, 8, f);
    fwrite(h, 1, n, f);
    free(h);
    for (int i = 0; i < L->n; i++) {
        const synth_tensor *t = &L->t[i];
        if (t->shard != s) continue;
        for (uint64_t k = 0; k < t->end - t->begin; k++) fputc(synth_byte(t->name, k), f);
    }
    return fclose(f);
}

static int write_index(const char *dir, const synth_list *L, int nshards)
{
    char path[1024], fname[64];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    uint64_t wrong_total = 0; /* as in R1: FP8 counted as 2 bytes */
    for (int i = 0; i < L->n; i++) wrong_total += (L->t[i].end - L->t[i].begin) * (L->t[i].esize == 1 ? 2 : 1);
    fprintf(f, "{\n  \"metadata\": {\"total_size\": %llu},\n  \"weight_map\": {", (unsigned long long)wrong_total);
    for (int i = 0; i < L->n; i++) {
        shard_name(fname, sizeof fname, L->t[i].shard, nshards);
        fprintf(f, "%s\n    \"%s\": \"%s\"", i ? "," : "", L->t[i].name, fname);
    }
    fprintf(f, "\n  }\n}\n");
    return fclose(f);
}

int synth_write_checkpoint(const char *dir, const model_config *c, uint64_t shard_bytes)
{
    synth_list L = {0};
    add(&L, "model.", "embed_tokens.weight", "BF16", c->vocab_size, c->hidden_size);
    for (int l = 0; l < config_total_layers(c); l++) add_layer(&L, c, l);
    add(&L, "model.", "norm.weight", "BF16", c->hidden_size, -1);
    add(&L, "", "lm_head.weight", "BF16", c->vocab_size, c->hidden_size);
    int shard = 0;
    uint64_t pos = 0;
    for (int i = 0; i < L.n; i++) {
        if (pos >= shard_bytes && pos > 0) { shard++; pos = 0; }
        synth_tensor *t = &L.t[i];
        uint64_t numel = (uint64_t)t->shape[0] * (uint64_t)(t->ndim == 2 ? t->shape[1] : 1);
        t->shard = shard;
        t->begin = pos;
        t->end = pos + numel * t->esize;
        pos = t->end;
    }
    int nshards = shard + 1, rc = write_config(dir, c);
    for (int s = 0; s < nshards && !rc; s++) rc = write_shard(dir, &L, s, nshards);
    if (!rc) rc = write_index(dir, &L, nshards);
    free(L.t);
    return rc;
}
