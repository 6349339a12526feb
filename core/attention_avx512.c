/* AVX-512 attention path: 16 floats per vector. Items of 17 to 32 heads (R1's groups of 32) run
 * their own loop with vectors over the heads (near the end of the file); items of four heads or
 * fewer (the embedded model) theirs; the rest attention_driver.h's item loop: scores in tiles of 4
 * heads x 4 positions (16 accumulators, 8 loads per 16 FMAs, one transpose-add tree per tile),
 * weighted latents in tiles of 4 heads x 64 columns (16 accumulators, 4 loads and 4 broadcasts per
 * 16 FMAs). */
#include <immintrin.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
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

/* s[h * ATTN_BLOCK + t] = lane h * 4 + t of sc. */
INLINE void store_scores(int NH, int NT, __m512 sc, float *s)
{
    float out[16];
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
    /* in a register: GCC otherwise stored the row to the stack and read it back as both ops' memory operand */
    __asm__("" : "+v"(d));
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
#pragma GCC unroll 4
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

/* The 16 scaled sums of NH heads x NT positions, lane h * 4 + t (zeros past NH and NT); PAIRS: BF16
 * rows read in pair order (q in it too). */
INLINE __m512 score_sums(int NH, int NT, int PAIRS, const float *ql, const float *qr, const void *lat, const void *kr,
                         int R, int rope, float scale)
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
    return _mm512_mul_ps(sum16(acc), _mm512_set1_ps(scale));
}

INLINE void score_tile(int NH, int NT, const float *ql, const float *qr, const void *lat, const void *kr, int R, int rope,
                       float scale, float *s)
{
    store_scores(NH, NT, score_sums(NH, NT, 0, ql, qr, lat, kr, R, rope, scale), s);
}

typedef void (*score_fn)(const float *ql, const float *qr, const void *lat, const void *kr, int R, int rope, float scale,
                         float *s);
#define SCORE_VARIANT(nh, nt)                                                                                     \
    static void score_##nh##_##nt(const float *ql, const float *qr, const void *lat, const void *kr, int R,       \
                                  int rope, float scale, float *s)                                                \
    {                                                                                                             \
        score_tile(nh, nt, ql, qr, lat, kr, R, rope, scale, s);                                                   \
    }
#define SCORE_HEADS(nt) SCORE_VARIANT(1, nt) SCORE_VARIANT(2, nt) SCORE_VARIANT(3, nt) SCORE_VARIANT(4, nt)
SCORE_HEADS(1) SCORE_HEADS(4)
/* [a quad of positions][heads - 1] */
static const score_fn score_table[2][4] = {{score_1_1, score_2_1, score_3_1, score_4_1},
                                           {score_1_4, score_2_4, score_3_4, score_4_4}};

/* Positions in quads, outermost, so that their rows stay in L1 while every head group reads them. */
static void attn_scores(const float *ql, const float *qr, int nh, const float *lat, const float *kr, int nt, int R,
                        int rope, float scale, float *s, const attention_ahead *ahead)
{
    for (int t = 0; t < nt;) {
        int quad = nt - t >= 4;
        attention_prefetch(ahead, t, t + (quad ? 4 : 1));
        for (int h = 0; h < nh; h += 4) {
            int hh = nh - h < 4 ? nh - h : 4;
            score_table[quad][hh - 1](ql + (size_t)h * R, qr + (size_t)h * rope, lat + (size_t)t * R,
                                      kr + (size_t)t * rope, R, rope, scale, s + h * ATTN_BLOCK + t);
        }
        t += quad ? 4 : 1;
    }
}

/* exp(x) for x <= 88: Cephes' expf polynomial (about 1 ulp) times 2^n by scalef; below -87.3 it
 * clamps (e^-87.3 ~ 1e-38 weighs nothing beside the largest weight, at least e^0: the maximum's). */
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

/* Rows of the cache still to prefetch: the next one's latent and rope key, `rows` of them, taken
 * rate / 65536 rows per step, so that a pass spreads its share evenly; a row's latent lines and its
 * rope key's together, so that the next block's first rows have all their lines early. l1: into L1
 * (prefetcht0) rather than L2 (prefetcht2; see few_block). */
typedef struct {
    const char *lat, *kr;
    size_t lat_row, kr_row;
    int rows, l1;
    unsigned frac, rate;
} pf_cursor;

/* The locality hint must be a compile-time constant even at -O0, hence the branch. */
INLINE void pf_line(const char *p, int L1)
{
    if (L1) __builtin_prefetch(p, 0, 3);
    else __builtin_prefetch(p, 0, 1);
}

INLINE void pf_rows(pf_cursor *c, int L1)
{
    for (c->frac += c->rate; c->frac >= 65536 && c->rows > 0; c->frac -= 65536, c->rows--) {
        for (size_t b = 0; b < c->lat_row; b += 64) pf_line(c->lat + b, L1);
        for (size_t b = 0; b < c->kr_row; b += 64) pf_line(c->kr + b, L1);
        c->lat += c->lat_row;
        c->kr += c->kr_row;
    }
}

INLINE void pf_step(pf_cursor *c)
{
    if (c->l1)
        pf_rows(c, 1);
    else
        pf_rows(c, 0);
}

/* a[h][...] += w[h * ws] * row[c0 .. c0 + 16 NV): one position of a weighted tile. */
INLINE void weighted_row(int NH, int NV, int PAIRS, __m512 a[4][4], const __mmask16 m[4], const void *row, int c0,
                         const float *w, int ws)
{
    __m512 x[4];
    if (PAIRS) {
#pragma GCC unroll 2
        for (int v = 0; v < NV; v += 2) pair_split((const uint16_t *)row + c0 + 16 * v, &x[v], &x[v + 1]);
    } else {
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) x[v] = _mm512_maskz_loadu_ps(m[v], (const float *)row + c0 + 16 * v);
    }
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++) {
        __m512 p = _mm512_set1_ps(w[h * ws]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) a[h][v] = _mm512_fmadd_ps(p, x[v], a[h][v]);
    }
}

/* acc[h][c0 .. c0 + 16 NV) += sum_t w[h][t] lat[t][...] for items of few heads: columns past R
 * masked; PAIRS: BF16 rows in pair order (R a multiple of 32, NV 2 or 4); w in the score tiles'
 * order (16 per quad of positions: lane h * 4 + t % 4, so that a quad's weights sit at fixed
 * offsets); a step of pf per quad of positions. */
INLINE void weighted_tile(int NH, int NV, int PAIRS, float *acc, int R, const float *w, const void *lat, int nt, int c0,
                          pf_cursor *pf)
{
    __m512 a[4][4];
    __mmask16 m[4];
    size_t row = (size_t)R * (PAIRS ? 2 : 4);
    const char *x = lat;
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) m[v] = lanes(R - c0 - 16 * v);
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) a[h][v] = _mm512_maskz_loadu_ps(m[v], acc + (size_t)h * R + c0 + 16 * v);
    pf_cursor c = *pf; /* in registers: the vector stores may alias what pf reaches */
    int t = 0;
    for (; t + 4 <= nt; t += 4, x += 4 * row) {
        pf_step(&c);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) weighted_row(NH, NV, PAIRS, a, m, x + j * row, c0, w + t * 4 + j, 4);
    }
    for (; t < nt; t++, x += row) weighted_row(NH, NV, PAIRS, a, m, x, c0, w + t * 4 - (t & 3) * 3, 4);
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(acc + (size_t)h * R + c0 + 16 * v, m[v], a[h][v]);
    *pf = c;
}

