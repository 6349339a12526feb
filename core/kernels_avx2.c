/* AVX2 + FMA + F16C path (the i7-8700K class: no AVX-512): 8-column chunks. FP8 matvec_range reads
 * the weights as fp32 bit patterns against a prepared x (the section "FP8 matvec_range" below);
 * the transposed product goes through vcvtph2ps (see kernels_internal.h). Only 16 ymm registers:
 * streaming tiles of 8 (nb 1), 4 (nb 2) or 2 FP8 rows and four BF16/F32 rows, GEMM tiles of 2 FP8
 * or 4 BF16/F32 decoded rows x 3 x rows. The row loops and the batch, panel and tile drivers are
 * shared with the AVX-512 path: kernels_driver.h, included last. */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/kernels_internal.h"

typedef struct { __m256 lo, hi; } ps16;

/* fp8 bytes -> fp16 bits (b & 0x80) << 8 | (b & 0x7F) << 7: sign-extending to 16 bits and shifting
 * left by 7 puts the sign in bit 15 and a copy of it in bit 14, which the mask clears. */
/* Two ways to feed vcvtph2ps. FP8_CVT_MEM=1: the fp16 words go through a 32-byte L1 buffer and
 * the memory form converts them (on Intel the register form costs a port-5 shuffle uop, and port 5
 * already carries the byte->word widening; the asm keeps the compiler from forwarding the store
 * back into register extracts). FP8_CVT_MEM=0 (default): register form with vextracti128. On the
 * Zen 4 this was tuned on, the register form decodes 16 weights in ~3.3 cycles against ~4.5 for
 * the buffer (one 256-bit store per cycle, and store forwarding into the upper half stalls):
 * +30% on the nb=1 loop in L2. Both give the same bits, so this is a pure speed choice. */
#ifndef FP8_CVT_MEM
#define FP8_CVT_MEM 0
#endif
#if FP8_CVT_MEM
INLINE __m256 cvtph_ps_mem(const uint16_t *p)
{
    __m256 r;
    __asm__("vcvtph2ps %1, %0" : "=x"(r) : "m"(*(const __m128i *)p));
    return r;
}
#endif
INLINE ps16 fp8x16_to_ps(__m128i q)
{
    __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(q), 7), _mm256_set1_epi16((short)0xBFFF));
#if FP8_CVT_MEM
    _Alignas(32) uint16_t stage[16];
    _mm256_store_si256((__m256i *)stage, h);
    ps16 r = { cvtph_ps_mem(stage), cvtph_ps_mem(stage + 8) };
#else
    ps16 r = { _mm256_cvtph_ps(_mm256_castsi256_si128(h)), _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)) };
#endif
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

INLINE float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- matvec_range: the reduction of one (weight row, x row) pair ----
 *
 * Fixed for this path whatever the batch size, tile shape, column panel or row range: inside a
 * 128-column block, 8-column chunks in ascending order accumulate into one 8-lane accumulator
 * (lane = column mod 8; a last partial chunk has zero weights and zero x in its missing lanes);
 * at the block's end the accumulator times the block scale is fma'd into an 8-lane running total
 * (kept in memory between blocks, so column panels resume it exactly); after the last block hsum256
 * sums the total. Both the streaming tile (weights decoded in registers) and the GEMM tile
 * (weights decoded once into an L1 buffer) issue exactly these operations per pair. */
#define VW 8
#define TOT_LANES 8

INLINE __m256 x_chunk(const float *x, int n)
{
    if (n >= VW) return _mm256_loadu_ps(x);
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(x, m);
}

INLINE __m256 block_scale(dtype_t dt, const float *srow, int c0)
{
    return _mm256_set1_ps(dt == DTYPE_F8_E4M3 ? srow[c0 / KERNEL_BLOCK] * FP8_FP16_RESCALE : 1.0f);
}

INLINE void tot_update(float *t, __m256 acc, __m256 s)
{
    _mm256_storeu_ps(t, _mm256_fmadd_ps(acc, s, _mm256_loadu_ps(t)));
}

