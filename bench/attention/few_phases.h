/* Between few_phases.c (no ISA flags: it checks the CPU first) and few_phases_avx2.c (compiled with
 * the AVX2 path's flags around the kernel's own translation unit). */
#ifndef DSSPEC_FEW_PHASES_H
#define DSSPEC_FEW_PHASES_H

/* One block of an item of four heads at the embedded width, its rows and queries in L1. */
typedef struct few_phases_block few_phases_block;

/* NULL when out of memory. bf16: a block of BF16 rows as the kernel sizes it on this machine (64, or
 * 48 on a 32 KiB L1d), else 32 F32 rows. */
few_phases_block *few_phases_block_create(int bf16);
void few_phases_block_free(few_phases_block *b);

enum { FEW_PHASE_SCORES, FEW_PHASE_SOFTMAX, FEW_PHASE_WEIGHTED, FEW_PHASE_CHUNKS3, FEW_PHASE_CHUNKS2, FEW_PHASES };

/* Runs one phase of the block `reps` times; returns the FMAs it did (0 for the softmax). */
long few_phases_run(few_phases_block *b, int phase, int reps);
/* The block's rows. */
int few_phases_block_rows(const few_phases_block *b);
/* The FMAs of the whole block (scores and weighted latents), for the softmax's share. */
long few_phases_block_fmas(const few_phases_block *b);

#endif
