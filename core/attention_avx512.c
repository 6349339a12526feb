/* AVX-512 attention path: 16 floats per vector. Scores in tiles of 4 heads x 4 positions (16
 * accumulators, 8 loads per 16 FMAs, one transpose-add tree per tile); weighted latents in tiles of
 * 4 heads x 64 columns (16 accumulators, 4 loads and 4 broadcasts per 16 FMAs). Groups of more
 * than four heads (R1's 32) run attention_driver.h's item loop; items of four heads or fewer (the
 * embedded model) their own, at the end of the file. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/attention_internal.h"

#define INLINE static inline __attribute__((always_inline))

INLINE __mmask16 lanes(int n) { return n <= 0 ? 0 : (__mmask16)((1u << (n < 16 ? n : 16)) - 1); }

/* Lane i of the result is the sum of the 16 lanes of a[i]: pairs, then quads inside 128-bit lanes,
 * then across them (15 adds, 30 shuffles for 16 sums). */
INLINE __m512 sum16(const __m512 a[16])
{
    __m512 x[8], y[4], z[2];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        x[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* acc[h * 4 + t] += q[h] . x[t] over floats [k, k + 16) masked by m. */
INLINE void dot_step(int NH, int NT, const float *q, int qstride, const float *x, int xstride, int k, __mmask16 m,
                     __m512 acc[16])
{
    __m512 xv[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) xv[t] = _mm512_maskz_loadu_ps(m, x + (size_t)t * xstride + k);
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++) {
        __m512 qv = _mm512_maskz_loadu_ps(m, q + (size_t)h * qstride + k);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) acc[h * 4 + t] = _mm512_fmadd_ps(qv, xv[t], acc[h * 4 + t]);
    }
}

/* acc[h * 4 + t] += q[h] . x[t] over len floats (rows qstride, xstride apart): whole vectors with
 * a constant mask (no per-step mask arithmetic in the loop that does all the FMAs), the tail masked. */
INLINE void dot_segment(int NH, int NT, const float *q, int qstride, const float *x, int xstride, int len, __m512 acc[16])
{
    int k = 0;
    for (; k + 16 <= len; k += 16) dot_step(NH, NT, q, qstride, x, xstride, k, (__mmask16)0xFFFF, acc);
    if (k < len) dot_step(NH, NT, q, qstride, x, xstride, k, lanes(len - k), acc);
}

/* s[h * ATTN_BLOCK + t] = scale * (the 16 lanes of acc[h * 4 + t] summed). */
INLINE void store_scores(int NH, int NT, const __m512 acc[16], float scale, float *s)
{
    float out[16];
    __m512 sc = _mm512_mul_ps(sum16(acc), _mm512_set1_ps(scale));
    if (NT == 4) { /* head h's 4 scores are the h-th 128-bit lane */
        _mm_storeu_ps(s, _mm512_castps512_ps128(sc));
        if (NH > 1) _mm_storeu_ps(s + ATTN_BLOCK, _mm512_extractf32x4_ps(sc, 1));
        if (NH > 2) _mm_storeu_ps(s + 2 * ATTN_BLOCK, _mm512_extractf32x4_ps(sc, 2));
        if (NH > 3) _mm_storeu_ps(s + 3 * ATTN_BLOCK, _mm512_extractf32x4_ps(sc, 3));
        return;
    }
    _mm512_storeu_ps(out, sc);
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < NT; t++) s[h * ATTN_BLOCK + t] = out[h * 4 + t];
}

/* BF16 rows read by four heads or fewer (the items at the end of the file): widening a block into
 * conv costs as much as all the FMAs that read it (one 64-byte store per 16 values, and this path's
 * cores store one such vector per two cycles at best), so these items widen in registers instead. A 64-byte load holds 16 pairs of BF16
 * values: the pairs masked to their high halves are the odd values as floats, shifted up by 16 bits
 * the even ones. Dot products and weighted latents then run in pair order (in every 32 columns, the
 * 16 even ones, then the 16 odd ones): the queries are put in it once per item, the accumulators
 * taken out of it at the end. Every reduction order still depends only on the item's bounds. */
INLINE void pair_split(const uint16_t *p, __m512 *even, __m512 *odd)
{
    __m512i d = _mm512_loadu_si512(p);
    *odd = _mm512_castsi512_ps(_mm512_and_si512(d, _mm512_set1_epi32((int)0xFFFF0000u)));
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(d, 16));
}

