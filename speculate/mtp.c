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
    /* Rows whose logits nobody reads only leave their KV entry for later MTP rows; the block is the
     * last layer, so their outputs would go nowhere: write the entry, skip attention and experts. */
    int L = c->num_hidden_layers, full = logits ? logits_from : nb;
    if (full > 0 && model_layer_write_kv(m, L, mtp_kv, u, pos, full, err, errlen)) goto done;
    if (full < nb && model_decoder_layer(m, L, mtp_kv, ep, u + (size_t)full * H, pos + full, nb - full, NULL, err, errlen))
        goto done;
    int max_pos = 0;
    for (int b = 0; b < nb; b++) if (pos[b] > max_pos) max_pos = pos[b];
    if (max_pos + 1 > mtp_kv->len) mtp_kv->len = max_pos + 1;
    for (int b = full; b < nb; b++) model_rmsnorm(u + (size_t)b * H, x->head_norm, H, c->rms_norm_eps, u + (size_t)b * H);
    if (full < nb) model_bf16_matvec(m, x->head_data, c->vocab_size, H, u + (size_t)full * H, nb - full, logits);
    rc = 0;
done:
    free(emb); free(cat); free(u);
    return rc;
}
