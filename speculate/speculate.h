/* Speculative decoding with the checkpoint's own MTP layer: the MTP drafts one
 * token, the main model verifies [last, draft] in one 2-row pass, so an accepted draft yields two
 * tokens for one pass over the weights. Also the plain decode loop (MTP off), so both modes share
 * every line but the draft/verify step. */
#ifndef DSSPEC_SPECULATE_H
#define DSSPEC_SPECULATE_H

#include <stdint.h>
#include "core/model.h"
#include "core/sampler.h"

/* MTP pass: row i pairs the main model's post-norm hidden h_i with the embedding of the NEXT token
 * x_{i+1} (embedding first in the concat) and runs the MTP block at position pos[i] with its own KV.
 * logits: [nb - logits_from][V] for rows logits_from.. (NULL: none). Rows before logits_from (all rows
 * when logits is NULL) only write their MTP KV entries: nothing reads their block outputs. Works in
 * the model's scratch arena: nb and positions within model_reserve_scratch's rows and ctx. */
int mtp_forward(model *m, kv_cache *mtp_kv, expert_provider *ep, const float *hidden, const int *next_tokens,
                const int *pos, int nb, float *logits, int logits_from, char *err, size_t errlen);

/* Acceptance of a draft against the target logits of the row that verifies it. Returns 1 when
 * accepted; *token is the token this row emits (the draft when accepted). Greedy: accept iff
 * argmax == draft. Sampling: the draft is a point mass; accept with probability p_target(draft),
 * else draw from p_target with the draft removed and renormalized — the output distribution is
 * exactly p_target. */
int verify_draft(sampler *s, const float *logits, int draft, int *token);

typedef struct {
    int mtp;                 /* 1: draft with the MTP layer */
    int max_new;             /* stop after this many generated tokens */
    int eos_id;              /* stop at this token (-1: never) */
    int ctx;                 /* KV capacity in positions */
    int prefill_chunk;       /* prompt rows per prefill pass */
    int prefetch;            /* router-lookahead prefetch on/off */
    int kv_bf16;             /* latent KV cache in BF16 instead of F32 */
    sampler *sampler;
    void (*on_token)(void *ctx, int token);      /* every generated token, in order */
    void *token_ctx;
    /* called after each main-model pass with the generated count so far; non-zero stops */
    int (*on_step)(void *ctx, int generated);
    void *step_ctx;
    route_observer on_route; /* main-model routing of every processed row (trace-out) */
    void *route_ctx;
} gen_options;

typedef struct {
    int prompt_tokens, generated;
    int main_passes;         /* decode passes of the main model (prefill excluded) */
    int drafts, accepted;
    double prefill_seconds, decode_seconds;
    int stopped_by_eos, stopped_by_ctx;
} gen_stats;

/* Prefill and decode of one prompt. The model's scratch must be reserved for
 * max(prefill_chunk, 2) rows over o->ctx positions (model_reserve_scratch). */
int generate(model *m, expert_provider *ep, const int *prompt, int n_prompt, const gen_options *o, gen_stats *st,
             char *err, size_t errlen);

#endif