/* Lanes of the pair order: even columns of 32, then odd ones; and back. */
static void to_pair_order(const float *src, int n, float *dst)
{
    __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    for (int g = 0; g < n; g += 32) {
        __m512 a = _mm512_loadu_ps(src + g), b = _mm512_loadu_ps(src + g + 16);
        _mm512_storeu_ps(dst + g, _mm512_permutex2var_ps(a, ev, b));
        _mm512_storeu_ps(dst + g + 16, _mm512_permutex2var_ps(a, od, b));
    }
}

static void from_pair_order(float *a, int n)
{
    __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    for (int g = 0; g < n; g += 32) {
        __m512 e = _mm512_loadu_ps(a + g), o = _mm512_loadu_ps(a + g + 16);
        _mm512_storeu_ps(a + g, _mm512_permutex2var_ps(e, lo, o));
        _mm512_storeu_ps(a + g + 16, _mm512_permutex2var_ps(e, hi, o));
    }
}

/* acc[h * 4 + t] += q[h] . x[t] over len (a multiple of 32) values, q in pair order. */
INLINE void pair_dot_segment(int NH, int NT, const float *q, int qstride, const uint16_t *x, int xstride, int len,
                             __m512 acc[16])
{
    for (int k = 0; k < len; k += 32) {
        __m512 e[4], o[4];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) pair_split(x + (size_t)t * xstride + k, &e[t], &o[t]);
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            __m512 qe = _mm512_loadu_ps(q + (size_t)h * qstride + k), qo = _mm512_loadu_ps(q + (size_t)h * qstride + k + 16);
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) acc[h * 4 + t] = _mm512_fmadd_ps(qo, o[t], _mm512_fmadd_ps(qe, e[t], acc[h * 4 + t]));
        }
    }
}

/* The scores of NH heads x NT positions; PAIRS: BF16 rows read in pair order (q in it too). */
INLINE void score_tile(int NH, int NT, int PAIRS, const float *ql, const float *qr, const void *lat, const void *kr, int R,
                       int rope, float scale, float *s)
{
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    if (PAIRS) {
        pair_dot_segment(NH, NT, ql, R, lat, R, R, acc);
        pair_dot_segment(NH, NT, qr, rope, kr, rope, rope, acc);
    } else {
        dot_segment(NH, NT, ql, R, lat, R, R, acc);
        dot_segment(NH, NT, qr, rope, kr, rope, rope, acc);
    }
    store_scores(NH, NT, acc, scale, s);
}

typedef void (*score_fn)(const float *ql, const float *qr, const void *lat, const void *kr, int R, int rope, float scale,
                         float *s);
#define SCORE_VARIANT(nh, nt, pairs)                                                                             \
    static void score_##nh##_##nt##_##pairs(const float *ql, const float *qr, const void *lat, const void *kr,    \
                                            int R, int rope, float scale, float *s)                               \
    {                                                                                                             \
        score_tile(nh, nt, pairs, ql, qr, lat, kr, R, rope, scale, s);                                            \
    }
#define SCORE_HEADS(nt, pairs)                                                                                    \
    SCORE_VARIANT(1, nt, pairs) SCORE_VARIANT(2, nt, pairs) SCORE_VARIANT(3, nt, pairs) SCORE_VARIANT(4, nt, pairs)
SCORE_HEADS(1, 0) SCORE_HEADS(4, 0) SCORE_HEADS(1, 1) SCORE_HEADS(4, 1)
/* [pairs][a quad of positions][heads - 1] */
static const score_fn score_table[2][2][4] = {
    {{score_1_1_0, score_2_1_0, score_3_1_0, score_4_1_0}, {score_1_4_0, score_2_4_0, score_3_4_0, score_4_4_0}},
    {{score_1_1_1, score_2_1_1, score_3_1_1, score_4_1_1}, {score_1_4_1, score_2_4_1, score_3_4_1, score_4_4_1}}};

/* Positions in quads, outermost, so that their rows stay in L1 while every head group reads them. */
static void attn_scores(const float *ql, const float *qr, int nh, const float *lat, const float *kr, int nt, int R,
                        int rope, float scale, float *s, const attention_ahead *ahead)
{
    for (int t = 0; t < nt;) {
        int quad = nt - t >= 4;
        attention_prefetch(ahead, t, t + (quad ? 4 : 1));
        for (int h = 0; h < nh; h += 4) {
            int hh = nh - h < 4 ? nh - h : 4;
            score_table[0][quad][hh - 1](ql + (size_t)h * R, qr + (size_t)h * rope, lat + (size_t)t * R,
                                      kr + (size_t)t * rope, R, rope, scale, s + h * ATTN_BLOCK + t);
        }
        t += quad ? 4 : 1;
    }
}

