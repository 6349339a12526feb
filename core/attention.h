/* Absorbed-MLA attention of one row over the latent KV cache: for every head h,
 *   out[h] = sum_t softmax_t(scale * (q_lat[h] . latent[t] + q_rope[h] . krope[t])) * latent[t]
 * over positions t in [0, n). The work is cut into chunks of positions (their number and bounds
 * depend on n and, for a row with few items per CPU, on the machine's online CPUs and kernel path,
 * never on the pool) times groups of heads; inside a chunk the positions are taken in blocks that
 * every head of the group reads while the block is in cache, with an online softmax (no n-long
 * score buffer), and the chunks are merged in chunk order. So the result is bit-identical for any
 * thread count, and on a machine a row's numbers depend on nothing but its own query, n and the
 * cache.
 * BF16 caches are widened to F32 a block at a time; every sum is in F32. */
#ifndef DSSPEC_ATTENTION_H
#define DSSPEC_ATTENTION_H

#include <stddef.h>
#include "core/checkpoint.h"
#include "core/threadpool.h"

typedef struct {
    int heads, R, rope;    /* heads, kv_lora_rank, qk_rope_head_dim */
    dtype_t dtype;         /* DTYPE_F32 or DTYPE_BF16 */
    const void *latent;    /* [positions][R] */
    const void *krope;     /* [positions][rope] */
    float scale;           /* the softmax scale */
} attention_kv;

/* Bytes of scratch attention_row needs for these widths on a pool of n_threads threads. */
size_t attention_scratch_bytes(int heads, int R, int rope, int n_threads);

/* out[heads][R] for queries q_lat[heads][R] and q_rope[heads][rope] over positions [0, n) (n >= 1).
 * scratch: attention_scratch_bytes for kv's widths and the pool's size, 64-byte aligned, zeroed once
 * before first use (it holds the claim flags of the per-thread conversion buffers). */
void attention_row(thread_pool *pool, const attention_kv *kv, int n, const float *q_lat, const float *q_rope, float *out,
                   void *scratch);

#endif
