/* The census `dsspec inspect` prints. Lines are "key value" pairs so scripts and tests can read
 * them back; bytes are exact payload bytes from the shard headers (never metadata.total_size). */
#include <stdlib.h>
#include <string.h>
#include "core/checkpoint_internal.h"

typedef enum {
    FAM_ATTENTION, FAM_DENSE_MLP, FAM_SHARED_EXPERTS, FAM_ROUTED_EXPERTS, FAM_ROUTER, FAM_NORMS, FAM_EMBED_HEADS,
    FAM_MTP_EXTRAS, FAM_OTHER, FAM_COUNT
} tensor_family;

static const char *const family_names[FAM_COUNT] = {
    "attention", "dense_mlp", "shared_experts", "routed_experts", "router", "norms", "embed_heads", "mtp_extras", "other",
};

typedef struct {
    uint64_t tensors, bytes;
} tally;

static int is_norm_suffix(const char *rest)
{
    return !strcmp(rest, "input_layernorm.weight") || !strcmp(rest, "post_attention_layernorm.weight") ||
           !strcmp(rest, "self_attn.q_a_layernorm.weight") || !strcmp(rest, "self_attn.kv_a_layernorm.weight");
}

static int is_mtp_extra(const char *rest)
{
    return !strcmp(rest, "enorm.weight") || !strcmp(rest, "hnorm.weight") || !strcmp(rest, "eh_proj.weight") ||
           !strcmp(rest, "embed_tokens.weight") || !strncmp(rest, "shared_head.", 12);
}

/* Family of a tensor name; *layer gets its decoder layer or -1 for the model-level tensors. */
static tensor_family classify(const char *name, int *layer)
{
    *layer = -1;
    if (!strcmp(name, "model.embed_tokens.weight") || !strcmp(name, "lm_head.weight")) return FAM_EMBED_HEADS;
    if (!strcmp(name, "model.norm.weight")) return FAM_NORMS;
    char *end;
    if (strncmp(name, "model.layers.", 13)) return FAM_OTHER;
    long l = strtol(name + 13, &end, 10);
    if (end == name + 13 || *end != '.' || l < 0 || l > 1 << 20) return FAM_OTHER;
    *layer = (int)l;
    const char *rest = end + 1;
    if (is_norm_suffix(rest)) return FAM_NORMS;
    if (is_mtp_extra(rest)) return FAM_MTP_EXTRAS;
    if (!strncmp(rest, "self_attn.", 10)) return FAM_ATTENTION;
    if (!strncmp(rest, "mlp.experts.", 12)) return FAM_ROUTED_EXPERTS;
    if (!strncmp(rest, "mlp.shared_experts.", 19)) return FAM_SHARED_EXPERTS;
    if (!strncmp(rest, "mlp.gate.", 9)) return FAM_ROUTER;
    if (!strncmp(rest, "mlp.", 4)) return FAM_DENSE_MLP;
    return FAM_OTHER;
}

/* "641.29 GiB", "2.68 MiB": tiny test checkpoints and R1 both stay readable. */
static const char *human(uint64_t b, char *buf)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4) { v /= 1024.0; u++; }
    snprintf(buf, 32, u ? "%.2f %s" : "%.0f %s", v, unit[u]);
    return buf;
}

static void print_config(const checkpoint *ck, FILE *out)
{
    const model_config *c = &ck->cfg;
    fprintf(out, "config vocab_size=%d hidden_size=%d intermediate_size=%d moe_intermediate_size=%d\n", c->vocab_size,
            c->hidden_size, c->intermediate_size, c->moe_intermediate_size);
    fprintf(out, "config num_hidden_layers=%d num_nextn_predict_layers=%d first_k_dense_replace=%d moe_layer_freq=%d\n",
            c->num_hidden_layers, c->num_nextn_predict_layers, c->first_k_dense_replace, c->moe_layer_freq);
    fprintf(out, "config num_attention_heads=%d q_lora_rank=%d kv_lora_rank=%d qk_nope_head_dim=%d qk_rope_head_dim=%d v_head_dim=%d\n",
            c->num_attention_heads, c->q_lora_rank, c->kv_lora_rank, c->qk_nope_head_dim, c->qk_rope_head_dim, c->v_head_dim);
    fprintf(out, "config n_routed_experts=%d n_shared_experts=%d num_experts_per_tok=%d n_group=%d topk_group=%d norm_topk_prob=%d routed_scaling_factor=%g\n",
            c->n_routed_experts, c->n_shared_experts, c->num_experts_per_tok, c->n_group, c->topk_group, c->norm_topk_prob,
            c->routed_scaling_factor);
    fprintf(out, "config rms_norm_eps=%g rope_theta=%g max_position_embeddings=%d fp8_block=%dx%d bos_token_id=%d eos_token_id=%d\n",
            c->rms_norm_eps, c->rope_theta, c->max_position_embeddings, c->fp8_block_rows, c->fp8_block_cols, c->bos_token_id,
            c->eos_token_id);
    if (c->yarn.enabled)
        fprintf(out, "config rope_scaling=yarn factor=%g original_max_position_embeddings=%d beta_fast=%g beta_slow=%g mscale=%g mscale_all_dim=%g\n",
                c->yarn.factor, c->yarn.original_max_position_embeddings, c->yarn.beta_fast, c->yarn.beta_slow, c->yarn.mscale,
                c->yarn.mscale_all_dim);
    else
        fprintf(out, "config rope_scaling=none\n");
    if (ck->has_generation_config)
        fprintf(out, "generation temperature=%g top_p=%g\n", ck->gen_temperature, ck->gen_top_p);
}

