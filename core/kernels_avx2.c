/* AVX2 + FMA + F16C path (the i7-8700K class: no AVX-512): 16 columns per step as two 8-float
 * halves, FP8 through vcvtph2ps (see kernels_internal.h). Only 16 ymm registers: two weight rows
 * at a time for batches of up to 2, one row at a time for larger batch groups. */
#include <immintrin.h>
#include <string.h>
#include "core/kernels_internal.h"

#define INLINE static inline __attribute__((always_inline))

/* A single thread cannot keep enough DRAM reads in flight from demand loads and the hardware
 * prefetcher alone: ask for the bytes PREFETCH_BYTES ahead of where a row is being read. Two rows
 * are read side by side, so past the end of the row the next bytes needed are those of the row
 * after its sibling (rows + 2); with one row they simply follow. */
#ifndef PREFETCH_BYTES
#define PREFETCH_BYTES 4096
#endif
INLINE void prefetch_ahead(const void *row, size_t at, size_t row_bytes, int rows_side_by_side)
{
    size_t off = at + PREFETCH_BYTES;
    if (off >= row_bytes) off += (size_t)(rows_side_by_side - 1) * row_bytes;
    _mm_prefetch((const char *)row + off, _MM_HINT_T0);
}

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
    size_t esz = dt == DTYPE_F8_E4M3 ? 1 : dt == DTYPE_BF16 ? 2 : 4;
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
    const size_t esz = dt == DTYPE_F8_E4M3 ? 1 : dt == DTYPE_BF16 ? 2 : 4;  /* bytes per weight */
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

/* Demand misses at the start of a small matrix (an expert's 24 KiB, a router) are paid one
 * after another before the in-loop prefetch is far enough ahead: ask for the range's first bytes
 * (up to PREFETCH_BYTES, which the loop then keeps ahead of) before the first dot product. */
INLINE void prefetch_range_start(const void *p, size_t bytes)
{
    size_t n = bytes < PREFETCH_BYTES ? bytes : PREFETCH_BYTES;
    for (size_t o = 0; o < n; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/* Rows [r0, r1) against NB x rows, with the kernel inlined and per-row addressing hoisted (small
 * matrices make hundreds of these per pass). Two rows per dot_rows call for batches of up to 2,
 * one row for 3 and 4 (16 ymm registers). */
INLINE void range_rows(dtype_t dt, int NB, const matrix *w, int r0, int r1, const float *x, int ldx, float *y,
                       int ldy)
{
    const int NR = NB <= 2 ? 2 : 1;
    const size_t esz = dt == DTYPE_F8_E4M3 ? 1 : dt == DTYPE_BF16 ? 2 : 4;
    const size_t row_bytes = (size_t)w->cols * esz;
    const char *base = (const char *)w->data;
    const int nsc = kernel_scale_cols(w->cols);
    prefetch_range_start(base + (size_t)r0 * row_bytes, (size_t)(r1 - r0) * row_bytes);
    for (int r = r0; r < r1; r += NR) {
        const void *wrow[2] = { base + (size_t)r * row_bytes, base + (size_t)(r + 1) * row_bytes };
        const float *srow[2] = { NULL, NULL };
        if (dt == DTYPE_F8_E4M3) {
            srow[0] = w->scale + (size_t)(r / KERNEL_BLOCK) * nsc;
            srow[1] = w->scale + (size_t)((r + 1) / KERNEL_BLOCK) * nsc;
        }
        float out[2][KERNEL_BATCH_GROUP];
        if (NR == 2 && r + 1 < r1) {
            dot_rows(dt, 2, NB, wrow, srow, w->cols, x, ldx, out);
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) {
                y[(size_t)b * ldy + (r - r0)] = out[0][b];
                y[(size_t)b * ldy + (r - r0) + 1] = out[1][b];
            }
        } else {
            dot_rows(dt, 1, NB, wrow, srow, w->cols, x, ldx, out);
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) y[(size_t)b * ldy + (r - r0)] = out[0][b];
        }
    }
}

typedef void (*range_rows_fn)(const matrix *w, int r0, int r1, const float *x, int ldx, float *y, int ldy);

#define RANGE_ROWS_VARIANT(name, dt, nb)                                                                 \
    static void name(const matrix *w, int r0, int r1, const float *x, int ldx, float *y, int ldy)          \
    {                                                                                                     \
        range_rows(dt, nb, w, r0, r1, x, ldx, y, ldy);                                                    \
    }
