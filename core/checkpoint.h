/* Checkpoint reader: a DeepSeek-V3/R1 Hugging Face snapshot directory (config.json,
 * model.safetensors.index.json, safetensors shards) turned into a validated tensor table.
 *
 * Traps of the format this module guards against:
 *  - the index's metadata.total_size is wrong (FP8 counted as 2 bytes): sizes come from shard headers;
 *  - the shard header is authoritative for dtype/shape/offsets; the index only maps names to shards;
 *  - absolute offset = 8 + header_len + data_offsets[0]; 8 + header_len + max(end) must equal file size;
 *  - one routed expert's six tensors are contiguous but may straddle two shards (two pieces). */
#ifndef DSSPEC_CHECKPOINT_H
#define DSSPEC_CHECKPOINT_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

typedef enum { DTYPE_F8_E4M3 = 0, DTYPE_BF16, DTYPE_F32, DTYPE_F16, DTYPE_I64, DTYPE_OTHER } dtype_t;
const char *dtype_name(dtype_t t);
size_t dtype_size(dtype_t t); /* bytes per element; 0 for DTYPE_OTHER */

typedef struct {
    int enabled;                     /* rope_scaling.type == "yarn" */
    double factor;
    int original_max_position_embeddings;
    double beta_fast, beta_slow, mscale, mscale_all_dim;
} yarn_config;

/* Every field the forward pass needs; all read from config.json, none defaulted silently. */
typedef struct {
    int vocab_size, hidden_size, intermediate_size, moe_intermediate_size;
    int num_hidden_layers, num_nextn_predict_layers;
    int num_attention_heads, q_lora_rank, kv_lora_rank;
    int qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    int n_routed_experts, n_shared_experts, num_experts_per_tok;
    int n_group, topk_group, first_k_dense_replace, moe_layer_freq;
    int norm_topk_prob;
    double routed_scaling_factor, rms_norm_eps, rope_theta;
    int max_position_embeddings;
    yarn_config yarn;
    int bos_token_id, eos_token_id;  /* -1 when absent */
    int fp8_block_rows, fp8_block_cols; /* quantization_config.weight_block_size (128,128) */
} model_config;

/* Bounds the forward pass relies on: arrays sized by them live on the stack or in fixed tables.
 * config_load refuses a config.json beyond any of them (R1: 8 experts per token of 256 in 8 groups,
 * rope dim 64), so no code past the reader checks them again. */
enum {
    MODEL_MAX_EXPERTS_PER_TOK = 64,  /* num_experts_per_tok: a row's route in the MoE layer */
    MODEL_MAX_GROUPS = 256,          /* n_group: the router's group scores */
    MODEL_MAX_ROUTED_EXPERTS = 1024, /* n_routed_experts: the router's per-expert flags */
    MODEL_MAX_ROPE_DIM = 512,        /* qk_rope_head_dim: rope_table's frequencies (dim / 2) */
};

/* 1 when decoder layer l (0 .. num_hidden_layers + num_nextn_predict_layers - 1) is MoE. */
int config_layer_is_moe(const model_config *c, int layer);
int config_total_layers(const model_config *c); /* main layers + MTP layers */

typedef struct {
    char *name;
    int shard;          /* index into checkpoint.shards */
    uint64_t offset;    /* absolute byte offset in the shard file */
    uint64_t nbytes;
    dtype_t dtype;
    int ndim;
    int64_t shape[4];
} tensor_info;

typedef struct {
    char *path;         /* full path */
    char *file;         /* file name as the index spells it */
    int fd;             /* opened O_RDONLY (buffered); io/ opens its own O_DIRECT descriptors */
    uint64_t size, header_len;
} shard_info;

/* One routed expert on disk: its six tensors in R1 order (gate W, gate scale, up W, up scale,
 * down W, down scale) and the 1 or 2 contiguous byte pieces that hold them. */
enum { EXPERT_GATE_W, EXPERT_GATE_S, EXPERT_UP_W, EXPERT_UP_S, EXPERT_DOWN_W, EXPERT_DOWN_S, EXPERT_NTENSORS };
typedef struct {
    int npieces;        /* 0: the expert does not exist (dense layer) */
    struct { int shard; uint64_t offset, length; } piece[2];
    const tensor_info *t[EXPERT_NTENSORS];
    int contiguous;     /* the six tensors follow each other with no gap inside each piece */
} expert_extent;

typedef struct checkpoint_index checkpoint_index; /* private name -> tensor hash */

typedef struct {
    char *dir;
    model_config cfg;
    int n_shards;
    shard_info *shards;
    int n_tensors;
    tensor_info *tensors;
    checkpoint_index *index;
    expert_extent *experts;   /* [config_total_layers * n_routed_experts] */
    /* from generation_config.json when present (has_generation_config), else zeros */
    int has_generation_config;
    double gen_temperature, gen_top_p;
} checkpoint;

/* Opens and validates everything (the index, every shard header and their agreement; every tensor
 * the forward pass needs with the dtype and shape the config implies, core/tensor_table.h). NULL on failure with one line in err naming the
 * file and tensor and what was expected. */
checkpoint *checkpoint_open(const char *dir, char *err, size_t errlen);
void checkpoint_close(checkpoint *ck);

const tensor_info *checkpoint_tensor(const checkpoint *ck, const char *name);          /* NULL if absent */
const tensor_info *checkpoint_tensorf(const checkpoint *ck, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const expert_extent *checkpoint_expert(const checkpoint *ck, int layer, int expert);

/* Read n bytes at byte offset off inside tensor t into dst (pread, retries short reads).
 * 0, or -1 with err naming the file, tensor and offset. */
int checkpoint_read(const checkpoint *ck, const tensor_info *t, uint64_t off, void *dst, uint64_t n,
                    char *err, size_t errlen);
/* checkpoint_read for bytes read once and then kept in RAM (the resident weights): the file's pages
 * are dropped from the page cache as each chunk lands. Inside a memory cgroup the page cache a
 * process fills is charged to it, so buffered loading would otherwise push the cgroup to its limit
 * and make the kernel reclaim (or OOM-kill) for memory the process never uses again. */
int checkpoint_read_once(const checkpoint *ck, const tensor_info *t, uint64_t off, void *dst, uint64_t n,
                         char *err, size_t errlen);

/* The census `dsspec inspect` prints: tensors and bytes by dtype, family, layer; resident vs
 * routed-expert bytes; expert extents (contiguous or not, straddling). */
void checkpoint_print_census(const checkpoint *ck, FILE *out);

#endif