static void print_experts(const checkpoint *ck, FILE *out)
{
    char hb[32];
    uint64_t n = 0, contiguous = 0, straddle = 0, bytes = 0, min = UINT64_MAX, max = 0;
    size_t total = (size_t)config_total_layers(&ck->cfg) * (size_t)ck->cfg.n_routed_experts;
    for (size_t i = 0; i < total; i++) {
        const expert_extent *x = &ck->experts[i];
        if (!x->npieces) continue;
        uint64_t b = 0;
        for (int k = 0; k < EXPERT_NTENSORS; k++) b += x->t[k]->nbytes;
        n++;
        contiguous += (uint64_t)x->contiguous;
        straddle += x->npieces == 2;
        bytes += b;
        if (b < min) min = b;
        if (b > max) max = b;
    }
    if (!n) min = 0;
    fprintf(out, "experts count=%llu contiguous=%llu straddling=%llu bytes=%llu (%s) bytes_per_expert_min=%llu bytes_per_expert_max=%llu\n",
            (unsigned long long)n, (unsigned long long)contiguous, (unsigned long long)straddle, (unsigned long long)bytes, human(bytes, hb),
            (unsigned long long)min, (unsigned long long)max);
}

static void print_layers(const checkpoint *ck, FILE *out, const tally *layer_all, const tally *layer_routed)
{
    const model_config *c = &ck->cfg;
    fprintf(out, "%-6s %-5s %8s %16s %16s %16s\n", "#layer", "kind", "tensors", "bytes", "resident_bytes", "routed_bytes");
    for (int l = 0; l < config_total_layers(c); l++) {
        const char *kind = l >= c->num_hidden_layers ? "mtp" : config_layer_is_moe(c, l) ? "moe" : "dense";
        fprintf(out, "layer %-5d %-5s %8llu %16llu %16llu %16llu\n", l, kind, (unsigned long long)layer_all[l].tensors,
                (unsigned long long)layer_all[l].bytes, (unsigned long long)(layer_all[l].bytes - layer_routed[l].bytes),
                (unsigned long long)layer_routed[l].bytes);
    }
}

void checkpoint_print_census(const checkpoint *ck, FILE *out)
{
    int nl = config_total_layers(&ck->cfg);
    tally by_dtype[DTYPE_OTHER + 1] = {{0}}, by_family[FAM_COUNT] = {{0}}, total = {0}, model_level = {0};
    tally *layer_all = calloc((size_t)nl, sizeof *layer_all), *layer_routed = calloc((size_t)nl, sizeof *layer_routed);
    if (!layer_all || !layer_routed) { free(layer_all); free(layer_routed); fprintf(out, "census: out of memory\n"); return; }
    for (int i = 0; i < ck->n_tensors; i++) {
        const tensor_info *t = &ck->tensors[i];
        int layer;
        tensor_family f = classify(t->name, &layer);
        tally *slots[4] = {&total, &by_dtype[t->dtype], &by_family[f], layer >= 0 && layer < nl ? &layer_all[layer] : &model_level};
        for (int k = 0; k < 4; k++) { slots[k]->tensors++; slots[k]->bytes += t->nbytes; }
        if (f == FAM_ROUTED_EXPERTS && layer >= 0 && layer < nl) { layer_routed[layer].tensors++; layer_routed[layer].bytes += t->nbytes; }
    }
    char hb[32];
    fprintf(out, "checkpoint %s\n", ck->dir);
    fprintf(out, "total shards=%d tensors=%llu bytes=%llu (%s)\n", ck->n_shards, (unsigned long long)total.tensors,
            (unsigned long long)total.bytes, human(total.bytes, hb));
    print_config(ck, out);
    for (int d = 0; d <= DTYPE_OTHER; d++)
        if (by_dtype[d].tensors)
            fprintf(out, "dtype %s tensors=%llu bytes=%llu (%s)\n", dtype_name((dtype_t)d), (unsigned long long)by_dtype[d].tensors,
                    (unsigned long long)by_dtype[d].bytes, human(by_dtype[d].bytes, hb));
    for (int f = 0; f < FAM_COUNT; f++)
        fprintf(out, "family %s tensors=%llu bytes=%llu (%s)\n", family_names[f], (unsigned long long)by_family[f].tensors,
                (unsigned long long)by_family[f].bytes, human(by_family[f].bytes, hb));
    uint64_t routed = by_family[FAM_ROUTED_EXPERTS].bytes;
    fprintf(out, "resident bytes=%llu (%s)\n", (unsigned long long)(total.bytes - routed), human(total.bytes - routed, hb));
    fprintf(out, "routed bytes=%llu (%s)\n", (unsigned long long)routed, human(routed, hb));
    print_experts(ck, out);
    fprintf(out, "model_level tensors=%llu bytes=%llu\n", (unsigned long long)model_level.tensors, (unsigned long long)model_level.bytes);
    print_layers(ck, out, layer_all, layer_routed);
    free(layer_all);
    free(layer_routed);
}
