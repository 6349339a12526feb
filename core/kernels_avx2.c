/* AVX2 + FMA + F16C path (the i7-8700K class: no AVX-512): 16 columns per step as two 8-float
 * halves, FP8 through vcvtph2ps (see kernels_internal.h). Only 16 ymm registers: two weight rows
 * at a time for batches of up to 2, one row at a time for larger batch groups. The row loops and
 * the batch and tile drivers are shared with the AVX-512 path: kernels_driver.h, included last. */
#include <immintrin.h>
#include <string.h>
#include "core/kernels_internal.h"

typedef struct { __m256 lo, hi; } ps16;

/* fp8 bytes -> fp16 bits (b & 0x80) << 8 | (b & 0x7F) << 7: sign-extending to 16 bits and shifting
 * left by 7 puts the sign in bit 15 and a copy of it in bit 14, which the mask clears. */
/* vcvtph2ps from a register costs a port-5 shuffle uop besides its arithmetic uop, and port 5
 * already carries the byte->word widening: the memory form spreads the halves in the load unit
 * instead. The fp16 words therefore go through a 32-byte L1 buffer; the asm keeps the compiler
 * from forwarding that store back into register extracts. (+15% measured on the FP8 loop.) */
INLINE __m256 cvtph_ps_mem(const uint16_t *p)
{
    __m256 r;
    __asm__("vcvtph2ps %1, %0" : "=x"(r) : "m"(*(const __m128i *)p));
    return r;
}
INLINE ps16 fp8x16_to_ps(__m128i q)
{
    _Alignas(32) uint16_t stage[16];
    __m256i h = _mm256_slli_epi16(_mm256_cvtepi8_epi16(q), 7);
    _mm256_store_si256((__m256i *)stage, _mm256_and_si256(h, _mm256_set1_epi16((short)0xBFFF)));
    ps16 r = { cvtph_ps_mem(stage), cvtph_ps_mem(stage + 8) };
    return r;
}

INLINE __m256 bf16x8_to_ps(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 16 weights of a row from column c, as floats (FP8 still times 2^-8). */
INLINE ps16 load_w(dtype_t dt, const void *row, int c)
{
    if (dt == DTYPE_F8_E4M3) return fp8x16_to_ps(_mm_loadu_si128((const __m128i *)((const uint8_t *)row + c)));
    ps16 r;
    if (dt == DTYPE_BF16) {
        const uint16_t *p = (const uint16_t *)row + c;
        r.lo = bf16x8_to_ps(_mm_loadu_si128((const __m128i *)p));
        r.hi = bf16x8_to_ps(_mm_loadu_si128((const __m128i *)(p + 8)));
    } else {
        r.lo = _mm256_loadu_ps((const float *)row + c);
        r.hi = _mm256_loadu_ps((const float *)row + c + 8);
    }
    return r;
}

/* n < 16 weights from column c, zero-padded: AVX2 has no byte-masked loads, so go via a buffer. */
INLINE ps16 load_w_partial(dtype_t dt, const void *row, int c, int n)
{
    size_t esz = kernel_dtype_bytes(dt);
    _Alignas(32) unsigned char buf[64] = { 0 };
    memcpy(buf, (const char *)row + (size_t)c * esz, (size_t)n * esz);
    return load_w(dt, buf, 0);
}

INLINE ps16 load_x(const float *x)
{
    ps16 r = { _mm256_loadu_ps(x), _mm256_loadu_ps(x + 8) };
    return r;
}

INLINE ps16 load_x_partial(const float *x, int n)
{
    _Alignas(32) float buf[16] = { 0 };
    memcpy(buf, x, (size_t)n * sizeof(float));
    return load_x(buf);
}

INLINE float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The last n < 16 columns of a block from c, zero-padded, into the accumulators. */
INLINE void tail_chunk(dtype_t dt, int NR, int NB, const void *const *wrow, int c, int n, const float *x, int ldx,
                       ps16 acc[2][KERNEL_BATCH_GROUP])
{
    ps16 wv[2];
#pragma GCC unroll 2
    for (int i = 0; i < NR; i++) wv[i] = load_w_partial(dt, wrow[i], c, n);
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++) {
        ps16 xv = load_x_partial(x + (size_t)b * ldx + c, n);
#pragma GCC unroll 2
        for (int i = 0; i < NR; i++) {
            acc[i][b].lo = _mm256_fmadd_ps(wv[i].lo, xv.lo, acc[i][b].lo);
            acc[i][b].hi = _mm256_fmadd_ps(wv[i].hi, xv.hi, acc[i][b].hi);
        }
    }
}

/* Dot products of NR (1..2) weight rows with NB (1..4) x rows. Per (row, x) the sum runs over
 * 128-column blocks; inside a block the low and high 8 columns of each 16-column chunk have their
 * own accumulators, whose sum (times the block scale) goes into a running vector. */
