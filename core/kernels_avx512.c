/* AVX-512 path: 16 columns per vector. FP8 matvec_range reads the weights as fp32 bit patterns
 * against a prepared x (the section "FP8 matvec_range" below, and kernels_avx2.c for why); the
 * transposed product goes through vcvtph2ps (see kernels_internal.h). The row loops and the batch
 * and tile drivers are shared with the AVX2 path: kernels_driver.h, included last. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* ---- matvec_range: the reduction of one (weight row, x row) pair ----
 *
 * Fixed for this path whatever the batch size, tile shape, column panel or row range: inside a
 * 128-column block, 16-column chunks in ascending order accumulate into one 16-lane accumulator
 * (lane = column mod 16; a last partial chunk is masked to zero weights and zero x); at the
 * block's end the accumulator times the block scale is fma'd into a 16-lane running total (kept in
 * memory between blocks, so column panels resume it exactly); after the last block
 * _mm512_reduce_add_ps sums the total. Both the streaming tile (weights decoded in registers) and
 * the GEMM tile (weights decoded once into an L1 buffer) issue exactly these operations per pair. */
#define VW 16
#define TOT_LANES 16

INLINE __mmask16 chunk_mask(int n) { return (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1); }

INLINE __m512 block_scale(dtype_t dt, const float *srow, int c0)
{
    return _mm512_set1_ps(dt == DTYPE_F8_E4M3 ? srow[c0 / KERNEL_BLOCK] * FP8_FP16_RESCALE : 1.0f);
}

INLINE void tot_update(float *t, __m512 acc, __m512 s)
{
    _mm512_storeu_ps(t, _mm512_fmadd_ps(acc, s, _mm512_loadu_ps(t)));
}

/* 32 weights of a row from column c as two chunks. */
INLINE void load_w32(dtype_t dt, const void *row, int c, __m512 *w0, __m512 *w1)
{
    if (dt == DTYPE_F8_E4M3) {
        fp8x32_to_ps((const uint8_t *)row + c, w0, w1);
    } else {
        *w0 = load_w(dt, row, c);
        *w1 = load_w(dt, row, c + 16);
    }
}

/* Streaming tile: NR (1..4) weight rows against NB (1..4) x rows, whole rows, the weights decoded
 * 32 at a time in registers (two chunks, fma'd one after the other into the pair's accumulator)
 * and prefetched ahead. st: [NR][NB][TOT_LANES] scratch. */
INLINE void tile_stream(dtype_t dt, int NR, int NB, const matrix *w, int r, const float *x, int ldx, float *st,
                        float *y, int ldy)
{
    const size_t esz = kernel_dtype_bytes(dt);
    const int cols = w->cols;
    const size_t row_bytes = (size_t)cols * esz;
    const void *wrow[4];
    const float *srow[4];
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) {
        wrow[i] = (const char *)w->data + (size_t)(r + i) * row_bytes;
        srow[i] = dt == DTYPE_F8_E4M3 ? kernel_scale_row(w, r + i) : NULL;
    }
#pragma GCC unroll 16
    for (int j = 0; j < NR * NB; j++) _mm512_storeu_ps(st + (size_t)j * TOT_LANES, _mm512_setzero_ps());
    for (int c0 = 0; c0 < cols; c0 += KERNEL_BLOCK) {
        int cb = cols - c0 < KERNEL_BLOCK ? cols - c0 : KERNEL_BLOCK;
        __m512 acc[4][4];
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) acc[i][b] = _mm512_setzero_ps();
        int k = 0;
        for (; k + 32 <= cb; k += 32) {
            if (((size_t)(c0 + k) * esz) % 64 == 0) {
#pragma GCC unroll 4
                for (int i = 0; i < NR; i++) prefetch_ahead(wrow[i], (size_t)(c0 + k) * esz, row_bytes, NR);
            }
            if (esz == 4) {
#pragma GCC unroll 4
                for (int i = 0; i < NR; i++) prefetch_ahead(wrow[i], (size_t)(c0 + k) * esz + 64, row_bytes, NR);
            }
#pragma GCC unroll 4
            for (int i = 0; i < NR; i++) {
                __m512 w0, w1;
                load_w32(dt, wrow[i], c0 + k, &w0, &w1);
#pragma GCC unroll 4
                for (int b = 0; b < NB; b++) {
                    acc[i][b] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + (size_t)b * ldx + c0 + k), acc[i][b]);
                    acc[i][b] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + (size_t)b * ldx + c0 + k + 16), acc[i][b]);
                }
            }
        }
        for (; k < cb; k += VW) {
            __mmask16 m = chunk_mask(cb - k);
#pragma GCC unroll 4
            for (int i = 0; i < NR; i++) {
                __m512 wv = load_w_masked(dt, wrow[i], c0 + k, m);
#pragma GCC unroll 4
                for (int b = 0; b < NB; b++)
                    acc[i][b] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + (size_t)b * ldx + c0 + k), acc[i][b]);
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) {
            __m512 s = block_scale(dt, srow[i], c0);
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) tot_update(st + (size_t)(i * NB + b) * TOT_LANES, acc[i][b], s);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++)
            y[(size_t)b * ldy + i] = _mm512_reduce_add_ps(_mm512_loadu_ps(st + (size_t)(i * NB + b) * TOT_LANES));
}

