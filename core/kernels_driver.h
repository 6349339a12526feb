/* The ISA-independent half of a SIMD kernel path: the row, batch and column-panel loops of
 * matvec_range, the column tiling of matvec_t_range, and their per-(dtype, tile shape) function
 * tables.
 *
 * Why a header included by each ISA file, not a .c of its own: this code must be compiled once per
 * ISA, with that file's -m flags, so that the file's always_inline tiles inline into it (each
 * table entry is one dtype and tile shape, specialised at compile time). A separate .c would have
 * neither the vector ISA nor the inner loops to inline. So kernels_avx2.c and kernels_avx512.c
 * each include it last, after defining:
 *   KERNEL_ISA              the name suffix: the file then exports matvec_range_<KERNEL_ISA> and
 *                           matvec_t_range_<KERNEL_ISA> (declared in kernels_internal.h)
 *   VW, TOT_LANES           floats per chunk and per running total of one (weight row, x row) pair
 *   STREAM_ROWS(nb)         weight rows per streaming tile for a batch of nb (1..KERNEL_STREAM_MAX)
 *   GEMM_ROWS, GEMM_COLS    weight rows and x rows of the GEMM tile
 *   tile_stream(dt, NR, NB, w, r, x, ldx, st, y, ldy)
 *                           whole rows r..r+NR of W . NB x rows, weights decoded in registers
 *   decode_rows(dt, w, r, nr, c_beg, c_end, buf, ldb)
 *                           rows r..r+nr, columns [c_beg, c_end) as floats into buf
 *   tile_buf(dt, NR, NB, w, r, buf, ldb, c_beg, c_end, x, ldx, st, y, ldy)
 *                           the same product from decoded rows, over the column blocks
 *                           [c_beg, c_end), resuming the running totals st (zeroed when c_beg == 0)
 *                           and writing y[b * ldy + i] when c_end == cols
 *   F8_LONG_COLS, F8_NB2_LONG_ROWS()  rows of >= F8_LONG_COLS columns against two x rows run in
 *                           tiles of 8 weight rows when this evaluates to 8 (0: F8_STREAM_ROWS)
 *   F8_GROUP, F8_STREAM_ROWS(nb), F8_SHORT_ROWS, F8_GEMM_ROWS, F8_GEMM_COLS, f8_abs_max,
 *   f8_prepare_x, tile_stream_f8, tile_buf_f8, and for decode_rows_f8 here: F8_VEC, F8_VEC_LANES,
 *   F8_DECODE_GROUP(src, F8_VEC[4]), fp8_partial_to_f32bits(src, n, F8_VEC[4]), F8_STORE
 *                           the FP8 matvec_range: weights as fp32 bit patterns against x prepared
 *                           once per call (see "FP8" below); the tiles above serve BF16 and F32
 *   T_TILE_VECTORS(nb), t_tile(dt, NB, TV, w, r0, r1, c0, x, ldx, y, ldy)
 *                           y[.][c0 .. c0 + 16*TV) of the transposed product over rows r0..r1
 * Nothing here changes the reduction of an output element: that is all in the tiles, which issue
 * the same operations per (weight row, x row) pair whatever NR, NB or the column panels. */
#if !defined(KERNEL_ISA) || !defined(STREAM_ROWS) || !defined(GEMM_ROWS) || !defined(GEMM_COLS) ||      \
    !defined(T_TILE_VECTORS) || !defined(TOT_LANES) || !defined(VW) || !defined(F8_GROUP) ||            \
    !defined(F8_GEMM_ROWS) || !defined(F8_GEMM_COLS) || !defined(F8_SHORT_ROWS) || !defined(F8_VEC) ||  \
    !defined(F8_DECODE_GROUP) || !defined(F8_STORE) || !defined(F8_VEC_LANES) || !defined(F8_LONG_COLS)
#error "kernels_driver.h is included last by an ISA file, after the macros listed above"
#endif

#define KERNEL_ISA_PASTE(name, isa) name##_##isa
#define KERNEL_ISA_NAME(name, isa) KERNEL_ISA_PASTE(name, isa)

