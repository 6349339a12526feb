/* Private to the kernels: one entry per instruction-set path, chosen by kernels.c at run time.
 * Every path must keep the determinism contract of kernels.h: the reduction of one output element
 * is a fixed sequence of operations that depends on the weight row and the column count only. */
#ifndef DSSPEC_KERNELS_INTERNAL_H
#define DSSPEC_KERNELS_INTERNAL_H

#include <stdint.h>
#include <string.h>
#include "core/kernels.h"

/* FP8 scales cover 128x128 blocks; the reductions are also cut at these column blocks for every
 * dtype, so that BF16/F32 rows share the structure (and the code) of FP8 rows. */
#define KERNEL_BLOCK 128
/* Batch rows handled together by one matvec_t_range tile. */
#define KERNEL_BATCH_GROUP 4
/* matvec_range batches of up to this many x rows stream the weights once, decoded in registers
 * (decode, speculative verify); larger ones (prefill) run as a GEMM over decoded weight panels. */
#define KERNEL_STREAM_MAX 4

/* The SIMD paths' transposed product decodes an FP8 byte b as the fp16 with bits
 * (b & 0x80) << 8 | (b & 0x7F) << 7, whose value is exactly fp8(b) * 2^-8 (subnormals included),
 * so the block scale it multiplies in is scale * 256. (Their matvec_range reads FP8 as fp32 bit
 * patterns instead: see kernels_avx2.c.) NaN bytes (0x7F, 0xFF) read as +-480 either way: real
 * checkpoints contain none. */
#define FP8_FP16_RESCALE 256.0f

void matvec_range_scalar(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);
void matvec_t_range_scalar(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);
void matvec_range_avx2(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);
void matvec_t_range_avx2(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);
void matvec_range_avx512(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);
void matvec_t_range_avx512(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);

/* Whether this CPU retires 512-bit FMAs at twice the flops of 256-bit ones (Zen 5, Intel parts with
 * two 512-bit units), measured once by kernels_init on the AVX-512 path; 0 where zmm and ymm give
 * the same flops (Zen 4 splits a zmm FMA in two). Only tile shapes depend on it, never results.
 * kernels_set_fma512_wide(0 or 1) pins it for tests, -1 measures again. */
int kernels_fma512_wide(void);
void kernels_set_fma512_wide(int wide);
int fma512_measure_wide(void);

/* This thread's scratch buffer of at least `floats` floats, 64-byte aligned; valid until the next
 * call from the same thread. Aborts with one line when memory runs out. */
float *kernel_scratch(size_t floats);

/* Aborts with one line naming the dtype: only F8_E4M3, BF16 and F32 weights have kernels. */
void kernels_unsupported_dtype(dtype_t t, const char *where);

static inline int kernel_scale_cols(int cols) { return (cols + KERNEL_BLOCK - 1) / KERNEL_BLOCK; }

/* The scale row of weight row r: S[r / 128][*]. */
static inline const float *kernel_scale_row(const matrix *w, int r)
{
    return w->scale + (size_t)(r / KERNEL_BLOCK) * (size_t)kernel_scale_cols(w->cols);
}