/* Rows r..r+nr, columns [c_beg, c_end) (whole blocks but the matrix's last) as floats into
 * buf[i * ldb + (c - c_beg)] (FP8 still times 2^-8), each block's last partial chunk zero-padded. */
INLINE void decode_rows(dtype_t dt, const matrix *w, int r, int nr, int c_beg, int c_end, float *buf, int ldb)
{
    for (int i = 0; i < nr; i++) {
        const void *row = kernel_weight_row(w, r + i);
        float *o = buf + (size_t)i * ldb - c_beg;
        int c = c_beg;
        for (; c + 32 <= c_end; c += 32) {
            __m512 w0, w1;
            load_w32(dt, row, c, &w0, &w1);
            _mm512_store_ps(o + c, w0);
            _mm512_store_ps(o + c + 16, w1);
        }
        for (; c < c_end; c += 16) _mm512_store_ps(o + c, load_w_masked(dt, row, c, chunk_mask(c_end - c)));
    }
}

/* An opaque copy: GCC would otherwise fold a loaded vector into each fma that uses it as a memory
 * operand, reloading it once per use, and the tile would wait on the load ports, not on the fmas. */
INLINE __m512 in_register(__m512 v)
{
    __asm__("" : "+v"(v));
    return v;
}

/* GEMM tile: NR (1..3) decoded rows of buf against NB (1..4) x rows over the blocks
 * [c_beg, c_end). The running totals stay in registers for the whole panel (12 accumulators + 12
 * totals + 3 weight vectors + 1 x vector of the 32 zmm): spilling them to memory after every
 * 128-column block cost more than the block's own fmas on small shapes. They are resumed from
 * st[NR][NB][TOT_LANES] (zero when c_beg == 0) and parked there at the panel's end, or summed into
 * y when c_end == cols. */
INLINE void tile_buf(dtype_t dt, int NR, int NB, const matrix *w, int r, const float *buf, int ldb, int c_beg,
                     int c_end, const float *x, int ldx, float *st, float *y, int ldy)
{
    const int cols = w->cols;
    const float *srow[3];
    __m512 tot[3][4];
#pragma GCC unroll 3
    for (int i = 0; i < NR; i++) {
        srow[i] = dt == DTYPE_F8_E4M3 ? kernel_scale_row(w, r + i) : NULL;
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++)
            tot[i][b] = c_beg == 0 ? _mm512_setzero_ps() : _mm512_load_ps(st + (size_t)(i * NB + b) * TOT_LANES);
    }
    for (int c0 = c_beg; c0 < c_end; c0 += KERNEL_BLOCK) {
        int cb = cols - c0 < KERNEL_BLOCK ? cols - c0 : KERNEL_BLOCK;
        const float *wb = buf + (c0 - c_beg);
        __m512 acc[3][4];
#pragma GCC unroll 3
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) acc[i][b] = _mm512_setzero_ps();
        int k = 0;
        for (; k + VW <= cb; k += VW) {
            __m512 wv[3];
#pragma GCC unroll 3
            for (int i = 0; i < NR; i++) wv[i] = in_register(_mm512_load_ps(wb + (size_t)i * ldb + k));
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) {
                __m512 xv = in_register(_mm512_loadu_ps(x + (size_t)b * ldx + c0 + k));
#pragma GCC unroll 3
                for (int i = 0; i < NR; i++) acc[i][b] = _mm512_fmadd_ps(wv[i], xv, acc[i][b]);
            }
        }
        if (k < cb) {
            __mmask16 m = chunk_mask(cb - k);
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) {
                __m512 xv = _mm512_maskz_loadu_ps(m, x + (size_t)b * ldx + c0 + k);
#pragma GCC unroll 3
                for (int i = 0; i < NR; i++)
                    acc[i][b] = _mm512_fmadd_ps(_mm512_load_ps(wb + (size_t)i * ldb + k), xv, acc[i][b]);
            }
        }
