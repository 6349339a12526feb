/* A whole checkpoint directory: the input is config.json, written into a small synthetic
 * checkpoint (its shards and index fixed), then checkpoint_open -> model_load -> one 2-row
 * forward pass (routed experts read straight from the shards). Whatever config the reader
 * accepts must run; the values that do not change tensor shapes (top-k, groups, scaling, rope,
 * eps, ...) are what the fuzzer explores here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/expert_direct.h"
#include "core/kernels.h"
#include "core/model.h"
#include "tests/fuzz/fuzz_util.h"

static const char *dir;
static thread_pool *pool;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    dir = fuzz_tmpdir();
    fuzz_write_synth_checkpoint(dir);
    kernels_init(CPU_PATH_AVX512);
    pool = thread_pool_create(1);
    return 0;
}

/* Two rows at positions 0 and 1: tokens 0 and vocab-1 (the embedding table's ends). */
static void forward(model *m, const checkpoint *ck)
{
    const model_config *c = model_get_config(m);
    char err[1024] = "";
    if (model_reserve_scratch(m, 2, 4, err, sizeof err)) { fuzz_check_error_line("model_reserve_scratch", err); return; }
    kv_cache *kv = kv_cache_create(c, 0, c->num_hidden_layers, 4, DTYPE_F32);
    expert_direct *d = expert_direct_create(ck);
    float *logits = malloc(2 * (size_t)c->vocab_size * sizeof *logits);
    if (!kv || !d || !logits) fuzz_fail("out of memory for a tiny model");
    expert_provider ep = expert_direct_provider(d);
    int tokens[2] = {0, c->vocab_size - 1}, pos[2] = {0, 1};
    forward_request req = {.logits = logits};
    if (model_forward(m, kv, &ep, tokens, pos, 2, &req, err, sizeof err)) fuzz_check_error_line("model_forward", err);
    free(logits);
    expert_direct_free(d);
    kv_cache_free(kv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write_file(dir, "config.json", data, size);
    char err[1024] = "";
    checkpoint *ck = checkpoint_open(dir, err, sizeof err);
    if (!ck) { fuzz_check_error_line("checkpoint_open", err); return 0; }
    model *m = model_load(ck, pool, err, sizeof err);
    if (m) forward(m, ck);
    else fuzz_check_error_line("model_load", err);
    model_free(m);
    checkpoint_close(ck);
    return 0;
}
