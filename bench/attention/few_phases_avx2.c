/* The AVX2 path's few-heads phases, as few_heads_block calls them. The phases are static to the
 * kernel, so this file compiles core/attention_avx2.c into itself (with the path's flags) rather
 * than widening the kernel's interface for a bench; the kernel's one external symbol is renamed so
 * that the core library's copy can never clash with this one. */
#define attention_item_avx2 few_phases_unused_item_avx2
#include "core/attention_avx2.c"
#undef attention_item_avx2
#include <stdlib.h>
#include "bench/attention/attention_bench.h"
#include "bench/attention/few_phases.h"

enum { HEADS = 4, R = 128, ROPE = 32 };

struct few_phases_block {
    int bf16, nt;
    void *lat, *kr;
    float *ql, *qr, *raw, *w, *acc;
};

few_phases_block *few_phases_block_create(int bf16)
{
    few_phases_block *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->bf16 = bf16;
    /* the kernel's block: few_block_rows_bf16 sizes BF16 ones to this machine's L1d */
    attention_kv kv = {.heads = HEADS, .R = R, .rope = ROPE, .dtype = DTYPE_BF16};
    b->nt = bf16 ? few_block_rows_bf16(&(attention_item){.kv = &kv, .l1d_bytes = attention_l1d_bytes()}) : ATTN_BLOCK / 2;
    size_t es = bf16 ? 2 : 4;
    b->lat = aligned_alloc(64, (size_t)b->nt * R * es);
    b->kr = aligned_alloc(64, (size_t)b->nt * ROPE * es);
    b->ql = aligned_alloc(64, HEADS * R * sizeof(float));
    b->qr = aligned_alloc(64, HEADS * ROPE * sizeof(float));
    b->raw = aligned_alloc(64, 4 * ATTN_BLOCK * sizeof(float));
    b->w = aligned_alloc(64, 4 * ATTN_BLOCK * sizeof(float));
    b->acc = aligned_alloc(64, HEADS * R * sizeof(float));
    if (!b->lat || !b->kr || !b->ql || !b->qr || !b->raw || !b->w || !b->acc) {
        few_phases_block_free(b);
        return NULL;
    }
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    bench_fill_cache_values(b->lat, (size_t)b->nt * R * es, &rng);
    bench_fill_cache_values(b->kr, (size_t)b->nt * ROPE * es, &rng);
    /* queries small enough that every score stays near 0: no weight leaves F32's normal range */
    for (int i = 0; i < HEADS * R; i++) b->ql[i] = (float)((int)(bench_rng_next(&rng) % 201) - 100) * 1e-4f;
    for (int i = 0; i < HEADS * ROPE; i++) b->qr[i] = (float)((int)(bench_rng_next(&rng) % 201) - 100) * 1e-4f;
    memset(b->acc, 0, HEADS * R * sizeof(float));
    few_phases_run(b, FEW_PHASE_SCORES, 1);
    few_phases_run(b, FEW_PHASE_SOFTMAX, 1);
    return b;
}

void few_phases_block_free(few_phases_block *b)
{
    if (!b) return;
    free(b->lat);
    free(b->kr);
    free(b->ql);
    free(b->qr);
    free(b->raw);
    free(b->w);
    free(b->acc);
    free(b);
}

int few_phases_block_rows(const few_phases_block *b) { return b->nt; }

long few_phases_block_fmas(const few_phases_block *b) { return (long)b->nt * HEADS * (R + ROPE + R) / 8; }

/* Weighted chunks of the block from unit u0 to u1 (units of 8 columns), as few_heads_block cuts
 * them, with no next block to prefetch. */
static void weighted_units(few_phases_block *b, int u0, int u1)
{
    static const float alpha[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    for (int c0 = 8 * u0; c0 < 8 * u1;) {
        int nu = few_chunk_units((R - c0) / 8);
        few_weighted_table[b->bf16][HEADS - 1][nu - 2][(c0 / 8) & 1](b->acc, R, alpha, b->w, b->lat, b->nt, c0, NULL, 0, 0);
        c0 += 8 * nu;
    }
}

long few_phases_run(few_phases_block *b, int phase, int reps)
{
    /* R = 128 is 16 units: chunks of 3, 3, 3, 3, then 2 and 2 */
    _Static_assert(R % 16 == 0 && ROPE % 16 == 0, "the whole-step score loop and no weighted tail");
    long fmas = 0;
    for (int r = 0; r < reps; r++) switch (phase) {
        case FEW_PHASE_SCORES: {
            score_prefetch none = {b->lat, b->lat, b->kr, b->kr}; /* empty: no next block */
            few_scores_table[b->bf16][1][HEADS - 1](b->ql, b->qr, b->lat, b->kr, R, ROPE, 0.07f, b->nt, &none, b->raw);
            fmas += (long)b->nt * HEADS * (R + ROPE) / 8;
            break;
        }
        case FEW_PHASE_SOFTMAX: {
            __m256 sum;
            few_weights(b->raw, b->w, b->nt, _mm256_setzero_ps(), &sum);
            __asm__ volatile("" : : "x"(sum) : "memory");
            break;
        }
        case FEW_PHASE_WEIGHTED:
            weighted_units(b, 0, R / 8);
            fmas += (long)b->nt * HEADS * R / 8;
            break;
        case FEW_PHASE_CHUNKS3:
            weighted_units(b, 0, 12);
            fmas += (long)b->nt * HEADS * 96 / 8;
            break;
        default:
            weighted_units(b, 12, 16);
            fmas += (long)b->nt * HEADS * 32 / 8;
            break;
        }
    return fmas;
}
