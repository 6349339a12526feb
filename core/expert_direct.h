/* The simplest expert provider: each acquire reads the expert's six tensors from the checkpoint
 * (buffered pread) and release frees them. No cache, no budget: it is the reference path for
 * `dsspec eval` and for tests, and the baseline the cache is measured against. */
#ifndef DSSPEC_EXPERT_DIRECT_H
#define DSSPEC_EXPERT_DIRECT_H

#include "core/checkpoint.h"
#include "core/expert_provider.h"

typedef struct expert_direct expert_direct;

expert_direct *expert_direct_create(const checkpoint *ck);
void expert_direct_free(expert_direct *d);
expert_provider expert_direct_provider(expert_direct *d);
/* Experts read so far and their bytes. */
void expert_direct_counts(const expert_direct *d, unsigned long long *experts, unsigned long long *bytes);

#endif
