/* What the AVX2 attention's inner tiles reach with nothing else to do, beside the FMA probe that
 * bench_attention's compute roof uses, sampled alternately in one run: the ceiling a kernel built
 * of those tiles can reach on this core now. Each shape below has exactly the loads, conversions and
 * FMAs of one of core/attention_avx2.c's tiles (per 12 FMAs), its operands in L1, and no softmax,
 * prefetches, reduction trees or block set-up; the probe is 12 FMA chains and nothing else. Where a
 * machine's speed moves in phases (a shared core), the tiles and the probe move differently: the
 * share says how much of the roof such a tile can reach in each phase, so that a roof table's cells
 * can be read against it. AVX2 only (the path the machines without AVX-512 run).
 *   build/bench/tile_ceiling [--seconds S]  */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/attention/attention_bench.h"

#define AVX2 __attribute__((target("avx2,fma"), noinline))
#define ZERO12                                                                                                     \
    "vxorps %%xmm0, %%xmm0, %%xmm0\n\t" "vxorps %%xmm1, %%xmm1, %%xmm1\n\t" "vxorps %%xmm2, %%xmm2, %%xmm2\n\t"    \
    "vxorps %%xmm3, %%xmm3, %%xmm3\n\t" "vxorps %%xmm4, %%xmm4, %%xmm4\n\t" "vxorps %%xmm5, %%xmm5, %%xmm5\n\t"    \
    "vxorps %%xmm6, %%xmm6, %%xmm6\n\t" "vxorps %%xmm7, %%xmm7, %%xmm7\n\t" "vxorps %%xmm8, %%xmm8, %%xmm8\n\t"    \
    "vxorps %%xmm9, %%xmm9, %%xmm9\n\t" "vxorps %%xmm10, %%xmm10, %%xmm10\n\t" "vxorps %%xmm11, %%xmm11, %%xmm11\n\t"
#define CLOBBERS                                                                                                   \
    "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
        "xmm12", "xmm13", "xmm14", "xmm15"
/* the sum of the 12 accumulators, stored: the loops' results are used */
#define KEEP "vaddps %%ymm1, %%ymm0, %%ymm0\n\t" "vaddps %%ymm11, %%ymm0, %%ymm0\n\t" "vmovups %%ymm0, (%[out])\n\t"
#define FMA(a, b, acc) "vfmadd231ps %%ymm" #a ", %%ymm" #b ", %%ymm" #acc "\n\t"
/* A weighted tile's loop: n rows, BODY per row, the rows XSTEP bytes apart, the scores SSTEP (the F32
 * loops pass the BF16 mask too, unread). */
#define ROW_LOOP(BODY, XSTEP, SSTEP)                                                                               \
    __asm__ volatile(ZERO12 "1:\n\t" BODY "add $" #XSTEP ", %[x]\n\t" "add $" #SSTEP ", %[s]\n\t"                 \
                     "sub $1, %[n]\n\t" "jnz 1b\n\t" KEEP                                                           \
                     : [x] "+r"(rows), [s] "+r"(s), [n] "+r"(n)                                                     \
                     : [m] "r"(mask), [out] "r"(out)                                                                \
                     : CLOBBERS)

/* One query vector (ymm15) times the three rows' values (ymm12-14): a head's row of a score tile. */
#define SCORE_HEAD(qoff, a0, a1, a2)                                                                               \
    "vmovups " qoff "(%[q],%[k]), %%ymm15\n\t" FMA(12, 15, a0) FMA(13, 15, a1) FMA(14, 15, a2)
#define SCORE_HEADS(o)                                                                                             \
    SCORE_HEAD(o, 0, 1, 2) SCORE_HEAD(o "+640", 3, 4, 5) SCORE_HEAD(o "+1280", 6, 7, 8) SCORE_HEAD(o "+1920", 9, 10, 11)

/* Few heads, scores, F32: per 8 values 3 rows and 4 queries loaded, 12 FMAs (4 heads x 3 positions;
 * rows 640 bytes apart, a k-loop of n vectors). */
