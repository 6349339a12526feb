/* config.json and generation_config.json: every field the forward pass needs, read and checked.
 * A value this engine does not implement (another rope type, softmax scoring, ...) is an error
 * naming the key, never a silent default: running R1 math on a different model gives plausible
 * garbage, which is far worse than refusing. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/checkpoint_internal.h"

typedef struct {
    const char *path;
    char *err;
    size_t errlen;
} config_ctx;

static int get_number(const config_ctx *x, const cJSON *obj, const char *prefix, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) { error_set(x->err, x->errlen, "%s: key '%s%s' missing (expected a number)", x->path, prefix, key); return -1; }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        error_set(x->err, x->errlen, "%s: key '%s%s' must be a finite number", x->path, prefix, key);
        return -1;
    }
    *out = v->valuedouble;
    return 0;
}

static int get_int(const config_ctx *x, const cJSON *obj, const char *prefix, const char *key, int lo, int hi, int *out)
{
    double d;
    if (get_number(x, obj, prefix, key, &d)) return -1;
    if (d != floor(d) || d < lo || d > hi) {
        error_set(x->err, x->errlen, "%s: key '%s%s' = %g, expected an integer in [%d, %d]", x->path, prefix, key, d, lo, hi);
        return -1;
    }
    *out = (int)d;
    return 0;
}

static int get_positive(const config_ctx *x, const cJSON *obj, const char *prefix, const char *key, double *out)
{
    if (get_number(x, obj, prefix, key, out)) return -1;
    if (*out <= 0) {
        error_set(x->err, x->errlen, "%s: key '%s%s' = %g, expected > 0", x->path, prefix, key, *out);
        return -1;
    }
    return 0;
}

/* A string key that must equal exactly one accepted value. */
static int expect_string(const config_ctx *x, const cJSON *obj, const char *prefix, const char *key, const char *want)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) { error_set(x->err, x->errlen, "%s: key '%s%s' missing (expected \"%s\")", x->path, prefix, key, want); return -1; }
    if (!cJSON_IsString(v) || strcmp(v->valuestring, want) != 0) {
        error_set(x->err, x->errlen, "%s: key '%s%s' = %s, expected \"%s\"", x->path, prefix, key,
                  cJSON_IsString(v) ? v->valuestring : "(not a string)", want);
        return -1;
    }
    return 0;
}

static int get_bool(const config_ctx *x, const cJSON *obj, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) { error_set(x->err, x->errlen, "%s: key '%s' missing (expected true or false)", x->path, key); return -1; }
    if (!cJSON_IsBool(v)) { error_set(x->err, x->errlen, "%s: key '%s' must be true or false", x->path, key); return -1; }
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return 0;
}

/* bos/eos: an integer, or (generation_config) a list whose first entry is used; absent -> -1. */
static int get_token_id(const config_ctx *x, const cJSON *obj, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0) v = cJSON_GetArrayItem(v, 0);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 1e9) {
        error_set(x->err, x->errlen, "%s: key '%s' must be a non-negative integer token id", x->path, key);
        return -1;
    }
    *out = (int)v->valuedouble;
    return 0;
}

static int check_architecture(const config_ctx *x, const cJSON *root)
{
    if (expect_string(x, root, "", "model_type", "deepseek_v3")) return -1;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const cJSON *first = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 0) : NULL;
    if (!cJSON_IsString(first) || strcmp(first->valuestring, "DeepseekV3ForCausalLM") != 0 || cJSON_GetArraySize(a) != 1) {
        error_set(x->err, x->errlen, "%s: key 'architectures' must be [\"DeepseekV3ForCausalLM\"]", x->path);
        return -1;
    }
    if (expect_string(x, root, "", "hidden_act", "silu")) return -1;
    if (expect_string(x, root, "", "scoring_func", "sigmoid")) return -1;
    if (expect_string(x, root, "", "topk_method", "noaux_tc")) return -1;
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (tie && !cJSON_IsFalse(tie)) {
        error_set(x->err, x->errlen, "%s: key 'tie_word_embeddings' must be false (lm_head is its own tensor)", x->path);
        return -1;
    }
    return 0;
}