/* Streaming tile: NR (1..4) weight rows against NB (1..4) x rows, whole rows, the weights decoded
 * 16 at a time in registers (two chunks, fma'd one after the other into the pair's accumulator)
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
    memset(st, 0, sizeof(float) * TOT_LANES * (size_t)(NR * NB));
    for (int c0 = 0; c0 < cols; c0 += KERNEL_BLOCK) {
        int cb = cols - c0 < KERNEL_BLOCK ? cols - c0 : KERNEL_BLOCK;
        __m256 acc[4][4];
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) acc[i][b] = _mm256_setzero_ps();
        int k = 0;
        for (; k + 16 <= cb; k += 16) {
            /* one prefetch per 64 bytes of each row */
            if (((size_t)(c0 + k) * esz) % 64 == 0) {
#pragma GCC unroll 4
                for (int i = 0; i < NR; i++) prefetch_ahead(wrow[i], (size_t)(c0 + k) * esz, row_bytes, NR);
            }
            __m256 x0[4], x1[4];
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) {
                x0[b] = _mm256_loadu_ps(x + (size_t)b * ldx + c0 + k);
                x1[b] = _mm256_loadu_ps(x + (size_t)b * ldx + c0 + k + 8);
            }
#pragma GCC unroll 4
            for (int i = 0; i < NR; i++) {
                ps16 wv = load_w(dt, wrow[i], c0 + k);
#pragma GCC unroll 4
                for (int b = 0; b < NB; b++) {
                    acc[i][b] = _mm256_fmadd_ps(wv.lo, x0[b], acc[i][b]);
                    acc[i][b] = _mm256_fmadd_ps(wv.hi, x1[b], acc[i][b]);
                }
            }
        }
        for (; k < cb; k += VW) {
            int n = cb - k;
#pragma GCC unroll 4
            for (int i = 0; i < NR; i++) {
                __m256 wv = load_w_partial(dt, wrow[i], c0 + k, n < VW ? n : VW).lo;
#pragma GCC unroll 4
                for (int b = 0; b < NB; b++)
                    acc[i][b] = _mm256_fmadd_ps(wv, x_chunk(x + (size_t)b * ldx + c0 + k, n), acc[i][b]);
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) {
            __m256 s = block_scale(dt, srow[i], c0);
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) tot_update(st + (size_t)(i * NB + b) * TOT_LANES, acc[i][b], s);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) y[(size_t)b * ldy + i] = hsum256(_mm256_loadu_ps(st + (size_t)(i * NB + b) * TOT_LANES));
}

/* Rows r..r+nr, columns [c_beg, c_end) (whole blocks but the matrix's last) as floats into
 * buf[i * ldb + (c - c_beg)] (FP8 still times 2^-8), each block's last partial chunk zero-padded. */
INLINE void decode_rows(dtype_t dt, const matrix *w, int r, int nr, int c_beg, int c_end, float *buf, int ldb)
{
    for (int i = 0; i < nr; i++) {
        const void *row = kernel_weight_row(w, r + i);
        float *o = buf + (size_t)i * ldb - c_beg;
        int c = c_beg;
        for (; c + 16 <= c_end; c += 16) {
            ps16 v = load_w(dt, row, c);
            _mm256_store_ps(o + c, v.lo);
            _mm256_store_ps(o + c + 8, v.hi);
        }
        if (c < c_end) {  /* the matrix's last block: c + 16 stays inside its 128-column slot */
            ps16 v = load_w_partial(dt, row, c, c_end - c);
            _mm256_store_ps(o + c, v.lo);
            _mm256_store_ps(o + c + 8, v.hi);
        }
    }
}

/* An opaque copy: GCC would otherwise fold a loaded vector into each fma that uses it as a memory
 * operand, reloading it once per use, and the tile would wait on the load ports, not on the fmas. */
INLINE __m256 in_register(__m256 v)
{
    __asm__("" : "+x"(v));
    return v;
}

/* GEMM tile: NR (1..4) decoded rows of buf against NB (1..3) x rows over the blocks [c_beg, c_end),
 * resuming st[NR][NB][TOT_LANES] (zeroed when c_beg == 0), writing y when c_end == cols. The x
 * vectors are loaded first, then each weight vector once per chunk: 12 accumulators + 3 x + 1
 * weight fill the 16 ymm. The totals live in st (no registers are left for them); the memory
 * clobber at each block end keeps GCC from promoting them into registers that it then spills. */
