/* The scratch arena: one allocation carved into every buffer the forward and MTP passes write, so
 * a pass never calls malloc (and cannot fail for memory halfway through a layer). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "core/model_internal.h"
#include "core/text_file.h"

/* The next piece of the arena, 64-byte aligned (a cache line, the widest vector load). With base
 * NULL nothing is handed out and only the size is counted. */
static void *take(char *base, size_t *off, size_t count, size_t size)
{
    void *p = base ? base + *off : NULL;
    *off += (count * size + 63) & ~(size_t)63;
    return p;
}

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* Each pool thread's expert piece: as many rows as a piece or a batch holds, whichever is fewer. */
static void take_pieces(const model *m, int rows, char *base, size_t *off, scratch *s)
{
    int threads = thread_pool_size(m->pool);
    size_t n = rows < EXPERT_PIECE_ROWS ? (size_t)rows : EXPERT_PIECE_ROWS;
    size_t H = m->cfg.hidden_size, I = m->cfg.moe_intermediate_size;
    s->pieces = take(base, off, (size_t)threads, sizeof *s->pieces);
    for (int t = 0; t < threads; t++) {
        expert_piece *p = base ? &s->pieces[t] : &(expert_piece){0};
        p->xs = take(base, off, n * H, sizeof(float));
        p->ys = take(base, off, n * H, sizeof(float));
        p->act = take(base, off, n * I, sizeof(float));
        p->act2 = take(base, off, n * I, sizeof(float));
        p->rows_of = take(base, off, n, sizeof(int));
        p->slot_of = take(base, off, n, sizeof(int));
        atomic_init(&p->busy, 0);
    }
}

/* Lays the buffers out for rows rows; returns the arena's size. Nothing in it grows with the
 * context: attention keeps a running softmax instead of a score per position. */
static size_t carve(const model *m, int rows, char *base, scratch *s)
{
    const model_config *c = &m->cfg;
    size_t off = 0, n = (size_t)rows, H = c->hidden_size, E = c->n_routed_experts, k = c->num_experts_per_tok;
    size_t heads = c->num_attention_heads, R = c->kv_lora_rank, rope = c->qk_rope_head_dim;
    size_t inter = max3(c->intermediate_size, (size_t)c->moe_intermediate_size * c->n_shared_experts, c->moe_intermediate_size);
#define TAKE(field, count) (s->field = take(base, &off, (count), sizeof *s->field))
    TAKE(x, n * H);
    TAKE(xn, n * H);
    TAKE(y, n * H);
    TAKE(qa, n * c->q_lora_rank);
    TAKE(q, n * heads * (c->qk_nope_head_dim + rope));
    TAKE(ckv, n * (R + rope));
    TAKE(q_lat, n * heads * R);
    TAKE(o_lat, n * heads * R);
    TAKE(q_rope, n * heads * rope);
    TAKE(heads_out, n * heads * c->v_head_dim);
    s->attn = take(base, &off, attention_scratch_bytes((int)heads, (int)R, (int)rope, thread_pool_size(m->pool)), 1);
    TAKE(act, n * inter);
    TAKE(act2, n * inter);
    TAKE(router_logits, n * E);
    TAKE(router_scratch, 2 * E);
    TAKE(routes, n);
    TAKE(uni, n * k);
    TAKE(results, n * k * H);
    TAKE(xs, n * H);
    TAKE(ys, n * H);
    TAKE(rows_of, n);
    TAKE(slot_of, n);
    TAKE(taken, n * k < E ? n * k : E);
    take_pieces(m, rows, base, &off, s);
    TAKE(prefetch_xn, n * H);
    TAKE(prefetch_logits, n * E);
    TAKE(guess, n * E);
    TAKE(uni_guess, n * E);
    TAKE(embed_row, H);
    if (m->has_mtp) {
        TAKE(mtp.emb, n * H);
        TAKE(mtp.cat, n * 2 * H);
        TAKE(mtp.u, n * H);
    }
#undef TAKE
    return off;
}

int model_widest_input(const model_config *c)
{
    int w[] = {2 * c->hidden_size, c->intermediate_size, c->moe_intermediate_size * (c->n_shared_experts > 1 ? c->n_shared_experts : 1),
               c->q_lora_rank, c->kv_lora_rank, c->num_attention_heads * c->v_head_dim, c->num_attention_heads * c->qk_nope_head_dim};
    int m = 0;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) m = w[i] > m ? w[i] : m;
    return m;
}