/* FP8 rows r..r+nr, columns [c_beg, c_end) (whole blocks but the matrix's last) into
 * buf[i * ldb + (c - c_beg)] as fp32 * 2^-120 in the conversion's order, last groups zero-padded. */
INLINE void decode_rows_f8(const matrix *w, int r, int nr, int c_beg, int c_end, float *buf, int ldb)
{
    for (int i = 0; i < nr; i++) {
        const uint8_t *row = kernel_weight_row(w, r + i);
        float *o = buf + (size_t)i * ldb - c_beg;
        for (int c0 = c_beg; c0 < c_end; c0 += KERNEL_BLOCK) {
            int ce = c_end - c0 < KERNEL_BLOCK ? c_end : c0 + KERNEL_BLOCK;
            for (int c = c0; c < ce; c += F8_GROUP) {
                F8_VEC wv[4];
                if (c + F8_GROUP <= ce) F8_DECODE_GROUP(row + c, wv);
                else fp8_partial_to_f32bits(row + c, ce - c, wv);
                for (int t = 0; t < 4; t++) F8_STORE(o + c + F8_VEC_LANES * t, wv[t]);
            }
        }
    }
}

/* ---- matvec_range ---- */

/* Batches of up to KERNEL_STREAM_MAX x rows (decode, speculative verify): the weights stream from
 * memory once for all of them, STREAM_ROWS(NB) rows side by side, decoded in registers. Small
 * matrices (96x256 experts, 256x96 downs) make hundreds of these calls per pass, so per-call work
 * is kept out of the row loop. */
INLINE void stream_rows(dtype_t dt, int NB, const matrix *w, int r0, int r1, const float *x, int ldx, float *y,
                        int ldy)
{
    const int NR = STREAM_ROWS(NB);
    const size_t row_bytes = (size_t)w->cols * kernel_dtype_bytes(dt);
    _Alignas(64) float st[4 * KERNEL_STREAM_MAX * TOT_LANES];
    prefetch_range_start((const char *)w->data + (size_t)r0 * row_bytes, (size_t)(r1 - r0) * row_bytes);
    int r = r0;
    for (; r + NR <= r1; r += NR) tile_stream(dt, NR, NB, w, r, x, ldx, st, y + (r - r0), ldy);
    for (; r < r1; r++) tile_stream(dt, 1, NB, w, r, x, ldx, st, y + (r - r0), ldy);
}

typedef void (*stream_fn)(const matrix *w, int r0, int r1, const float *x, int ldx, float *y, int ldy);

#define STREAM_VARIANT(name, dt, nb)                                                                     \
    static void name(const matrix *w, int r0, int r1, const float *x, int ldx, float *y, int ldy)          \
    {                                                                                                     \
        stream_rows(dt, nb, w, r0, r1, x, ldx, y, ldy);                                                   \
    }