#pragma GCC unroll 3
        for (int i = 0; i < NR; i++) {
            __m512 s = block_scale(dt, srow[i], c0);
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) tot[i][b] = _mm512_fmadd_ps(acc[i][b], s, tot[i][b]);
        }
    }
#pragma GCC unroll 3
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) {
            if (c_end == cols) y[(size_t)b * ldy + i] = _mm512_reduce_add_ps(tot[i][b]);
            else _mm512_store_ps(st + (size_t)(i * NB + b) * TOT_LANES, tot[i][b]);
        }
}

/* The transposed product, one tile of 16*TV columns x NB (1..4) batch rows held in registers while
 * the rows r0..r1 stream by: y_b[c] = fma(W[r][c], x_b[r] * block scale, y_b[c]) in ascending r,
 * the same operations whatever the tiling, so batch and range invariance hold. */
INLINE void t_tile_f8(int NB, const matrix *w, int r0, int r1, int c0, const float *x, int ldx, float *y, int ldy);

INLINE void t_tile(dtype_t dt, int NB, int TV, const matrix *w, int r0, int r1, int c0, const float *x, int ldx,
                   float *y, int ldy)
{
    const size_t esz = kernel_dtype_bytes(dt);
    int n = w->cols - c0 < 16 * TV ? w->cols - c0 : 16 * TV;
    if (dt == DTYPE_F8_E4M3 && TV == 4 && n == 64) {
        t_tile_f8(NB, w, r0, r1, c0, x, ldx, y, ldy);
        return;
    }
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
         * fetch this row's next tile now, it is needed one whole pass over the rows later. Into L2:
         * at kv_b's 512-byte row stride a pass's lines share 8 of L1's 64 sets, and prefetched
         * into L1 they evicted the pass's own lines (absorbed query, 1 thread: AVX-512 10.2 ->
         * 11.4 GB/s, AVX2 10.1 -> 10.6). */
        const char *next = (const char *)row + (size_t)(c0 + 16 * TV) * esz;
#pragma GCC unroll 4
        for (size_t o = 0; o < 16 * (size_t)TV * esz; o += 64) _mm_prefetch(next + o, _MM_HINT_T2);
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

/* ---- FP8 matvec_range: weights as fp32 bit patterns against a prepared x ----
 *
 * As in kernels_avx2.c (which explains the representation and the scaling of x by 2^k): a byte
 * b becomes the fp32 with bits (b & 0x80) << 24 | (b & 0x7F) << 20 = fp8(b) * 2^-120, here 64 at
 * a time: two in-lane byte unpacks, two shifts and two masks give 64 bf16 words, two masks and two
 * shifts the four fp32 vectors: 10 zmm ops per 64 weights against 12 for the vcvtph2ps route, all
 * of them single-uop integer ops. The reduction of one (weight row, x row) pair: per 128-column
 * block, its 64-column groups in order, their four vectors in order into one accumulator (a
 * masked last group has zero weights and zero x); at the block's end the accumulator times the
 * scale is fma'd into the running total; _mm512_reduce_add_ps at the end. One accumulator per
 * pair is enough here: a zmm fma issues at most once a cycle, and the tiles keep 8 or more chains
 * in flight. */
#define F8_GROUP 64

/* Vector t, lane L (128-bit lane h = L / 4, j = L % 4) holds column 16h + 2j + {1, 0, 9, 8}[t]. */
INLINE void fp8x64_bits(__m512i b, __m512 wv[4])
{
    const __m512i mask = _mm512_set1_epi16((short)0x87F0), high = _mm512_set1_epi32((int)0xFFFF0000);
    __m512i lo = _mm512_and_si512(_mm512_srai_epi16(_mm512_unpacklo_epi8(b, b), 4), mask);
    __m512i hi = _mm512_and_si512(_mm512_srai_epi16(_mm512_unpackhi_epi8(b, b), 4), mask);
    wv[0] = _mm512_castsi512_ps(_mm512_and_si512(lo, high));
    wv[1] = _mm512_castsi512_ps(_mm512_slli_epi32(lo, 16));
    wv[2] = _mm512_castsi512_ps(_mm512_and_si512(hi, high));
    wv[3] = _mm512_castsi512_ps(_mm512_slli_epi32(hi, 16));
}