AVX2 static void few_score_f32(const float *rows, const float *q, long n, float *out)
{
    long k;
    __asm__ volatile(ZERO12 "xor %[k], %[k]\n"
                     "1:\n\t" "vmovups (%[x],%[k]), %%ymm12\n\t" "vmovups 640(%[x],%[k]), %%ymm13\n\t"
                     "vmovups 1280(%[x],%[k]), %%ymm14\n\t" SCORE_HEADS("0")
                     "add $32, %[k]\n\t" "cmp %[end], %[k]\n\t" "jne 1b\n\t" KEEP
                     : [k] "=&r"(k)
                     : [x] "r"(rows), [q] "r"(q), [end] "r"(n * 32), [out] "r"(out)
                     : CLOBBERS);
}

/* Few heads, scores, BF16: per 16 values each row's 32 bytes loaded twice, shifted (the evens) and
 * masked (the odds, the mask read from memory), 8 query loads, 24 FMAs (rows 320 bytes apart). */
AVX2 static void few_score_bf16(const void *rows, const float *q, long n, const void *mask, float *out)
{
    long k;
    __asm__ volatile(ZERO12 "xor %[k], %[k]\n"
                     "1:\n\t" "vmovdqu (%[x],%[k]), %%ymm12\n\t" "vmovdqu 320(%[x],%[k]), %%ymm13\n\t"
                     "vmovdqu 640(%[x],%[k]), %%ymm14\n\t" "vpslld $16, %%ymm12, %%ymm12\n\t"
                     "vpslld $16, %%ymm13, %%ymm13\n\t" "vpslld $16, %%ymm14, %%ymm14\n\t" SCORE_HEADS("0")
                     "vmovdqu (%[x],%[k]), %%ymm12\n\t" "vmovdqu 320(%[x],%[k]), %%ymm13\n\t"
                     "vmovdqu 640(%[x],%[k]), %%ymm14\n\t" "vpand (%[m]), %%ymm12, %%ymm12\n\t"
                     "vpand (%[m]), %%ymm13, %%ymm13\n\t" "vpand (%[m]), %%ymm14, %%ymm14\n\t" SCORE_HEADS("32")
                     "add $32, %[k]\n\t" "cmp %[end], %[k]\n\t" "jne 1b\n\t" KEEP
                     : [k] "=&r"(k)
                     : [x] "r"(rows), [q] "r"(q), [end] "r"(n * 32), [m] "r"(mask), [out] "r"(out)
                     : CLOBBERS);
}

/* A head's score broadcast (ymm15) times a row's three units (ymm12-14). */
#define WEIGHT_HEAD(s, a0, a1, a2)                                                                                 \
    "vbroadcastss " s "(%[s]), %%ymm15\n\t" FMA(12, 15, a0) FMA(13, 15, a1) FMA(14, 15, a2)
#define WEIGHT_HEADS                                                                                               \
    WEIGHT_HEAD("0", 0, 1, 2) WEIGHT_HEAD("4", 3, 4, 5) WEIGHT_HEAD("8", 6, 7, 8) WEIGHT_HEAD("12", 9, 10, 11)

/* Few heads, weighted latents, F32: per row 3 units loaded, 4 scores broadcast, 12 FMAs (4 heads x
 * 24 columns; rows 512 bytes apart, n rows). */
AVX2 static void few_weighted_f32(const float *rows, const float *s, long n, const void *mask, float *out)
{
    ROW_LOOP("vmovups (%[x]), %%ymm12\n\t" "vmovups 32(%[x]), %%ymm13\n\t" "vmovups 64(%[x]), %%ymm14\n\t"
             WEIGHT_HEADS, 512, 16);
}

/* Few heads, weighted latents, BF16: per row two loads, two shifts and a mask for 24 columns, 4
 * scores broadcast, 12 FMAs (rows 256 bytes apart). */
AVX2 static void few_weighted_bf16(const void *rows, const float *s, long n, const void *mask, float *out)
{
    ROW_LOOP("vmovdqu (%[x]), %%ymm13\n\t" "vpslld $16, %%ymm13, %%ymm12\n\t" "vpand (%[m]), %%ymm13, %%ymm13\n\t"
             "vmovdqu 32(%[x]), %%ymm14\n\t" "vpslld $16, %%ymm14, %%ymm14\n\t" WEIGHT_HEADS, 256, 16);
}

