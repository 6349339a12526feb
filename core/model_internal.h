/* Private to core/model*.c and core/kv_cache.c: the model's resident weights and its scratch arena.
 * The forward pass (model.c) reads them; model_load.c fills the weights, model_scratch.c carves
 * the arena. */
#ifndef DSSPEC_MODEL_INTERNAL_H
#define DSSPEC_MODEL_INTERNAL_H

#include <stdatomic.h>
#include "core/attention.h"
#include "core/kernels.h"
#include "core/model.h"
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

/* One row's routed experts, ascending id, and their weights. */
typedef struct {
    int ids[MODEL_MAX_EXPERTS_PER_TOK];
    float weights[MODEL_MAX_EXPERTS_PER_TOK];
} row_route;

/* Up to EXPERT_PIECE_ROWS rows of one expert, gathered, on one pool thread (model.c's
 * run_taken_experts): xs, ys [n][H], act, act2 [n][moe_intermediate]; rows_of, slot_of [n]. */
#define EXPERT_PIECE_ROWS 32
typedef struct {
    float *xs, *ys, *act, *act2;
    int *rows_of, *slot_of;
    atomic_int busy;
} expert_piece;

/* Every buffer the forward and MTP passes write, carved from one allocation for batches of up to
 * max_rows rows attending over up to ctx positions (llama2.c's RunState): the hot path never
 * allocates. H hidden, R kv_lora_rank, E routed experts, k experts per token. */
typedef struct {
    int max_rows, ctx;
    size_t bytes;
    void *base;                 /* NULL until model_reserve_scratch */
    float *x;                   /* [rows][H] model_forward's residual stream */
    float *xn, *y;              /* [rows][H] a layer's normalized input, a block's output */
    float *qa;                  /* [rows][q_lora_rank] */
    float *q;                   /* [rows][heads][qk_nope + qk_rope] */
    float *ckv;                 /* [rows][R + qk_rope] new latent KV entries */
    float *q_lat, *o_lat;       /* [rows][heads][R] absorbed query, attention-weighted latent */
    float *q_rope;              /* [rows][heads][qk_rope] */
    float *heads_out;           /* [rows][heads][v_head_dim] */
    void *attn;                 /* attention_scratch_bytes: one row's chunk partials, conversion buffers */
    float *act, *act2;          /* [rows][widest MLP intermediate] */
    float *router_logits;       /* [rows][E] */
    float *router_scratch;      /* [2E] */
    row_route *routes;          /* [rows] */
    int *uni;                   /* [rows * k] the batch's distinct experts */
    float *results;             /* [rows][k][H] each (row, choice)'s expert output */
    float *xs, *ys;             /* [rows][H] the rows of one expert, gathered */
    int *rows_of, *slot_of;     /* [rows] where each gathered row's result goes */
    expert_weights *taken;      /* [min(rows * k, E)] the experts pinned for one run over the pool */
    expert_piece *pieces;       /* [threads] one expert's rows at a time on each pool thread */
    float *prefetch_xn;         /* [rows][H] */
    float *prefetch_logits;     /* [rows][E] */
    int *guess;                 /* [rows][E] a later layer's experts, most likely first */
    int *uni_guess;             /* [rows * E] the rows' guesses interleaved rank by rank */
    uint16_t *embed_row;        /* [H] one BF16 embedding row as read */
    mtp_buffers mtp;            /* [rows][H], [rows][2H], [rows][H]; NULL without an MTP layer */
} scratch;

struct model {
    const checkpoint *ck;
    model_config cfg;
    thread_pool *pool;
    int n_layers;               /* main layers + MTP layers */
    layer_weights *layers;
    const tensor_info *embed;   /* model.embed_tokens.weight, rows read on demand */
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
    scratch scratch;
};

/* 0, or -1 with err when nothing is reserved or nb exceeds the reserved rows (model_scratch.c). */
int scratch_check_rows(const model *m, int nb, char *err, size_t errlen);

/* One position's latent and rotated k_rope into the cache, converted to its dtype. */
void kv_cache_store(kv_cache *kv, int kv_layer, int pos, const float *latent, const float *krope);

#endif