#define STREAM_DTYPE(tag, dt)                                                                             \
    STREAM_VARIANT(tag##_1, dt, 1) STREAM_VARIANT(tag##_2, dt, 2) STREAM_VARIANT(tag##_3, dt, 3)          \
    STREAM_VARIANT(tag##_4, dt, 4)                                                                        \
    static const stream_fn tag##_table[KERNEL_STREAM_MAX] = { tag##_1, tag##_2, tag##_3, tag##_4 };

STREAM_DTYPE(stream_bf16, DTYPE_BF16)
STREAM_DTYPE(stream_f32, DTYPE_F32)

/* Larger batches (prefill): a GEMM. A slice of GEMM_SLICE_ROWS weight rows (the whole tiles that
 * fit in 16 rows) and a panel of GEMM_PANEL_COLS columns is decoded once into an L1 buffer (at most
 * 16 KiB), then every x row of a super-group of up to GEMM_SUPER x rows passes over it in tiles of
 * GEMM_ROWS x GEMM_COLS, whose x panel (GEMM_COLS x 256 floats) stays in L1 while the slice's rows
 * go by. The running totals of
 * the super-group's pairs wait in st between panels. */
enum {
    GEMM_SLICE_ROWS = 16 / GEMM_ROWS * GEMM_ROWS,
    GEMM_PANEL_COLS = 2 * KERNEL_BLOCK,
    GEMM_SUPER = 8 * GEMM_COLS
};

typedef void (*gemm_fn)(const matrix *w, int r, const float *buf, int c_beg, int c_end, const float *x, int ldx,
                        float *st, float *y, int ldy);
typedef void (*decode_fn)(const matrix *w, int r, int nr, int c_beg, int c_end, float *buf);

#define GEMM_VARIANT(name, dt, nr, nb)                                                                   \
    static void name(const matrix *w, int r, const float *buf, int c_beg, int c_end, const float *x, int ldx, \
                     float *st, float *y, int ldy)                                                        \
    {                                                                                                     \
        tile_buf(dt, nr, nb, w, r, buf, GEMM_PANEL_COLS, c_beg, c_end, x, ldx, st, y, ldy);               \
    }
#define GEMM_ROW_VARIANTS(tag, dt, nr)                                                                    \
    GEMM_VARIANT(tag##_1, dt, nr, 1) GEMM_VARIANT(tag##_2, dt, nr, 2) GEMM_VARIANT(tag##_3, dt, nr, 3)     \
    GEMM_VARIANT(tag##_4, dt, nr, 4)
#define GEMM_DTYPE(tag, dt)                                                                               \
    GEMM_ROW_VARIANTS(tag##_rt, dt, GEMM_ROWS) GEMM_ROW_VARIANTS(tag##_r1, dt, 1)                           \
    static void tag##_decode(const matrix *w, int r, int nr, int c_beg, int c_end, float *buf)             \
    {                                                                                                     \
        decode_rows(dt, w, r, nr, c_beg, c_end, buf, GEMM_PANEL_COLS);                                    \
    }                                                                                                     \
    static const gemm_fn tag##_table[2][4] = {                                                   \
        { tag##_rt_1, tag##_rt_2, tag##_rt_3, tag##_rt_4 }, { tag##_r1_1, tag##_r1_2, tag##_r1_3, tag##_r1_4 } };

GEMM_DTYPE(gemm_bf16, DTYPE_BF16)
GEMM_DTYPE(gemm_f32, DTYPE_F32)

static void gemm_range(const gemm_fn table[2][4], decode_fn decode, const matrix *w, int r0, int r1, const float *x,
                       int ldx, int nb, float *y, int ldy)
{
    _Alignas(64) float buf[GEMM_SLICE_ROWS * GEMM_PANEL_COLS];
    _Alignas(64) float st[GEMM_SLICE_ROWS * GEMM_SUPER * TOT_LANES];
    const int cols = w->cols;
    const size_t row_bytes = (size_t)cols * kernel_dtype_bytes(w->dtype);
    for (int r = r0; r < r1; r += GEMM_SLICE_ROWS) {
        int nr = r1 - r < GEMM_SLICE_ROWS ? r1 - r : GEMM_SLICE_ROWS;
        /* the next slice's first bytes, while this one computes */
        if (r + nr < r1) prefetch_range_start((const char *)w->data + (size_t)(r + nr) * row_bytes, row_bytes);
        for (int s0 = 0; s0 < nb; s0 += GEMM_SUPER) {
            int ns = nb - s0 < GEMM_SUPER ? nb - s0 : GEMM_SUPER;
            for (int c = 0; c < cols; c += GEMM_PANEL_COLS) {
                int ce = cols - c < GEMM_PANEL_COLS ? cols : c + GEMM_PANEL_COLS;
                decode(w, r, nr, c, ce, buf);
                for (int b0 = 0; b0 < ns; b0 += GEMM_COLS) {
                    int g = ns - b0 < GEMM_COLS ? ns - b0 : GEMM_COLS;
                    const float *xg = x + (size_t)(s0 + b0) * ldx;
                    float *yg = y + (size_t)(s0 + b0) * ldy + (r - r0);
                    float *sg = st + (size_t)b0 * GEMM_SLICE_ROWS * TOT_LANES;
                    int i = 0;
                    for (; i + GEMM_ROWS <= nr; i += GEMM_ROWS)
                        table[0][g - 1](w, r + i, buf + (size_t)i * GEMM_PANEL_COLS, c, ce, xg, ldx,
                                        sg + (size_t)i * g * TOT_LANES, yg + i, ldy);
                    for (; i < nr; i++)
                        table[1][g - 1](w, r + i, buf + (size_t)i * GEMM_PANEL_COLS, c, ce, xg, ldx,
                                        sg + (size_t)i * g * TOT_LANES, yg + i, ldy);
                }
            }
        }
    }
}

/* ---- FP8: weights as fp32 bit patterns against a prepared x ----
 * The ISA file also defines F8_GROUP, F8_STREAM_ROWS(nb), F8_GEMM_ROWS, F8_GEMM_COLS, f8_abs_max,
 * f8_prepare_x, tile_stream_f8, decode_rows_f8 and tile_buf_f8 (kernels_avx2.c explains the
 * representation and why x is scaled by 2^k and permuted). */

/* The x row's scale exponent k (f8_scale_exponent of max |x|). */
static inline int f8_x_exponent(const float *x, int n) { return f8_scale_exponent(f8_abs_max(x, n)); }

static inline int f8_padded(int cols) { return (cols + F8_GROUP - 1) / F8_GROUP * F8_GROUP; }

INLINE void stream_tiles_f8(int NR, int NB, const matrix *w, int r0, int r1, const float *xp, int ldp,
                            const float *smul, float *y, int ldy)
{
    _Alignas(64) float st[8 * KERNEL_STREAM_MAX * TOT_LANES];
    const prefetch_plan pf = prefetch_plan_for((size_t)w->cols, NR), pf1 = prefetch_plan_for((size_t)w->cols, 1);
    int r = r0;
    for (; r + NR <= r1; r += NR) tile_stream_f8(NR, NB, w, r, xp, ldp, smul, pf, st, y + (r - r0), ldy);
    for (; r < r1; r++) tile_stream_f8(1, NB, w, r, xp, ldp, smul, pf1, st, y + (r - r0), ldy);
}

/* Rows of at most 1 KiB (kv_b's 512 columns) run one x row in tiles of F8_SHORT_ROWS rows: with
 * more the per-row block ends and sums weigh more than the shorter chains save (measured on
 * kv_b_proj). */
INLINE void stream_rows_f8(int NB, const matrix *w, int r0, int r1, const float *xp, int ldp, const float *smul,
                           float *y, int ldy)
{
    prefetch_range_start((const char *)w->data + (size_t)r0 * w->cols, (size_t)(r1 - r0) * w->cols);
    if (NB == 1 && w->cols <= 1024) stream_tiles_f8(F8_SHORT_ROWS, 1, w, r0, r1, xp, ldp, smul, y, ldy);
    else if (NB == 2 && w->cols >= F8_LONG_COLS && F8_NB2_LONG_ROWS() == 8)
        stream_tiles_f8(8, 2, w, r0, r1, xp, ldp, smul, y, ldy);
    else stream_tiles_f8(F8_STREAM_ROWS(NB), NB, w, r0, r1, xp, ldp, smul, y, ldy);
}

typedef void (*stream_f8_fn)(const matrix *w, int r0, int r1, float *xp, int ldp, float *smul, float *y, int ldy);
#define STREAM_F8_VARIANT(nb)                                                                            \
    static void stream_f8p_##nb(const matrix *w, int r0, int r1, float *xp, int ldp, float *smul, float *y,    \
                                int ldy)                                                                  \
    {                                                                                                     \
        stream_rows_f8(nb, w, r0, r1, xp, ldp, smul, y, ldy);                                             \
    }
STREAM_F8_VARIANT(1) STREAM_F8_VARIANT(2) STREAM_F8_VARIANT(3) STREAM_F8_VARIANT(4)
static const stream_f8_fn stream_f8p_table[KERNEL_STREAM_MAX] = { stream_f8p_1, stream_f8p_2, stream_f8p_3, stream_f8p_4 };

static void f8_stream_range(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy)
{
    const int ldp = f8_padded(w->cols);
    float *xp = kernel_scratch((size_t)ldp * (size_t)nb);
    float smul[KERNEL_STREAM_MAX];
    for (int b = 0; b < nb; b++) {
        int k = f8_x_exponent(x + (size_t)b * ldx, w->cols);
        f8_prepare_x(x + (size_t)b * ldx, w->cols, f8_pow2(k), xp + (size_t)b * ldp);
        smul[b] = f8_pow2(120 - k);
    }
    stream_f8p_table[nb - 1](w, r0, r1, xp, ldp, smul, y, ldy);
}

typedef void (*gemm_f8_fn)(const matrix *w, int r, const float *buf, int c_beg, int c_end, const float *xp, int ldp,
                           const float *smul, float *st, float *y, int ldy);
#define GEMM_F8_VARIANT(name, nr, nb)                                                                    \
    static void name(const matrix *w, int r, const float *buf, int c_beg, int c_end, const float *xp, int ldp, \
                     const float *smul, float *st, float *y, int ldy)                                     \
    {                                                                                                     \
        tile_buf_f8(nr, nb, w, r, buf, GEMM_PANEL_COLS, c_beg, c_end, xp, ldp, smul, st, y, ldy);         \
    }
#define GEMM_F8_ROW_VARIANTS(tag, nr)                                                                     \
    GEMM_F8_VARIANT(tag##_1, nr, 1) GEMM_F8_VARIANT(tag##_2, nr, 2) GEMM_F8_VARIANT(tag##_3, nr, 3)
GEMM_F8_ROW_VARIANTS(gemm_f8p_rt, F8_GEMM_ROWS)
GEMM_F8_ROW_VARIANTS(gemm_f8p_r1, 1)
#if F8_GEMM_COLS == 4
GEMM_F8_VARIANT(gemm_f8p_rt_4, F8_GEMM_ROWS, 4)
GEMM_F8_VARIANT(gemm_f8p_r1_4, 1, 4)
static const gemm_f8_fn gemm_f8p_table[2][4] = { { gemm_f8p_rt_1, gemm_f8p_rt_2, gemm_f8p_rt_3, gemm_f8p_rt_4 },
                                                 { gemm_f8p_r1_1, gemm_f8p_r1_2, gemm_f8p_r1_3, gemm_f8p_r1_4 } };
#else
static const gemm_f8_fn gemm_f8p_table[2][3] = { { gemm_f8p_rt_1, gemm_f8p_rt_2, gemm_f8p_rt_3 },
                                                 { gemm_f8p_r1_1, gemm_f8p_r1_2, gemm_f8p_r1_3 } };
#endif

enum { F8_SUPER = 8 * F8_GEMM_COLS };
_Static_assert(F8_SUPER <= 32 && KERNEL_STREAM_MAX <= 32 && F8_GROUP <= 64,
               "kernels_scratch_bytes_per_thread bounds the prepared x by 64-aligned columns x 32 rows");

/* One decoded slice (rows r..r+nr, panel [c, ce)) against a super-group of ns prepared x rows
 * (xp[b * ldp], column c at xp[c]), in tiles of F8_GEMM_ROWS x F8_GEMM_COLS. */
static void f8_gemm_panel(const matrix *w, int r, int nr, int c, int ce, const float *buf, const float *xp, int ldp,
                          int ns, const float *smul, float *st, float *y, int ldy)
{
    for (int b0 = 0; b0 < ns; b0 += F8_GEMM_COLS) {
        int g = ns - b0 < F8_GEMM_COLS ? ns - b0 : F8_GEMM_COLS;
        const float *xg = xp + (size_t)b0 * ldp + c;
        float *yg = y + (size_t)b0 * ldy, *sg = st + (size_t)b0 * GEMM_SLICE_ROWS * TOT_LANES;
        int i = 0;
        for (; i + F8_GEMM_ROWS <= nr; i += F8_GEMM_ROWS)
            gemm_f8p_table[0][g - 1](w, r + i, buf + (size_t)i * GEMM_PANEL_COLS, c, ce, xg, ldp, smul + b0,
                                     sg + (size_t)i * g * TOT_LANES, yg + i, ldy);
        for (; i < nr; i++)
            gemm_f8p_table[1][g - 1](w, r + i, buf + (size_t)i * GEMM_PANEL_COLS, c, ce, xg, ldp, smul + b0,
                                     sg + (size_t)i * g * TOT_LANES, yg + i, ldy);
    }
}

/* Batches above KERNEL_STREAM_MAX, one super-group of F8_SUPER x rows at a time: its rows
 * prepared once (this thread's scratch), then slices of 16 weight rows decoded once per
 * 256-column panel and applied to all of them (as gemm_range). */
static void f8_gemm_range(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy)
{
    _Alignas(64) float buf[GEMM_SLICE_ROWS * GEMM_PANEL_COLS];
    _Alignas(64) float st[GEMM_SLICE_ROWS * F8_SUPER * TOT_LANES];
    float smul[F8_SUPER];
    const int cols = w->cols, ldp = f8_padded(cols);
    float *xp = kernel_scratch((size_t)ldp * F8_SUPER);
    for (int s0 = 0; s0 < nb; s0 += F8_SUPER) {
        int ns = nb - s0 < F8_SUPER ? nb - s0 : F8_SUPER;
        for (int b = 0; b < ns; b++) {
            const float *xb = x + (size_t)(s0 + b) * ldx;
            int k = f8_x_exponent(xb, cols);
            f8_prepare_x(xb, cols, f8_pow2(k), xp + (size_t)b * ldp);
            smul[b] = f8_pow2(120 - k);
        }
        for (int r = r0; r < r1; r += GEMM_SLICE_ROWS) {
            int nr = r1 - r < GEMM_SLICE_ROWS ? r1 - r : GEMM_SLICE_ROWS;
            if (r + nr < r1) prefetch_range_start((const char *)w->data + (size_t)(r + nr) * cols, (size_t)cols);
            for (int c = 0; c < cols; c += GEMM_PANEL_COLS) {
                int ce = cols - c < GEMM_PANEL_COLS ? cols : c + GEMM_PANEL_COLS;
                decode_rows_f8(w, r, nr, c, ce, buf, GEMM_PANEL_COLS);
                f8_gemm_panel(w, r, nr, c, ce, buf, xp, ldp, ns, smul, st, y + (size_t)s0 * ldy + (r - r0), ldy);
            }
        }
    }
}

/* Batches of up to F8_STREAM_GROUPS_MAX x rows stream the weights once per KERNEL_STREAM_MAX of
 * them instead of running the GEMM: decoded in registers and used four times, FP8 weights keep
 * the FMAs busier than decoded once into L1 and reloaded (bench_gemv, 1 thread, AVX-512, R1's
 * shapes: streaming 4 rows 66-75% of the FMA peak; the GEMM 36-46% at 8 rows, 48-56% at 16,
 * 55-63% at 32; the embedded model's experts 38% against 31% at 6 rows). The price is reading
 * the weights nb / 4 times: at 4 rows a thread streams ~11 GB/s, which a few threads' share of
 * the memory bandwidth affords and many would not, so large batches (prefill's attention and
 * dense layers) keep the GEMM's one read per 32 rows. */
enum { F8_STREAM_GROUPS_MAX = 16 };

static void f8_stream_groups(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy)
{
    for (int b = 0; b < nb; b += KERNEL_STREAM_MAX) {
        int n = nb - b < KERNEL_STREAM_MAX ? nb - b : KERNEL_STREAM_MAX;
        f8_stream_range(w, r0, r1, x + (size_t)b * ldx, ldx, n, y + (size_t)b * ldy, ldy);
    }
}

void KERNEL_ISA_NAME(matvec_range, KERNEL_ISA)(const matrix *w, int r0, int r1, const float *x, int ldx, int nb,
                                               float *y, int ldy)
{
    const stream_fn *stream;
    const gemm_fn(*gemm)[4];
    decode_fn decode;
    switch (w->dtype) {
    case DTYPE_F8_E4M3:
        if (nb <= KERNEL_STREAM_MAX) f8_stream_range(w, r0, r1, x, ldx, nb, y, ldy);
        else if (nb <= F8_STREAM_GROUPS_MAX) f8_stream_groups(w, r0, r1, x, ldx, nb, y, ldy);
        else f8_gemm_range(w, r0, r1, x, ldx, nb, y, ldy);
        return;
    case DTYPE_BF16: stream = stream_bf16_table; gemm = gemm_bf16_table; decode = gemm_bf16_decode; break;
    case DTYPE_F32: stream = stream_f32_table; gemm = gemm_f32_table; decode = gemm_f32_decode; break;
    default: kernels_unsupported_dtype(w->dtype, "matvec_range"); return;
    }
    if (nb <= KERNEL_STREAM_MAX) stream[nb - 1](w, r0, r1, x, ldx, y, ldy);
    else gemm_range(gemm, decode, w, r0, r1, x, ldx, nb, y, ldy);
}

/* ---- matvec_t_range ---- */

typedef void (*t_tile_fn)(const matrix *w, int r0, int r1, int c0, const float *x, int ldx, float *y, int ldy);

#define T_TILE_VARIANT(name, dt, nb)                                                                   \
    static void name(const matrix *w, int r0, int r1, int c0, const float *x, int ldx, float *y, int ldy) \
    {                                                                                                 \
        t_tile(dt, nb, T_TILE_VECTORS(nb), w, r0, r1, c0, x, ldx, y, ldy);                            \
    }
#define T_TILE_DTYPE(tag, dt)                                                                         \
    T_TILE_VARIANT(tag##_1, dt, 1) T_TILE_VARIANT(tag##_2, dt, 2) T_TILE_VARIANT(tag##_3, dt, 3)      \
    T_TILE_VARIANT(tag##_4, dt, 4)                                                                    \
    static const t_tile_fn tag##_table[KERNEL_BATCH_GROUP] = { tag##_1, tag##_2, tag##_3, tag##_4 };

T_TILE_DTYPE(t_tile_f8, DTYPE_F8_E4M3)
T_TILE_DTYPE(t_tile_bf16, DTYPE_BF16)
T_TILE_DTYPE(t_tile_f32, DTYPE_F32)

/* The most bytes matvec_t_range asks for up front (into L2). */
#define T_PREFETCH_BLOCK_BYTES (256 << 10)

/* Each batch group walks the columns one tile (16 * T_TILE_VECTORS columns) at a time. */
void KERNEL_ISA_NAME(matvec_t_range, KERNEL_ISA)(const matrix *w, int r0, int r1, const float *x, int ldx, int nb,
                                                 float *y, int ldy)
{
    const t_tile_fn *table;
    switch (w->dtype) {
    case DTYPE_F8_E4M3: table = t_tile_f8_table; break;
    case DTYPE_BF16: table = t_tile_bf16_table; break;
    case DTYPE_F32: table = t_tile_f32_table; break;
    default: kernels_unsupported_dtype(w->dtype, "matvec_t_range"); return;
    }
    /* The tiles walk down the rows one column tile at a time, each row's next tile prefetched a pass
     * ahead, but the first pass has nothing ahead of it: ask for the whole block at once (an
     * absorbed head's is 64 KiB) so that its rows arrive in parallel, not one miss after another
     * (bench_gemv's kv_b absorb, 1 thread, AVX-512: 7.8 -> 10.5 GB/s). */
    size_t row_bytes = (size_t)w->cols * kernel_dtype_bytes(w->dtype);
    const char *base = (const char *)w->data + (size_t)r0 * row_bytes;
    if ((size_t)(r1 - r0) * row_bytes <= T_PREFETCH_BLOCK_BYTES)
        for (size_t o = 0; o < (size_t)(r1 - r0) * row_bytes; o += 64) __builtin_prefetch(base + o, 0, 1);
    for (int b0 = 0; b0 < nb; b0 += KERNEL_BATCH_GROUP) {
        int nbg = nb - b0 < KERNEL_BATCH_GROUP ? nb - b0 : KERNEL_BATCH_GROUP;
        for (int c0 = 0; c0 < w->cols; c0 += 16 * T_TILE_VECTORS(nbg))
            table[nbg - 1](w, r0, r1, c0, x + (size_t)b0 * ldx, ldx, y + (size_t)b0 * ldy, ldy);
    }
}
