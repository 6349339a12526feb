/* The ISA-independent half of a SIMD kernel path: the row loop and batch slicing of matvec_range,
 * the column tiling of matvec_t_range, and their per-(dtype, batch size) function tables.
 *
 * Why a header included by each ISA file, not a .c of its own: this code must be compiled once per
 * ISA, with that file's -m flags, so that the file's always_inline dot_rows and t_tile inline into
 * it (each table entry is one dtype and batch size, specialised at compile time). A separate .c
 * would have neither the vector ISA nor the inner loops to inline. So kernels_avx2.c and
 * kernels_avx512.c each include it last, after defining:
 *   KERNEL_ISA              the name suffix: the file then exports matvec_range_<KERNEL_ISA> and
 *                           matvec_t_range_<KERNEL_ISA> (declared in kernels_internal.h)
 *   DOT_ROWS_PER_CALL(nb)   weight rows (1 or 2) per dot_rows call for a batch group of nb
 *   T_TILE_VECTORS(nb)      16-column vectors per t_tile for a batch group of nb
 *   dot_rows(dt, NR, NB, wrow, srow, cols, x, ldx, out[2][KERNEL_BATCH_GROUP])
 *                           NR weight rows . NB x rows, cut at KERNEL_BLOCK columns
 *   t_tile(dt, NB, TV, w, r0, r1, c0, x, ldx, y, ldy)
 *                           y[.][c0 .. c0 + 16*TV) of the transposed product over rows r0..r1
 * Nothing here changes the reduction of an output element: that is all in dot_rows and t_tile. */
#if !defined(KERNEL_ISA) || !defined(DOT_ROWS_PER_CALL) || !defined(T_TILE_VECTORS)
#error "kernels_driver.h is included last by an ISA file, after KERNEL_ISA, DOT_ROWS_PER_CALL, T_TILE_VECTORS"
#endif

#define KERNEL_ISA_PASTE(name, isa) name##_##isa
#define KERNEL_ISA_NAME(name, isa) KERNEL_ISA_PASTE(name, isa)

/* ---- matvec_range ---- */

/* Rows [r0, r1) against NB x rows, with the kernel inlined and per-row addressing hoisted (small
 * matrices, 96x256 experts and 256x96 expert downs, make hundreds of these calls per pass). */
INLINE void range_rows(dtype_t dt, int NB, const matrix *w, int r0, int r1, const float *x, int ldx, float *y,
                       int ldy)
{
    const int NR = DOT_ROWS_PER_CALL(NB);
    const size_t row_bytes = (size_t)w->cols * kernel_dtype_bytes(dt);
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

void KERNEL_ISA_NAME(matvec_range, KERNEL_ISA)(const matrix *w, int r0, int r1, const float *x, int ldx, int nb,
                                               float *y, int ldy)
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
    for (int b0 = 0; b0 < nb; b0 += KERNEL_BATCH_GROUP) {
        int nbg = nb - b0 < KERNEL_BATCH_GROUP ? nb - b0 : KERNEL_BATCH_GROUP;
        for (int c0 = 0; c0 < w->cols; c0 += 16 * T_TILE_VECTORS(nbg))
            table[nbg - 1](w, r0, r1, c0, x + (size_t)b0 * ldx, ldx, y + (size_t)b0 * ldy, ldy);
    }
}
