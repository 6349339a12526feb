/* Test helper: writes a synthetic checkpoint directory in the R1 on-disk format (config.json,
 * generation_config.json, model.safetensors.index.json, shards) for any model_config, so the
 * reader can be tested at R1's tensor count (91,991) with tiny dimensions and before fixtures exist.
 * Tensor bytes are synth_byte(name, i) so reads can be verified independently. */
#ifndef DSSPEC_SYNTH_CHECKPOINT_H
#define DSSPEC_SYNTH_CHECKPOINT_H

#include <stdint.h>
#include "core/checkpoint.h"

/* A small R1-shaped config: hidden 64, 2 dense + 3 MoE layers (+1 MTP), 8 experts. */
model_config synth_small_config(void);
/* R1's layer/expert structure (61 layers, 256 experts, 1 MTP) with tiny matrices. */
model_config synth_r1_layout_config(void);

/* Writes dir (must exist). shard_bytes: a shard is closed once its data reaches this many bytes
 * (tensors are never split, so experts straddle shard boundaries as in R1). 0 or -1. */
int synth_write_checkpoint(const char *dir, const model_config *c, uint64_t shard_bytes);

static inline unsigned char synth_byte(const char *name, uint64_t i)
{
    uint32_t h = 2166136261u;
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 16777619u;
    return (unsigned char)((h >> 8) + i * 131u + (i >> 8));
}

#endif
