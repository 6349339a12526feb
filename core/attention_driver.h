/* The ISA-independent half of an attention path: one work item's loop over its blocks. Included
 * last by attention.c (scalar), attention_avx2.c and attention_avx512.c, so that their inline
 * primitives inline into it, after they define:
 *   ATTN_ISA      the name suffix: the file then exports attention_item_<ATTN_ISA>
 *   attn_scores(ql, qr, nh, lat, kr, nt, R, rope, scale, s, ahead)
 *                 s[h * ATTN_BLOCK + t] = scale * (ql[h] . lat[t] + qr[h] . kr[t]), h < nh, t < nt;
 *                 prefetches ahead's rows [0, nt) as it goes
 *   attn_softmax_block(s, nh, nt, m, l, alpha)
 *                 per head: the new running max m', alpha = exp(m - m'), s = exp(s - m'),
 *                 l = l * alpha + sum(s), m = m'
 *   attn_weighted(acc, nh, R, alpha, s, lat, nt)
 *                 acc[h] = acc[h] * alpha[h] + sum_t s[h][t] * lat[t]
 *   attn_widen_bf16(src, n, dst)     n BF16 values to floats
 * The reduction order of every value depends only on the item's bounds and the primitives. */
#ifndef ATTN_ISA
#error "attention_driver.h is included last by an attention path file, after ATTN_ISA"
#endif

#define ATTN_ISA_PASTE(name, isa) name##_##isa
#define ATTN_ISA_NAME(name, isa) ATTN_ISA_PASTE(name, isa)

/* Rows [u, u + n) of the BF16 block of nt positions at t, widened into their places in conv: the
 * block's latents [nt][R], then its rope keys [nt][rope]. */
static void widen_block_rows(const attention_kv *kv, int t, int nt, int u, int n, float *conv)
{
    attn_widen_bf16((const uint16_t *)kv->latent + (size_t)(t + u) * kv->R, n * kv->R, conv + (size_t)u * kv->R);
    attn_widen_bf16((const uint16_t *)kv->krope + (size_t)(t + u) * kv->rope, n * kv->rope,
                    conv + (size_t)nt * kv->R + (size_t)u * kv->rope);
}

/* The F32 rows of positions [t, t + nt): the cache itself, or the block widened into conv (widen:
 * now; else the caller widens it, widen_block_rows). */
static void block_rows(const attention_kv *kv, int t, int nt, float *conv, int widen, const float **lat, const float **kr)
{
    if (kv->dtype == DTYPE_F32) {
        *lat = (const float *)kv->latent + (size_t)t * kv->R;
        *kr = (const float *)kv->krope + (size_t)t * kv->rope;
        return;
    }
    if (widen) widen_block_rows(kv, t, nt, 0, nt, conv);
    *lat = conv;
    *kr = conv + (size_t)nt * kv->R;
}

void ATTN_ISA_NAME(attention_item, ATTN_ISA)(const attention_item *it)
{
    const attention_kv *kv = it->kv;
    int R = kv->R, rope = kv->rope, nh = it->nh;
    float s[ATTN_GROUP_HEADS * ATTN_BLOCK] __attribute__((aligned(64)));
    float alpha[ATTN_GROUP_HEADS];
    for (int h = 0; h < nh; h++) {
        it->m[h] = -INFINITY;
        it->l[h] = 0.0f;
    }
    memset(it->acc, 0, (size_t)nh * R * sizeof(float));
    for (int t = it->t0; t < it->t1; t += ATTN_BLOCK) {
        int nt = it->t1 - t < ATTN_BLOCK ? it->t1 - t : ATTN_BLOCK;
        const float *lat, *kr;
        block_rows(kv, t, nt, it->conv, 1, &lat, &kr);
        attention_ahead ahead = attention_block_after(kv, t, it->n, ATTN_BLOCK);
        attn_scores(it->q_lat, it->q_rope, nh, lat, kr, nt, R, rope, kv->scale, s, &ahead);
        attn_softmax_block(s, nh, nt, it->m, it->l, alpha);
        attn_weighted(it->acc, nh, R, alpha, s, lat, nt);
    }
}
