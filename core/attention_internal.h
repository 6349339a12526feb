/* Private to core/attention*.c: one work item of attention_row (a chunk of positions x a group of
 * heads) and its per-ISA implementations, chosen at run time by kernels_path(). */
#ifndef DSSPEC_ATTENTION_INTERNAL_H
#define DSSPEC_ATTENTION_INTERNAL_H

#include <stdatomic.h>
#include <time.h>
#include "core/attention.h"

/* CLOCK_MONOTONIC nanoseconds: the times of bench_attention --trace. */
static inline long long attention_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Positions per block (and the stride of a block's scores): every head of a group reads a block while
 * it is in L1/L2. A multiple of 4 (the score tiles take 4 positions; AVX2's for few heads 3, then
 * the rest). */
#define ATTN_BLOCK 64
/* The first block of an AVX2 item of few heads (BF16), the next ones twice as long up to the full
 * block (a multiple of 4: the score tiles). AVX-512's items start on a whole block. */
#define ATTN_RAMP_FIRST 8
/* Heads per work item (at most: attention_row halves it for a short row on many threads): more
 * items for small n, and the group's queries and accumulators (ATTN_GROUP_HEADS x (R + rope)
 * floats each) stay in L2. */
#define ATTN_GROUP_HEADS 32
/* Chunks per row at most (the merge's partial sums are [ATTN_MAX_CHUNKS][heads][R], or in the lane
 * layout), the shortest chunk, and the positions per chunk aimed at in between. Every chunk after the first of a thread
 * starts on cold cache rows (its predecessor's prefetch of them went to another core) and has its
 * own partial sums to merge: at the embedded width 1024 positions a chunk ran 1.5% (1 thread) and
 * 5% (2 threads) faster than 512 (bench_attention, 4k and 16k positions). */
#define ATTN_MAX_CHUNKS 32
#define ATTN_MIN_CHUNK 512
#define ATTN_CHUNK_TARGET 1024
/* Chunks per CPU of the machine at most, beyond which a long row's chunks grow longer than
 * ATTN_CHUNK_TARGET instead of more numerous (see chunk_length). */
#define ATTN_CHUNKS_PER_CPU 4
/* The shortest chunk of a short row spread over a machine's CPUs (attention.c, chunk_length): of a
 * row of many heads, and of a row of one group (few heads), whose chunks are its only items. */
#define ATTN_SHORT_CHUNK 256
#define ATTN_SHORT_CHUNK_FEW 128

/* Groups of heads one item of AVX-512's loop for many heads may run block by block, where a row has
 * several items per thread anyway: each block is then read from DRAM (and, BF16, widened) once for
 * all of them rather than once per group. */
#define ATTN_ITEM_GROUPS 4
/* A thread's buffer: [ATTN_BLOCK][R + rope] floats for a BF16 block widened, then room for each of
 * an item's G groups' queries and weighted latents in another order ([R + rope][ATTN_GROUP_HEADS]
 * and [R][ATTN_GROUP_HEADS]: the AVX-512 and AVX2 loops for many heads). */
#define ATTN_CONV_FLOATS_GROUPS(R, rope, G) \
    ((size_t)(ATTN_BLOCK + 2 * ATTN_GROUP_HEADS * (G)) * ((size_t)(R) + (size_t)(rope)))

/* Work of one running item that other threads may do (attention.c says when): its score tiles,
 * and the column slices of its weighted latents for the block whose softmax is done. The owner
 * takes each from the front, idle threads from the back; a score and a column of the weighted
 * latents are the same chains of FMAs whoever computes them, so the result does not depend on who
 * took what. Score tile i is positions [12 (i % ATTN_HELP_TILES_PER_BLOCK), ...) of the item's
 * block i / ATTN_HELP_TILES_PER_BLOCK; slice k the columns [ATTN_HELP_SLICE k, ...). */
#define ATTN_HELP_TILE 12
#define ATTN_HELP_TILES_PER_BLOCK ((ATTN_BLOCK + ATTN_HELP_TILE - 1) / ATTN_HELP_TILE)
#define ATTN_HELP_SLICE 48      /* columns of a slice: 4 of the weighted pass's tiles */
#define ATTN_HELP_SLICES 16     /* slices per block at most: R <= 768 */
#define ATTN_HELP_POSITIONS 512 /* the longest chunk whose items take help */
#define ATTN_HELP_BLOCKS (ATTN_HELP_POSITIONS / ATTN_BLOCK)
#define ATTN_HELP_ITEMS 64      /* items of a row at most, for help */
#define ATTN_HELP_TILES (ATTN_HELP_BLOCKS * ATTN_HELP_TILES_PER_BLOCK)
typedef struct {
    _Alignas(64) _Atomic unsigned long long claim; /* back << 32 | front: score tiles [front, back) unclaimed */
    atomic_int stage;            /* 0: the owner has not started; 1: its queries are laid out (qt); 2: done */
    const float *qt;             /* the owner's queries in its loop's order */
    float *at;                   /* the owner's weighted latents in its loop's order */
    int tiles;                   /* the item's score tiles */
    int timed;                   /* bench_attention --trace: the count and the times below are taken */
    atomic_int helped;           /* score tiles and slices that helpers did */
    _Atomic long long first_help_ns, owner_wait_ns; /* CLOCK_MONOTONIC of a helper's first piece; the owner's waits for helpers */
    float *scores;               /* [positions of the item][ATTN_GROUP_HEADS]: scores, then softmax weights */
    float *rows;                 /* [ATTN_BLOCK][R + rope]: the owner's odd blocks widened (BF16) */
    atomic_uchar done[ATTN_HELP_TILES]; /* tile i's scores written by a helper */
    _Alignas(64) _Atomic unsigned long long slices; /* block << 32 | back << 16 | front: that block's open slices */
    atomic_uchar slice_done[ATTN_HELP_SLICES]; /* the open block's slice k written by a helper */
    float alpha[ATTN_HELP_BLOCKS][ATTN_GROUP_HEADS]; /* each block's rescaling of the weighted latents */
} attention_help;

/* Pieces of a helped item that nobody has claimed: score tiles and its open block's slices. */
static inline unsigned attention_help_left(attention_help *hp)
{
    unsigned long long v = atomic_load_explicit(&hp->claim, memory_order_relaxed);
    unsigned long long w = atomic_load_explicit(&hp->slices, memory_order_relaxed);
    unsigned tiles = (unsigned)(v >> 32) > (unsigned)v ? (unsigned)(v >> 32) - (unsigned)v : 0;
    unsigned back = (unsigned)(w >> 16 & 0xFFFF), front = (unsigned)(w & 0xFFFF);
    return tiles + (back > front ? back - front : 0);
}

typedef struct {
    const attention_kv *kv;
    const float *q_lat, *q_rope;  /* this group's first head: [nh][R], [nh][rope] */
    int t0, t1;                   /* positions of this chunk */
    int n;                        /* positions of the row: prefetches stop there */
    int nh;                       /* heads in this group, 1..ATTN_GROUP_HEADS */
    int groups;                   /* groups of nh heads, 1..ATTN_ITEM_GROUPS, run block by block (more than
                                   * one: AVX-512's loop for many heads, nh = ATTN_GROUP_HEADS); group g's
                                   * queries, partial sums, m and l at g nh heads from the first's */
    float *acc;                   /* unnormalized weighted latents: [nh][R], or [R][16 V] in the lane layout
                                   * (AVX-512's items of rows of more than 16 heads, V = 2 for 17 or more) */
    float *m, *l;                 /* [nh] running max of the scaled scores, sum of exp(score - m) */
    float *conv;                  /* ATTN_CONV_FLOATS_GROUPS(R, rope, groups): a BF16 block widened, a path's work */
    int l1_prefetch_bytes;        /* L1 data cache prefetches may fill, 0: none (attention_l1_prefetch_bytes) */
    int l1d_bytes;                /* the L1 data cache's size (attention_l1d_bytes) */
    attention_help *help;         /* NULL, or the board of this item's pieces that idle threads may take */
    int rows_prefetched;          /* this thread's last item was the chunk before, in this call: it
                                   * prefetched this one's first rows */
} attention_item;

/* The L1 data cache's size (CPUID: AMD leaf 0x80000005, else the deterministic cache leaf 4, 32 KiB
 * when neither says) on AMD, where the few-heads loop prefetches into L1 when it holds two blocks;
 * 0 on other vendors (see attention.c). */
int attention_l1_prefetch_bytes(void);

/* The L1 data cache's size on any vendor (the same CPUID leaves), read once. */
int attention_l1d_bytes(void);

/* The cache rows of the block after the one being scored: the score pass prefetches them a few rows
 * at a time, one block (ATTN_BLOCK positions) ahead. The hardware prefetcher alone leaves the core
 * waiting on DRAM at every block when few heads share a row (measured by bench_attention: about
 * 1.6x slower at the embedded width); a burst of a whole block's lines at once does worse than
 * none (it stalls on the miss buffers and pushes the current block out of L1). */
typedef struct {
    const char *lat, *kr;    /* the next block's first row (NULL when there is none) */
    size_t lat_row, kr_row;  /* bytes per row */
    int rows;                /* rows that exist from there: [0, rows) may be prefetched */
} attention_ahead;

/* The block of blk positions after the one at t of a row of n positions. */
static inline attention_ahead attention_block_after(const attention_kv *kv, int t, int n, int blk)
{
    size_t es = dtype_size(kv->dtype);
    int next = t + blk;
    attention_ahead a = {.lat_row = (size_t)kv->R * es, .kr_row = (size_t)kv->rope * es, .rows = n - next};
    if (a.rows <= 0) return (attention_ahead){.rows = 0};
    a.lat = (const char *)kv->latent + (size_t)next * a.lat_row;
    a.kr = (const char *)kv->krope + (size_t)next * a.kr_row;
    return a;
}

/* Rows [t0, t1) of the next block into L2 (what does not exist is skipped). */
static inline void attention_prefetch(const attention_ahead *a, int t0, int t1)
{
    for (int t = t0; t < t1 && t < a->rows; t++) {
        for (size_t b = 0; b < a->lat_row; b += 64) __builtin_prefetch(a->lat + (size_t)t * a->lat_row + b, 0, 1);
        for (size_t b = 0; b < a->kr_row; b += 64) __builtin_prefetch(a->kr + (size_t)t * a->kr_row + b, 0, 1);
    }
}

/* Where one call's time went (bench_attention --trace): CLOCK_MONOTONIC nanoseconds of the call's
 * start, of each work item's start and end (by item number, the first ATTN_TRACE_ITEMS), of the
 * items' end (the last one's when the pool merges, their return to the caller when the caller
 * does) and of the merge's end. */
#define ATTN_TRACE_ITEMS 1024
typedef struct {
    long long start, items_done, merged;
    long long item_start[ATTN_TRACE_ITEMS], item_end[ATTN_TRACE_ITEMS];
    short item_cpu[ATTN_TRACE_ITEMS], item_cpu_end[ATTN_TRACE_ITEMS]; /* the CPU at its start and end */
    int items; /* work items of the call (chunks x groups) */
    int tiles, helped; /* score tiles of the items that could be helped; tiles and slices helpers did */
    /* of a helped item: when a helper finished its first piece (0: none did), how long its owner
     * waited for helpers' pieces */
    long long item_first_help[ATTN_TRACE_ITEMS], item_owner_wait[ATTN_TRACE_ITEMS];
} attention_trace;

/* attention_row as on a machine of machine_cpus online CPUs (1..ATTN_MAX_CHUNKS), which set how
 * many chunks a short row is cut into: attention_row passes the machine's, the tests others; and
 * with trace non-NULL, the call's times into it. */
void attention_row_on_machine(thread_pool *pool, const attention_kv *kv, int n, const float *q_lat,
                              const float *q_rope, float *out, void *scratch, int machine_cpus,
                              attention_trace *trace);

/* attention_row, its times into trace. */
void attention_row_traced(thread_pool *pool, const attention_kv *kv, int n, const float *q_lat, const float *q_rope,
                          float *out, void *scratch, attention_trace *trace);

/* Pieces of the running item it (its help board hp) from the back until none is left: its open
 * block's column slices first (its owner waits on them), then score tiles; BF16 rows are widened in
 * conv. Returns the pieces it did. */
int attention_help_avx512(const attention_item *it, attention_help *hp, float *conv);

/* The lane layout's merge: out[h][k] = inv[h] sum_c w[c][h] acc[c][k][h] (the chunks in order, acc's
 * chunks chunk_stride floats apart, its rows S), for heads h < nh (one vector: w [nc][16], inv
 * [16], zeros past nh) and columns k0 <= k < k1 (k0 a multiple of 16); out's rows R floats. Each
 * column's sum is merge_columns_*'s chain of multiplies and adds. */
void attention_merge_lanes_avx512(const float *acc, size_t chunk_stride, int nc, int S, const float *w, const float *inv,
                                  int nh, int R, int k0, int k1, float *out);

void attention_item_scalar(const attention_item *it);
void attention_item_avx2(const attention_item *it);
void attention_item_avx512(const attention_item *it);

#endif