/* A position's cache value broadcast (ymm14 or 15) times two vectors of 8 heads' queries (ymm12-13). */
#define WIDE_POS(off, b, a0, a1) "vbroadcastss " off "(%[x],%[k]), %%ymm" #b "\n\t" FMA(b, 12, a0) FMA(b, 13, a1)

/* Many heads, scores: per k 2 query vectors (16 heads) loaded, 6 positions' values broadcast, 12
 * FMAs (R1's rows, 2304 bytes apart; n values of k). */
AVX2 static void wide_score(const float *rows, const float *q, long n, float *out)
{
    long k;
    __asm__ volatile(ZERO12 "xor %[k], %[k]\n"
                     "1:\n\t" "vmovups (%[q]), %%ymm12\n\t" "vmovups 32(%[q]), %%ymm13\n\t" WIDE_POS("0", 14, 0, 1)
                     WIDE_POS("2304", 15, 2, 3) WIDE_POS("4608", 14, 4, 5) WIDE_POS("6912", 15, 6, 7)
                     WIDE_POS("9216", 14, 8, 9) WIDE_POS("11520", 15, 10, 11)
                     "add $64, %[q]\n\t" "add $4, %[k]\n\t" "cmp %[end], %[k]\n\t" "jne 1b\n\t" KEEP
                     : [k] "=&r"(k), [q] "+r"(q)
                     : [x] "r"(rows), [end] "r"(n * 4), [out] "r"(out)
                     : CLOBBERS);
}

/* A head's weight broadcast (ymm14 or 15) times a row's two units (ymm12-13). */
#define WIDE_HEAD(s, b, a0, a1) "vbroadcastss " s "(%[s]), %%ymm" #b "\n\t" FMA(12, b, a0) FMA(13, b, a1)
#define WIDE_HEADS                                                                                                 \
    WIDE_HEAD("0", 14, 0, 1) WIDE_HEAD("4", 15, 2, 3) WIDE_HEAD("8", 14, 4, 5) WIDE_HEAD("12", 15, 6, 7)           \
    WIDE_HEAD("16", 14, 8, 9) WIDE_HEAD("20", 15, 10, 11)

/* Many heads, weighted latents, F32: per row 2 units (16 columns) loaded, 6 heads' weights broadcast,
 * 12 FMAs (rows 2048 bytes apart, weights 128 bytes a position). */
AVX2 static void wide_weighted_f32(const float *rows, const float *s, long n, const void *mask, float *out)
{
    ROW_LOOP("vmovups (%[x]), %%ymm12\n\t" "vmovups 32(%[x]), %%ymm13\n\t" WIDE_HEADS, 2048, 128);
}

/* Many heads, weighted latents, BF16: per row one load, a shift and a mask for 16 columns. */
AVX2 static void wide_weighted_bf16(const void *rows, const float *s, long n, const void *mask, float *out)
{
    ROW_LOOP("vmovdqu (%[x]), %%ymm13\n\t" "vpslld $16, %%ymm13, %%ymm12\n\t" "vpand (%[m]), %%ymm13, %%ymm13\n\t"
             WIDE_HEADS, 1024, 128);
}

/* The operands: a 96 KiB buffer, of which each shape reads at most 24 KiB (its block, in L1). */
typedef struct {
    float *rows, *q, *s, *out;
    const void *mask;
} operands;

enum { SHAPES = 7, REPS = 40 };
static const char *const shape_names[SHAPES] = {
    "few heads, scores, f32", "few heads, scores, bf16", "few heads, weighted, f32", "few heads, weighted, bf16",
    "many heads, scores", "many heads, weighted, f32", "many heads, weighted, bf16"};
static const char *const shape_ops[SHAPES] = {
    "3 row + 4 query loads, 12 FMAs", "6 row loads, 3 shifts, 3 masks, 8 query loads, 24 FMAs",
    "3 row loads, 4 broadcasts, 12 FMAs", "2 row loads, 2 shifts, 1 mask, 4 broadcasts, 12 FMAs",
    "2 query loads, 6 broadcasts, 12 FMAs", "2 row loads, 6 broadcasts, 12 FMAs",
    "1 row load, 1 shift, 1 mask, 6 broadcasts, 12 FMAs"};