#define RANGE_ROWS_DTYPE(tag, dt)                                                                         \
    RANGE_ROWS_VARIANT(tag##_1, dt, 1) RANGE_ROWS_VARIANT(tag##_2, dt, 2)                                 \
    RANGE_ROWS_VARIANT(tag##_3, dt, 3) RANGE_ROWS_VARIANT(tag##_4, dt, 4)                                 \
    static const range_rows_fn tag##_table[KERNEL_BATCH_GROUP] = { tag##_1, tag##_2, tag##_3, tag##_4 };

RANGE_ROWS_DTYPE(range_f8, DTYPE_F8_E4M3)
RANGE_ROWS_DTYPE(range_bf16, DTYPE_BF16)
RANGE_ROWS_DTYPE(range_f32, DTYPE_F32)

/* Batches beyond one group (prefill) take a 16-row slice through every batch group before moving
 * on, so the slice's weights are read from memory once and then served from L1/L2. */
enum { RANGE_SLICE_ROWS = 16 };

void matvec_range_avx2(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy)
{
    const range_rows_fn *table;
    switch (w->dtype) {
    case DTYPE_F8_E4M3: table = range_f8_table; break;
    case DTYPE_BF16: table = range_bf16_table; break;
    case DTYPE_F32: table = range_f32_table; break;
    default: kernels_unsupported_dtype(w->dtype, "matvec_range"); return;
    }
    if (nb <= KERNEL_BATCH_GROUP) {
        table[nb - 1](w, r0, r1, x, ldx, y, ldy);
        return;
    }
    for (int r = r0; r < r1; r += RANGE_SLICE_ROWS) {
        int re = r1 - r < RANGE_SLICE_ROWS ? r1 : r + RANGE_SLICE_ROWS;
        for (int b0 = 0; b0 < nb; b0 += KERNEL_BATCH_GROUP) {
            int nbg = nb - b0 < KERNEL_BATCH_GROUP ? nb - b0 : KERNEL_BATCH_GROUP;
            table[nbg - 1](w, r, re, x + (size_t)b0 * ldx, ldx, y + (size_t)b0 * ldy + (r - r0), ldy);
        }
    }
}

/* The transposed product, one tile of 16*TP columns x NB (1..4) batch rows held in registers while
 * the rows r0..r1 stream by: y_b[c] = fma(W[r][c], x_b[r] * block scale, y_b[c]) in ascending r,
 * the same operations whatever the tiling, so batch and range invariance hold. */
INLINE void t_tile(dtype_t dt, int NB, int TP, const matrix *w, int r0, int r1, int c0, const float *x, int ldx,
                   float *y, int ldy)
{
    const size_t esz = dt == DTYPE_F8_E4M3 ? 1 : dt == DTYPE_BF16 ? 2 : 4;  /* bytes per weight */
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

/* Tile width per batch group: 32 columns while the accumulators fit in the 16 ymm registers,
 * 16 for groups of 3 and 4. */
static int t_tile_cols(int nbg) { return nbg <= 2 ? 32 : 16; }

typedef void (*t_tile_fn)(const matrix *w, int r0, int r1, int c0, const float *x, int ldx, float *y, int ldy);

#define T_TILE_VARIANT(name, dt, nb)                                                                   \
    static void name(const matrix *w, int r0, int r1, int c0, const float *x, int ldx, float *y, int ldy) \
    {                                                                                                 \
        t_tile(dt, nb, nb <= 2 ? 2 : 1, w, r0, r1, c0, x, ldx, y, ldy);                               \
    }
#define T_TILE_DTYPE(tag, dt)                                                                         \
    T_TILE_VARIANT(tag##_1, dt, 1) T_TILE_VARIANT(tag##_2, dt, 2) T_TILE_VARIANT(tag##_3, dt, 3)      \
    T_TILE_VARIANT(tag##_4, dt, 4)                                                                    \
    static const t_tile_fn tag##_table[KERNEL_BATCH_GROUP] = { tag##_1, tag##_2, tag##_3, tag##_4 };

T_TILE_DTYPE(t_tile_f8, DTYPE_F8_E4M3)
T_TILE_DTYPE(t_tile_bf16, DTYPE_BF16)
T_TILE_DTYPE(t_tile_f32, DTYPE_F32)

void matvec_t_range_avx2(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy)
{
    const t_tile_fn *table;
    switch (w->dtype) {
    case DTYPE_F8_E4M3: table = t_tile_f8_table; break;
    case DTYPE_BF16: table = t_tile_bf16_table; break;
    case DTYPE_F32: table = t_tile_f32_table; break;
    default: kernels_unsupported_dtype(w->dtype, "matvec_t_range"); return;
    }
    for (int b0 = 0; b0 < nb; b0 += KERNEL_BATCH_GROUP) {
        int nbg = nb - b0 < KERNEL_BATCH_GROUP ? nb - b0 : KERNEL_BATCH_GROUP;
        for (int c0 = 0; c0 < w->cols; c0 += t_tile_cols(nbg))
            table[nbg - 1](w, r0, r1, c0, x + (size_t)b0 * ldx, ldx, y + (size_t)b0 * ldy, ldy);
    }
}