/* 2^e for e in [-126, 127], by its bits. */
static inline float f8_pow2(int e)
{
    uint32_t bits = (uint32_t)(e + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The FP8 paths decode weights as fp32 bit patterns, fp8 * 2^-120, so the values they multiply
 * are scaled by 2^k to keep every product and sum normal: from a bound m on those values (m < 2^e,
 * e from m's exponent bits), k = 100 - e clamped to [0, 120]; the result is scaled back by
 * 2^(120 - k). */
static inline int f8_scale_exponent(float m)
{
    uint32_t bits;
    memcpy(&bits, &m, sizeof bits);
    int e = (int)((bits >> 23) & 0xFF) - 126;
    int k = 100 - e;
    return k < 0 ? 0 : k > 120 ? 120 : k;
}

/* The transposed FP8 tiles (t_tile_f8 in kernels_avx2.c and kernels_avx512.c) scale each row's
 * factor x[r] * block scale that way, the bound being max |x| times the largest block scale of
 * column block c0 over rows [r0, r1), so that their products are the fp16 route's times
 * 2^(k - 120). */
static inline float t_tile_scale_max(const matrix *w, int r0, int r1, int c0)
{
    float smax = 0.0f;
    for (int rb = r0 / KERNEL_BLOCK; rb <= (r1 - 1) / KERNEL_BLOCK; rb++) {
        float s = kernel_scale_row(w, rb * KERNEL_BLOCK)[c0 / KERNEL_BLOCK];
        smax = s > smax ? s : smax;
    }
    return smax;
}

static inline void t_tile_rescale(float m, float *xmul, float *ymul)
{
    int k = f8_scale_exponent(m);
    *xmul = f8_pow2(k);
    *ymul = f8_pow2(120 - k);
}

/* Bytes per weight of the three dtypes that have kernels. */
static inline size_t kernel_dtype_bytes(dtype_t t) { return t == DTYPE_F8_E4M3 ? 1 : t == DTYPE_BF16 ? 2 : 4; }

static inline const void *kernel_weight_row(const matrix *w, int r)
{
    return (const char *)w->data + (size_t)r * (size_t)w->cols * kernel_dtype_bytes(w->dtype);
}

/* ---- shared by the SIMD paths (kernels_avx2.c, kernels_avx512.c) ---- */

/* Their hot helpers must inline into loops compiled for their own ISA. */
#define INLINE static inline __attribute__((always_inline))

/* A single thread cannot keep enough DRAM reads in flight from demand loads and the hardware
 * prefetcher alone: ask for the bytes PREFETCH_BYTES ahead of where a row is being read. A tile reads
 * rows side by side, so past the end of the row the next bytes needed are those of the same row
 * of the next tile; with one row they simply follow. The lines go to L2, not L1
 * (__builtin_prefetch(p, 0, 1) is prefetcht2): PREFETCH_BYTES ahead of 8 rows side by side is
 * 32 KiB in flight, L1's whole size, and prefetched into L1 they evicted each other and the
 * prepared x before use (bench_gemv, 1 thread, weights from DRAM: FP8 gate/up 60% -> 81% of the
 * read bandwidth on AVX-512, kv_b 31% -> 76%, BF16 lm_head 59% -> 76%). */
#ifndef PREFETCH_BYTES
#define PREFETCH_BYTES 4096
#endif
INLINE void prefetch_ahead(const void *row, size_t at, size_t row_bytes, int rows_side_by_side)
{
    size_t off = at + PREFETCH_BYTES;
    if (off >= row_bytes) off += (size_t)(rows_side_by_side - 1) * row_bytes;
    __builtin_prefetch((const char *)row + off, 0, 1);
}

/* The same for rows that may be shorter than PREFETCH_BYTES (an expert's down projection, 2 KiB in
 * R1): the bytes PREFETCH_BYTES ahead of a row's position are q tiles of rows further on, q =
 * PREFETCH_BYTES / row_bytes. The division is done once per matrix call (prefetch_plan_for), the
 * tile loops only compare. */
typedef struct { size_t whole, part, tile; } prefetch_plan;

static inline prefetch_plan prefetch_plan_for(size_t row_bytes, int rows_side_by_side)
{
    size_t tile = (size_t)rows_side_by_side * row_bytes;
    prefetch_plan p = { PREFETCH_BYTES / row_bytes * tile, PREFETCH_BYTES % row_bytes, tile };
    return p;
}

INLINE void prefetch_ahead_plan(const void *row, size_t at, size_t row_bytes, prefetch_plan p)
{
    size_t off = at + p.part, skip = p.whole;
    if (off >= row_bytes) {
        off -= row_bytes;
        skip += p.tile;
    }
    __builtin_prefetch((const char *)row + skip + off, 0, 1);
}

/* Demand misses at the start of a small matrix (an expert's 24 KiB, a router) are paid one
 * after another before the in-loop prefetch is far enough ahead: ask for the range's first bytes
 * (up to PREFETCH_BYTES, which the loop then keeps ahead of) before the first dot product. */
INLINE void prefetch_range_start(const void *p, size_t bytes)
{
    size_t n = bytes < PREFETCH_BYTES ? bytes : PREFETCH_BYTES;
    for (size_t o = 0; o < n; o += 64) __builtin_prefetch((const char *)p + o, 0, 3);
}

#endif