/* Runs shape i REPS times; returns its FMAs. Each call is a tile's worth of work: 10 triples of the
 * embedded width's 160 values, 6 chunks of 32 rows, 576 values of R1's rows, 32 rows of 32 chunks. */
static long run_shape(int i, const operands *o)
{
    long fmas = 0;
    for (int r = 0; r < REPS; r++) switch (i) {
        case 0:
            for (int t = 0; t < 10; t++) few_score_f32(o->rows + t * 480, o->q, 20, o->out);
            fmas += 10 * 20 * 12;
            break;
        case 1:
            for (int t = 0; t < 10; t++) few_score_bf16(o->rows + t * 240, o->q, 10, o->mask, o->out);
            fmas += 10 * 10 * 24;
            break;
        case 2:
            for (int c = 0; c < 6; c++) few_weighted_f32(o->rows + c * 24, o->s, 32, o->mask, o->out);
            fmas += 6 * 32 * 12;
            break;
        case 3:
            for (int c = 0; c < 6; c++) few_weighted_bf16(o->rows + c * 12, o->s, 64, o->mask, o->out);
            fmas += 6 * 64 * 12;
            break;
        case 4:
            wide_score(o->rows, o->q, 576, o->out);
            fmas += 576 * 12;
            break;
        case 5:
            for (int c = 0; c < 4; c++) wide_weighted_f32(o->rows + c * 16, o->s, 12, o->mask, o->out);
            fmas += 4 * 12 * 12;
            break;
        default:
            for (int c = 0; c < 4; c++) wide_weighted_bf16(o->rows + c * 8, o->s, 24, o->mask, o->out);
            fmas += 4 * 24 * 12;
            break;
        }
    return fmas;
}

int main(int argc, char **argv)
{
    double seconds = 4.0;
    int status = bench_avx2_tool_args(argc, argv, "tile_ceiling",
                                      "[--seconds S]  (default 4: samples alternate the shapes with the FMA probe)", &seconds);
    if (status >= 0) return status;
    static const int32_t odd_mask[8] __attribute__((aligned(32))) = {
        (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u,
        (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u};
    float *buf = aligned_alloc(64, 96 << 10);
    if (!buf) return 1;
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    bench_fill_cache_values(buf, 96 << 10, &rng);
    operands o = {.rows = buf, .q = buf + 8192, .s = buf + 16384, .out = buf + 24000, .mask = odd_mask};
    int cap = 1 << 16, n = 0;
    double *share = malloc(sizeof(double) * SHAPES * (size_t)cap);
    double *gflops = malloc(sizeof(double) * SHAPES * (size_t)cap);
    if (!share || !gflops) return 1;
    double end = bench_now_s() + seconds;
    while (n < cap && bench_now_s() < end) {
        for (int i = 0; i < SHAPES; i++) {
            double t0 = bench_now_s();
            long fmas = run_shape(i, &o);
            double t1 = bench_now_s();
            bench_fma_probe_avx2(fmas / 12, o.out);
            double t2 = bench_now_s();
            share[i * cap + n] = (t2 - t1) / (t1 - t0);
            gflops[i * cap + n] = 16.0 * (double)fmas / (t2 - t1) / 1e9;
        }
        n++;
    }
    printf("AVX2 tiles with their operands in L1 and nothing else, against the FMA probe run after each sample "
           "(%d samples each)\n", n);
    printf("%-27s | %-56s | share of the probe: p10 p50 p90 | probe GFLOP/s: p10 p50 p90\n", "tile", "per step");
    for (int i = 0; i < SHAPES; i++) {
        double *sh = share + i * cap, *gf = gflops + i * cap;
        printf("%-27s | %-56s | %6.1f%% %6.1f%% %6.1f%%      | %6.1f %6.1f %6.1f\n", shape_names[i], shape_ops[i],
               100 * bench_percentile(sh, n, 0.1), 100 * bench_percentile(sh, n, 0.5), 100 * bench_percentile(sh, n, 0.9),
               bench_percentile(gf, n, 0.1), bench_percentile(gf, n, 0.5), bench_percentile(gf, n, 0.9));
    }
    free(share);
    free(gflops);
    free(buf);
    return 0;
}