/* acc[h][c0 .. c0 + 16 NV) = acc * alpha[h] + sum_t s[h][t] lat[t][...] (F32 rows; s rows ATTN_BLOCK
 * apart); columns past R masked. */
INLINE void rows_weighted_tile(int NH, int NV, float *acc, int R, const float *alpha, const float *s, const float *lat,
                               int nt, int c0)
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
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) x[v] = _mm512_maskz_loadu_ps(m[v], lat + (size_t)t * R + c0 + 16 * v);
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

typedef void (*weighted_fn)(float *acc, int R, const float *alpha, const float *s, const float *lat, int nt, int c0);
#define WEIGHTED_VARIANT(nh, nv)                                                                                  \
    static void weighted_##nh##_##nv(float *acc, int R, const float *alpha, const float *s, const float *lat, int nt, \
                                     int c0)                                                                      \
    {                                                                                                             \
        rows_weighted_tile(nh, nv, acc, R, alpha, s, lat, nt, c0);                                                \
    }
#define WEIGHTED_HEADS(nh) WEIGHTED_VARIANT(nh, 1) WEIGHTED_VARIANT(nh, 2) WEIGHTED_VARIANT(nh, 3) WEIGHTED_VARIANT(nh, 4)
WEIGHTED_HEADS(1) WEIGHTED_HEADS(2) WEIGHTED_HEADS(3) WEIGHTED_HEADS(4)
/* [heads - 1][vectors - 1] */
static const weighted_fn weighted_table[4][4] = {{weighted_1_1, weighted_1_2, weighted_1_3, weighted_1_4},
                                                 {weighted_2_1, weighted_2_2, weighted_2_3, weighted_2_4},
                                                 {weighted_3_1, weighted_3_2, weighted_3_3, weighted_3_4},
                                                 {weighted_4_1, weighted_4_2, weighted_4_3, weighted_4_4}};

static void attn_weighted(float *acc, int nh, int R, const float *alpha, const float *s, const float *lat, int nt)
{
    for (int h = 0; h < nh; h += 4) {
        int hh = nh - h < 4 ? nh - h : 4;
        for (int c0 = 0; c0 < R; c0 += 64) {
            int nv = (R - c0 + 15) / 16;
            weighted_table[hh - 1][(nv < 4 ? nv : 4) - 1](acc + (size_t)h * R, R, alpha + h, s + h * ATTN_BLOCK, lat, nt, c0);
        }
    }
}

/* Up to 16 BF16 values widened (whole vectors unmasked, only a tail masked: the mask arithmetic per
 * vector would cost as much as the widening itself); returns how many. */
INLINE int widen16(const uint16_t *src, float *dst, int n)
{
    if (n >= 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)src));
        _mm512_storeu_ps(dst, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
        return 16;
    }
    __mmask16 k = lanes(n);
    __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, src));
    _mm512_mask_storeu_ps(dst, k, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    return n;
}

static void attn_widen_bf16(const uint16_t *src, int n, float *dst)
{
    for (int i = 0; i < n;) i += widen16(src + i, dst + i, n - i);
}

/* The generic item loop (BF16 blocks widened into conv) as attention_item_avx512_rows. */
void attention_item_avx512_rows(const attention_item *it);
#define ATTN_ISA avx512_rows
#include "core/attention_driver.h"

/* ---------- Items of four heads or fewer ---------- */

/* How far above its running maximum m a head's score may go before the block is redone against a
 * new maximum: the softmax weights are exp(score - m) <= e^8, far inside F32's range. So a block
 * takes its weights in the score tiles, as each tile's scores come out (no pass over the block's
 * scores between the two FMA passes, and no rescaling of the accumulators), and only the rare block
 * whose maximum rises by more than this (and an item's first, where m is -inf) takes a second pass. */
#define FEW_LAZY_MAX 8.0f

/* Lanes of a quad's 16 scores (h * 4 + t) that hold heads < nh and positions < nt. */
INLINE __mmask16 quad_lanes(int nh, int nt)
{
    static const __mmask16 pos[5] = {0, 0x1111, 0x3333, 0x7777, 0xFFFF};
    return (__mmask16)(lanes(4 * nh) & pos[nt < 4 ? nt : 4]);
}

/* Lane i of the result: the maximum of its 128-bit lane (one head's four positions). */
INLINE __m512 lane4_max(__m512 v)
{
    v = _mm512_max_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_max_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
}

/* The running state of an item of few heads, lane h * 4 + j for head h: the reference maximum m
 * (the same in all four lanes of a head), the sum of the weights l (four partial sums per head,
 * added at the end) and, through a block, the maximum of its scores and the sum of its weights. */
typedef struct {
    __m512 m, l, bmax, bsum;
    int pf_l1; /* prefetch into L1 (see few_block) */
} few_state;

/* One quad's (or the last positions') scores sc into raw, their maximum into bmax. */
INLINE void few_keep(__m512 sc, __mmask16 k, __m512 *bmax, float *raw)
{
    _mm512_storeu_ps(raw, sc);
    *bmax = _mm512_mask_max_ps(*bmax, k, *bmax, sc);
}

/* The score pass of a block of nt positions: quads, then the last 1-3 positions as one tile; then
 * the weights against m and their sum, in a loop of their own: taken in the quad loop, each exp's
 * chain (a dozen dependent ops after the scores' reduction tree) stalled the next quad's FMAs
 * (cpu-clock samples, Zen 5: a fifth of an item's time on the exp's instructions). The state and
 * the cursor are copied into locals, which stay in registers (the vector stores may alias what a
 * pointer reaches). */
INLINE void few_scores(int NH, int PAIRS, const float *ql, const float *qr, const char *lat, const char *kr, int R,
                       int rope, float scale, int nt, __m512 m, few_state *st, float *raw, float *w, pf_cursor *pf)
{
    size_t es = PAIRS ? 2 : 4, lr = (size_t)R * es, kr_row = (size_t)rope * es;
    pf_cursor c = *pf;
    __m512 bmax = _mm512_set1_ps(-INFINITY), bsum = _mm512_setzero_ps(), sc;
    int u = 0;
    for (; u + 4 <= nt; u += 4) {
        pf_step(&c);
        sc = score_sums(NH, 4, PAIRS, ql, qr, lat + u * lr, kr + u * kr_row, R, rope, scale);
        few_keep(sc, quad_lanes(NH, 4), &bmax, raw + u * 4);
    }
    if (u < nt) {
        if (nt - u == 3)
            sc = score_sums(NH, 3, PAIRS, ql, qr, lat + u * lr, kr + u * kr_row, R, rope, scale);
        else if (nt - u == 2)
            sc = score_sums(NH, 2, PAIRS, ql, qr, lat + u * lr, kr + u * kr_row, R, rope, scale);
        else
            sc = score_sums(NH, 1, PAIRS, ql, qr, lat + u * lr, kr + u * kr_row, R, rope, scale);
        few_keep(sc, quad_lanes(NH, nt - u), &bmax, raw + u * 4);
    }
    for (u = 0; u < nt; u += 4) {
        __m512 e = _mm512_maskz_mov_ps(quad_lanes(NH, nt - u), exp_ps(_mm512_sub_ps(_mm512_loadu_ps(raw + u * 4), m)));
        _mm512_storeu_ps(w + u * 4, e);
        bsum = _mm512_add_ps(bsum, e);
    }
    *pf = c;
    st->bmax = bmax;
    st->bsum = bsum;
}