INLINE void fp8x64_to_f32bits(const uint8_t *q, __m512 wv[4]) { fp8x64_bits(_mm512_loadu_si512(q), wv); }

/* The n < 64 bytes of a last group; masked loads never touch the bytes past them. */
INLINE void fp8_partial_to_f32bits(const uint8_t *q, int n, __m512 wv[4])
{
    fp8x64_bits(_mm512_maskz_loadu_epi8(((__mmask64)1 << n) - 1, q), wv);
}

/* t_tile on 64 FP8 columns decoded as fp32 bit patterns (fp8 * 2^-120) instead of through fp16,
 * whose two vcvtph2ps per 32 weights bound the absorbed query's transposed product; x's factors
 * rescaled as t_tile_rescale says (the bound: max |x| times the largest scale of the tile's
 * blocks), so every product and sum is the fp16 route's times 2^(k - 120) and y, scaled back, has
 * the same bits. The lanes come out in the decode's column order (fp8x64_bits) and are put back
 * by two two-source permutes and a blend per 16 columns. */
INLINE void t_tile_f8(int NB, const matrix *w, int r0, int r1, int c0, const float *x, int ldx, float *y, int ldy)
{
    float xmul[KERNEL_BATCH_GROUP], ymul[KERNEL_BATCH_GROUP], smax = t_tile_scale_max(w, r0, r1, c0);
    __m512 acc[KERNEL_BATCH_GROUP][4];
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++) {
        const float *xb = x + (size_t)b * ldx;
        __m512 mv = _mm512_setzero_ps();
        int r = 0;
        for (; r + 16 <= r1 - r0; r += 16) mv = _mm512_max_ps(mv, _mm512_abs_ps(_mm512_loadu_ps(xb + r)));
        if (r < r1 - r0) mv = _mm512_max_ps(mv, _mm512_abs_ps(_mm512_maskz_loadu_ps((__mmask16)((1u << (r1 - r0 - r)) - 1), xb + r)));
        t_tile_rescale(_mm512_reduce_max_ps(mv) * smax, &xmul[b], &ymul[b]);
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) acc[b][t] = _mm512_setzero_ps();
    }
    for (int r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)kernel_weight_row(w, r) + c0;
        float s = kernel_scale_row(w, r)[c0 / KERNEL_BLOCK];
        _mm_prefetch((const char *)row + 64, _MM_HINT_T2);
        __m512 wv[4];
        fp8x64_to_f32bits(row, wv);
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) {
            __m512 a = _mm512_set1_ps(x[(size_t)b * ldx + (r - r0)] * s * xmul[b]);
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++) acc[b][t] = _mm512_fmadd_ps(wv[t], a, acc[b][t]);
        }
    }
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++) {
        __m512 ym = _mm512_set1_ps(ymul[b]);
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            /* columns 16h + m: m < 8 from vectors 1 (even m) and 0 (odd), m >= 8 from 3 and 2, lane 4h + m / 2 % 4 */
            __m512i lo = _mm512_setr_epi32(4 * h, 16 + 4 * h, 4 * h + 1, 17 + 4 * h, 4 * h + 2, 18 + 4 * h, 4 * h + 3,
                                           19 + 4 * h, 0, 0, 0, 0, 0, 0, 0, 0);
            __m512i hi = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4 * h, 16 + 4 * h, 4 * h + 1, 17 + 4 * h, 4 * h + 2,
                                           18 + 4 * h, 4 * h + 3, 19 + 4 * h);
            __m512 v = _mm512_mask_blend_ps((__mmask16)0xFF00, _mm512_permutex2var_ps(acc[b][1], lo, acc[b][0]),
                                            _mm512_permutex2var_ps(acc[b][3], hi, acc[b][2]));
            _mm512_storeu_ps(y + (size_t)b * ldy + c0 + 16 * h, _mm512_mul_ps(v, ym));
        }
    }
}

