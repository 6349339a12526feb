/* AVX-512 path: 16 columns per vector, FP8 through vcvtph2ps (see kernels_internal.h). The row
 * loops and the batch and tile drivers are shared with the AVX2 path: kernels_driver.h, included
 * last. */
#include <immintrin.h>
#include "core/kernels_internal.h"

/* fp8 bytes -> fp16 bits (b & 0x80) << 8 | (b & 0x7F) << 7: sign-extending to 16 bits and shifting
 * left by 7 puts the sign in bit 15 and a copy of it in bit 14, which the mask clears. */
INLINE __m512 fp8x16_to_ps(__m128i q)
{
    __m256i h = _mm256_slli_epi16(_mm256_cvtepi8_epi16(q), 7);
    return _mm512_cvtph_ps(_mm256_and_si256(h, _mm256_set1_epi16((short)0xBFFF)));
}

/* The same for 32 bytes: the integer steps run once on a full zmm, halving their uops (ports 0
 * and 5 are the bottleneck once 512-bit instructions are in flight). */
INLINE void fp8x32_to_ps(const uint8_t *q, __m512 *lo, __m512 *hi)
{
    __m512i h = _mm512_slli_epi16(_mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)q)), 7);
    h = _mm512_and_si512(h, _mm512_set1_epi16((short)0xBFFF));
    *lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    *hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
}

INLINE __m512 bf16x16_to_ps(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* 16 weights of a row from column c, as floats (FP8 still times 2^-8). */
INLINE __m512 load_w(dtype_t dt, const void *row, int c)
{
    if (dt == DTYPE_F8_E4M3) return fp8x16_to_ps(_mm_loadu_si128((const __m128i *)((const uint8_t *)row + c)));
    if (dt == DTYPE_BF16) return bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + c)));
    return _mm512_loadu_ps((const float *)row + c);
}

/* Masked loads never touch the masked-off bytes, so a row's tail needs no padding. */
INLINE __m512 load_w_masked(dtype_t dt, const void *row, int c, __mmask16 m)
{
    if (dt == DTYPE_F8_E4M3) return fp8x16_to_ps(_mm_maskz_loadu_epi8(m, (const uint8_t *)row + c));
    if (dt == DTYPE_BF16) return bf16x16_to_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + c));
    return _mm512_maskz_loadu_ps(m, (const float *)row + c);
}

/* Up to 16 columns from c of NR rows and NB x rows into accumulator half par. */
INLINE void tail_chunk(dtype_t dt, int NR, int NB, const void *const *wrow, int c, int n, const float *x, int ldx,
                       __m512 acc[2][KERNEL_BATCH_GROUP][2], int par)
{
    __mmask16 m = (__mmask16)((1u << (n < 16 ? n : 16)) - 1);
    __m512 wt[2];
#pragma GCC unroll 2
    for (int i = 0; i < NR; i++) wt[i] = load_w_masked(dt, wrow[i], c, m);
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++) {
        __m512 xt = _mm512_maskz_loadu_ps(m, x + (size_t)b * ldx + c);
#pragma GCC unroll 2
        for (int i = 0; i < NR; i++) acc[i][b][par] = _mm512_fmadd_ps(wt[i], xt, acc[i][b][par]);
    }
}

/* Dot products of NR (1..2) weight rows with NB (1..4) x rows. Per (row, x) the sum runs over
 * 128-column blocks; inside a block, even 16-column chunks go to one accumulator and odd ones to
 * another, the block sum (times its scale) goes into a running vector, reduced at the end. */
INLINE void dot_rows(dtype_t dt, int NR, int NB, const void *const *wrow, const float *const *srow,
                     int cols, const float *x, int ldx, float out[2][KERNEL_BATCH_GROUP])
{
    const size_t esz = kernel_dtype_bytes(dt);
    __m512 tot[2][KERNEL_BATCH_GROUP];
#pragma GCC unroll 2
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) tot[i][b] = _mm512_setzero_ps();
    for (int c0 = 0; c0 < cols; c0 += KERNEL_BLOCK) {
        int cb = cols - c0 < KERNEL_BLOCK ? cols - c0 : KERNEL_BLOCK;
        __m512 acc[2][KERNEL_BATCH_GROUP][2];
#pragma GCC unroll 2
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) acc[i][b][0] = acc[i][b][1] = _mm512_setzero_ps();
        int k = 0;
        for (; k + 32 <= cb; k += 32) {
            __m512 w0[2], w1[2];
#pragma GCC unroll 2
            for (int i = 0; i < NR; i++) {
                prefetch_ahead(wrow[i], (size_t)(c0 + k) * esz, (size_t)cols * esz, NR);
                if (dt == DTYPE_F8_E4M3) {
                    fp8x32_to_ps((const uint8_t *)wrow[i] + c0 + k, &w0[i], &w1[i]);
                } else {
                    w0[i] = load_w(dt, wrow[i], c0 + k);
                    w1[i] = load_w(dt, wrow[i], c0 + k + 16);
                }
            }
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) {
                __m512 x0 = _mm512_loadu_ps(x + (size_t)b * ldx + c0 + k);
                __m512 x1 = _mm512_loadu_ps(x + (size_t)b * ldx + c0 + k + 16);
#pragma GCC unroll 2
                for (int i = 0; i < NR; i++) {
                    acc[i][b][0] = _mm512_fmadd_ps(w0[i], x0, acc[i][b][0]);
                    acc[i][b][1] = _mm512_fmadd_ps(w1[i], x1, acc[i][b][1]);
                }
            }
        }
        /* Block tail, under 32 columns: its first 16 go to the even accumulator, the rest to the
         * odd one (constant indices keep the accumulators in registers). */
        if (k < cb) tail_chunk(dt, NR, NB, wrow, c0 + k, cb - k, x, ldx, acc, 0);
        if (k + 16 < cb) tail_chunk(dt, NR, NB, wrow, c0 + k + 16, cb - k - 16, x, ldx, acc, 1);