/* A block whose maximum rose past m + FEW_LAZY_MAX (or the item's first): m to the new maximum, the
 * sums and accumulators rescaled, the weights taken again from the raw scores. */
INLINE void few_rebase(int NH, few_state *st, const float *raw, float *w, int nt, float *acc, int R)
{
    __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 mnew = _mm512_max_ps(st->m, lane4_max(st->bmax));
    __mmask16 had = _mm512_cmp_ps_mask(st->m, ninf, _CMP_NEQ_OQ) & quad_lanes(NH, 4);
    __m512 alpha = _mm512_maskz_mov_ps(had, exp_ps(_mm512_sub_ps(st->m, mnew)));
    float al[16];
    _mm512_storeu_ps(al, alpha);
    st->l = _mm512_mul_ps(st->l, alpha);
    for (int u = 0; u < nt; u += 4) {
        __mmask16 k = quad_lanes(NH, nt - u);
        __m512 e = _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(_mm512_loadu_ps(raw + u * 4), mnew)));
        _mm512_storeu_ps(w + u * 4, e);
        st->l = _mm512_add_ps(st->l, e);
    }
    for (int h = 0; h < NH; h++)
        for (int c = 0; c < R; c += 16) {
            __mmask16 k = lanes(R - c);
            float *p = acc + (size_t)h * R + c;
            _mm512_mask_storeu_ps(p, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p), _mm512_set1_ps(al[4 * h])));
        }
    st->m = mnew;
}

/* Rows [next, next + rows) (none when rows <= 0). */
static pf_cursor rows_of(const attention_kv *kv, int next, int rows)
{
    size_t es = dtype_size(kv->dtype);
    pf_cursor c = {.lat_row = (size_t)kv->R * es, .kr_row = (size_t)kv->rope * es, .rows = rows > 0 ? rows : 0};
    c.lat = (const char *)kv->latent + (size_t)next * c.lat_row;
    c.kr = (const char *)kv->krope + (size_t)next * c.kr_row;
    return c;
}

/* One block of an item with four heads or fewer: the score pass (taking the weights as it goes),
 * the second pass when the maximum rose, the weighted latents. With few heads memory binds or
 * nearly (F32; BF16 on a core with full-width FMAs), and it must stay busy through both FMA passes:
 * the next block's rows are prefetched evenly over the block's time, 5/9 of them during the scores
 * (their share of the FMAs: 2 (R + rope) against 2 R per head and position), the rest during the
 * weighted latents. A burst in the score pass alone left memory idle through the weighted pass
 * (Zen 4: 62-65% of the memory roof against 73-80%). Where L1 holds two blocks with room to spare
 * (Zen 5's 48 KiB against 2 x 20 KB at the embedded width) they go straight into L1: on Zen 5
 * (bench_attention, interleaved runs) that read faster than into L2, most with both cores
 * streaming; Zen 4's 32 KiB does not hold them and prefetches into L2, as Intel cores do (slower
 * into L1 there: attention_l1_prefetch_bytes). Two blocks ahead (into L2) measured slower than one
 * on Zen 5. The prefetch runs from row pf_from to the next block's end: pf_from is the next block's
 * first row, or in a cold item's first block the first row not asked for at its start. */
INLINE void few_block(int NH, int PAIRS, int R, int rope, const attention_item *it, const float *ql, const float *qr, int t,
                      int nt, int pf_from, int next_rows, few_state *st, float *raw, float *w)
{
    const attention_kv *kv = it->kv;
    int nq = (nt + 3) / 4;
    size_t es = PAIRS ? 2 : 4;
    const char *lat = (const char *)kv->latent + (size_t)t * R * es, *kr = (const char *)kv->krope + (size_t)t * rope * es;
    int pf_end = t + nt + (next_rows < it->n - t - nt ? next_rows : it->n - t - nt);
    pf_cursor pf = rows_of(kv, pf_from, pf_end - pf_from);
    unsigned total = (unsigned)pf.rows;
    pf.l1 = st->pf_l1;
    pf.rate = (total * 5 * 65536 / 9 + nq - 1) / nq;
    /* no maximum yet (an item's first block): weights against +inf, zeros the second pass replaces */
    int fast = _mm512_cmp_ps_mask(st->m, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ) != 0;
    few_scores(NH, PAIRS, ql, qr, lat, kr, R, rope, kv->scale, nt, fast ? st->m : _mm512_set1_ps(INFINITY), st, raw, w,
               &pf);
    __m512 limit = _mm512_add_ps(st->m, _mm512_set1_ps(FEW_LAZY_MAX));
    if (!fast || _mm512_mask_cmp_ps_mask(quad_lanes(NH, 4), st->bmax, limit, _CMP_GT_OQ))
        few_rebase(NH, st, raw, w, nt, it->acc, R);
    else
        st->l = _mm512_add_ps(st->l, st->bsum);
    int chunks = (R + 63) / 64;
    unsigned rest = (unsigned)pf.rows;
    pf.frac = 0;
    unsigned steps = (unsigned)(chunks * (nt / 4));
    pf.rate = steps ? (rest * 65536 + steps - 1) / steps : 0;
    for (int c0 = 0; c0 < R; c0 += 64) {
        int nv = (R - c0 + 15) / 16;
        if (PAIRS && nv >= 4)
            weighted_tile(NH, 4, 1, it->acc, R, w, lat, nt, c0, &pf);
        else if (PAIRS)
            weighted_tile(NH, 2, 1, it->acc, R, w, lat, nt, c0, &pf);
        else if (nv >= 4)
            weighted_tile(NH, 4, 0, it->acc, R, w, lat, nt, c0, &pf);
        else if (nv == 3)
            weighted_tile(NH, 3, 0, it->acc, R, w, lat, nt, c0, &pf);
        else if (nv == 2)
            weighted_tile(NH, 2, 0, it->acc, R, w, lat, nt, c0, &pf);
        else
            weighted_tile(NH, 1, 0, it->acc, R, w, lat, nt, c0, &pf);
    }
}

/* An item with four heads or fewer: its own loop, for the prefetching and the weights above and,
 * with a BF16 cache, the queries in pair order (conv holds them: nh (R + rope) <= ATTN_BLOCK (R +
 * rope) floats). Blocks of 32 F32 rows or 64 BF16 rows: 20 KB at the embedded width, what L1 keeps
 * while the weighted pass reads the block a second time; shorter blocks cost more per position (the
 * accumulators' loads and stores). Every block is whole, the first too: a ramp of short first blocks
 * (8, 16, 40, then 64) cost a thread whose chunks run back to back, each prefetched by the one before,
 * 7-9% per call on an Emerald Rapids core (BF16, 1k in chunks of 128 on 1 thread). An item whose
 * first rows nobody prefetched asks for its first FEW_FIRST_ROWS at once instead, the ramp's reason
 * (2 threads, chunks of 512 each starting cold: 0.984-0.990x the ramp's speed, BF16 1k), and leaves
 * the rest of its first block to that block's own prefetch, ahead of the next block's rows: more
 * asked at once stalls the core while the prefetches queue (32 rows: ~1,200 cycles), and rows left
 * to nobody become the score pass's own misses. The blocks follow the chunk alone, the prefetch the
 * thread: the bits never depend on which thread ran what. */
