/* The wiring: checkpoint -> resident weights -> memory plan -> expert reader -> expert cache ->
 * scratch arena, in that order, because each step sizes the next (the plan needs the resident
 * weights' real size and the reader's slot size; the cache needs the plan's slot count). */
#include <stdlib.h>
#include <string.h>
#include "engine/engine_internal.h"

void dsspec_options_default(dsspec_options *o)
{
    memset(o, 0, sizeof *o);
    o->threads = dsspec_physical_cores();
    o->mtp = -1;
    o->policy = DSSPEC_POLICY_LFU;
    o->prefetch = 1;
    o->prefetch_depth = 1;
    o->io = DSSPEC_IO_AUTO;
    o->queue_depth = 16;
    o->ctx = 0;      /* engine_default_ctx (engine/plan.c) */
    o->kv_bf16 = -1; /* F32 when the budget holds it (engine/plan.c) */
    o->prefill_chunk = 0; /* from the budget (engine/plan.c) */
    o->load_tokenizer = 1;
}

int dsspec_check_cpu_features(const char *name, char *err, size_t errlen)
{
    cpu_path p;
    if (cpu_path_parse(name, &p) != 0) {
        error_set(err, errlen, "--cpu-features: expected scalar, avx2 or avx512, got '%s'", name);
        return -1;
    }
    if (!cpu_path_available(p)) {
        error_set(err, errlen, "--cpu-features %s: this CPU does not support it", name);
        return -1;
    }
    return 0;
}

static void fill_model_info(dsspec *e)
{
    const model_config *c = model_get_config(e->m);
    dsspec_model_info *i = &e->info;
    i->vocab_size = c->vocab_size;
    i->hidden_size = c->hidden_size;
    i->n_layers = c->num_hidden_layers;
    i->last_moe_layer = -1;
    for (int l = 0; l < c->num_hidden_layers; l++)
        if (config_layer_is_moe(c, l)) i->last_moe_layer = l;
    i->n_routed_experts = c->n_routed_experts;
    i->experts_per_token = c->num_experts_per_tok;
    i->has_mtp = model_has_mtp(e->m);
    i->eos_id = e->tok && tokenizer_eos_id(e->tok) >= 0 ? tokenizer_eos_id(e->tok) : c->eos_token_id;
    i->has_generation_config = e->ck->has_generation_config;
    i->default_temperature = e->ck->has_generation_config ? e->ck->gen_temperature : 0.6;
    i->default_top_p = e->ck->has_generation_config ? e->ck->gen_top_p : 0.95;
    i->kernel_path = cpu_path_name(kernels_path());
}

/* Checkpoint, threads, resident weights and (when asked) the tokenizer. */
static int open_model(dsspec *e, char *err, size_t errlen)
{
    const dsspec_options *o = &e->opt;
    cpu_path max = CPU_PATH_AVX512;
    if (o->cpu_features && (dsspec_check_cpu_features(o->cpu_features, err, errlen) || cpu_path_parse(o->cpu_features, &max)))
        return -1;
    kernels_init(max);
    if (!(e->ck = checkpoint_open(o->model_dir, err, errlen))) return -1;
    if (!(e->pool = thread_pool_create(o->threads))) { error_set(err, errlen, "cannot start %d threads", o->threads); return -1; }
    if (!(e->m = model_load(e->ck, e->pool, err, errlen))) return -1;
    if (o->load_tokenizer && !(e->tok = tokenizer_load(o->model_dir, err, errlen))) return -1;
    fill_model_info(e);
    /* auto (the default) means off where there is nothing to draft with; only on insists. */
    if (e->opt.mtp < 0 || (e->opt.mtp == DSSPEC_MTP_AUTO && !e->info.has_mtp))
        e->opt.mtp = e->info.has_mtp ? DSSPEC_MTP_AUTO : DSSPEC_MTP_OFF;
    if (e->opt.mtp && !e->info.has_mtp) {
        error_set(err, errlen, "--mtp on: %s has no MTP layer (num_nextn_predict_layers 0)", o->model_dir);
        return -1;
    }
    return 0;
}

