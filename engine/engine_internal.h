/* Private to engine/: the handle behind dsspec.h and the pieces the engine sources share. */
#ifndef DSSPEC_ENGINE_INTERNAL_H
#define DSSPEC_ENGINE_INTERNAL_H

#include "engine/dsspec.h"
#include "cache/expert_cache.h"
#include "core/checkpoint.h"
#include "core/expert_direct.h"
#include "core/kernels.h"
#include "core/model.h"
#include "core/sampler.h"
#include "core/text_file.h"
#include "core/threadpool.h"
#include "io/expert_io.h"
#include "speculate/speculate.h"

struct dsspec {
    dsspec_options opt;          /* as opened, with defaults resolved (model_dir, mtp) */
    checkpoint *ck;
    thread_pool *pool;
    model *m;
    tokenizer *tok;
    dsspec_model_info info;
    dsspec_plan plan;
    expert_reader *reader;       /* cached experts: reader -> cache -> provider */
    expert_cache *cache;
    expert_direct *direct;       /* DSSPEC_EXPERTS_DIRECT: read on every use */
    expert_provider provider;    /* what the forward pass fetches experts through */
    kv_cache *kv, *mtp_kv;       /* made by the first dsspec_generate, reused by every later one */
};

/* Stop strings over the generated text (engine/text_relay.c): tokens in, text without the stop
 * strings out to p->on_text; hit is set once one appears (generation then stops). */
typedef struct {
    const dsspec_generate_params *p;
    tokenizer_stream *stream;    /* NULL when neither on_text nor stop strings are asked for */
    char *pending;
    size_t len, cap;
    int hit;
} text_relay;
int text_relay_start(text_relay *t, dsspec *e, const dsspec_generate_params *p, char *err, size_t errlen);
void text_relay_push_token(text_relay *t, int token);
void text_relay_finish(text_relay *t);  /* delivers what is held back when no stop string came */

/* The modules' enums behind dsspec.h's (engine/names.c). */
cache_policy_kind engine_policy_kind(dsspec_cache_policy p);
io_backend engine_io_backend(dsspec_io_backend b);

/* Divides the budget (engine/plan.c) and reserves the model's scratch arena; fills e->plan.
 * 0, or -1 with err when the budget or --cache-gib cannot be honoured. */
int engine_plan_memory(dsspec *e, size_t slot_bytes, char *err, size_t errlen);
/* The context when --ctx is not given (engine/plan.c): min(max_position_embeddings, 32768), less
 * only when the budget cannot hold its KV. p: the plan so far (budget, resident, buffers, slot
 * size), or NULL when there is no budget to fit (no expert cache). *why (if given) says which rule. */
int engine_default_ctx(const model_config *c, const dsspec_options *o, const dsspec_plan *p, const char **why);

/* Sessions (engine/session.c), driven by dsspec_generate. */
/* The sampling settings a session records: each changes the output. */
typedef struct {
    double temperature, top_p, min_p;
    int top_k;
    uint64_t seed;
} session_sampling;
/* Checks this generation against the file's header (refusing another prompt or output-changing
 * setting), or writes the header of a new file. 0 or -1 with err. */
int session_bind(dsspec_session *s, const dsspec *e, const int *prompt, int n, const gen_options *g,
                 const session_sampling *smp, char *err, size_t errlen);
/* How much of a run of max_new tokens the file already holds: *count tokens to replay, and the
 * stop reason when nothing is left to generate (else -1: continue from session_resume_point). */
int session_replay(dsspec_session *s, int max_new, int *count);
/* The comparison of session_bind alone: nothing is written. */
int session_check(const dsspec_session *s, const dsspec *e, const int *prompt, int n, const gen_options *g,
                  const session_sampling *smp, char *err, size_t errlen);
const gen_checkpoint *session_resume_point(const dsspec_session *s);  /* NULL: from the start */
/* gen_options callbacks: on_checkpoint appends a record, restore_kv fills the caches. */
int session_on_checkpoint(void *s, const gen_checkpoint *cp, const kv_cache *kv, const kv_cache *mtp_kv, char *err,
                          size_t errlen);
int session_restore_kv(void *s, kv_cache *kv, kv_cache *mtp_kv, char *err, size_t errlen);
void session_note_token(dsspec_session *s, int token);
/* The FINAL record (EOS, -n, full context) and an fsync; other endings only fsync. */
int session_finish(dsspec_session *s, dsspec_stop_reason why, char *err, size_t errlen);

#endif
