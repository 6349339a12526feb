/* Loading: every resident weight of the main layers and the MTP layer, found and checked through
 * the tensor table. Routed experts and the embedding tables stay on disk: experts come through an
 * expert_provider, embedding rows are read per token. */
#include <stdlib.h>
#include <string.h>
#include "core/model_internal.h"
#include "core/tensor_table.h"
#include "core/text_file.h"

static void *model_alloc(model *m, size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) return NULL;
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 256;
        void **o = realloc(m->owned, cap * sizeof *o);
        if (!o) { free(p); return NULL; }
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    m->resident_bytes += bytes;
    return p;
}

static void *read_tensor(model *m, const tensor_info *t, char *err, size_t errlen)
{
    void *p = model_alloc(m, t->nbytes);
    if (!p) { error_set(err, errlen, "out of memory loading tensor %s (%llu bytes)", t->name, (unsigned long long)t->nbytes); return NULL; }
    if (checkpoint_read_once(m->ck, t, 0, p, t->nbytes, err, errlen) != 0) return NULL;
    return p;
}

typedef struct {
    model *m;
    int layer;
    char *err;
    size_t errlen;
} loader;

/* A 1-D weight (a norm, BF16 or F32 on disk; the router bias, F32) as fp32. */
static int load_vector(const loader *ld, tensor_kind kind, float **out)
{
    const tensor_info *t = tensor_table_find(ld->m->ck, kind, ld->layer, 0, NULL, ld->err, ld->errlen);
    void *raw = t ? read_tensor(ld->m, t, ld->err, ld->errlen) : NULL;
    if (!raw) return -1;
    if (t->dtype == DTYPE_F32) { *out = raw; return 0; }
    int n = (int)t->shape[0];
    float *v = model_alloc(ld->m, (size_t)n * sizeof(float));
    if (!v) { error_set(ld->err, ld->errlen, "out of memory loading tensor %s", t->name); return -1; }
    for (int i = 0; i < n; i++) v[i] = bf16_to_float(((const uint16_t *)raw)[i]);
    *out = v;
    return 0;
}

/* A 2-D weight as the kernels take it: FP8 with its block scales, or BF16. */
static int load_matrix(const loader *ld, tensor_kind kind, matrix *w)
{
    const tensor_info *scale, *t = tensor_table_find(ld->m->ck, kind, ld->layer, 0, &scale, ld->err, ld->errlen);
    if (!t) return -1;
    *w = (matrix){t->dtype, (int)t->shape[0], (int)t->shape[1], NULL, NULL};
    if (!(w->data = read_tensor(ld->m, t, ld->err, ld->errlen))) return -1;
    if (scale && !(w->scale = read_tensor(ld->m, scale, ld->err, ld->errlen))) return -1;
    return 0;
}

static int load_layer(model *m, int l, char *err, size_t errlen)
{
    layer_weights *lw = &m->layers[l];
    loader ld = {m, l, err, errlen};
    lw->is_moe = config_layer_is_moe(&m->cfg, l);
    if (load_vector(&ld, TT_INPUT_NORM, &lw->input_norm) || load_vector(&ld, TT_POST_NORM, &lw->post_norm) ||
        load_vector(&ld, TT_Q_A_NORM, &lw->q_a_norm) || load_vector(&ld, TT_KV_A_NORM, &lw->kv_a_norm) ||
        load_matrix(&ld, TT_Q_A, &lw->q_a) || load_matrix(&ld, TT_Q_B, &lw->q_b) || load_matrix(&ld, TT_KV_A, &lw->kv_a) ||
        load_matrix(&ld, TT_KV_B, &lw->kv_b) || load_matrix(&ld, TT_O, &lw->o))
        return -1;
    if (!lw->is_moe)
        return load_matrix(&ld, TT_MLP_GATE, &lw->gate) || load_matrix(&ld, TT_MLP_UP, &lw->up) ||
               load_matrix(&ld, TT_MLP_DOWN, &lw->down) ? -1 : 0;
    return load_matrix(&ld, TT_SHARED_GATE, &lw->gate) || load_matrix(&ld, TT_SHARED_UP, &lw->up) ||
           load_matrix(&ld, TT_SHARED_DOWN, &lw->down) || load_matrix(&ld, TT_ROUTER, &lw->router) ||
           load_vector(&ld, TT_ROUTER_BIAS, &lw->router_bias) ? -1 : 0;
}