INLINE void tile_buf(dtype_t dt, int NR, int NB, const matrix *w, int r, const float *buf, int ldb, int c_beg,
                     int c_end, const float *x, int ldx, float *st, float *y, int ldy)
{
    const int cols = w->cols;
    if (c_beg == 0) memset(st, 0, sizeof(float) * TOT_LANES * (size_t)(NR * NB));
    for (int c0 = c_beg; c0 < c_end; c0 += KERNEL_BLOCK) {
        int cb = cols - c0 < KERNEL_BLOCK ? cols - c0 : KERNEL_BLOCK;
        const float *wb = buf + (c0 - c_beg);
        __m256 acc[4][4];
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) acc[i][b] = _mm256_setzero_ps();
        int k = 0;
        for (; k + VW <= cb; k += VW) {
            __m256 xv[4];
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) xv[b] = in_register(_mm256_loadu_ps(x + (size_t)b * ldx + c0 + k));
#pragma GCC unroll 4
            for (int i = 0; i < NR; i++) {
                __m256 wv = in_register(_mm256_load_ps(wb + (size_t)i * ldb + k));
#pragma GCC unroll 4
                for (int b = 0; b < NB; b++) acc[i][b] = _mm256_fmadd_ps(wv, xv[b], acc[i][b]);
            }
        }
        if (k < cb) {
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) {
                __m256 xv = x_chunk(x + (size_t)b * ldx + c0 + k, cb - k);
#pragma GCC unroll 4
                for (int i = 0; i < NR; i++)
                    acc[i][b] = _mm256_fmadd_ps(_mm256_load_ps(wb + (size_t)i * ldb + k), xv, acc[i][b]);
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) {
            __m256 s = block_scale(dt, kernel_scale_row(w, r + i), c0);
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) tot_update(st + (size_t)(i * NB + b) * TOT_LANES, acc[i][b], s);
        }
        __asm__ volatile("" ::: "memory");
    }
    if (c_end == cols) {
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++)
                y[(size_t)b * ldy + i] = hsum256(_mm256_loadu_ps(st + (size_t)(i * NB + b) * TOT_LANES));
    }
}

/* The transposed product, one tile of 16*TP columns x NB (1..4) batch rows held in registers while
 * the rows r0..r1 stream by: y_b[c] = fma(W[r][c], x_b[r] * block scale, y_b[c]) in ascending r,
 * the same operations whatever the tiling, so batch and range invariance hold. */
INLINE void t_tile_f8(int NB, const matrix *w, int r0, int r1, int c0, const float *x, int ldx, float *y, int ldy);

