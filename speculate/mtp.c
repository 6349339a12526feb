#include <stdio.h>
#include <stdlib.h>
#include "speculate/speculate.h"

int mtp_forward(model *m, kv_cache *mtp_kv, expert_provider *ep, const float *hidden, const int *next_tokens,
                const int *pos, int nb, float *logits, int logits_from, char *err, size_t errlen)
{
    const model_config *c = model_get_config(m);
    const mtp_extras *x = model_mtp_extras(m);
    int H = c->hidden_size, rc = -1;
    if (!x) { snprintf(err, errlen, "the checkpoint has no MTP layer (num_nextn_predict_layers is 0)"); return -1; }
    float *emb = malloc((size_t)nb * H * sizeof(float));
    float *cat = malloc((size_t)nb * 2 * H * sizeof(float));
    float *u = malloc((size_t)nb * H * sizeof(float));
    if (!emb || !cat || !u) { snprintf(err, errlen, "out of memory in the MTP pass"); goto done; }

    if (model_embed(m, x->embed_table, next_tokens, nb, emb, err, errlen)) goto done;
    for (int b = 0; b < nb; b++) {
        /* Embedding first, then the hidden state: the serving engines' order (vLLM, SGLang). */
        model_rmsnorm(emb + (size_t)b * H, x->enorm, H, c->rms_norm_eps, cat + (size_t)b * 2 * H);
        model_rmsnorm(hidden + (size_t)b * H, x->hnorm, H, c->rms_norm_eps, cat + (size_t)b * 2 * H + H);
    }
    model_bf16_matvec(m, x->eh_proj_data, H, 2 * H, cat, nb, u);
    if (model_decoder_layer(m, c->num_hidden_layers, mtp_kv, ep, u, pos, nb, NULL, err, errlen)) goto done;
    int max_pos = 0;
    for (int b = 0; b < nb; b++) {
        model_rmsnorm(u + (size_t)b * H, x->head_norm, H, c->rms_norm_eps, u + (size_t)b * H);
        if (pos[b] > max_pos) max_pos = pos[b];
    }
    if (max_pos + 1 > mtp_kv->len) mtp_kv->len = max_pos + 1;
    if (logits && logits_from < nb)
        model_bf16_matvec(m, x->head_data, c->vocab_size, H, u + (size_t)logits_from * H, nb - logits_from, logits);
    rc = 0;
done:
    free(emb); free(cat); free(u);
    return rc;
}