/* exp(x) for x <= 0: Cephes' expf polynomial (about 1 ulp) times 2^n by scalef; below -87.3 it
 * clamps (e^-87.3 ~ 1e-38 weighs nothing beside the block's maximum, which is e^0). */
INLINE __m512 exp_ps(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* Lane j of every 128-bit lane of the result is op over the 16 lanes of v[j]: four heads reduced at
 * once (13 shuffles and ops), where one head at a time is a chain of 8 dependent ones. */
#define REDUCE4(name, op)                                                                                         \
    INLINE __m512 name(const __m512 v[4])                                                                        \
    {                                                                                                             \
        __m512 a = op(_mm512_unpacklo_ps(v[0], v[1]), _mm512_unpackhi_ps(v[0], v[1]));                          \
        __m512 b = op(_mm512_unpacklo_ps(v[2], v[3]), _mm512_unpackhi_ps(v[2], v[3]));                          \
        __m512 c = op(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2))); \
        c = op(c, _mm512_shuffle_f32x4(c, c, _MM_SHUFFLE(1, 0, 3, 2)));                                          \
        return op(c, _mm512_shuffle_f32x4(c, c, _MM_SHUFFLE(2, 3, 0, 1)));                                       \
    }
REDUCE4(max4, _mm512_max_ps)
REDUCE4(sum4, _mm512_add_ps)

/* Heads four at a time, so that the block's maxima, exponentials and sums of four heads are
 * independent work for the out-of-order core rather than one head's latency chain after another.
 * Heads past nh are scored -inf and their lanes never stored. */
static void attn_softmax_block(float *s, int nh, int nt, float *m, float *l, float *alpha)
{
    __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int h0 = 0; h0 < nh; h0 += 4) {
        int hh = nh - h0 < 4 ? nh - h0 : 4;
        __mmask16 hk = lanes(hh);
        __m512 v[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const float *sh = s + (h0 + j) * ATTN_BLOCK;
            v[j] = ninf;
            for (int c = 0; j < hh && c < nt; c += 16) v[j] = _mm512_max_ps(v[j], _mm512_mask_loadu_ps(ninf, lanes(nt - c), sh + c));
        }
        __m512 mold = _mm512_mask_loadu_ps(ninf, hk, m + h0);
        __m512 mnew = _mm512_max_ps(mold, max4(v));
        /* exp_ps would clamp -inf (the first block) to e^-87.3, harmless against l = acc = 0, but 0 is
         * what it means */
        __m512 a = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(mold, ninf, _CMP_NEQ_OQ), exp_ps(_mm512_sub_ps(mold, mnew)));
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            float *sh = s + (h0 + j) * ATTN_BLOCK;
            __m512 mj = _mm512_permutexvar_ps(_mm512_set1_epi32(j), mnew);
            v[j] = _mm512_setzero_ps();
            for (int c = 0; j < hh && c < nt; c += 16) {
                __mmask16 k = lanes(nt - c);
                __m512 e = _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, sh + c), mj)));
                _mm512_mask_storeu_ps(sh + c, k, e);
                v[j] = _mm512_add_ps(v[j], e);
            }
        }
        __m512 lnew = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(hk, l + h0), a, sum4(v));
        _mm512_mask_storeu_ps(l + h0, hk, lnew);
        _mm512_mask_storeu_ps(m + h0, hk, mnew);
        _mm512_mask_storeu_ps(alpha + h0, hk, a);
    }
}

/* acc[h][c0 .. c0 + 16 NV) = acc * alpha[h] + sum_t s[h][t] lat[t][...]; columns past R masked.
 * PAIRS: BF16 rows in pair order (R a multiple of 32, NV 2 or 4). With ahead, the rows pf_base on of
 * the next block are prefetched, pf_per per four positions. */