INLINE void t_tile(dtype_t dt, int NB, int TP, const matrix *w, int r0, int r1, int c0, const float *x, int ldx,
                   float *y, int ldy)
{
    const size_t esz = kernel_dtype_bytes(dt);
    int n = w->cols - c0 < 16 * TP ? w->cols - c0 : 16 * TP;
    if (dt == DTYPE_F8_E4M3 && TP == 2 && n == 32) {
        t_tile_f8(NB, w, r0, r1, c0, x, ldx, y, ldy);
        return;
    }
    ps16 acc[KERNEL_BATCH_GROUP][2];
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++)
#pragma GCC unroll 2
        for (int v = 0; v < TP; v++) acc[b][v].lo = acc[b][v].hi = _mm256_setzero_ps();
    for (int r = r0; r < r1; r++) {
        const void *row = kernel_weight_row(w, r);
        float s = dt == DTYPE_F8_E4M3 ? kernel_scale_row(w, r)[c0 / KERNEL_BLOCK] * FP8_FP16_RESCALE : 1.0f;
        /* Tiles walk down the rows with a stride the hardware prefetcher does not follow well:
         * fetch this row's next tile now, it is needed one whole pass over the rows later. Into L2:
         * at kv_b's 512-byte row stride a pass's lines share 8 of L1's 64 sets, and prefetched
         * into L1 they evicted the pass's own lines (absorbed query, 1 thread: AVX-512 10.2 ->
         * 11.4 GB/s, AVX2 10.1 -> 10.6). */
        const char *next = (const char *)row + (size_t)(c0 + 16 * TP) * esz;
#pragma GCC unroll 2
        for (size_t o = 0; o < 16 * (size_t)TP * esz; o += 64) _mm_prefetch(next + o, _MM_HINT_T2);
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

/* ---- FP8 matvec_range: weights as fp32 bit patterns against a prepared x ----
 *
 * The fp16 route above costs a cross-lane widening, a shift, a mask, two vcvtph2ps and an
 * extract per 16 weights, and the FP8 GEMV then runs on the conversion, not on memory. Here a byte
 * b becomes the fp32 with bits (b & 0x80) << 24 | (b & 0x7F) << 20, which is exactly
 * fp8(b) * 2^-120 (FP8 subnormals land on fp32 subnormals, NaN bytes read as +-480 * 2^-120), in
 * five cheap ops per 16 weights: an in-lane byte unpack of b with itself, an arithmetic shift and
 * a mask give bf16 words, and a mask or a shift by 16 turns pairs of them into fp32.
 *
 * Two consequences, both handled once per call by f8_prepare_x: the weights come out permuted
 * (vector t of a 32-column group holds the columns in F8_PERM below), so x is stored in that
 * order; and products of weights this small with x would underflow, so x is scaled by 2^k with
 * k = min(120, 100 - e), |x| < 2^e, which is exact and keeps x * 2^k below 2^100. The block
 * scale then carries 2^(120 - k), so every product, sum and total is the unscaled computation's
 * times a power of two: the same bits whatever k. The reduction of one (weight row, x row) pair:
 * per 128-column block, its 32-column groups in order, vectors 0 and 2 into accumulator 0, 1 and 3
 * into accumulator 1 (a padded last group has zero weights and zero x); at the block's end
 * (acc0 + acc1) times the scale is fma'd into the running total; hsum256 at the end. The
 * streaming and GEMM tiles issue exactly these operations per pair. */
#define F8_GROUP 32

/* 32 FP8 bytes -> 4 vectors of fp32 weights * 2^-120. Vector t, lane L (half h = L / 4,
 * j = L % 4) holds column 16h + 2j + {1, 0, 9, 8}[t]. */
INLINE void fp8x32_to_f32bits(const uint8_t *q, __m256 wv[4])
{
    const __m256i mask = _mm256_set1_epi16((short)0x87F0), high = _mm256_set1_epi32((int)0xFFFF0000);
    __m256i b = _mm256_loadu_si256((const __m256i *)q);
    __m256i lo = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpacklo_epi8(b, b), 4), mask);
    __m256i hi = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpackhi_epi8(b, b), 4), mask);
    wv[0] = _mm256_castsi256_ps(_mm256_and_si256(lo, high));
    wv[1] = _mm256_castsi256_ps(_mm256_slli_epi32(lo, 16));
    wv[2] = _mm256_castsi256_ps(_mm256_and_si256(hi, high));
    wv[3] = _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16));
}

/* The same for the n < 32 bytes of a last group, zero-padded. */
INLINE void fp8_partial_to_f32bits(const uint8_t *q, int n, __m256 wv[4])
{
    _Alignas(32) uint8_t buf[F8_GROUP] = { 0 };
    memcpy(buf, q, (size_t)n);
    fp8x32_to_f32bits(buf, wv);
}

/* t_tile on 32 FP8 columns decoded as fp32 bit patterns (fp8 * 2^-120) instead of through fp16
 * (the fp16 route's conversions bound the absorbed query's transposed product); x's factors
 * rescaled as t_tile_rescale says (the bound: max |x| times the largest scale of the tile's
 * blocks), so every product and sum is the fp16 route's times 2^(k - 120) and y, scaled back, has
 * the same bits. The lanes come out in the decode's column order and are put back by unpacks and
 * 128-bit permutes at the end. */
