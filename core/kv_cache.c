/* The latent KV cache: [n_layers][ctx] latents and rotated keys, F32 or BF16. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "core/model_internal.h"

size_t kv_cache_bytes(const model_config *c, int n_layers, int ctx, dtype_t dtype)
{
    return (size_t)n_layers * ctx * (c->kv_lora_rank + c->qk_rope_head_dim) * dtype_size(dtype);
}

enum { HUGE_PAGE = 2 << 20 };

/* Attention streams a layer's cache through the TLB: with 4 KiB pages a page walk every 6-13 rows at
 * the embedded width, and the rows prefetched ahead wait on it (bench_attention: 4-7% of the time
 * at the embedded width). So large caches ask for transparent huge pages (Debian's default THP mode
 * is madvise); the advice may be refused, which changes nothing else. */
static void *kv_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes < HUGE_PAGE) return malloc(bytes);
    if (posix_memalign(&p, HUGE_PAGE, bytes)) return NULL;
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

kv_cache *kv_cache_create(const model_config *c, int first_layer, int n_layers, int ctx, dtype_t dtype)
{
    if (dtype != DTYPE_F32 && dtype != DTYPE_BF16) return NULL;
    kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return NULL;
    kv->dtype = dtype;
    kv->first_layer = first_layer;
    kv->n_layers = n_layers;
    kv->ctx = ctx;
    kv->latent_dim = c->kv_lora_rank;
    kv->rope_dim = c->qk_rope_head_dim;
    kv->latent = kv_alloc((size_t)n_layers * ctx * kv->latent_dim * dtype_size(dtype));
    kv->krope = kv_alloc((size_t)n_layers * ctx * kv->rope_dim * dtype_size(dtype));
    if (!kv->latent || !kv->krope) { kv_cache_free(kv); return NULL; }
    return kv;
}

void kv_cache_free(kv_cache *kv)
{
    if (!kv) return;
    free(kv->latent);
    free(kv->krope);
    free(kv);
}

void kv_cache_store(kv_cache *kv, int kv_layer, int pos, const float *latent, const float *krope)
{
    size_t lo = ((size_t)kv_layer * kv->ctx + pos) * kv->latent_dim, ro = ((size_t)kv_layer * kv->ctx + pos) * kv->rope_dim;
    if (kv->dtype == DTYPE_F32) {
        memcpy((float *)kv->latent + lo, latent, kv->latent_dim * sizeof(float));
        memcpy((float *)kv->krope + ro, krope, kv->rope_dim * sizeof(float));
        return;
    }
    for (int i = 0; i < kv->latent_dim; i++) ((uint16_t *)kv->latent)[lo + i] = float_to_bf16(latent[i]);
    for (int i = 0; i < kv->rope_dim; i++) ((uint16_t *)kv->krope)[ro + i] = float_to_bf16(krope[i]);
}