#pragma GCC unroll 2
        for (int i = 0; i < NR; i++) {
            __m512 s = _mm512_set1_ps(dt == DTYPE_F8_E4M3 ? srow[i][c0 / KERNEL_BLOCK] * FP8_FP16_RESCALE : 1.0f);
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++)
                tot[i][b] = _mm512_fmadd_ps(_mm512_add_ps(acc[i][b][0], acc[i][b][1]), s, tot[i][b]);
        }
    }
#pragma GCC unroll 2
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) out[i][b] = _mm512_reduce_add_ps(tot[i][b]);
}

/* The transposed product, one tile of 16*TV columns x NB (1..4) batch rows held in registers while
 * the rows r0..r1 stream by: y_b[c] = fma(W[r][c], x_b[r] * block scale, y_b[c]) in ascending r,
 * the same operations whatever the tiling, so batch and range invariance hold. */
INLINE void t_tile(dtype_t dt, int NB, int TV, const matrix *w, int r0, int r1, int c0, const float *x, int ldx,
                   float *y, int ldy)
{
    const size_t esz = kernel_dtype_bytes(dt);
    int n = w->cols - c0 < 16 * TV ? w->cols - c0 : 16 * TV;
    __mmask16 m[4];
    __m512 acc[KERNEL_BATCH_GROUP][4];
#pragma GCC unroll 4
    for (int v = 0; v < TV; v++) {
        int rem = n - 16 * v;
        m[v] = (__mmask16)(rem >= 16 ? 0xFFFF : rem > 0 ? (1u << rem) - 1 : 0);
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) acc[b][v] = _mm512_setzero_ps();
    }
    for (int r = r0; r < r1; r++) {
        const void *row = kernel_weight_row(w, r);
        float s = dt == DTYPE_F8_E4M3 ? kernel_scale_row(w, r)[c0 / KERNEL_BLOCK] * FP8_FP16_RESCALE : 1.0f;
        /* Tiles walk down the rows with a stride the hardware prefetcher does not follow well:
         * fetch this row's next tile now, it is needed one whole pass over the rows later. */
        const char *next = (const char *)row + (size_t)(c0 + 16 * TV) * esz;
#pragma GCC unroll 4
        for (size_t o = 0; o < 16 * (size_t)TV * esz; o += 64) _mm_prefetch(next + o, _MM_HINT_T0);
        __m512 wv[4];
        if (n == 16 * TV) {
#pragma GCC unroll 4
            for (int v = 0; v < TV; v += 2) {
                if (dt == DTYPE_F8_E4M3) {
                    fp8x32_to_ps((const uint8_t *)row + c0 + 16 * v, &wv[v], &wv[v + 1]);
                } else {
                    wv[v] = load_w(dt, row, c0 + 16 * v);
                    wv[v + 1] = load_w(dt, row, c0 + 16 * v + 16);
                }
            }
        } else {
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++) wv[v] = load_w_masked(dt, row, c0 + 16 * v, m[v]);
        }
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) {
            __m512 a = _mm512_set1_ps(x[(size_t)b * ldx + (r - r0)] * s);
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++) acc[b][v] = _mm512_fmadd_ps(wv[v], a, acc[b][v]);
        }
    }
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++)
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) _mm512_mask_storeu_ps(y + (size_t)b * ldy + c0 + 16 * v, m[v], acc[b][v]);
}

/* Two weight rows per dot_rows call for every batch group (32 zmm registers), and t_tile widths of
 * 64 columns (whole cache lines of FP8) while the accumulators fit in registers, 32 for groups of
 * 3 and 4. The driver defines matvec_range_avx512 and matvec_t_range_avx512 from these. */
#define KERNEL_ISA avx512
#define DOT_ROWS_PER_CALL(nb) 2
#define T_TILE_VECTORS(nb) ((nb) <= 2 ? 4 : 2)
#include "core/kernels_driver.h"