INLINE void weighted_tile(int NH, int NV, int PAIRS, float *acc, int R, const float *alpha, const float *s,
                          const void *lat, int nt, int c0, const attention_ahead *ahead, int pf_base, int pf_per)
{
    __m512 a[4][4];
    __mmask16 m[4];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) m[v] = lanes(R - c0 - 16 * v);
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            a[h][v] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[v], acc + (size_t)h * R + c0 + 16 * v), _mm512_set1_ps(alpha[h]));
    for (int t = 0; t < nt; t++) {
        __m512 x[4];
        if (ahead && !(t & 3)) attention_prefetch(ahead, pf_base + t / 4 * pf_per, pf_base + (t / 4 + 1) * pf_per);
        if (PAIRS) {
#pragma GCC unroll 2
            for (int v = 0; v < NV; v += 2) pair_split((const uint16_t *)lat + (size_t)t * R + c0 + 16 * v, &x[v], &x[v + 1]);
        } else {
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) x[v] = _mm512_maskz_loadu_ps(m[v], (const float *)lat + (size_t)t * R + c0 + 16 * v);
        }
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            __m512 p = _mm512_set1_ps(s[h * ATTN_BLOCK + t]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) a[h][v] = _mm512_fmadd_ps(p, x[v], a[h][v]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(acc + (size_t)h * R + c0 + 16 * v, m[v], a[h][v]);
}

typedef void (*weighted_fn)(float *acc, int R, const float *alpha, const float *s, const void *lat, int nt, int c0,
                            const attention_ahead *ahead, int pf_base, int pf_per);
#define WEIGHTED_VARIANT(nh, nv, pairs)                                                                           \
    static void weighted_##nh##_##nv##_##pairs(float *acc, int R, const float *alpha, const float *s, const void *lat, \
                                               int nt, int c0, const attention_ahead *ahead, int pf_base, int pf_per) \
    {                                                                                                             \
        weighted_tile(nh, nv, pairs, acc, R, alpha, s, lat, nt, c0, ahead, pf_base, pf_per);                      \
    }
#define WEIGHTED_HEADS(nh)                                                                                        \
    WEIGHTED_VARIANT(nh, 1, 0) WEIGHTED_VARIANT(nh, 2, 0) WEIGHTED_VARIANT(nh, 3, 0) WEIGHTED_VARIANT(nh, 4, 0)   \
    WEIGHTED_VARIANT(nh, 2, 1) WEIGHTED_VARIANT(nh, 4, 1)
WEIGHTED_HEADS(1) WEIGHTED_HEADS(2) WEIGHTED_HEADS(3) WEIGHTED_HEADS(4)
/* [heads - 1][vectors - 1] of F32 rows; pair order takes 2 or 4 vectors */
static const weighted_fn weighted_table[4][4] = {
    {weighted_1_1_0, weighted_1_2_0, weighted_1_3_0, weighted_1_4_0},
    {weighted_2_1_0, weighted_2_2_0, weighted_2_3_0, weighted_2_4_0},
    {weighted_3_1_0, weighted_3_2_0, weighted_3_3_0, weighted_3_4_0},
    {weighted_4_1_0, weighted_4_2_0, weighted_4_3_0, weighted_4_4_0}};
static const weighted_fn pair_weighted_table[2][4] = {
    {weighted_1_2_1, weighted_2_2_1, weighted_3_2_1, weighted_4_2_1},
    {weighted_1_4_1, weighted_2_4_1, weighted_3_4_1, weighted_4_4_1}};

static void attn_weighted(float *acc, int nh, int R, const float *alpha, const float *s, const float *lat, int nt)
{
    for (int h = 0; h < nh; h += 4) {
        int hh = nh - h < 4 ? nh - h : 4;
        for (int c0 = 0; c0 < R; c0 += 64) {
            int nv = (R - c0 + 15) / 16;
            weighted_table[hh - 1][(nv < 4 ? nv : 4) - 1](acc + (size_t)h * R, R, alpha + h, s + h * ATTN_BLOCK, lat, nt, c0,
                                                          NULL, 0, 0);
        }
    }
}

/* Whole vectors unmasked, the tail masked: the mask arithmetic per vector would cost as much as the
 * widening itself. */
static void attn_widen_bf16(const uint16_t *src, int n, float *dst)
{
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
    if (i < n) {
        __mmask16 k = lanes(n - i);
        __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, src + i));
        _mm512_mask_storeu_ps(dst + i, k, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
}

/* The generic item loop (BF16 blocks widened into conv) as attention_item_avx512_rows. */
void attention_item_avx512_rows(const attention_item *it);
#define ATTN_ISA avx512_rows
#include "core/attention_driver.h"

/* ---------- Items of four heads or fewer ---------- */

/* One block of an item with four heads or fewer: scores, softmax, weighted latents. With few heads
 * memory binds an F32 cache, and it must stay busy through both passes: the next block's rows are
 * prefetched evenly over the block's time, the first half during the scores (a row per two
 * positions), the rest during the weighted latents (a row per four positions of each 64-column
 * chunk); twice as many when the next block (next positions) is twice as long. A burst in the score
 * pass alone left memory idle through the weighted pass: measured 62-65% of the memory roof against
 * 73-80% so (bench_attention, embedded width, 1 thread). */
