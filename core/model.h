/* The DeepSeek-V3/R1 forward pass: resident weights, the absorbed-MLA latent KV cache, and a
 * batched forward over rows at arbitrary positions. Routed experts come only through an
 * expert_provider. A row's numbers never depend on which other rows share its batch, so a 2-row
 * speculative verification gives bit-identical results to two 1-row passes.
 *
 * Every pass works in the model's scratch arena (model_reserve_scratch), so a model runs one pass
 * at a time and nothing on the hot path allocates. */
#ifndef DSSPEC_MODEL_H
#define DSSPEC_MODEL_H

#include <stddef.h>
#include "core/checkpoint.h"
#include "core/expert_provider.h"
#include "core/threadpool.h"

typedef struct model model;

/* Loads every resident weight (everything but routed experts and the embedding table, whose rows
 * are read on demand) of the main layers and, when present, the MTP layer. */
model *model_load(const checkpoint *ck, thread_pool *pool, char *err, size_t errlen);
void model_free(model *m);
const model_config *model_get_config(const model *m);
const checkpoint *model_get_checkpoint(const model *m);
size_t model_resident_bytes(const model *m);
int model_has_mtp(const model *m);

/* Allocates the scratch arena once for batches of up to max_rows rows attending over up to ctx
 * positions (the MTP pass's rows included). Called again with larger values it grows (frees and
 * reallocates to the larger of old and new in each); it never shrinks. 0, or -1 with one error
 * line (the old arena, if any, is kept). */
int model_reserve_scratch(model *m, int max_rows, int ctx, char *err, size_t errlen);
size_t model_scratch_bytes(const model *m); /* the arena's real size in bytes (0 before reserve) */
/* The widest input any of the model's weight products takes: what each thread's kernel scratch
 * (kernels_scratch_bytes_per_thread) is sized by. model_reserve_scratch reserves it on every pool
 * thread, and each pass on its caller's thread, so no product allocates. */
int model_widest_input(const model_config *c);

/* What model_reserve_scratch(m, max_rows, ctx) would allocate, without allocating. */
size_t model_scratch_bytes_for(const model *m, int max_rows, int ctx);

/* Latent KV cache of a set of layers: per token kv_lora_rank latent + qk_rope_head_dim rotated
 * k_rope values per layer, stored as F32 (exact; the reference tests use it) or BF16 (half the
 * memory: 70,272 bytes per token at R1 scale, what long contexts under a budget need). The main
 * model uses layers [0, L); the MTP drafter its own cache for layer L. The cache does not know how
 * many positions are valid: a row attends to positions 0..pos, so the caller that picks positions
 * (speculate/generate.c) owns the sequence length. */
typedef struct {
    int first_layer, n_layers, ctx;
    int latent_dim, rope_dim;
    dtype_t dtype;  /* DTYPE_F32 or DTYPE_BF16 */
    void *latent;   /* [n_layers][ctx][latent_dim] */
    void *krope;    /* [n_layers][ctx][rope_dim] */
} kv_cache;

size_t kv_cache_bytes(const model_config *c, int n_layers, int ctx, dtype_t dtype);
kv_cache *kv_cache_create(const model_config *c, int first_layer, int n_layers, int ctx, dtype_t dtype);
void kv_cache_free(kv_cache *kv);

/* Observes routing decisions: called once per MoE layer per row with the chosen experts in
 * ascending id order. */
typedef void (*route_observer)(void *ctx, int layer, int row, const int *experts, int k);

typedef struct {
    float *hidden;         /* [nb][H] after model.norm, or NULL */
    float *logits;         /* [nb - logits_from][V], rows logits_from..nb-1, or NULL */
    int logits_from;
    route_observer on_route;
    void *route_ctx;
    int prefetch;          /* d >= 1: apply layers l+1..l+d's routers to layer l's residual and hand their
                            * guesses to ep->prefetch; 0: off */
    int prefetch_guesses;  /* guesses per row and layer, most confident first; 0: the router's top_k */
    /* Optional: before each layer after the first, how many of the current rows go on; the others
     * are dropped from the end of the batch (their KV entries stop below this layer, hidden and
     * logits are written for the kept rows only). A row attends only to positions up to its own,
     * so dropping later rows leaves the kept rows' numbers unchanged (a speculative draft row). */
    int (*keep_rows)(void *ctx, int layer, int nb);
    void *keep_ctx;
    /* Rows attend to positions [attend_from, pos[b]] of kv instead of [0, pos[b]]: a caller that
     * left rows below unwritten (speculate/'s MTP KV, whose KV-only rows --mtp auto skips) keeps
     * every row from reading a position it did not write. 0: from the start. */
    int attend_from;
} forward_request;

/* Rows tokens[0..nb) at positions pos[0..nb) (each row attends to positions 0..pos[b] of kv, rows of
 * this batch included; from req->attend_from when set); writes their KV entries. Returns 0, or -1
 * with an error in err (an expert read failed; nb beyond the reserved rows; a position beyond kv's
 * ctx or the reserved ctx, or below req->attend_from). */
int model_forward(model *m, kv_cache *kv, expert_provider *ep, const int *tokens, const int *pos, int nb,
                  forward_request *req, char *err, size_t errlen);

/* Building blocks the MTP drafter (speculate/) composes with the same code as the main layers.
 * They check nb and positions against the reservation as model_forward does. */
/* x[nb][H] = the BF16 rows tokens[] of an embedding table (read from disk, never resident). */
int model_embed(const model *m, const tensor_info *table, const int *tokens, int nb, float *x, char *err, size_t errlen);
void model_rmsnorm(const float *x, const float *w, int n, double eps, float *out);
int model_decoder_layer(model *m, int layer, kv_cache *kv, expert_provider *ep, float *x, const int *pos, int nb,
                        forward_request *req, char *err, size_t errlen);

/* Only the KV entries layer `layer` would write for rows x (its input) at pos: what a row needs when
 * nothing reads its output, only later rows its keys (the MTP rows whose logits are not wanted). */
int model_layer_write_kv(model *m, int layer, kv_cache *kv, const float *x, const int *pos, int nb, char *err, size_t errlen);

/* MTP layer extras (layer index L = num_hidden_layers): NULL when the checkpoint has none. */
typedef struct {
    const float *enorm, *hnorm, *head_norm; /* [H] */
    const void *eh_proj_data;               /* BF16 [H][2H] */
    const void *head_data;                  /* BF16 [V][H] (shared_head.head) */
    const tensor_info *embed_table;         /* the MTP's embedding rows (the main table when identical) */
} mtp_extras;
const mtp_extras *model_mtp_extras(const model *m);

/* The MTP pass's rows in the scratch arena: emb [max_rows][H], cat [max_rows][2H], u [max_rows][H]. */
typedef struct {
    float *emb, *cat, *u;
} mtp_buffers;
/* 0 with *out set, or -1 with err when the model has no MTP layer, nothing is reserved, or nb
 * exceeds the reserved rows. */
int model_mtp_buffers(model *m, int nb, mtp_buffers *out, char *err, size_t errlen);

/* y[nb][rows] = W x for a resident BF16 matrix given its data (used for eh_proj and heads). */
void model_bf16_matvec(model *m, const void *data, int rows, int cols, const float *x, int nb, float *y);

#endif
