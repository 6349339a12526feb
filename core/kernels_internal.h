/* Private to the kernels: one entry per instruction-set path, chosen by kernels.c at run time.
 * Every path must keep the determinism contract of kernels.h: the reduction of one output element
 * is a fixed sequence of operations that depends on the weight row and the column count only. */
#ifndef DSSPEC_KERNELS_INTERNAL_H
#define DSSPEC_KERNELS_INTERNAL_H

#include "core/kernels.h"

/* FP8 scales cover 128x128 blocks; the reductions are also cut at these column blocks for every
 * dtype, so that BF16/F32 rows share the structure (and the code) of FP8 rows. */
#define KERNEL_BLOCK 128
/* Batch rows handled together per pass over a weight row; larger batches loop over groups of this
 * size while the row is still in L1/L2. */
#define KERNEL_BATCH_GROUP 4

/* The SIMD paths decode an FP8 byte b as the fp16 with bits (b & 0x80) << 8 | (b & 0x7F) << 7,
 * whose value is exactly fp8(b) * 2^-8 (subnormals included), so the block scale they multiply in
 * is scale * 256. NaN bytes (0x7F, 0xFF) then read as +-480: real checkpoints contain none. */
#define FP8_FP16_RESCALE 256.0f

void matvec_range_scalar(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);
void matvec_t_range_scalar(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);
void matvec_range_avx2(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);
void matvec_t_range_avx2(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);
void matvec_range_avx512(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);
void matvec_t_range_avx512(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);

/* Aborts with one line naming the dtype: only F8_E4M3, BF16 and F32 weights have kernels. */
void kernels_unsupported_dtype(dtype_t t, const char *where);

static inline int kernel_scale_cols(int cols) { return (cols + KERNEL_BLOCK - 1) / KERNEL_BLOCK; }

/* The scale row of weight row r: S[r / 128][*]. */
static inline const float *kernel_scale_row(const matrix *w, int r)
{
    return w->scale + (size_t)(r / KERNEL_BLOCK) * (size_t)kernel_scale_cols(w->cols);
}

static inline const void *kernel_weight_row(const matrix *w, int r)
{
    size_t esz = w->dtype == DTYPE_F8_E4M3 ? 1 : w->dtype == DTYPE_BF16 ? 2 : 4;
    return (const char *)w->data + (size_t)r * (size_t)w->cols * esz;
}

#endif