#define FEW_FIRST_ROWS 24
INLINE void few_item(int NH, int PAIRS, const attention_item *it)
{
    const attention_kv *kv = it->kv;
    int R = kv->R, rope = kv->rope;
    float raw[ATTN_BLOCK * 4] __attribute__((aligned(64))), w[ATTN_BLOCK * 4] __attribute__((aligned(64)));
    const float *ql = it->q_lat, *qr = it->q_rope;
    if (PAIRS) {
        float *qp = it->conv, *qpr = it->conv + (size_t)NH * R;
        for (int h = 0; h < NH; h++) {
            to_pair_order(it->q_lat + (size_t)h * R, R, qp + (size_t)h * R);
            to_pair_order(it->q_rope + (size_t)h * rope, rope, qpr + (size_t)h * rope);
        }
        ql = qp;
        qr = qpr;
    }
    memset(it->acc, 0, (size_t)NH * R * sizeof(float));
    int full = PAIRS ? ATTN_BLOCK : ATTN_BLOCK / 2;
    size_t es = PAIRS ? 2 : 4, block_bytes = (size_t)full * (R + rope) * es;
    int cold = !it->rows_prefetched;
    if (cold) {
        attention_ahead first = attention_block_after(kv, it->t0, it->t1, 0); /* the item's own rows */
        attention_prefetch(&first, 0, FEW_FIRST_ROWS);
    }
    few_state st = {.m = _mm512_set1_ps(-INFINITY), .l = _mm512_setzero_ps(),
                    .pf_l1 = 8 * 2 * block_bytes <= 7 * (size_t)it->l1_prefetch_bytes};
    for (int t = it->t0; t < it->t1;) {
        int nt = it->t1 - t < full ? it->t1 - t : full;
        int pf_from = cold && t == it->t0 && nt > FEW_FIRST_ROWS ? t + FEW_FIRST_ROWS : t + nt;
        few_block(NH, PAIRS, R, rope, it, ql, qr, t, nt, pf_from, full, &st, raw, w);
        t += nt;
    }
    float m[16], l[16];
    _mm512_storeu_ps(m, st.m);
    _mm512_storeu_ps(l, st.l);
    for (int h = 0; h < NH; h++) {
        it->m[h] = m[4 * h];
        it->l[h] = (l[4 * h] + l[4 * h + 1]) + (l[4 * h + 2] + l[4 * h + 3]);
    }
    if (PAIRS)
        for (int h = 0; h < NH; h++) from_pair_order(it->acc + (size_t)h * R, R);
}

#define FEW_ITEM(nh, pairs) \
    static void few_item_##nh##_##pairs(const attention_item *it) { few_item(nh, pairs, it); }

FEW_ITEM(1, 0) FEW_ITEM(2, 0) FEW_ITEM(3, 0) FEW_ITEM(4, 0) FEW_ITEM(1, 1) FEW_ITEM(2, 1) FEW_ITEM(3, 1) FEW_ITEM(4, 1)
/* [BF16 read in pairs][heads - 1] */
static void (*const few_items[2][4])(const attention_item *) = {
    {few_item_1_0, few_item_2_0, few_item_3_0, few_item_4_0}, {few_item_1_1, few_item_2_1, few_item_3_1, few_item_4_1}};

/* ---------- Items of rows of more than 16 heads (R1's groups of 32, or 16 on many threads) ---------- */

/* Scores and weighted latents as vectors over the group's heads (V = 2 vectors: 32 heads, or V = 1:
 * 16; those past nh zero): a tile's FMAs take a vector of 16 heads' queries (or weights) and one
 * broadcast element of a cache row, so no tile ends in a transpose-add tree and the softmax is vertical, lane h for head h.
 * Tiles of WIDE_NT positions x 32 heads (scores) and WIDE_NC columns x 32 heads (weighted latents)
 * keep 2 WIDE_NT or 2 WIDE_NC accumulators. The queries ([R + rope][32]) are re-read once per
 * WIDE_NT positions, a block's rows once per block and pass; the 4 x 4 tiles of the loop above
 * re-read the group's queries for every 4 positions and the block's rows for every 4 heads, which
 * on a core with full-width FMAs (Zen 5) held it to ~70% of the FMA roof. Tiles of 8 and 14
 * measured the same as 12 (bench_attention, interleaved runs). Nothing here depends on the FMA
 * width: a core with half-width FMAs (Zen 4) does the same FMAs with less L2 traffic and no trees. */
#define WIDE_NT 12
#define WIDE_NC 12

/* r[i] = column i of the 16 x 16 block whose rows were r[0..16). */
INLINE void transpose16(__m512 r[16])
{
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < 16; g += 4) {
        __m512d a = _mm512_castps_pd(t[g]), b = _mm512_castps_pd(t[g + 1]);
        __m512d c = _mm512_castps_pd(t[g + 2]), d = _mm512_castps_pd(t[g + 3]);
        r[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        t[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
        t[8 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
        r[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xdd);
    }
}

/* dst[j * ds + i] = src[i * ss + j] for i < rows, j < cols (both <= 16), and zeros in lanes i >= rows
 * of those cols rows. */
static void transpose_block(const float *src, size_t ss, int rows, int cols, float *dst, size_t ds)
{
    __m512 r[16];
    if (rows == 16 && cols == 16) { /* R1's every block: unmasked, r in registers */
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * ss);
        transpose16(r);
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) _mm512_storeu_ps(dst + j * ds, r[j]);
        return;
    }
    __mmask16 k = lanes(cols);
    for (int i = 0; i < 16; i++) r[i] = i < rows ? _mm512_maskz_loadu_ps(k, src + i * ss) : _mm512_setzero_ps();
    transpose16(r);
    for (int j = 0; j < cols; j++) _mm512_storeu_ps(dst + j * ds, r[j]);
}

/* qt[k][h] = q[h][k] (k < n, h < nh; zeros for h >= nh up to 32). */
static void wide_queries(const float *q, int nh, int n, float *qt)
{
    for (int h0 = 0; h0 < 32; h0 += 16)
        for (int k0 = 0; k0 < n; k0 += 16)
            transpose_block(q + (size_t)h0 * n + k0, (size_t)n, nh - h0 < 16 ? (nh - h0 > 0 ? nh - h0 : 0) : 16,
                            n - k0 < 16 ? n - k0 : 16, qt + (size_t)k0 * 32 + h0, 32);
}

/* Columns [c0, c1) of the weighted latents at ([R][16 V]) into the item's partial sums acc, laid out
 * the same (the lane layout: attention_merge_lanes_avx512 reads them). */
static void wide_columns_out(const float *at, int V, int c0, int c1, float *acc)
{
    memcpy(acc + (size_t)c0 * 16 * V, at + (size_t)c0 * 16 * V, (size_t)(c1 - c0) * 16 * V * sizeof(float));
}

/* What a score tile does beside its FMAs: byte ranges of the next block's latents and rope keys to
 * prefetch, and (BF16) the next tile's rows to widen: n_lat and n_kr values from lat_src and kr_src
 * into lat_dst and kr_dst. */
typedef struct {
    const char *lat, *lat_end, *kr, *kr_end;
    const uint16_t *lat_src, *kr_src;
    float *lat_dst, *kr_dst;
    int n_lat, n_kr;
} wide_pf;

/* a[t][v] += qt[k][16 v ..] * x[t][k] over k < len, v < V (x rows xs apart); W: wn BF16 values from
 * ws widened into wd, 16 per step; the lines [pf, pf_end) of the next block prefetched into L2, one
 * per step: spread out, because a burst of a tile's lines (~400) waits on the miss buffers, which
 * cost ~20% where the rows come from DRAM. Lane h of a[t][0] is the same chain of FMAs for V = 1
 * and 2: a head's score does not depend on its group. */