static void few_heads_block(const attention_item *it, const float *ql, const float *qr, int t, int blk, int next,
                            float *s, float *alpha)
{
    int f = next / blk; /* 1 or 2 */
    const attention_kv *kv = it->kv;
    int R = kv->R, rope = kv->rope, nh = it->nh, nt = it->t1 - t < blk ? it->t1 - t : blk;
    int pairs = kv->dtype == DTYPE_BF16;
    size_t es = dtype_size(kv->dtype);
    attention_ahead ahead = attention_block_after(kv, t, it->n, blk);
    const char *lat = (const char *)kv->latent + (size_t)t * R * es, *kr = (const char *)kv->krope + (size_t)t * rope * es;
    for (int u = 0; u < nt;) {
        int quad = nt - u >= 4;
        attention_prefetch(&ahead, u * f / 2, ((u + (quad ? 4 : 1)) * f + 1) / 2);
        score_table[pairs][quad][nh - 1](ql, qr, lat + (size_t)u * R * es, kr + (size_t)u * rope * es, R, rope, kv->scale,
                                         s + u);
        u += quad ? 4 : 1;
    }
    attn_softmax_block(s, nh, nt, it->m, it->l, alpha);
    for (int c0 = 0; c0 < R; c0 += 64) {
        int nv = (R - c0 + 15) / 16;
        weighted_fn weighted = pairs ? pair_weighted_table[nv >= 4][nh - 1] : weighted_table[nh - 1][(nv < 4 ? nv : 4) - 1];
        weighted(it->acc, R, alpha, s, lat, nt, c0, &ahead, f * (blk / 2 + c0 / 64 * (blk / 4)), f);
    }
}

/* An item with four heads or fewer: its own loop, for the prefetching above and, with a BF16 cache,
 * the queries in pair order (conv holds them: nh (R + rope) <= ATTN_BLOCK (R + rope) floats). Blocks
 * of 32 F32 rows or 64 BF16 rows: 20 KB at the embedded width, what L1 keeps while the weighted pass
 * reads the block a second time; shorter blocks cost more per position (the softmax, the
 * accumulators' loads and stores). Except the first blocks: an item starts on rows nobody
 * prefetched, and waiting for a whole 20 KB block before any work cost ~1 us per item (bench_attention,
 * 64 positions cold against in cache), so blocks start at ATTN_RAMP_FIRST positions and double. */
static void attention_item_few_heads(const attention_item *it)
{
    const attention_kv *kv = it->kv;
    int R = kv->R, rope = kv->rope, nh = it->nh, pairs = kv->dtype == DTYPE_BF16;
    float s[4 * ATTN_BLOCK] __attribute__((aligned(64)));
    float alpha[4];
    const float *ql = it->q_lat, *qr = it->q_rope;
    if (pairs) {
        float *qp = it->conv, *qpr = it->conv + (size_t)nh * R;
        for (int h = 0; h < nh; h++) {
            to_pair_order(it->q_lat + (size_t)h * R, R, qp + (size_t)h * R);
            to_pair_order(it->q_rope + (size_t)h * rope, rope, qpr + (size_t)h * rope);
        }
        ql = qp;
        qr = qpr;
    }
    for (int h = 0; h < nh; h++) {
        it->m[h] = -INFINITY;
        it->l[h] = 0.0f;
    }
    memset(it->acc, 0, (size_t)nh * R * sizeof(float));
    int full = pairs ? ATTN_BLOCK : ATTN_BLOCK / 2, blk = ATTN_RAMP_FIRST < full ? ATTN_RAMP_FIRST : full;
    for (int t = it->t0; t < it->t1;) {
        int next = 2 * blk < full ? 2 * blk : full;
        few_heads_block(it, ql, qr, t, blk, next, s, alpha);
        t += blk;
        blk = next;
    }
    if (pairs)
        for (int h = 0; h < nh; h++) from_pair_order(it->acc + (size_t)h * R, R);
}

void attention_item_avx512(const attention_item *it)
{
    const attention_kv *kv = it->kv;
    if (it->nh <= 4 && (kv->dtype == DTYPE_F32 || (kv->R % 32 == 0 && kv->rope % 32 == 0)))
        attention_item_few_heads(it);
    else
        attention_item_avx512_rows(it);
}
