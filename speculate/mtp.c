/* The MTP block: the checkpoint's extra layer drafting the token after next from the main model's
 * hidden state and the next token's embedding. Its rows live in the model's scratch arena. */
#include "speculate/speculate.h"

int mtp_forward(model *m, kv_cache *mtp_kv, expert_provider *ep, const float *hidden, const int *next_tokens,
                const int *pos, int nb, float *logits, int logits_from, int attend_from, char *err, size_t errlen)
{
    const model_config *c = model_get_config(m);
    const mtp_extras *x = model_mtp_extras(m);
    int H = c->hidden_size, L = c->num_hidden_layers, full = logits ? logits_from : nb;
    mtp_buffers buf;
    if (model_mtp_buffers(m, nb, &buf, err, errlen)) return -1;
    if (model_embed(m, x->embed_table, next_tokens, nb, buf.emb, err, errlen)) return -1;
    for (int b = 0; b < nb; b++) {
        /* Embedding first, then the hidden state: the serving engines' order (vLLM, SGLang). */
        model_rmsnorm(buf.emb + (size_t)b * H, x->enorm, H, c->rms_norm_eps, buf.cat + (size_t)b * 2 * H);
        model_rmsnorm(hidden + (size_t)b * H, x->hnorm, H, c->rms_norm_eps, buf.cat + (size_t)b * 2 * H + H);
    }
    model_bf16_matvec(m, x->eh_proj_data, H, 2 * H, buf.cat, nb, buf.u);
    /* Rows whose logits nobody reads only leave their KV entry for later MTP rows; the block is the
     * last layer, so their outputs would go nowhere: write the entry, skip attention and experts. */
    if (full > 0 && model_layer_write_kv(m, L, mtp_kv, buf.u, pos, full, err, errlen)) return -1;
    if (full >= nb) return 0;
    float *u = buf.u + (size_t)full * H;
    forward_request req = {.attend_from = attend_from};
    if (model_decoder_layer(m, L, mtp_kv, ep, u, pos + full, nb - full, &req, err, errlen)) return -1;
    for (int b = 0; b < nb - full; b++) model_rmsnorm(u + (size_t)b * H, x->head_norm, H, c->rms_norm_eps, u + (size_t)b * H);
    model_bf16_matvec(m, x->head_data, c->vocab_size, H, u, nb - full, logits);
    return 0;
}
