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
 * when logits is NULL) only write their MTP KV entries: nothing reads their block outputs. The rows
 * with logits attend to MTP positions [attend_from, pos[i]]: every one of them must hold a row
 * written for that position. Works in the model's scratch arena: nb and positions within
 * model_reserve_scratch's rows and ctx. */
int mtp_forward(model *m, kv_cache *mtp_kv, expert_provider *ep, const float *hidden, const int *next_tokens,
                const int *pos, int nb, float *logits, int logits_from, int attend_from, char *err, size_t errlen);

/* Acceptance of a draft against the target logits of the row that verifies it. Returns 1 when
 * accepted; *token is the token this row emits (the draft when accepted). The row's token is
 * picked as without a draft (argmax, or one draw from p_target) and the draft is accepted iff it
 * equals it: for a point-mass draft that is acceptance with probability p_target(draft) and, on
 * rejection, p_target with the draft removed — the output distribution is exactly p_target. */
int verify_draft(sampler *s, const float *logits, int draft, int *token);

/* Sampling draws the token of sequence position p with the generator at a state keyed by
 * (gen_checkpoint.rng, p), so the output depends on neither the path (MTP off, on, auto) nor where a
 * run was resumed. */

/* A step boundary of the loop: everything it needs to continue from here, given the main KV rows
 * [0, len) and the MTP KV rows [mtp_from, mtp_to). Rows below len are final: no later pass
 * rewrites them (a rejected draft's row is at len or beyond). The MTP rows are written once each,
 * and not all of them (--mtp auto skips the KV-only rows of steps without a draft): those outside
 * [mtp_from, mtp_to) may hold anything, a previous request's rows included, and nothing attends to
 * them. An observer that keeps the MTP KV across boundaries stores rows [mtp_new, mtp_to), the ones
 * written since the previous boundary; restored in order, they rebuild [mtp_from, mtp_to). During
 * prefill, prefill_done < the prompt's length and last/draft are unset. */
typedef struct {
    int len;                 /* KV positions [0, len) are final */
    int prefill_done;        /* prompt rows done; the prompt's length once decoding */
    int last;                /* the last generated token, not yet in the KV (-1 in prefill) */
    int draft;               /* MTP's draft for the next step (-1: MTP off or in prefill) */
    uint64_t rng;            /* the sampler's base state (draws are keyed from it per position) */
    int generated, main_passes, drafts, accepted;
    int mtp_from, mtp_to;    /* the valid MTP rows, mtp_from <= mtp_to <= len (0, 0: MTP off) */
    int mtp_new;             /* mtp_from <= mtp_new <= mtp_to: rows [mtp_new, mtp_to) are new */
} gen_checkpoint;

/* gen_options.mtp: off, draft every step, or draft only on steps where the running cost estimates
 * say a draft yields more tokens per second. On writes every MTP KV row; auto writes the KV-only
 * rows of steps without a draft only when a draft follows, the last gen_options.mtp_window of them
 * at most (a draft after a longer stretch without attends to those and what it writes next). */
enum { GEN_MTP_OFF = 0, GEN_MTP_ON = 1, GEN_MTP_AUTO = 2 };

/* gen_options.mtp_window when 0: measured by bench/decode/mtp_window.c (docs/BENCHMARKS.md, MTP off / on / auto). */
enum { GEN_MTP_WINDOW_DEFAULT = 64 };