/* 64 consecutive floats (scaled by mul) in the conversion's order: lane h of vector t takes
 * floats 16h + 2j + {1, 0, 9, 8}[t] (j = 0..3); two two-source permutes gather chunks 0-1 and
 * 2-3, a 128-bit shuffle joins them. */
INLINE void f8_permute_group(const float *x, __m512 mul, float *out)
{
    static const int pick[4] = { 1, 0, 9, 8 };
    __m512 a = _mm512_mul_ps(_mm512_loadu_ps(x), mul), b = _mm512_mul_ps(_mm512_loadu_ps(x + 16), mul);
    __m512 c = _mm512_mul_ps(_mm512_loadu_ps(x + 32), mul), d = _mm512_mul_ps(_mm512_loadu_ps(x + 48), mul);
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
        int p = pick[t];
        __m512i idx = _mm512_setr_epi32(p, p + 2, p + 4, p + 6, 16 + p, 18 + p, 20 + p, 22 + p, p, p + 2, p + 4, p + 6,
                                        16 + p, 18 + p, 20 + p, 22 + p);
        __m512 ab = _mm512_permutex2var_ps(a, idx, b), cd = _mm512_permutex2var_ps(c, idx, d);
        _mm512_storeu_ps(out + 16 * t, _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)));
    }
}

/* x[0, n) times mul into out[0, round_up(n, 64)) in the conversion's order, zero-padded. */
INLINE void f8_prepare_x(const float *x, int n, float mul, float *out)
{
    __m512 m = _mm512_set1_ps(mul);
    int c = 0;
    for (; c + F8_GROUP <= n; c += F8_GROUP) f8_permute_group(x + c, m, out + c);
    if (c < n) {
        _Alignas(64) float buf[F8_GROUP];
        _mm512_store_ps(buf, _mm512_maskz_loadu_ps(chunk_mask(n - c), x + c));
        for (int i = 16; i < F8_GROUP; i += 16)
            _mm512_store_ps(buf + i, _mm512_maskz_loadu_ps(chunk_mask(n - c - i < 0 ? 0 : n - c - i), x + c + i));
        f8_permute_group(buf, m, out + c);
    }
}

/* max |x[0, n)| */
INLINE float f8_abs_max(const float *x, int n)
{
    __m512 m = _mm512_setzero_ps();
    for (int c = 0; c < n; c += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_maskz_loadu_ps(chunk_mask(n - c), x + c)));
    return _mm512_reduce_max_ps(m);
}

INLINE __m512 f8_acc_group(__m512 acc, const __m512 wv[4], const float *xp)
{
    acc = _mm512_fmadd_ps(wv[0], _mm512_loadu_ps(xp), acc);
    acc = _mm512_fmadd_ps(wv[1], _mm512_loadu_ps(xp + 16), acc);
    acc = _mm512_fmadd_ps(wv[2], _mm512_loadu_ps(xp + 32), acc);
    return _mm512_fmadd_ps(wv[3], _mm512_loadu_ps(xp + 48), acc);
}

/* Streaming tile: NR (1..8) FP8 rows against NB (1..4) prepared x rows xp[b * ldp], whole rows,
 * prefetched ahead as pf plans. smul[b]: 2^(120 - k_b). st: [NR][NB][16] scratch. */