typedef struct {
    int widest;
    atomic_int failed;
} kernel_reserve_job;

static void reserve_on_thread(void *arg, int t)
{
    kernel_reserve_job *j = arg;
    (void)t;
    if (kernels_scratch_reserve(j->widest)) atomic_store(&j->failed, 1);
}

static int kernel_scratch_error(const model *m, char *err, size_t errlen)
{
    error_set(err, errlen, "out of memory for the kernels' per-thread scratch (%zu KiB a thread)",
              kernels_scratch_bytes_per_thread(model_widest_input(&m->cfg)) >> 10);
    return -1;
}

/* The kernels' per-thread scratch on every thread of the pool, now rather than inside a product. */
static int reserve_kernel_scratch(model *m, char *err, size_t errlen)
{
    kernel_reserve_job j = {.widest = model_widest_input(&m->cfg)};
    atomic_init(&j.failed, 0);
    thread_pool_each(m->pool, reserve_on_thread, &j);
    return atomic_load(&j.failed) ? kernel_scratch_error(m, err, errlen) : 0;
}

size_t model_scratch_bytes_for(const model *m, int max_rows, int ctx)
{
    scratch s;
    (void)ctx; /* nothing in the arena grows with the context */
    return carve(m, max_rows, NULL, &s);
}

int model_reserve_scratch(model *m, int max_rows, int ctx, char *err, size_t errlen)
{
    const scratch *old = &m->scratch;
    if (max_rows < 1 || ctx < 1) {
        error_set(err, errlen, "model_reserve_scratch: max_rows %d and ctx %d must both be at least 1", max_rows, ctx);
        return -1;
    }
    if (reserve_kernel_scratch(m, err, errlen)) return -1;
    if (old->base && max_rows <= old->max_rows && ctx <= old->ctx) return 0;
    if (old->base && old->max_rows > max_rows) max_rows = old->max_rows;
    if (old->base && old->ctx > ctx) ctx = old->ctx;
    scratch s = {0};
    size_t bytes = carve(m, max_rows, NULL, &s);
    if (old->base && bytes == old->bytes) { /* only more positions: the same arena serves them */
        m->scratch.max_rows = max_rows;
        m->scratch.ctx = ctx;
        return 0;
    }
    char *base = aligned_alloc(64, bytes);
    if (!base) {
        error_set(err, errlen, "out of memory for the forward pass's scratch (%zu bytes for %d rows over %d positions)", bytes, max_rows, ctx);
        return -1;
    }
    memset(base, 0, bytes);
    carve(m, max_rows, base, &s);
    s.max_rows = max_rows;
    s.ctx = ctx;
    s.bytes = bytes;
    s.base = base;
    free(m->scratch.base);
    m->scratch = s;
    return 0;
}

size_t model_scratch_bytes(const model *m) { return m->scratch.bytes; }

int scratch_check_rows(const model *m, int nb, char *err, size_t errlen)
{
    if (!m->scratch.base) {
        error_set(err, errlen, "the model has no scratch arena: model_reserve_scratch must come before the first pass");
        return -1;
    }
    if (nb > m->scratch.max_rows) {
        error_set(err, errlen, "a batch of %d rows exceeds the %d rows reserved by model_reserve_scratch", nb, m->scratch.max_rows);
        return -1;
    }
    /* The pool's threads reserved theirs in model_reserve_scratch; a pass may come from another
     * thread (a server's job thread): it reserves here, where failing is still an error line. */
    return kernels_scratch_reserve(model_widest_input(&m->cfg)) ? kernel_scratch_error(m, err, errlen) : 0;
}

int model_mtp_buffers(model *m, int nb, mtp_buffers *out, char *err, size_t errlen)
{
    if (!m->has_mtp) {
        error_set(err, errlen, "the checkpoint has no MTP layer (num_nextn_predict_layers is 0)");
        return -1;
    }
    if (scratch_check_rows(m, nb, err, errlen)) return -1;
    *out = m->scratch.mtp;
    return 0;
}