static int parse_quantization(const config_ctx *x, const cJSON *root, model_config *c)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    if (!cJSON_IsObject(q)) {
        error_set(x->err, x->errlen, "%s: key 'quantization_config' missing or not an object (expected fp8 e4m3 [128,128])", x->path);
        return -1;
    }
    if (expect_string(x, q, "quantization_config.", "quant_method", "fp8")) return -1;
    if (expect_string(x, q, "quantization_config.", "fmt", "e4m3")) return -1;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(q, "activation_scheme");
    if (act && !(cJSON_IsString(act) && !strcmp(act->valuestring, "dynamic"))) {
        error_set(x->err, x->errlen, "%s: key 'quantization_config.activation_scheme' must be \"dynamic\" (no activation scales are read)", x->path);
        return -1;
    }
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(q, "weight_block_size");
    const cJSON *r = cJSON_IsArray(b) ? cJSON_GetArrayItem(b, 0) : NULL;
    const cJSON *cc = cJSON_IsArray(b) ? cJSON_GetArrayItem(b, 1) : NULL;
    if (cJSON_GetArraySize(b) != 2 || !cJSON_IsNumber(r) || !cJSON_IsNumber(cc) || r->valuedouble != 128 || cc->valuedouble != 128) {
        error_set(x->err, x->errlen, "%s: key 'quantization_config.weight_block_size' must be [128, 128]", x->path);
        return -1;
    }
    c->fp8_block_rows = 128;
    c->fp8_block_cols = 128;
    return 0;
}

static int parse_rope_scaling(const config_ctx *x, const cJSON *root, model_config *c)
{
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    memset(&c->yarn, 0, sizeof c->yarn);
    if (!rs || cJSON_IsNull(rs)) return 0;
    if (!cJSON_IsObject(rs)) { error_set(x->err, x->errlen, "%s: key 'rope_scaling' must be an object or null", x->path); return -1; }
    /* Older configs spell it "type", newer transformers "rope_type". */
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!cJSON_IsString(t) || strcmp(t->valuestring, "yarn") != 0) {
        error_set(x->err, x->errlen, "%s: key 'rope_scaling.type' = %s, expected \"yarn\" (or no rope_scaling)", x->path,
                  cJSON_IsString(t) ? t->valuestring : "(missing)");
        return -1;
    }
    yarn_config *y = &c->yarn;
    const char *p = "rope_scaling.";
    if (get_positive(x, rs, p, "factor", &y->factor) || get_int(x, rs, p, "original_max_position_embeddings", 1, 1 << 30, &y->original_max_position_embeddings) ||
        get_positive(x, rs, p, "beta_fast", &y->beta_fast) || get_positive(x, rs, p, "beta_slow", &y->beta_slow) ||
        get_positive(x, rs, p, "mscale", &y->mscale) || get_positive(x, rs, p, "mscale_all_dim", &y->mscale_all_dim))
        return -1;
    y->enabled = 1;
    return 0;
}

static int parse_dimensions(const config_ctx *x, const cJSON *root, model_config *c)
{
    const int big = 1 << 24, layers = 4096;
    return get_int(x, root, "", "vocab_size", 1, big, &c->vocab_size) || get_int(x, root, "", "hidden_size", 1, big, &c->hidden_size) ||
           get_int(x, root, "", "intermediate_size", 1, big, &c->intermediate_size) ||
           get_int(x, root, "", "moe_intermediate_size", 1, big, &c->moe_intermediate_size) ||
           get_int(x, root, "", "num_hidden_layers", 1, layers, &c->num_hidden_layers) ||
           get_int(x, root, "", "num_nextn_predict_layers", 0, 16, &c->num_nextn_predict_layers) ||
           get_int(x, root, "", "num_attention_heads", 1, 65536, &c->num_attention_heads) ||
           get_int(x, root, "", "q_lora_rank", 1, big, &c->q_lora_rank) || get_int(x, root, "", "kv_lora_rank", 1, big, &c->kv_lora_rank) ||
           get_int(x, root, "", "qk_nope_head_dim", 1, 65536, &c->qk_nope_head_dim) ||
           get_int(x, root, "", "qk_rope_head_dim", 2, MODEL_MAX_ROPE_DIM, &c->qk_rope_head_dim) ||
           get_int(x, root, "", "v_head_dim", 1, 65536, &c->v_head_dim) ||
           get_int(x, root, "", "n_routed_experts", 1, MODEL_MAX_ROUTED_EXPERTS, &c->n_routed_experts) ||
           get_int(x, root, "", "n_shared_experts", 0, 64, &c->n_shared_experts) ||
           get_int(x, root, "", "num_experts_per_tok", 1, MODEL_MAX_EXPERTS_PER_TOK, &c->num_experts_per_tok) ||
           get_int(x, root, "", "n_group", 1, MODEL_MAX_GROUPS, &c->n_group) || get_int(x, root, "", "topk_group", 1, 65536, &c->topk_group) ||
           get_int(x, root, "", "first_k_dense_replace", 0, layers, &c->first_k_dense_replace) ||
           get_int(x, root, "", "moe_layer_freq", 1, layers, &c->moe_layer_freq) ||
           get_int(x, root, "", "max_position_embeddings", 1, 1 << 30, &c->max_position_embeddings)
               ? -1 : 0;
}

