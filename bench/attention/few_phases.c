/* Where the AVX2 path's block of four heads spends its time, phase by phase, with nothing else
 * running: the kernel's own score pass, softmax and weighted chunks (few_phases_avx2.c calls them as
 * few_heads_block does) on one block at the embedded width (4 heads, kv_lora 128, rope 32), rows and
 * queries in L1, no prefetch and no item around them, each sample followed by the FMA probe doing
 * the same FMAs. A phase's share of the probe is how near its loop comes to the FMA peak; the
 * softmax does no FMAs, so its time is given as a share of the probe's time for the whole block's
 * FMAs. Where bench_attention's cells move with DRAM, threads and a shared core's phases, these
 * shares (their p50 in a quiet phase) hold still to a point: the place to see what a change to one
 * phase is worth. AVX2 only, the embedded width only.
 *   build/bench/few_phases [--seconds S]  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/attention/attention_bench.h"
#include "bench/attention/few_phases.h"

static const char *const phase_names[FEW_PHASES] = {
    "scores (4 heads x 3 positions, trees)", "softmax (exp against the block's max)", "weighted, all 6 chunks",
    "weighted, 4 chunks of 24 columns", "weighted, 2 chunks of 16 columns"};

enum { REPS = 20 };

int main(int argc, char **argv)
{
    double seconds = 2.0;
    int status = bench_avx2_tool_args(argc, argv, "few_phases",
                                      "[--seconds S]  (default 2: samples alternate the phases with the FMA probe)", &seconds);
    if (status >= 0) return status;
    enum { CAP = 1 << 15 };
    double *share = malloc(sizeof(double) * 2 * FEW_PHASES * CAP);
    few_phases_block *blocks[2] = {few_phases_block_create(0), few_phases_block_create(1)};
    float out[8];
    if (!share || !blocks[0] || !blocks[1]) {
        fprintf(stderr, "few_phases: out of memory for the blocks\n");
        few_phases_block_free(blocks[0]);
        few_phases_block_free(blocks[1]);
        free(share);
        return 1;
    }
    /* both dtypes' phases in every round, so that they see the same phases of a shared core; an F32
     * block has fewer rows than a BF16 one (half, or two thirds of 48), so it runs twice as many times a
     * sample (the shares are per FMA either way) */
    int n = 0;
    double end = bench_now_s() + seconds;
    while (n < CAP && bench_now_s() < end) {
        for (int bf16 = 0; bf16 < 2; bf16++) {
            long block_fmas = few_phases_block_fmas(blocks[bf16]);
            for (int p = 0; p < FEW_PHASES; p++) {
                int reps = bf16 ? REPS : 2 * REPS;
                double t0 = bench_now_s();
                long fmas = few_phases_run(blocks[bf16], p, reps);
                double t1 = bench_now_s();
                /* the softmax against the block's FMAs: the share of the block's FMA time it adds */
                bench_fma_probe_avx2((fmas ? fmas : reps * block_fmas) / 12, out);
                double t2 = bench_now_s();
                share[(bf16 * FEW_PHASES + p) * CAP + n] = fmas ? (t2 - t1) / (t1 - t0) : (t1 - t0) / (t2 - t1);
            }
        }
        n++;
    }
    printf("The AVX2 path's block of 4 heads at the embedded width (%d BF16 or %d F32 rows), its phases alone in L1, "
           "each sample followed by the FMA probe doing its FMAs (%d samples each)\n",
           few_phases_block_rows(blocks[1]), few_phases_block_rows(blocks[0]), n);
    printf("%-5s %-40s | share of the probe: p10 p50 p90\n", "dtype", "phase");
    for (int bf16 = 1; bf16 >= 0; bf16--)
        for (int p = 0; p < FEW_PHASES; p++) {
            double *v = share + (bf16 * FEW_PHASES + p) * CAP;
            printf("%-5s %-40s | %6.1f%% %6.1f%% %6.1f%%%s\n", bf16 ? "bf16" : "f32", phase_names[p],
                   100 * bench_percentile(v, n, 0.1), 100 * bench_percentile(v, n, 0.5),
                   100 * bench_percentile(v, n, 0.9), p == FEW_PHASE_SOFTMAX ? " of the block's FMA time" : "");
        }
    few_phases_block_free(blocks[0]);
    few_phases_block_free(blocks[1]);
    printf("(%g)\n", (double)out[0]);
    free(share);
    return 0;
}