INLINE void tile_stream_f8(int NR, int NB, const matrix *w, int r, const float *xp, int ldp, const float *smul,
                           prefetch_plan pf, float *st, float *y, int ldy)
{
    const int cols = w->cols;
    const size_t row_bytes = (size_t)cols;
    const uint8_t *wrow[8];
    const float *srow[8];
#pragma GCC unroll 8
    for (int i = 0; i < NR; i++) {
        wrow[i] = (const uint8_t *)w->data + (size_t)(r + i) * row_bytes;
        srow[i] = kernel_scale_row(w, r + i);
    }
#pragma GCC unroll 16
    for (int j = 0; j < NR * NB; j++) _mm512_storeu_ps(st + (size_t)j * TOT_LANES, _mm512_setzero_ps());
    for (int c0 = 0; c0 < cols; c0 += KERNEL_BLOCK) {
        int cb = cols - c0 < KERNEL_BLOCK ? cols - c0 : KERNEL_BLOCK;
        __m512 acc[8][4];
#pragma GCC unroll 8
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) acc[i][b] = _mm512_setzero_ps();
        int k = 0;
        for (; k + F8_GROUP <= cb; k += F8_GROUP) {
#pragma GCC unroll 8
            for (int i = 0; i < NR; i++) {
                prefetch_ahead_plan(wrow[i], (size_t)(c0 + k), row_bytes, pf);
                __m512 wv[4];
                fp8x64_to_f32bits(wrow[i] + c0 + k, wv);
#pragma GCC unroll 4
                for (int b = 0; b < NB; b++) acc[i][b] = f8_acc_group(acc[i][b], wv, xp + (size_t)b * ldp + c0 + k);
            }
        }
        if (k < cb) {
#pragma GCC unroll 8
            for (int i = 0; i < NR; i++) {
                __m512 wv[4];
                fp8_partial_to_f32bits(wrow[i] + c0 + k, cb - k, wv);
#pragma GCC unroll 4
                for (int b = 0; b < NB; b++) acc[i][b] = f8_acc_group(acc[i][b], wv, xp + (size_t)b * ldp + c0 + k);
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < NR; i++) {
            float s = srow[i][c0 / KERNEL_BLOCK];
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++)
                tot_update(st + (size_t)(i * NB + b) * TOT_LANES, acc[i][b], _mm512_set1_ps(s * smul[b]));
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++)
            y[(size_t)b * ldy + i] = _mm512_reduce_add_ps(_mm512_loadu_ps(st + (size_t)(i * NB + b) * TOT_LANES));
}

/* GEMM tile: NR (1..3) decoded FP8 rows of buf against NB (1..4) prepared x rows of the panel
 * xp[b * ldp] (column c_beg at xp[0]) over the blocks [c_beg, c_end): 12 accumulators, 12 running
 * totals, 3 weight vectors and 1 x vector of the 32 zmm, as tile_buf. The totals are resumed from
 * st[NR][NB][16] (zero when c_beg == 0) and parked there at the panel's end, or summed into y when
 * c_end == cols. */
INLINE void tile_buf_f8(int NR, int NB, const matrix *w, int r, const float *buf, int ldb, int c_beg, int c_end,
                        const float *xp, int ldp, const float *smul, float *st, float *y, int ldy)
{
    const int cols = w->cols;
    __m512 tot[3][4];
#pragma GCC unroll 3
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++)
            tot[i][b] = c_beg == 0 ? _mm512_setzero_ps() : _mm512_load_ps(st + (size_t)(i * NB + b) * TOT_LANES);
    for (int c0 = c_beg; c0 < c_end; c0 += KERNEL_BLOCK) {
        int cb = cols - c0 < KERNEL_BLOCK ? cols - c0 : KERNEL_BLOCK;
        int npad = (cb + F8_GROUP - 1) / F8_GROUP * F8_GROUP;
        const float *wb = buf + (c0 - c_beg), *xb = xp + (c0 - c_beg);
        __m512 acc[3][4];
#pragma GCC unroll 3
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) acc[i][b] = _mm512_setzero_ps();
        for (int k = 0; k < npad; k += VW) {
            __m512 wv[3];
#pragma GCC unroll 3
            for (int i = 0; i < NR; i++) wv[i] = in_register(_mm512_load_ps(wb + (size_t)i * ldb + k));
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) {
                __m512 xv = in_register(_mm512_loadu_ps(xb + (size_t)b * ldp + k));
#pragma GCC unroll 3
                for (int i = 0; i < NR; i++) acc[i][b] = _mm512_fmadd_ps(wv[i], xv, acc[i][b]);
            }
        }
#pragma GCC unroll 3
        for (int i = 0; i < NR; i++) {
            float s = kernel_scale_row(w, r + i)[c0 / KERNEL_BLOCK];
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) tot[i][b] = _mm512_fmadd_ps(acc[i][b], _mm512_set1_ps(s * smul[b]), tot[i][b]);
        }
    }
#pragma GCC unroll 3
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) {
            if (c_end == cols) y[(size_t)b * ldy + i] = _mm512_reduce_add_ps(tot[i][b]);
            else _mm512_store_ps(st + (size_t)(i * NB + b) * TOT_LANES, tot[i][b]);
        }
}

/* 24 independent FMA chains (enough for any latency x width) of vectors of type T, ITERS deep; the
 * sum keeps them live. */