INLINE void wide_dot(int NT, int V, int W, const float *qt, const float *x, int xs, int len, const char *pf,
                     const char *pf_end, const uint16_t *ws, float *wd, int wn, __m512 a[12][2])
{
#pragma GCC unroll 2
    for (int k = 0; k < len; k++) {
        if (pf < pf_end) {
            __builtin_prefetch(pf, 0, 1);
            pf += 64;
        }
        if (W && wn > 0) {
            int d = widen16(ws, wd, wn);
            ws += d, wd += d, wn -= d;
        }
        __m512 q0 = _mm512_loadu_ps(qt + (size_t)k * 32), q1 = V > 1 ? _mm512_loadu_ps(qt + (size_t)k * 32 + 16) : q0;
#pragma GCC unroll 12
        for (int t = 0; t < NT; t++) {
            __m512 b = _mm512_set1_ps(x[(size_t)t * xs + k]);
            a[t][0] = _mm512_fmadd_ps(q0, b, a[t][0]);
            if (V > 1) a[t][1] = _mm512_fmadd_ps(q1, b, a[t][1]);
        }
    }
}

/* s[t][0..16 V) = scale * (qt . row t) for NT positions; pf: this tile's share of the next block. */
INLINE void wide_score_tile(int NT, int V, int W, const float *qt, const float *lat, const float *kr, int R, int rope,
                            float scale, float *s, const wide_pf *pf)
{
    __m512 a[12][2];
#pragma GCC unroll 12
    for (int t = 0; t < NT; t++) a[t][0] = a[t][1] = _mm512_setzero_ps();
    wide_dot(NT, V, W, qt, lat, R, R, pf->lat, pf->lat_end, pf->lat_src, pf->lat_dst, pf->n_lat, a);
    wide_dot(NT, V, W, qt + (size_t)R * 32, kr, rope, rope, pf->kr, pf->kr_end, pf->kr_src, pf->kr_dst, pf->n_kr, a);
    __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 12
    for (int t = 0; t < NT; t++) {
        _mm512_storeu_ps(s + t * 32, _mm512_mul_ps(a[t][0], sc));
        if (V > 1) _mm512_storeu_ps(s + t * 32 + 16, _mm512_mul_ps(a[t][1], sc));
    }
}

/* at[c0 + c][..] = at * alpha + sum_t s[t][..] lat[t][c0 + c] for NC columns (at's rows 16 V
 * floats, the lane layout); first: an item's first block, at not yet written (no memset of it per
 * item: ~2% of a 512-position item). */
INLINE void wide_weighted_tile(int NC, int V, float *at, const __m512 alpha[2], const float *s, const float *lat, int R,
                               int nt, int c0, int first)
{
    __m512 a[12][2];
    float *p = at + (size_t)c0 * 16 * V;
#pragma GCC unroll 12
    for (int c = 0; c < NC; c++) {
        a[c][0] = first ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_loadu_ps(p + c * 16 * V), alpha[0]);
        a[c][1] = first || V < 2 ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_loadu_ps(p + c * 16 * V + 16), alpha[1]);
    }
    const float *x = lat + c0;
#pragma GCC unroll 2
    for (int t = 0; t < nt; t++, x += R) {
        __m512 w0 = _mm512_loadu_ps(s + t * 32), w1 = V > 1 ? _mm512_loadu_ps(s + t * 32 + 16) : w0;
#pragma GCC unroll 12
        for (int c = 0; c < NC; c++) {
            __m512 b = _mm512_set1_ps(x[c]);
            a[c][0] = _mm512_fmadd_ps(w0, b, a[c][0]);
            if (V > 1) a[c][1] = _mm512_fmadd_ps(w1, b, a[c][1]);
        }
    }
#pragma GCC unroll 12
    for (int c = 0; c < NC; c++) {
        _mm512_storeu_ps(p + c * 16 * V, a[c][0]);
        if (V > 1) _mm512_storeu_ps(p + c * 16 * V + 16, a[c][1]);
    }
}

typedef void (*wide_score_fn)(const float *qt, const float *lat, const float *kr, int R, int rope, float scale, float *s,
                              const wide_pf *pf);
typedef void (*wide_weighted_fn)(float *at, const __m512 alpha[2], const float *s, const float *lat, int R, int nt, int c0,
                                 int first);
#define WIDE_VARIANT(n, v)                                                                                        \
    static void wide_score_##n##_##v(const float *qt, const float *lat, const float *kr, int R, int rope,          \
                                     float scale, float *s, const wide_pf *pf)                                    \
    {                                                                                                             \
        wide_score_tile(n, v, 0, qt, lat, kr, R, rope, scale, s, pf);                                             \
    }                                                                                                             \
    static void wide_score_bf16_##n##_##v(const float *qt, const float *lat, const float *kr, int R, int rope,     \
                                          float scale, float *s, const wide_pf *pf)                               \
    {                                                                                                             \
        wide_score_tile(n, v, 1, qt, lat, kr, R, rope, scale, s, pf);                                             \
    }                                                                                                             \
    static void wide_weighted_##n##_##v(float *at, const __m512 alpha[2], const float *s, const float *lat, int R, \
                                        int nt, int c0, int first)                                                \
    {                                                                                                             \
        wide_weighted_tile(n, v, at, alpha, s, lat, R, nt, c0, first);                                            \
    }
#define WIDE_VARIANTS(v)                                                                                          \
    WIDE_VARIANT(1, v) WIDE_VARIANT(2, v) WIDE_VARIANT(3, v) WIDE_VARIANT(4, v) WIDE_VARIANT(5, v)                \
    WIDE_VARIANT(6, v) WIDE_VARIANT(7, v) WIDE_VARIANT(8, v) WIDE_VARIANT(9, v) WIDE_VARIANT(10, v)               \
    WIDE_VARIANT(11, v) WIDE_VARIANT(12, v)
