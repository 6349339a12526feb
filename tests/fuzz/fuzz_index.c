/* model.safetensors.index.json: the input replaces the index of a small synthetic checkpoint
 * (fuzz_write_synth_checkpoint) and checkpoint_open must either refuse it with one line or open a checkpoint
 * whose every tensor and expert lies inside its shard. */
#include <string.h>
#include "core/checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

static const char *dir;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    dir = fuzz_tmpdir();
    fuzz_write_synth_checkpoint(dir);
    return 0;
}

static void check_open(const checkpoint *ck)
{
    for (int t = 0; t < ck->n_tensors; t++) {
        const tensor_info *x = &ck->tensors[t];
        if (x->shard < 0 || x->shard >= ck->n_shards || x->offset + x->nbytes > ck->shards[x->shard].size)
            fuzz_fail("tensor '%s' accepted outside its shard", x->name);
    }
    for (int l = 0; l < config_total_layers(&ck->cfg); l++)
        for (int e = 0; e < ck->cfg.n_routed_experts; e++) {
            const expert_extent *x = checkpoint_expert(ck, l, e);
            for (int p = 0; x && p < x->npieces; p++)
                if (x->piece[p].offset + x->piece[p].length > ck->shards[x->piece[p].shard].size)
                    fuzz_fail("expert %d/%d accepted with a piece past its shard", l, e);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write_file(dir, "model.safetensors.index.json", data, size);
    char err[1024];
    checkpoint *ck = checkpoint_open(dir, err, sizeof err);
    if (ck) check_open(ck);
    else fuzz_check_error_line("checkpoint_open", err);
    checkpoint_close(ck);
    return 0;
}