/* 1 when two tensors hold the same bytes, 0 when not, -1 on a read error. */
static int tensors_identical(const model *m, const tensor_info *a, const tensor_info *b, char *err, size_t errlen)
{
    if (a->nbytes != b->nbytes || a->dtype != b->dtype) return 0;
    size_t chunk = 1 << 20;
    char *pa = malloc(chunk), *pb = malloc(chunk);
    int same = pa && pb;
    for (uint64_t off = 0; same && off < a->nbytes; off += chunk) {
        uint64_t n = a->nbytes - off < chunk ? a->nbytes - off : chunk;
        if (checkpoint_read_once(m->ck, a, off, pa, n, err, errlen) || checkpoint_read_once(m->ck, b, off, pb, n, err, errlen)) same = -1;
        else same = memcmp(pa, pb, n) == 0;
    }
    free(pa);
    free(pb);
    return same;
}

/* The MTP layer's embed_tokens and shared_head.head are copies of the main ones in released
 * checkpoints: they are shared only when byte-identical, else the layer keeps its own. */
static int load_mtp(model *m, char *err, size_t errlen)
{
    int L = m->cfg.num_hidden_layers;
    loader ld = {m, L, err, errlen};
    mtp_extras *x = &m->mtp;
    float *enorm, *hnorm, *head_norm;
    matrix eh, head;
    if (load_vector(&ld, TT_MTP_ENORM, &enorm) || load_vector(&ld, TT_MTP_HNORM, &hnorm) ||
        load_vector(&ld, TT_MTP_HEAD_NORM, &head_norm) || load_matrix(&ld, TT_MTP_EH_PROJ, &eh))
        return -1;
    *x = (mtp_extras){.enorm = enorm, .hnorm = hnorm, .head_norm = head_norm, .eh_proj_data = eh.data};

    const tensor_info *own_embed = tensor_table_find(m->ck, TT_MTP_EMBED, L, 0, NULL, err, errlen);
    int same = own_embed ? tensors_identical(m, own_embed, m->embed, err, errlen) : -1;
    if (same < 0) return -1;
    x->embed_table = same ? m->embed : own_embed;

    const tensor_info *own_head = tensor_table_find(m->ck, TT_MTP_HEAD, L, 0, NULL, err, errlen);
    const tensor_info *main_head = tensor_table_find(m->ck, TT_LM_HEAD, 0, 0, NULL, err, errlen);
    same = own_head && main_head ? tensors_identical(m, own_head, main_head, err, errlen) : -1;
    if (same < 0) return -1;
    if (same) x->head_data = m->lm_head.data;
    else if (load_matrix(&ld, TT_MTP_HEAD, &head)) return -1;
    else x->head_data = head.data;
    return 0;
}

model *model_load(const checkpoint *ck, thread_pool *pool, char *err, size_t errlen)
{
    model *m = calloc(1, sizeof *m);
    if (!m) { error_set(err, errlen, "out of memory"); return NULL; }
    m->ck = ck;
    m->cfg = ck->cfg;
    m->pool = pool;
    const model_config *c = &m->cfg;
    rope_init(&m->rope, c);
    m->attn_scale = mla_softmax_scale(c);
    m->router = (router_params){c->n_routed_experts, c->n_group, c->topk_group, c->num_experts_per_tok,
                                c->norm_topk_prob, c->routed_scaling_factor};
    m->has_mtp = c->num_nextn_predict_layers > 0;
    m->n_layers = c->num_hidden_layers + (m->has_mtp ? 1 : 0);
    m->layers = calloc(m->n_layers, sizeof *m->layers);
    loader ld = {m, 0, err, errlen};
    if (!m->layers) { error_set(err, errlen, "out of memory"); goto fail; }
    if (!(m->embed = tensor_table_find(ck, TT_EMBED, 0, 0, NULL, err, errlen))) goto fail;
    for (int l = 0; l < m->n_layers; l++)
        if (load_layer(m, l, err, errlen)) goto fail;
    if (load_vector(&ld, TT_FINAL_NORM, &m->final_norm) || load_matrix(&ld, TT_LM_HEAD, &m->lm_head)) goto fail;
    if (m->has_mtp && load_mtp(m, err, errlen)) goto fail;
    return m;
fail:
    model_free(m);
    return NULL;
}

void model_free(model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    free(m->scratch.base);
    free(m);
}

const model_config *model_get_config(const model *m) { return &m->cfg; }
const checkpoint *model_get_checkpoint(const model *m) { return m->ck; }
size_t model_resident_bytes(const model *m) { return m->resident_bytes; }
int model_has_mtp(const model *m) { return m->has_mtp; }
const mtp_extras *model_mtp_extras(const model *m) { return m->has_mtp ? &m->mtp : NULL; }