WIDE_VARIANTS(1) WIDE_VARIANTS(2)
#define WIDE_ROW(name, v)                                                                                         \
    {name##_1_##v, name##_2_##v, name##_3_##v, name##_4_##v,  name##_5_##v,  name##_6_##v,                        \
     name##_7_##v, name##_8_##v, name##_9_##v, name##_10_##v, name##_11_##v, name##_12_##v}
/* [BF16 (widening the next tile's rows)][vectors - 1][positions or columns - 1] */
static const wide_score_fn wide_scores[2][2][12] = {{WIDE_ROW(wide_score, 1), WIDE_ROW(wide_score, 2)},
                                                    {WIDE_ROW(wide_score_bf16, 1), WIDE_ROW(wide_score_bf16, 2)}};
static const wide_weighted_fn wide_weighteds[2][12] = {WIDE_ROW(wide_weighted, 1), WIDE_ROW(wide_weighted, 2)};
_Static_assert(WIDE_NT == 12 && WIDE_NC == 12, "the tables and accumulator arrays hold tiles of up to 12");

/* The block's weighted latents for columns [c0, c1), in tiles of WIDE_NC: the same tiles, so the
 * same bits, whether one thread takes all the columns or helpers take slices of them. */
static void wide_weigh_columns(int V, float *at, const __m512 alpha[2], const float *s, const float *lat, int R, int nt,
                               int c0, int c1, int first)
{
    for (; c0 < c1; c0 += WIDE_NC)
        wide_weighteds[V - 1][(c1 - c0 < WIDE_NC ? c1 - c0 : WIDE_NC) - 1](at, alpha, s, lat, R, nt, c0, first);
}

/* Spins until a helper has set *flag (its piece is written); the wait counted in hp when timed. */
static void wait_for_helper(attention_help *hp, atomic_uchar *flag)
{
    long long t0 = hp->timed ? attention_clock_ns() : 0;
    for (int spins = 0; !atomic_load_explicit(flag, memory_order_acquire); spins++)
        if (spins >= 4096) sched_yield(); /* the helper may need this core */
        else _mm_pause();
    if (hp->timed) atomic_fetch_add_explicit(&hp->owner_wait_ns, attention_clock_ns() - t0, memory_order_relaxed);
}

/* A helper's piece of hp is written: counted, and the first one's time kept, when timed. */
static void helped_piece(attention_help *hp)
{
    long long none = 0;
    if (!hp->timed) return;
    atomic_fetch_add_explicit(&hp->helped, 1, memory_order_relaxed);
    if (!atomic_load_explicit(&hp->first_help_ns, memory_order_relaxed))
        atomic_compare_exchange_strong(&hp->first_help_ns, &none, attention_clock_ns());
}

/* The block's softmax, vertical (lane h: head h): m to the block's maximum, alpha = exp(m_old - m),
 * s = exp(s - m), l = l alpha + sum_t s. */
static void wide_softmax(float *s, int nt, int V, __m512 m[2], __m512 l[2], __m512 alpha[2])
{
    __m512 ninf = _mm512_set1_ps(-INFINITY);
    alpha[1] = _mm512_setzero_ps(); /* V = 1: never read */
    for (int v = 0; v < V; v++) {
        __m512 mx[2] = {m[v], ninf};
        for (int t = 0; t < nt; t++) mx[t & 1] = _mm512_max_ps(mx[t & 1], _mm512_loadu_ps(s + t * 32 + 16 * v));
        __m512 mnew = _mm512_max_ps(mx[0], mx[1]), sum[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
        alpha[v] = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(m[v], ninf, _CMP_NEQ_OQ), exp_ps(_mm512_sub_ps(m[v], mnew)));
        for (int t = 0; t < nt; t++) {
            float *p = s + t * 32 + 16 * v;
            __m512 e = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(p), mnew));
            _mm512_storeu_ps(p, e);
            sum[t & 1] = _mm512_add_ps(sum[t & 1], e);
        }
        l[v] = _mm512_fmadd_ps(l[v], alpha[v], _mm512_add_ps(sum[0], sum[1]));
        m[v] = mnew;
    }
}

/* Tile `tile` of a helped item: the owner's when it is still at the front of the unclaimed tiles
 * (claimed here), else a helper's, already taken from the back. */
static int wide_claim_front(attention_help *hp, int tile)
{
    unsigned long long v = atomic_load_explicit(&hp->claim, memory_order_relaxed);
    for (;;) {
        if ((unsigned)(v >> 32) <= (unsigned)tile) return 0;
        if (atomic_compare_exchange_weak_explicit(&hp->claim, &v, v + 1, memory_order_relaxed, memory_order_relaxed))
            return 1;
    }
}

/* The owner's part of block p's open slices (lat: its rows): those still at the front, each copied
 * out to the partial sums when p is the item's last block, then the wait for those helpers took.
 * Copying the last block's columns out as they go, whoever takes them, spares the owner gathering
 * the weighted latents helpers wrote: that took 12-32 us on the Xeon for the item the call waited
 * for (8 us unhelped), R1 at 1k-2k on 16 threads. */
static void wide_finish_slices(const attention_item *it, attention_help *hp, float *at, int p, const float *lat)
{
    int R = it->kv->R, V = it->nh > 16 ? 2 : 1, slices = (R + ATTN_HELP_SLICE - 1) / ATTN_HELP_SLICE;
    int t = it->t0 + p * ATTN_BLOCK, nt = it->t1 - t < ATTN_BLOCK ? it->t1 - t : ATTN_BLOCK;
    const float *s = hp->scores + (size_t)p * ATTN_BLOCK * 32;
    __m512 alpha[2] = {_mm512_loadu_ps(hp->alpha[p]), _mm512_loadu_ps(hp->alpha[p] + 16)};
    int k = 0;
    for (unsigned long long v = atomic_load_explicit(&hp->slices, memory_order_relaxed); k < slices;) {
        if ((int)(v >> 16 & 0xFFFF) <= k) break;
        if (!atomic_compare_exchange_weak_explicit(&hp->slices, &v, v + 1, memory_order_relaxed, memory_order_relaxed))
            continue;
        int c1 = (k + 1) * ATTN_HELP_SLICE < R ? (k + 1) * ATTN_HELP_SLICE : R;
        wide_weigh_columns(V, at, alpha, s, lat, R, nt, k * ATTN_HELP_SLICE, c1, p == 0);
        if (t + nt == it->t1) wide_columns_out(at, V, k * ATTN_HELP_SLICE, c1, it->acc);
        k++;
    }
    for (; k < slices; k++) wait_for_helper(hp, &hp->slice_done[k]);
}

/* Block b's slices of columns opened to helpers (its rescaling alpha), none claimed yet. */
static void wide_open_slices(attention_help *hp, int b, int R, const __m512 alpha[2])
{
    int slices = (R + ATTN_HELP_SLICE - 1) / ATTN_HELP_SLICE;
    _mm512_storeu_ps(hp->alpha[b], alpha[0]);
    _mm512_storeu_ps(hp->alpha[b] + 16, alpha[1]);
    for (int k = 0; k < slices; k++) atomic_store_explicit(&hp->slice_done[k], 0, memory_order_relaxed);
    atomic_store_explicit(&hp->slices, (unsigned long long)b << 32 | (unsigned long long)slices << 16,
                          memory_order_release);
}

/* Rows a first block's tile prefetches: as many as one line per step of its dot products reaches
 * (R steps for the latents, rope for the rope keys), at most 16, so that 6 tiles reach 12 + 6 x 16 =
 * 108 positions (BF16's rows, half as long, reaching twice as far measured 0.99x on 16 threads). */
static int first_block_rows_per_tile(const attention_kv *kv)
{
    int es = (int)dtype_size(kv->dtype), lines = kv->R * es / 64, kr_lines = kv->rope * es / 64;
    int reach = kv->R / (lines > 0 ? lines : 1), kr_reach = kv->rope / (kr_lines > 0 ? kr_lines : 1);
    reach = reach < kr_reach ? reach : kr_reach;
    return reach < 16 ? reach : 16;
}

/* Rows [u, u + n) of the BF16 block of nt positions at t, for a score tile to widen into rows as it
 * goes (the places widen_block_rows puts them in); returns u + n. */
static int widen_during(const attention_kv *kv, int t, int nt, int u, int n, float *rows, wide_pf *pf)
{
    pf->lat_src = (const uint16_t *)kv->latent + (size_t)(t + u) * kv->R, pf->lat_dst = rows + (size_t)u * kv->R;
    pf->kr_src = (const uint16_t *)kv->krope + (size_t)(t + u) * kv->rope;
    pf->kr_dst = rows + (size_t)nt * kv->R + (size_t)u * kv->rope;
    pf->n_lat = n * kv->R, pf->n_kr = n * kv->rope;
    return u + n;
}