/* The context the KV cache is sized for: positions past max_position_embeddings have no rope the
 * model was trained for (and YaRN's scaling is defined up to it), so asking for more is refused. */
/* An explicit --ctx above the model's own maximum is the caller's mistake: positions past it are
 * outside what the checkpoint was trained and its rope configured for. Not given (0), the plan
 * picks the default (engine_default_ctx). */
static int refuse_ctx_above_max(dsspec *e, int *usage_error, char *err, size_t errlen)
{
    int max = model_get_config(e->m)->max_position_embeddings;
    if (e->opt.ctx <= max) return 0;
    error_set(err, errlen, "--ctx %d is above the model's limit: %s/config.json max_position_embeddings = %d", e->opt.ctx,
              e->opt.model_dir, max);
    if (usage_error) *usage_error = 1;
    return -1;
}

/* Reader and cache sized by the plan; a plan that cannot be honoured is the caller's mistake. */
static int open_expert_cache(dsspec *e, int *usage_error, char *err, size_t errlen)
{
    const dsspec_options *o = &e->opt;
    if (!(e->reader = expert_reader_create(e->ck, engine_io_backend(o->io), o->queue_depth, err, errlen))) return -1;
    if (engine_plan_memory(e, expert_reader_slot_bytes(e->reader), err, errlen)) {
        if (usage_error) *usage_error = 1;
        return -1;
    }
    e->plan.io_backend = io_backend_name(expert_reader_backend(e->reader));
    e->plan.io_note = expert_reader_backend_note(e->reader);
    e->cache = expert_cache_create(e->ck, e->reader, e->plan.slots, engine_policy_kind(o->policy), err, errlen);
    if (!e->cache) return -1;
    e->provider = expert_cache_provider(e->cache);
    return 0;
}

dsspec *dsspec_open(const dsspec_options *o, int *usage_error, char *err, size_t errlen)
{
    if (usage_error) *usage_error = 0;
    dsspec *e = calloc(1, sizeof *e);
    if (!e) { error_set(err, errlen, "out of memory"); return NULL; }
    e->opt = *o;
    if (dsspec_resolve_model_dir(o->model_dir, &e->opt.model_dir, err, errlen)) goto fail;
    if (e->opt.threads < 1) e->opt.threads = 1;
    if (open_model(e, err, errlen) || refuse_ctx_above_max(e, usage_error, err, errlen)) goto fail;
    if (e->opt.experts == DSSPEC_EXPERTS_DIRECT) {
        if (e->opt.kv_bf16 < 0) e->opt.kv_bf16 = 0; /* no budget to fit: exact */
        if (e->opt.ctx <= 0) e->opt.ctx = engine_default_ctx(model_get_config(e->m), &e->opt, NULL, NULL);
        if (e->opt.prefill_chunk <= 0) e->opt.prefill_chunk = 64; /* no plan, no budget to size it from */
        if (!(e->direct = expert_direct_create(e->ck))) { error_set(err, errlen, "out of memory"); goto fail; }
        e->provider = expert_direct_provider(e->direct);
    } else if (open_expert_cache(e, usage_error, err, errlen)) {
        goto fail;
    }
    return e;
fail:
    dsspec_close(e);
    return NULL;
}

void dsspec_close(dsspec *e)
{
    if (!e) return;
    kv_cache_free(e->kv);
    kv_cache_free(e->mtp_kv);
    expert_cache_free(e->cache);
    expert_reader_free(e->reader);
    expert_direct_free(e->direct);
    tokenizer_free(e->tok);
    model_free(e->m);
    thread_pool_free(e->pool);
    checkpoint_close(e->ck);
    free(e);
}

const dsspec_model_info *dsspec_get_model_info(const dsspec *e) { return &e->info; }
tokenizer *dsspec_get_tokenizer(dsspec *e) { return e->tok; }
const dsspec_plan *dsspec_get_plan(const dsspec *e) { return e->cache ? &e->plan : NULL; }