typedef struct {
    int mtp;                 /* GEN_MTP_* */
    int max_new;             /* stop after this many generated tokens */
    int eos_id;              /* stop at this token (-1: never) */
    int ctx;                 /* KV capacity in positions */
    int prefill_chunk;       /* prompt rows per prefill pass */
    int prefetch;            /* router-lookahead prefetch: layers ahead to guess, 0 off */
    int prefetch_guesses;    /* guesses per row and layer; 0: the router's top_k */
    int kv_bf16;             /* latent KV cache in BF16 instead of F32 */
    sampler *sampler;
    void (*on_token)(void *ctx, int token);      /* every generated token, in order */
    void *token_ctx;
    /* called after each main-model pass with the generated count so far; non-zero stops */
    int (*on_step)(void *ctx, int generated);
    void *step_ctx;
    route_observer on_route; /* main-model routing of every processed row (trace-out) */
    void *route_ctx;
    /* Optional: every step boundary (after each non-final prefill chunk and before each decode
     * pass), with the KV caches whose rows [0, cp->len) are final. Non-zero stops with an error
     * (err already set by the callee: a session that cannot be written). */
    int (*on_checkpoint)(void *ctx, const gen_checkpoint *cp, const kv_cache *kv, const kv_cache *mtp_kv,
                         char *err, size_t errlen);
    void *checkpoint_ctx;
    /* Optional: start from this boundary instead of the beginning. restore_kv fills rows
     * [0, resume->len) of the freshly created caches; the sampler's state is the caller's to set. */
    const gen_checkpoint *resume;
    int (*restore_kv)(void *ctx, kv_cache *kv, kv_cache *mtp_kv, char *err, size_t errlen);
    /* Optional: after each prefill chunk, prompt rows done of n; non-zero stops before the next
     * chunk (a long prompt is interruptible, not only the decode). */
    int (*on_prefill)(void *ctx, int done, int n);
    void *prefill_ctx;
    /* Optional: whether an expert holds a slot of the expert cache now. With it the loop counts the
     * expert loads of each pass and which of them only a draft needed; --mtp auto charges those
     * (and the reloads of what they evicted) to drafting and drops a draft row before a layer
     * whose predicted experts for it would be loaded. NULL: every expert counts as resident. */
    int (*expert_resident)(void *ctx, int layer, int expert);
    int (*expert_free_slots)(void *ctx);  /* slots free now (a load into one evicts nothing); NULL: none */
    void *resident_ctx;
    /* 1: an auto draft row leaves at its first predicted evicting load; 0: after as many as the
     * running costs say an accepted draft pays for (a test pins the rule with 1) */
    int drop_at_first_load;
    /* Auto: KV-only MTP rows kept unwritten at most (0: GEN_MTP_WINDOW_DEFAULT), and optionally
     * the draft decision itself (1: draft this step; a test and a bench pin the schedule with it;
     * every draft is then verified). */
    int mtp_window;
    int (*draft_schedule)(void *ctx, int generated);
    void *schedule_ctx;
    /* Optional: KV caches of at least ctx positions (of kv_bf16's type) to run in, kept by the
     * caller across calls: rows are written before they are read, so what an earlier call left in
     * them changes nothing, and a server or batch skips a fresh allocation's page faults and
     * zeroing per request. NULL: created for this call (mtp_kv only when mtp is not off). */
    kv_cache *kv, *mtp_kv;
} gen_options;

typedef struct {
    int prompt_tokens, generated;
    int main_passes;         /* decode passes of the main model (prefill excluded) */
    int drafts, accepted;
    double prefill_seconds, decode_seconds;
    double decode_cpu_seconds; /* the process's CPU time while decoding (all threads) */
    /* Per decode step with MTP: passes without a draft and why (the estimates favour no draft; a
     * plain step re-measured while drafting wins; no room for a draft row: --ctx or -n ends), drafts
     * made only to re-measure, and the time spent in MTP passes that only keep its KV complete
     * versus those that draft. The est_ fields are the final running estimates (seconds). */
    int plain_steps, no_draft_cost, no_draft_explore, no_draft_end, draft_explore;
    /* Verify passes that dropped their draft row before a layer whose experts for it would have
     * been loaded (auto): the step emits one token, exactly as without the draft. Not in drafts. */
    int rows_dropped;
    /* Drafts not verified (auto): the MTP's own probability of the draft, calibrated by past
     * acceptance, said the 2-row pass would not pay; the step went plain (counted in plain_steps). */
    int low_odds_drafts;
    /* Expert loads of decode passes, and those only a draft needed (the draft row's own experts in
     * a verify pass, the MTP layer's when drafting): what drafting costs in reads. */
    long expert_loads, draft_expert_loads;
    double mtp_kv_seconds, mtp_draft_seconds;
    double est_plain_s, est_verify_s, est_mtp_kv_s, est_mtp_draft_s;
    int stopped_by_eos, stopped_by_ctx;
    int stopped_in_prefill;  /* on_prefill asked to stop: nothing was generated by this call */
} gen_stats;

/* The KV caches a run with o needs, made where *kv / *mtp_kv are NULL (mtp_kv only when o->mtp is
 * not off): 0, or -1 with err when memory is short (what was made stays in *kv / *mtp_kv). */
int gen_kv_caches(const model *m, const gen_options *o, kv_cache **kv, kv_cache **mtp_kv, char *err, size_t errlen);

/* Prefill and decode of one prompt (or its continuation from o->resume). The model's scratch must
 * be reserved for max(prefill_chunk, 2) rows over o->ctx positions (model_reserve_scratch).
 * st->generated counts restored tokens too. */
int generate(model *m, expert_provider *ep, const int *prompt, int n_prompt, const gen_options *o, gen_stats *st,
             char *err, size_t errlen);

#endif