enum { FMA_PROBE_ITERS = 20000 };
#define FMA_CHAINS(name, T, set1, fmadd, first)                                                         \
    static float name(void)                                                                             \
    {                                                                                                   \
        T a[24], m = set1(0.999f), c = set1(1e-3f);                                                     \
        for (int i = 0; i < 24; i++) a[i] = set1((float)i);                                             \
        for (int k = 0; k < FMA_PROBE_ITERS; k++) {                                                     \
            _Pragma("GCC unroll 24") for (int i = 0; i < 24; i++) a[i] = fmadd(a[i], m, c);             \
        }                                                                                               \
        float sum = 0;                                                                                  \
        for (int i = 0; i < 24; i++) sum += first(a[i]);                                                \
        return sum;                                                                                     \
    }
FMA_CHAINS(fma_chains_zmm, __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_cvtss_f32)
FMA_CHAINS(fma_chains_ymm, __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32)

/* Flops per second of one of them, best of three rounds so that one preempted round does not
 * decide. */
static double fma_rate(float (*chains)(void), int lanes)
{
    double best = 0;
    for (int round = 0; round < 3; round++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        volatile float sink = chains();
        (void)sink;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double t = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        double rate = t > 0 ? 24.0 * FMA_PROBE_ITERS * lanes / t : 0;
        if (rate > best) best = rate;
    }
    return best;
}

/* Wide: zmm FMAs give at least 1.5x the flops of ymm ones (2x on Zen 5; 1x on Zen 4). About 1 ms. */
int fma512_measure_wide(void) { return fma_rate(fma_chains_zmm, 16) > 1.5 * fma_rate(fma_chains_ymm, 8); }

/* FP8 streaming tiles: 8 weight rows for one x row, 4 for two (4 measured 4-8% faster than 8 at
 * nb=2 once the prefetch went to L2, 2 slower; at nb=1 4, 6 and 8 rows were within the noise). */
#ifndef F8_ROWS_NB1
#define F8_ROWS_NB1 8
#endif
#ifndef F8_ROWS_NB2
#define F8_ROWS_NB2 4
#endif
#define F8_SHORT_ROWS 4 /* one x row against rows of <= 1 KiB (kv_b): AVX-512 4 rows (2: 3% slower) */
#define F8_STREAM_ROWS(nb) ((nb) == 1 ? F8_ROWS_NB1 : (nb) == 2 ? F8_ROWS_NB2 : 4)
/* Two x rows against rows of >= 4 KiB (every 7168- and 16384-wide R1 matrix) where zmm FMAs are
 * wide: 8 weight rows. There 4 rows x 2 x rows are 8 accumulator chains, exactly FMA latency times
 * throughput with no slack, and the x rows (57 KiB at 7168 columns) no longer fit L1: 8 rows halve
 * the x reloads and double the DRAM streams (bench_gemv nb=2, 1 thread, Zen 5: gate/up 58% -> 76%
 * of the read bandwidth, kv_a 64% -> 69%; rows of <= 2 KiB lose with 8: down 95% -> 80%). On Zen
 * 4, 4 rows were the faster shape. */
#define F8_LONG_COLS 4096
#define F8_NB2_LONG_ROWS() (kernels_fma512_wide() ? 8 : 0)
#define F8_GEMM_ROWS 3
#define F8_GEMM_COLS 4

/* BF16/F32 streaming tiles of two weight rows for one or two x rows, four for three and four (with
 * the prefetch in L2, BF16 lm_head at nb=1: 2 rows 27.4 GB/s, 4 rows 23.0, 8 rows 16.6; nb=2 25.0
 * against 23.9); GEMM tiles of three decoded rows by four x rows (see tile_buf); t_tile widths of
 * 64 columns (whole cache lines of FP8) while the accumulators fit in registers, 32 for groups of 3
 * and 4. The driver defines matvec_range_avx512 and matvec_t_range_avx512. */
#define KERNEL_ISA avx512
#define STREAM_ROWS(nb) ((nb) <= 2 ? 2 : 4)
#define GEMM_ROWS 3
#define GEMM_COLS 4
#define T_TILE_VECTORS(nb) ((nb) <= 2 ? 4 : 2)
/* decode_rows_f8 (kernels_driver.h): one group of F8_GROUP weights into 4 vectors */
#define F8_VEC __m512
#define F8_DECODE_GROUP fp8x64_to_f32bits
#define F8_STORE _mm512_store_ps
#define F8_VEC_LANES 16
#include "core/kernels_driver.h"