/* Relations between fields that the router and attention rely on. */
static int check_relations(const config_ctx *x, const model_config *c)
{
    if (c->qk_rope_head_dim % 2) {
        error_set(x->err, x->errlen, "%s: key 'qk_rope_head_dim' = %d, expected an even number (rotated in pairs)", x->path, c->qk_rope_head_dim);
        return -1;
    }
    if (c->n_routed_experts % c->n_group) {
        error_set(x->err, x->errlen, "%s: key 'n_group' = %d must divide n_routed_experts = %d", x->path, c->n_group, c->n_routed_experts);
        return -1;
    }
    if (c->topk_group > c->n_group) {
        error_set(x->err, x->errlen, "%s: key 'topk_group' = %d exceeds n_group = %d", x->path, c->topk_group, c->n_group);
        return -1;
    }
    if (c->num_experts_per_tok > c->topk_group * (c->n_routed_experts / c->n_group)) {
        error_set(x->err, x->errlen, "%s: key 'num_experts_per_tok' = %d exceeds the experts in topk_group groups (%d)", x->path,
                  c->num_experts_per_tok, c->topk_group * (c->n_routed_experts / c->n_group));
        return -1;
    }
    if (c->rope_theta <= 1) {
        /* inv_freq = theta^(-2i/d) and YaRN's correction dims divide by log(theta): both need theta > 1. */
        error_set(x->err, x->errlen, "%s: key 'rope_theta' = %g, expected > 1", x->path, c->rope_theta);
        return -1;
    }
    if (c->n_routed_experts / c->n_group < 2) {
        error_set(x->err, x->errlen, "%s: key 'n_group' = %d leaves fewer than 2 experts per group (group score = top-2 sum)", x->path, c->n_group);
        return -1;
    }
    return 0;
}

static int config_from_json(const config_ctx *x, const cJSON *root, model_config *c)
{
    if (!cJSON_IsObject(root)) { error_set(x->err, x->errlen, "%s: top level must be a JSON object", x->path); return -1; }
    if (check_architecture(x, root) || parse_dimensions(x, root, c) || parse_quantization(x, root, c) || parse_rope_scaling(x, root, c))
        return -1;
    if (get_bool(x, root, "norm_topk_prob", &c->norm_topk_prob) || get_positive(x, root, "", "routed_scaling_factor", &c->routed_scaling_factor) ||
        get_positive(x, root, "", "rms_norm_eps", &c->rms_norm_eps) || get_positive(x, root, "", "rope_theta", &c->rope_theta))
        return -1;
    c->bos_token_id = c->eos_token_id = -1;
    if (get_token_id(x, root, "bos_token_id", &c->bos_token_id) || get_token_id(x, root, "eos_token_id", &c->eos_token_id)) return -1;
    return check_relations(x, c);
}

int config_load(const char *path, model_config *cfg, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    char *text = text_file_read(path, NULL, err, errlen);
    if (!text) return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    config_ctx x = {path, err, errlen};
    if (!root) { error_set(err, errlen, "%s: malformed JSON", path); return -1; }
    int rc = config_from_json(&x, root, cfg);
    cJSON_Delete(root);
    return rc;
}

int generation_config_load(const char *path, checkpoint *ck, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) return 0;
    char *text = text_file_read(path, NULL, err, errlen);
    if (!text) return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    config_ctx x = {path, err, errlen};
    int rc = 1;
    if (!cJSON_IsObject(root)) {
        error_set(err, errlen, "%s: malformed JSON (expected an object)", path);
        rc = -1;
    } else {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "temperature");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "top_p");
        if (t && get_number(&x, root, "", "temperature", &ck->gen_temperature)) rc = -1;
        else if (p && get_number(&x, root, "", "top_p", &ck->gen_top_p)) rc = -1;
        else if (ck->gen_temperature < 0 || ck->gen_top_p < 0 || ck->gen_top_p > 1) {
            error_set(err, errlen, "%s: key 'temperature' must be >= 0 and 'top_p' in [0, 1]", path);
            rc = -1;
        } else if (get_token_id(&x, root, "bos_token_id", &ck->cfg.bos_token_id) || get_token_id(&x, root, "eos_token_id", &ck->cfg.eos_token_id))
            rc = -1;
    }
    cJSON_Delete(root);
    if (rc == 1) ck->has_generation_config = 1;
    return rc;
}

int config_layer_is_moe(const model_config *c, int layer)
{
    if (layer < 0 || layer >= config_total_layers(c)) return 0;
    if (layer >= c->num_hidden_layers) return 1; /* MTP layers are always MoE */
    return layer >= c->first_k_dense_replace && layer % c->moe_layer_freq == 0;
}

int config_total_layers(const model_config *c) { return c->num_hidden_layers + c->num_nextn_predict_layers; }