INLINE void dot_rows(dtype_t dt, int NR, int NB, const void *const *wrow, const float *const *srow,
                     int cols, const float *x, int ldx, float out[2][KERNEL_BATCH_GROUP])
{
    const size_t esz = kernel_dtype_bytes(dt);
    __m256 tot[2][KERNEL_BATCH_GROUP];
#pragma GCC unroll 2
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) tot[i][b] = _mm256_setzero_ps();
    for (int c0 = 0; c0 < cols; c0 += KERNEL_BLOCK) {
        int cb = cols - c0 < KERNEL_BLOCK ? cols - c0 : KERNEL_BLOCK;
        ps16 acc[2][KERNEL_BATCH_GROUP];
#pragma GCC unroll 2
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) acc[i][b].lo = acc[i][b].hi = _mm256_setzero_ps();
        int k = 0;
        for (; k + 16 <= cb; k += 16) {
            ps16 wv[2];
#pragma GCC unroll 2
            for (int i = 0; i < NR; i++) {
                prefetch_ahead(wrow[i], (size_t)(c0 + k) * esz, (size_t)cols * esz, NR);
                wv[i] = load_w(dt, wrow[i], c0 + k);
            }
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) {
                ps16 xv = load_x(x + (size_t)b * ldx + c0 + k);
#pragma GCC unroll 2
                for (int i = 0; i < NR; i++) {
                    acc[i][b].lo = _mm256_fmadd_ps(wv[i].lo, xv.lo, acc[i][b].lo);
                    acc[i][b].hi = _mm256_fmadd_ps(wv[i].hi, xv.hi, acc[i][b].hi);
                }
            }
        }
        if (k < cb) tail_chunk(dt, NR, NB, wrow, c0 + k, cb - k, x, ldx, acc);
#pragma GCC unroll 2
        for (int i = 0; i < NR; i++) {
            __m256 s = _mm256_set1_ps(dt == DTYPE_F8_E4M3 ? srow[i][c0 / KERNEL_BLOCK] * FP8_FP16_RESCALE : 1.0f);
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++)
                tot[i][b] = _mm256_fmadd_ps(_mm256_add_ps(acc[i][b].lo, acc[i][b].hi), s, tot[i][b]);
        }
    }
#pragma GCC unroll 2
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) out[i][b] = hsum256(tot[i][b]);
}

/* The transposed product, one tile of 16*TP columns x NB (1..4) batch rows held in registers while
 * the rows r0..r1 stream by: y_b[c] = fma(W[r][c], x_b[r] * block scale, y_b[c]) in ascending r,
 * the same operations whatever the tiling, so batch and range invariance hold. */
INLINE void t_tile(dtype_t dt, int NB, int TP, const matrix *w, int r0, int r1, int c0, const float *x, int ldx,
                   float *y, int ldy)
{
    const size_t esz = kernel_dtype_bytes(dt);
    int n = w->cols - c0 < 16 * TP ? w->cols - c0 : 16 * TP;
    ps16 acc[KERNEL_BATCH_GROUP][2];
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++)
#pragma GCC unroll 2
        for (int v = 0; v < TP; v++) acc[b][v].lo = acc[b][v].hi = _mm256_setzero_ps();
    for (int r = r0; r < r1; r++) {
        const void *row = kernel_weight_row(w, r);
        float s = dt == DTYPE_F8_E4M3 ? kernel_scale_row(w, r)[c0 / KERNEL_BLOCK] * FP8_FP16_RESCALE : 1.0f;
        /* Tiles walk down the rows with a stride the hardware prefetcher does not follow well:
         * fetch this row's next tile now, it is needed one whole pass over the rows later. */
        const char *next = (const char *)row + (size_t)(c0 + 16 * TP) * esz;
#pragma GCC unroll 2
        for (size_t o = 0; o < 16 * (size_t)TP * esz; o += 64) _mm_prefetch(next + o, _MM_HINT_T0);
        ps16 wv[2];
#pragma GCC unroll 2
        for (int v = 0; v < TP; v++) {
            int rem = n - 16 * v;
            if (rem >= 16) wv[v] = load_w(dt, row, c0 + 16 * v);
            else if (rem > 0) wv[v] = load_w_partial(dt, row, c0 + 16 * v, rem);
            else wv[v].lo = wv[v].hi = _mm256_setzero_ps();
        }
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) {
            __m256 a = _mm256_set1_ps(x[(size_t)b * ldx + (r - r0)] * s);
#pragma GCC unroll 2
            for (int v = 0; v < TP; v++) {
                acc[b][v].lo = _mm256_fmadd_ps(wv[v].lo, a, acc[b][v].lo);
                acc[b][v].hi = _mm256_fmadd_ps(wv[v].hi, a, acc[b][v].hi);
            }
        }
    }
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++) {
#pragma GCC unroll 2
        for (int v = 0; v < TP; v++) {
            int rem = n - 16 * v;
            float *yp = y + (size_t)b * ldy + c0 + 16 * v;
            if (rem >= 16) {
                _mm256_storeu_ps(yp, acc[b][v].lo);
                _mm256_storeu_ps(yp + 8, acc[b][v].hi);
            } else if (rem > 0) {
                _Alignas(32) float buf[16];
                _mm256_store_ps(buf, acc[b][v].lo);
                _mm256_store_ps(buf + 8, acc[b][v].hi);
                memcpy(yp, buf, (size_t)rem * sizeof(float));
            }
        }
    }
}

/* Two weight rows per dot_rows call for batch groups of up to 2, one for 3 and 4, and t_tile
 * widths of 32 columns while the accumulators fit in the 16 ymm registers, 16 for groups of 3 and
 * 4. The driver defines matvec_range_avx2 and matvec_t_range_avx2 from these. */
#define KERNEL_ISA avx2
#define DOT_ROWS_PER_CALL(nb) ((nb) <= 2 ? 2 : 1)
#define T_TILE_VECTORS(nb) ((nb) <= 2 ? 2 : 1)
#include "core/kernels_driver.h"
