/* Private to core/attention*.c: one work item of attention_row (a chunk of positions x a group of
 * heads) and its per-ISA implementations, chosen at run time by kernels_path(). */
#ifndef DSSPEC_ATTENTION_INTERNAL_H
#define DSSPEC_ATTENTION_INTERNAL_H

#include "core/attention.h"

/* Positions per block: every head of a group reads a block while it is in L1/L2. A multiple of 4
 * (the score tiles take 4 positions, 2 on AVX2). */
#define ATTN_BLOCK 32
/* Heads per work item: more items for small n, and the group's queries and accumulators
 * (ATTN_GROUP_HEADS x (R + rope) floats each) stay in L2. */
#define ATTN_GROUP_HEADS 32
/* Chunks per row at most (the merge's partial sums are [ATTN_MAX_CHUNKS][heads][R]) and the
 * shortest chunk: fewer, longer chunks for short contexts, where merging would cost more than
 * the parallelism gives. */
#define ATTN_MAX_CHUNKS 32
#define ATTN_MIN_CHUNK 256

typedef struct {
    const attention_kv *kv;
    const float *q_lat, *q_rope;  /* this group's first head: [nh][R], [nh][rope] */
    int t0, t1;                   /* positions of this chunk */
    int nh;                       /* heads in this group, 1..ATTN_GROUP_HEADS */
    float *acc;                   /* [nh][R] unnormalized weighted latents */
    float *m, *l;                 /* [nh] running max of the scaled scores, sum of exp(score - m) */
    float *conv;                  /* [ATTN_BLOCK][R + rope] floats: a BF16 block widened */
} attention_item;

void attention_item_scalar(const attention_item *it);
void attention_item_avx2(const attention_item *it);
void attention_item_avx512(const attention_item *it);

#endif