/* One block: scores (prefetching the next block's rows into L2 as they go), softmax, weighted; returns
 * where its F32 rows are. A BF16 block is widened into rows a score tile's rows at a time: each tile
 * widens the next one's, a vector per step beside its FMAs, where it would then read them from L1.
 * Widening the whole block first (150 KB at R1's widths) ran at L2's pace (-2 to -4 points,
 * bench_attention --shape R1); widening each tile's rows just before it, a burst of ~650 line fills
 * (its BF16 rows, conv's lines) that the FMAs could not hide, cost 4% against this (Emerald Rapids,
 * 1 thread, 1k-16k). The block's first tile is still widened at once: the block before it is in
 * the same rows until its weighted pass. A helped item's scores go to its board, and the tiles that helpers
 * took are waited for (their rows, which the weighted pass reads, asked for meanwhile). Its
 * weighted latents go in slices that helpers may take, a block late: the previous block's (prev:
 * its rows) are finished after this block's scores, which do not need them, so that the owner
 * scores while helpers finish slices, rather than waiting for them. Of an item of several groups,
 * the first widens the block (the others find it widened) and each asks for its share of the next
 * block's rows: the first asking for all of them ran 1.0-2.6% slower (R1, 1 thread, 4k-32k). */
static const float *wide_block(const attention_item *it, const float *qt, float *at, int t, int nt, __m512 m[2],
                               __m512 l[2], float *rows, const float *prev, int group, int groups)
{
    int follower = group > 0;
    const attention_kv *kv = it->kv;
    int R = kv->R, rope = kv->rope, bf16 = kv->dtype != DTYPE_F32, V = it->nh > 16 ? 2 : 1;
    float own[ATTN_BLOCK * 32] __attribute__((aligned(64)));
    attention_help *hp = it->help;
    float *s = hp ? hp->scores + (size_t)(t - it->t0) * 32 : own;
    int b = (t - it->t0) / ATTN_BLOCK, tile0 = b * ATTN_HELP_TILES_PER_BLOCK;
    unsigned helped = 0; /* bit u / WIDE_NT: a helper's tile */
    const float *lat, *kr;
    block_rows(kv, t, nt, rows, 0, &lat, &kr);
    /* A helped row's items (one or two per thread) start at once, their first blocks with nothing
     * prefetched, so a first block's tiles prefetch the rows after their own, on into the next block;
     * later blocks prefetch the next block's rows. Several items per thread need no such thing: a
     * thread's previous item prefetched the next one's first block (1 thread: 0.994x). */
    int first = hp && t == it->t0, per_tile = first ? first_block_rows_per_tile(kv) : WIDE_NT;
    attention_ahead ahead = attention_block_after(kv, t, it->n, first ? WIDE_NT : ATTN_BLOCK);
    if (groups > 1) { /* each group asks for its share of the next block's rows */
        int r0 = group * ATTN_BLOCK / groups, share = (group + 1) * ATTN_BLOCK / groups - r0;
        int tiles = (nt + WIDE_NT - 1) / WIDE_NT;
        ahead.rows = ahead.rows - r0 < share ? ahead.rows - r0 : share;
        if (ahead.rows > 0) ahead.lat += (size_t)r0 * ahead.lat_row, ahead.kr += (size_t)r0 * ahead.kr_row;
        else ahead.rows = 0;
        per_tile = (share + tiles - 1) / tiles;
    }
    int widened = follower ? nt : 0; /* BF16: rows [0, widened) of the block are in rows */
    for (int u = 0; u < nt; u += WIDE_NT) {
        int n = nt - u < WIDE_NT ? nt - u : WIDE_NT, k = u / WIDE_NT;
        int pa = k * per_tile < ahead.rows ? k * per_tile : ahead.rows;
        if (bf16 && widened < u + n) {
            widen_block_rows(kv, t, nt, widened, u + n - widened, rows);
            widened = u + n;
        }
        if (hp && !wide_claim_front(hp, tile0 + k)) {
            helped |= 1u << k;
            if (!bf16) attention_prefetch(&(attention_ahead){.lat = (const char *)(lat + (size_t)u * R),
                                                            .lat_row = (size_t)R * 4, .rows = n}, 0, n);
            continue;
        }
        int pb = first || groups > 1 ? (k + 1) * per_tile : u + n;
        pb = pb < ahead.rows ? pb : ahead.rows;
        wide_pf pf = {0};
        if (pa < pb)
            pf.lat = ahead.lat + pa * ahead.lat_row, pf.lat_end = ahead.lat + pb * ahead.lat_row,
            pf.kr = ahead.kr + pa * ahead.kr_row, pf.kr_end = ahead.kr + pb * ahead.kr_row;
        if (bf16 && !follower && u + n < nt) /* the next tile's rows */
            widened = widen_during(kv, t, nt, u + n, nt - u - n < WIDE_NT ? nt - u - n : WIDE_NT, rows, &pf);
        wide_scores[bf16 && !follower][V - 1][n - 1](qt, lat + (size_t)u * R, kr + (size_t)u * rope, R, rope,
                                                     kv->scale, s + u * 32, &pf);
    }
    for (int k = 0; helped >> k; k++)
        if (helped >> k & 1) wait_for_helper(hp, &hp->done[tile0 + k]);
    __m512 alpha[2];
    wide_softmax(s, nt, V, m, l, alpha);
    if (!hp) {
        wide_weigh_columns(V, at, alpha, s, lat, R, nt, 0, R, t == it->t0);
        return lat;
    }
    if (b > 0) wide_finish_slices(it, hp, at, b - 1, prev);
    wide_open_slices(hp, b, R, alpha);
    if (t + nt == it->t1) wide_finish_slices(it, hp, at, b, lat);
    return lat;
}

/* conv: the widened block, then each group's queries [R + rope][32] and weighted latents [R][16 V],
 * copied out as they are: the lane layout. Putting them out as [nh][R] took 64 16 x 16 transposes
 * per item, 2.3% of R1's 256-position item (Zen 5); the merge, which reads every chunk's, transposes
 * once per head and column instead, a quarter of that at 4 chunks. Accumulating them in the partial
 * sums themselves, not in conv, lost 1.5-3.5% on 2 threads (lines of another core's, or cold, where
 * conv's are this core's). A helped item's blocks alternate between conv's and the board's rows
 * (BF16): the previous block's rows are read by its slices while this block's are widened. An item
 * of several groups runs each block for all of them before the next. */
