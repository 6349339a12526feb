/* config.json and generation_config.json: the same bytes through both loaders. Accepted configs
 * must satisfy every bound the forward pass's arrays rely on (core/checkpoint.h MODEL_MAX_*). */
#include <string.h>
#include "core/checkpoint_internal.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }

static void check_accepted(const model_config *c)
{
    if (c->num_experts_per_tok < 1 || c->num_experts_per_tok > MODEL_MAX_EXPERTS_PER_TOK ||
        c->n_routed_experts > MODEL_MAX_ROUTED_EXPERTS || c->n_group > MODEL_MAX_GROUPS ||
        c->qk_rope_head_dim > MODEL_MAX_ROPE_DIM || c->qk_rope_head_dim % 2 || c->n_routed_experts % c->n_group ||
        c->topk_group > c->n_group || c->num_experts_per_tok > c->topk_group * (c->n_routed_experts / c->n_group))
        fuzz_fail("config accepted outside the forward pass's limits (top-k %d, experts %d, groups %d/%d, rope %d)",
                  c->num_experts_per_tok, c->n_routed_experts, c->n_group, c->topk_group, c->qk_rope_head_dim);
    if (config_total_layers(c) < 1 || c->max_position_embeddings < 1) fuzz_fail("config accepted with no layers or positions");
    if (!(c->rope_theta > 1)) fuzz_fail("config accepted with rope_theta %g (rope frequencies need > 1)", c->rope_theta);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_memfile(data, size);
    char err[1024];
    model_config c;
    if (config_load(path, &c, err, sizeof err) == 0) check_accepted(&c);
    else fuzz_check_error_line("config_load", err);

    checkpoint ck;
    memset(&ck, 0, sizeof ck);
    err[0] = 0;
    if (generation_config_load(path, &ck, err, sizeof err) < 0) fuzz_check_error_line("generation_config_load", err);
    else if (ck.gen_temperature < 0 || ck.gen_top_p < 0 || ck.gen_top_p > 1)
        fuzz_fail("generation_config accepted temperature %g top_p %g", ck.gen_temperature, ck.gen_top_p);
    return 0;
}
