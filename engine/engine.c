/* The wiring: checkpoint -> resident weights -> memory plan -> expert reader -> expert cache ->
 * scratch arena, in that order, because each step sizes the next (the plan needs the resident
 * weights' real size and the reader's slot size; the cache needs the plan's slot count). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine/engine_internal.h"

#ifndef DSSPEC_SOURCE_DIR
#define DSSPEC_SOURCE_DIR "."
#endif
#define DSSPEC_DEFAULT_MODEL_NAME "dsspec-tiny"
/* The context when none is given, lowered to the model's max_position_embeddings when that is less. */
#define DSSPEC_DEFAULT_CTX 4096

void dsspec_options_default(dsspec_options *o)
{
    memset(o, 0, sizeof *o);
    o->threads = 1;
    o->mtp = -1;
    o->policy = DSSPEC_POLICY_LFU;
    o->prefetch = 1;
    o->io = DSSPEC_IO_AUTO;
    o->queue_depth = 16;
    o->ctx = 0; /* DSSPEC_DEFAULT_CTX, or the model's maximum when lower */
    o->prefill_chunk = 64;
    o->load_tokenizer = 1;
}

const char *dsspec_default_model_dir(void)
{
    /* The model beside the source tree the binary was built from, else ../models from the binary. */
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/models/%s", DSSPEC_SOURCE_DIR, DSSPEC_DEFAULT_MODEL_NAME);
    if (access(path, R_OK) == 0) return path;
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(path, sizeof path, "%s/../models/%s", exe, DSSPEC_DEFAULT_MODEL_NAME);
    }
    return path;
}

static const cache_policy_kind policy_kinds[] = {CACHE_POLICY_LRU, CACHE_POLICY_LFU, CACHE_POLICY_ARC};
static const io_backend io_backends[] = {IO_BACKEND_AUTO, IO_BACKEND_URING, IO_BACKEND_PREAD};

const char *dsspec_cache_policy_name(dsspec_cache_policy p) { return cache_policy_name(policy_kinds[p]); }

int dsspec_cache_policy_parse(const char *s, dsspec_cache_policy *out)
{
    cache_policy_kind k;
    if (cache_policy_parse(s, 0, &k)) return -1;
    for (int i = 0; i < 3; i++)
        if (policy_kinds[i] == k) *out = (dsspec_cache_policy)i;
    return 0;
}

int dsspec_io_backend_parse(const char *s, dsspec_io_backend *out)
{
    io_backend b;
    if (io_backend_parse(s, &b)) return -1;
    for (int i = 0; i < 3; i++)
        if (io_backends[i] == b) *out = (dsspec_io_backend)i;
    return 0;
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
    if (e->opt.mtp < 0) e->opt.mtp = e->info.has_mtp;
    if (e->opt.mtp && !e->info.has_mtp) {
        error_set(err, errlen, "--mtp on: %s has no MTP layer (num_nextn_predict_layers 0)", o->model_dir);
        return -1;
    }
    return 0;
}

/* The context the KV cache is sized for: positions past max_position_embeddings have no rope the
 * model was trained for (and YaRN's scaling is defined up to it), so asking for more is refused. */
static int settle_ctx(dsspec *e, int *usage_error, char *err, size_t errlen)
{
    int max = model_get_config(e->m)->max_position_embeddings;
    if (e->opt.ctx <= 0) {
        e->opt.ctx = DSSPEC_DEFAULT_CTX < max ? DSSPEC_DEFAULT_CTX : max;
        return 0;
    }
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
    if (!(e->reader = expert_reader_create(e->ck, io_backends[o->io], o->queue_depth, err, errlen))) return -1;
    if (engine_plan_memory(e, expert_reader_slot_bytes(e->reader), err, errlen)) {
        if (usage_error) *usage_error = 1;
        return -1;
    }
    e->plan.io_backend = io_backend_name(expert_reader_backend(e->reader));
    e->plan.io_note = expert_reader_backend_note(e->reader);
    e->cache = expert_cache_create(e->ck, e->reader, e->plan.slots, policy_kinds[o->policy], err, errlen);
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
    if (!e->opt.model_dir) e->opt.model_dir = dsspec_default_model_dir();
    if (e->opt.prefill_chunk < 1) e->opt.prefill_chunk = 1;
    if (open_model(e, err, errlen) || settle_ctx(e, usage_error, err, errlen)) goto fail;
    if (e->opt.experts == DSSPEC_EXPERTS_DIRECT) {
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