INLINE void t_tile_f8(int NB, const matrix *w, int r0, int r1, int c0, const float *x, int ldx, float *y, int ldy)
{
    float xmul[KERNEL_BATCH_GROUP], ymul[KERNEL_BATCH_GROUP], smax = t_tile_scale_max(w, r0, r1, c0);
    __m256 acc[KERNEL_BATCH_GROUP][4];
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++) {
        const float *xb = x + (size_t)b * ldx;
        __m256 mv = _mm256_setzero_ps();
        int r = 0;
        for (; r + 8 <= r1 - r0; r += 8) mv = _mm256_max_ps(mv, _mm256_and_ps(_mm256_loadu_ps(xb + r), abs));
        _Alignas(32) float l[8];
        _mm256_store_ps(l, mv);
        float m = 0.0f;
        for (int i = 0; i < 8; i++) m = l[i] > m ? l[i] : m;
        for (; r < r1 - r0; r++) m = fabsf(xb[r]) > m ? fabsf(xb[r]) : m;
        t_tile_rescale(m * smax, &xmul[b], &ymul[b]);
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) acc[b][t] = _mm256_setzero_ps();
    }
    for (int r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)kernel_weight_row(w, r) + c0;
        float s = kernel_scale_row(w, r)[c0 / KERNEL_BLOCK];
        _mm_prefetch((const char *)row + 64, _MM_HINT_T2);
        __m256 wv[4];
        fp8x32_to_f32bits(row, wv);
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) {
            __m256 a = _mm256_set1_ps(x[(size_t)b * ldx + (r - r0)] * s * xmul[b]);
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++) acc[b][t] = _mm256_fmadd_ps(wv[t], a, acc[b][t]);
        }
    }
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++) {
        /* columns 16h + m: m < 8 alternate vectors 1 and 0, m >= 8 vectors 3 and 2, lane 4h + m / 2 % 4 */
        __m256 ym = _mm256_set1_ps(ymul[b]), *a = acc[b];
        __m256 lo10 = _mm256_unpacklo_ps(a[1], a[0]), hi10 = _mm256_unpackhi_ps(a[1], a[0]);
        __m256 lo32 = _mm256_unpacklo_ps(a[3], a[2]), hi32 = _mm256_unpackhi_ps(a[3], a[2]);
        float *yb = y + (size_t)b * ldy + c0;
        _mm256_storeu_ps(yb, _mm256_mul_ps(_mm256_permute2f128_ps(lo10, hi10, 0x20), ym));
        _mm256_storeu_ps(yb + 8, _mm256_mul_ps(_mm256_permute2f128_ps(lo32, hi32, 0x20), ym));
        _mm256_storeu_ps(yb + 16, _mm256_mul_ps(_mm256_permute2f128_ps(lo10, hi10, 0x31), ym));
        _mm256_storeu_ps(yb + 24, _mm256_mul_ps(_mm256_permute2f128_ps(lo32, hi32, 0x31), ym));
    }
}

