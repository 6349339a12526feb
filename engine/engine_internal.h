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
};

/* Divides the budget (engine/plan.c) and reserves the model's scratch arena; fills e->plan.
 * 0, or -1 with err when the budget or --cache-gib cannot be honoured. */
int engine_plan_memory(dsspec *e, size_t slot_bytes, char *err, size_t errlen);
/* The context when --ctx is not given (engine/plan.c): min(max_position_embeddings, 32768), less
 * only when the budget cannot hold its KV. p: the plan so far (budget, resident, buffers, slot
 * size), or NULL when there is no budget to fit (no expert cache). *why (if given) says which rule. */
int engine_default_ctx(const model_config *c, const dsspec_options *o, const dsspec_plan *p, const char **why);

#endif