static void wide_item(const attention_item *it)
{
    const attention_kv *kv = it->kv;
    int R = kv->R, rope = kv->rope, nh = it->nh, G = it->groups, V = nh > 16 ? 2 : 1;
    size_t gh = ATTN_GROUP_HEADS, group_floats = 2 * gh * (size_t)(R + rope); /* conv's share of a group */
    float *qt[ATTN_ITEM_GROUPS], *at[ATTN_ITEM_GROUPS];
    float *rows[2] = {it->conv, it->help ? it->help->rows : it->conv};
    __m512 m[ATTN_ITEM_GROUPS][2], l[ATTN_ITEM_GROUPS][2];
    for (int g = 0; g < G; g++) {
        qt[g] = it->conv + (size_t)ATTN_BLOCK * (R + rope) + g * group_floats, at[g] = qt[g] + gh * (R + rope);
        wide_queries(it->q_lat + g * gh * R, nh, R, qt[g]);
        wide_queries(it->q_rope + g * gh * rope, nh, rope, qt[g] + (size_t)32 * R);
        m[g][0] = m[g][1] = _mm512_set1_ps(-INFINITY);
        l[g][0] = l[g][1] = _mm512_setzero_ps();
    }
    if (it->help) {
        it->help->qt = qt[0], it->help->at = at[0];
        atomic_store_explicit(&it->help->stage, 1, memory_order_release);
    }
    const float *prev = NULL;
    for (int t = it->t0, b = 0; t < it->t1; t += ATTN_BLOCK, b++) {
        int nt = it->t1 - t < ATTN_BLOCK ? it->t1 - t : ATTN_BLOCK;
        for (int g = 0; g < G; g++) prev = wide_block(it, qt[g], at[g], t, nt, m[g], l[g], rows[b & 1], prev, g, G);
    }
    if (it->help) atomic_store_explicit(&it->help->stage, 2, memory_order_relaxed);
    for (int g = 0; g < G; g++) {
        if (!it->help) wide_columns_out(at[g], V, 0, R, it->acc + g * gh * R);
        float mv[32], lv[32];
        _mm512_storeu_ps(mv, m[g][0]);
        _mm512_storeu_ps(mv + 16, m[g][1]);
        _mm512_storeu_ps(lv, l[g][0]);
        _mm512_storeu_ps(lv + 16, l[g][1]);
        for (int h = 0; h < nh; h++) {
            it->m[g * gh + h] = mv[h];
            it->l[g * gh + h] = lv[h];
        }
    }
}

/* The open block's slice of the weighted latents at the back, if any: returns whether it took one. A
 * BF16 block's columns of the slice are widened into conv, in their places of rows R floats long. */
static int help_slice(const attention_item *it, attention_help *hp, float *conv)
{
    const attention_kv *kv = it->kv;
    int R = kv->R, V = it->nh > 16 ? 2 : 1;
    unsigned long long v = atomic_load_explicit(&hp->slices, memory_order_acquire);
    for (;;) {
        if ((v >> 16 & 0xFFFF) <= (v & 0xFFFF)) return 0;
        if (atomic_compare_exchange_weak_explicit(&hp->slices, &v, v - (1ull << 16), memory_order_acquire,
                                                  memory_order_acquire))
            break;
    }
    int b = (int)(v >> 32), k = (int)(v >> 16 & 0xFFFF) - 1, t = it->t0 + b * ATTN_BLOCK;
    int nt = it->t1 - t < ATTN_BLOCK ? it->t1 - t : ATTN_BLOCK, c1 = (k + 1) * ATTN_HELP_SLICE < R ? (k + 1) * ATTN_HELP_SLICE : R;
    __m512 alpha[2] = {_mm512_loadu_ps(hp->alpha[b]), _mm512_loadu_ps(hp->alpha[b] + 16)};
    const float *lat = (const float *)kv->latent + (size_t)t * R;
    if (kv->dtype != DTYPE_F32) {
        for (int r = 0; r < nt; r++)
            attn_widen_bf16((const uint16_t *)kv->latent + (size_t)(t + r) * R + k * ATTN_HELP_SLICE, c1 - k * ATTN_HELP_SLICE,
                            conv + (size_t)r * R + k * ATTN_HELP_SLICE);
        lat = conv;
    }
    wide_weigh_columns(V, hp->at, alpha, hp->scores + (size_t)b * ATTN_BLOCK * 32, lat, R, nt, k * ATTN_HELP_SLICE, c1, b == 0);
    if (t + nt == it->t1) wide_columns_out(hp->at, V, k * ATTN_HELP_SLICE, c1, it->acc);
    atomic_store_explicit(&hp->slice_done[k], 1, memory_order_release);
    helped_piece(hp);
    return 1;
}

int attention_help_avx512(const attention_item *it, attention_help *hp, float *conv)
{
    const attention_kv *kv = it->kv;
    int R = kv->R, rope = kv->rope, V = it->nh > 16 ? 2 : 1, done = 0;
    wide_pf none = {0};
    if (atomic_load_explicit(&hp->stage, memory_order_acquire) != 1) return 0;
    for (;;) {
        if (help_slice(it, hp, conv)) { /* the owner waits for these first */
            done++;
            continue;
        }
        unsigned long long v = atomic_load_explicit(&hp->claim, memory_order_relaxed);
        unsigned front = (unsigned)v, back = (unsigned)(v >> 32);
        if (back <= front) return done;
        if (!atomic_compare_exchange_weak_explicit(&hp->claim, &v, v - (1ull << 32), memory_order_relaxed,
                                                   memory_order_relaxed))
            continue;
        int tile = (int)back - 1, t = it->t0 + tile / ATTN_HELP_TILES_PER_BLOCK * ATTN_BLOCK;
        int u = tile % ATTN_HELP_TILES_PER_BLOCK * WIDE_NT, nt = it->t1 - t < ATTN_BLOCK ? it->t1 - t : ATTN_BLOCK;
        int n = nt - u < WIDE_NT ? nt - u : WIDE_NT;
        const float *lat, *kr;
        block_rows(kv, t, nt, conv, 0, &lat, &kr);
        if (kv->dtype != DTYPE_F32) widen_block_rows(kv, t, nt, u, n, conv);
        wide_scores[0][V - 1][n - 1](hp->qt, lat + (size_t)u * R, kr + (size_t)u * rope, R, rope, kv->scale,
                                     hp->scores + (size_t)(t - it->t0 + u) * 32, &none);
        atomic_store_explicit(&hp->done[tile], 1, memory_order_release);
        helped_piece(hp);
        done++;
    }
}

void attention_merge_lanes_avx512(const float *acc, size_t chunk_stride, int nc, int S, const float *w, const float *inv,
                                  int nh, int R, int k0, int k1, float *out)
{
    for (int k = k0; k < k1; k += 16) {
        int cols = k1 - k < 16 ? k1 - k : 16;
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) r[i] = _mm512_setzero_ps();
        for (int c = 0; c < nc; c++) {
            __m512 wc = _mm512_loadu_ps(w + 16 * c);
            const float *a = acc + c * chunk_stride + (size_t)k * S;
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                if (i < cols) r[i] = _mm512_add_ps(r[i], _mm512_mul_ps(wc, _mm512_loadu_ps(a + (size_t)i * S)));
        }
        transpose16(r); /* then r[h] is head h's: times its inv, the same product as before it */
#pragma GCC unroll 16
        for (int h = 0; h < 16; h++)
            if (h < nh) _mm512_mask_storeu_ps(out + (size_t)h * R + k, lanes(cols), _mm512_mul_ps(r[h], _mm512_set1_ps(inv[h])));
    }
}

_Static_assert(ATTN_GROUP_HEADS == 32, "wide_item's tiles hold a group in two vectors");
_Static_assert(WIDE_NT == ATTN_HELP_TILE && ATTN_HELP_SLICE % WIDE_NC == 0, "a helped item's pieces are whole tiles");

/* By the row's heads first: a row that attention_row may cut into groups of 16 or 32 runs every
 * group in wide_item (its last group may be short, and which heads share a group follows the thread
 * count); the others are one group. */
void attention_item_avx512(const attention_item *it)
{
    const attention_kv *kv = it->kv;
    if (kv->heads > ATTN_GROUP_HEADS / 2)
        wide_item(it);
    else if (it->nh <= 4 && kv->dtype == DTYPE_F32)
        few_items[0][it->nh - 1](it);
    else if (it->nh <= 4 && kv->R % 32 == 0 && kv->rope % 32 == 0)
        few_items[1][it->nh - 1](it);
    else
        attention_item_avx512_rows(it);
}