/* 32 consecutive floats (scaled by mul) in the conversion's order. */
INLINE void f8_permute_group(const float *x, __m256 mul, float *out)
{
    __m256 a = _mm256_mul_ps(_mm256_loadu_ps(x), mul), b = _mm256_mul_ps(_mm256_loadu_ps(x + 8), mul);
    __m256 c = _mm256_mul_ps(_mm256_loadu_ps(x + 16), mul), d = _mm256_mul_ps(_mm256_loadu_ps(x + 24), mul);
    __m256 ac0 = _mm256_permute2f128_ps(a, c, 0x20), ac1 = _mm256_permute2f128_ps(a, c, 0x31);
    __m256 bd0 = _mm256_permute2f128_ps(b, d, 0x20), bd1 = _mm256_permute2f128_ps(b, d, 0x31);
    _mm256_storeu_ps(out, _mm256_shuffle_ps(ac0, ac1, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm256_storeu_ps(out + 8, _mm256_shuffle_ps(ac0, ac1, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm256_storeu_ps(out + 16, _mm256_shuffle_ps(bd0, bd1, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm256_storeu_ps(out + 24, _mm256_shuffle_ps(bd0, bd1, _MM_SHUFFLE(2, 0, 2, 0)));
}

/* x[0, n) times mul into out[0, round_up(n, 32)) in the conversion's order, zero-padded. */
INLINE void f8_prepare_x(const float *x, int n, float mul, float *out)
{
    __m256 m = _mm256_set1_ps(mul);
    int c = 0;
    for (; c + F8_GROUP <= n; c += F8_GROUP) f8_permute_group(x + c, m, out + c);
    if (c < n) {
        _Alignas(32) float buf[F8_GROUP] = { 0 };
        memcpy(buf, x + c, sizeof(float) * (size_t)(n - c));
        f8_permute_group(buf, m, out + c);
    }
}

/* max |x[0, n)| */
INLINE float f8_abs_max(const float *x, int n)
{
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m = _mm256_setzero_ps();
    int c = 0;
    for (; c + 8 <= n; c += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + c), abs));
    _Alignas(32) float l[8];
    _mm256_store_ps(l, m);
    float r = 0;
    for (int i = 0; i < 8; i++) r = l[i] > r ? l[i] : r;
    for (; c < n; c++) r = fabsf(x[c]) > r ? fabsf(x[c]) : r;
    return r;
}

INLINE void f8_acc_group(__m256 acc[2], const __m256 wv[4], const float *xp)
{
    acc[0] = _mm256_fmadd_ps(wv[0], _mm256_loadu_ps(xp), acc[0]);
    acc[1] = _mm256_fmadd_ps(wv[1], _mm256_loadu_ps(xp + 8), acc[1]);
    acc[0] = _mm256_fmadd_ps(wv[2], _mm256_loadu_ps(xp + 16), acc[0]);
    acc[1] = _mm256_fmadd_ps(wv[3], _mm256_loadu_ps(xp + 24), acc[1]);
}

/* Streaming tile: NR (1..8) FP8 rows against NB (1..4) prepared x rows xp[b * ldp], whole rows,
 * prefetched ahead as pf plans. smul[b]: 2^(120 - k_b). st: [NR][NB][8] scratch. */
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
    memset(st, 0, sizeof(float) * TOT_LANES * (size_t)(NR * NB));
    for (int c0 = 0; c0 < cols; c0 += KERNEL_BLOCK) {
        int cb = cols - c0 < KERNEL_BLOCK ? cols - c0 : KERNEL_BLOCK;
        __m256 acc[8][4][2];
#pragma GCC unroll 8
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) acc[i][b][0] = acc[i][b][1] = _mm256_setzero_ps();
        int k = 0;
        for (; k + F8_GROUP <= cb; k += F8_GROUP) {
            if ((c0 + k) % 64 == 0) {
#pragma GCC unroll 8
                for (int i = 0; i < NR; i++) prefetch_ahead_plan(wrow[i], (size_t)(c0 + k), row_bytes, pf);
            }
#pragma GCC unroll 8
            for (int i = 0; i < NR; i++) {
                __m256 wv[4];
                fp8x32_to_f32bits(wrow[i] + c0 + k, wv);
#pragma GCC unroll 4
                for (int b = 0; b < NB; b++) f8_acc_group(acc[i][b], wv, xp + (size_t)b * ldp + c0 + k);
            }
        }
        if (k < cb) {
#pragma GCC unroll 8
            for (int i = 0; i < NR; i++) {
                __m256 wv[4];
                fp8_partial_to_f32bits(wrow[i] + c0 + k, cb - k, wv);
#pragma GCC unroll 4
                for (int b = 0; b < NB; b++) f8_acc_group(acc[i][b], wv, xp + (size_t)b * ldp + c0 + k);
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < NR; i++) {
            float s = srow[i][c0 / KERNEL_BLOCK];
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++)
                tot_update(st + (size_t)(i * NB + b) * TOT_LANES, _mm256_add_ps(acc[i][b][0], acc[i][b][1]),
                           _mm256_set1_ps(s * smul[b]));
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) y[(size_t)b * ldy + i] = hsum256(_mm256_loadu_ps(st + (size_t)(i * NB + b) * TOT_LANES));
}

/* GEMM tile: NR (1..2) decoded FP8 rows of buf against NB (1..3) prepared x rows of the panel
 * xp[b * ldp] (column c_beg at xp[0]) over the blocks [c_beg, c_end): 12 accumulators, 3 x
 * vectors and 1 weight vector fill the 16 ymm. Resumes st[NR][NB][8] (zeroed when c_beg == 0),
 * writes y when c_end == cols. */
INLINE void tile_buf_f8(int NR, int NB, const matrix *w, int r, const float *buf, int ldb, int c_beg, int c_end,
                        const float *xp, int ldp, const float *smul, float *st, float *y, int ldy)
{
    const int cols = w->cols;
    if (c_beg == 0) memset(st, 0, sizeof(float) * TOT_LANES * (size_t)(NR * NB));
    for (int c0 = c_beg; c0 < c_end; c0 += KERNEL_BLOCK) {
        int cb = cols - c0 < KERNEL_BLOCK ? cols - c0 : KERNEL_BLOCK;
        int npad = (cb + F8_GROUP - 1) / F8_GROUP * F8_GROUP;
        const float *wb = buf + (c0 - c_beg), *xb = xp + (c0 - c_beg);
        __m256 acc[2][3][2];
#pragma GCC unroll 2
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 3
            for (int b = 0; b < NB; b++) acc[i][b][0] = acc[i][b][1] = _mm256_setzero_ps();
        for (int k = 0; k < npad; k += 2 * VW) {
#pragma GCC unroll 2
            for (int a = 0; a < 2; a++) {
                __m256 xv[3];
#pragma GCC unroll 3
                for (int b = 0; b < NB; b++) xv[b] = in_register(_mm256_loadu_ps(xb + (size_t)b * ldp + k + VW * a));
#pragma GCC unroll 2
                for (int i = 0; i < NR; i++) {
                    __m256 wv = in_register(_mm256_load_ps(wb + (size_t)i * ldb + k + VW * a));
#pragma GCC unroll 3
                    for (int b = 0; b < NB; b++) acc[i][b][a] = _mm256_fmadd_ps(wv, xv[b], acc[i][b][a]);
                }
            }
        }
#pragma GCC unroll 2
        for (int i = 0; i < NR; i++) {
            float s = kernel_scale_row(w, r + i)[c0 / KERNEL_BLOCK];
#pragma GCC unroll 3
            for (int b = 0; b < NB; b++)
                tot_update(st + (size_t)(i * NB + b) * TOT_LANES, _mm256_add_ps(acc[i][b][0], acc[i][b][1]),
                           _mm256_set1_ps(s * smul[b]));
        }
        __asm__ volatile("" ::: "memory");
    }
    if (c_end == cols) {
#pragma GCC unroll 2
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 3
            for (int b = 0; b < NB; b++)
                y[(size_t)b * ldy + i] = hsum256(_mm256_loadu_ps(st + (size_t)(i * NB + b) * TOT_LANES));
    }
}

/* BF16/F32 streaming tiles of two weight rows for one x row, four for two, two for three and four
 * (with the prefetch in L2, BF16 lm_head at nb=1: 2 rows 28.4 GB/s, 4 rows 25.0; at nb=2 4 rows
 * 25.7, 2 rows 23.4); GEMM tiles of four decoded rows by three x rows (12 accumulators, 3 x
 * vectors, 1 weight vector: 7 loads per 12 fmas). t_tile widths of 32 columns while the
 * accumulators fit in the 16 ymm registers, 16 for groups of 3 and 4. The driver defines
 * matvec_range_avx2 and matvec_t_range_avx2 from these. */
#define KERNEL_ISA avx2
#define STREAM_ROWS(nb) ((nb) == 1 ? 2 : (nb) == 2 ? 4 : 2)
#define GEMM_ROWS 4
#define GEMM_COLS 3
/* FP8 streaming tiles: 4 weight rows for one x row, 2 for two. With 8 and 4 the accumulators spill
 * the 16 registers; once the prefetch went to L2 the smaller tiles measured faster (bench_gemv, 1
 * thread, R1's shapes: +5-19% at nb=1, +8-11% at nb=2). */
#ifndef F8_ROWS_NB1
#define F8_ROWS_NB1 4
#endif
#ifndef F8_ROWS_NB2
#define F8_ROWS_NB2 2
#endif
#define F8_SHORT_ROWS 2 /* one x row against rows of <= 1 KiB (kv_b): AVX2 2 rows: 20.1 -> 21.8 GB/s over 4 */
#define F8_STREAM_ROWS(nb) ((nb) == 1 ? F8_ROWS_NB1 : (nb) == 2 ? F8_ROWS_NB2 : 2)
#define F8_LONG_COLS 4096
#define F8_NB2_LONG_ROWS() 0 /* 16 ymm registers: no room for more than 2 rows x 2 x rows x 2 chains */
#define F8_GEMM_ROWS 2
#define F8_GEMM_COLS 3
#define T_TILE_VECTORS(nb) ((nb) <= 2 ? 2 : 1)
/* decode_rows_f8 (kernels_driver.h): one group of F8_GROUP weights into 4 vectors */
#define F8_VEC __m256
#define F8_DECODE_GROUP fp8x32_to_f32bits
#define F8_STORE _mm256_store_ps
#define F8_VEC_LANES 8
#include "core/kernels_driver.h"
