/* dsspec_eval: teacher-forced logits of every position, the reference hook checkers compare
 * against transformers. Experts come from whatever provider the engine holds; `dsspec eval` opens
 * with DSSPEC_EXPERTS_DIRECT so no cache state can touch these numbers. */
#include <stdlib.h>
#include <string.h>
#include "engine/engine_internal.h"

typedef struct {
    int T, k, base;
    int *routes; /* [n_layers][T][k] */
} route_table;

static void record_route(void *ctx, int layer, int row, const int *experts, int k)
{
    route_table *r = ctx;
    memcpy(r->routes + ((size_t)layer * r->T + r->base + row) * r->k, experts, k * sizeof(int));
}

static int main_pass(dsspec *e, kv_cache *kv, const int *ids, const int *pos, int T, int chunk, float *logits,
                     float *hidden, route_table *rt, char *err, size_t errlen)
{
    int V = e->info.vocab_size, H = e->info.hidden_size;
    for (int s = 0; s < T; s += chunk) {
        int nb = T - s < chunk ? T - s : chunk;
        rt->base = s;
        forward_request req = {.hidden = hidden + (size_t)s * H, .logits = logits + (size_t)s * V, .logits_from = 0,
                               .on_route = rt->routes ? record_route : NULL, .route_ctx = rt};
        if (model_forward(e->m, kv, &e->provider, ids + s, pos + s, nb, &req, err, errlen)) return -1;
    }
    return 0;
}

/* Row t pairs h_t with the next token; the last row's next token is the main model's argmax. */
static int mtp_pass(dsspec *e, kv_cache *mkv, const int *ids, const int *pos, int T, int chunk, const float *logits,
                    const float *hidden, float *mtp_logits, char *err, size_t errlen)
{
    int V = e->info.vocab_size, H = e->info.hidden_size;
    int *next = malloc((size_t)T * sizeof *next);
    if (!next) { error_set(err, errlen, "out of memory for %d positions", T); return -1; }
    for (int t = 0; t + 1 < T; t++) next[t] = ids[t + 1];
    next[T - 1] = sampler_argmax(logits + (size_t)(T - 1) * V, V);
    int rc = 0;
    for (int s = 0; s < T && rc == 0; s += chunk) {
        int nb = T - s < chunk ? T - s : chunk;
        rc = mtp_forward(e->m, mkv, &e->provider, hidden + (size_t)s * H, next + s, pos + s, nb,
                         mtp_logits + (size_t)s * V, 0, 0, err, errlen);
    }
    free(next);
    return rc;
}

/* The lookahead's guesses as the forward pass hands them to a cache, recorded instead of read:
 * target layer t hears from sources max(0, t - depth) .. t - 1 in that order (every layer, dense or
 * MoE, looks ahead), each call holding rank r of row b at r * nb + b. */
typedef struct {
    expert_provider inner;
    int *out;             /* [n_layers source][depth][T][n] */
    int T, depth, n, base, nb, n_layers;
    int *calls;           /* [n_layers] per target: calls heard in this chunk */
} guess_recorder;

static void rec_want(void *self, int layer, const int *experts, int n)
{
    guess_recorder *g = self;
    g->inner.want(g->inner.self, layer, experts, n);
}

static int rec_acquire_any(void *self, int layer, const int *experts, int n, int *which, expert_weights *out)
{
    guess_recorder *g = self;
    return g->inner.acquire_any(g->inner.self, layer, experts, n, which, out);
}

static void rec_release(void *self, int layer, int expert)
{
    guess_recorder *g = self;
    g->inner.release(g->inner.self, layer, expert);
}

static const char *rec_error(void *self)
{
    guess_recorder *g = self;
    return g->inner.error ? g->inner.error(g->inner.self) : "expert read failed";
}

static int rec_holds_layer(void *self, int layer)
{
    (void)self; (void)layer;
    return 0;
}

static void rec_prefetch(void *self, int target, const int *experts, int n)
{
    guess_recorder *g = self;
    int first = target - g->depth > 0 ? target - g->depth : 0, src = first + g->calls[target]++;
    int d = target - src;
    if (d < 1 || d > g->depth || n != g->n * g->nb) return;
    for (int b = 0; b < g->nb; b++)
        for (int r = 0; r < g->n; r++)
            g->out[(((size_t)src * g->depth + d - 1) * g->T + g->base + b) * g->n + r] = experts[r * g->nb + b];
}

int dsspec_eval_guesses(dsspec *e, const int *ids, int T, int chunk, int depth, int n, int *guesses, char *err,
                        size_t errlen)
{
    const model_config *c = model_get_config(e->m);
    if (T < 1) { error_set(err, errlen, "no token ids to evaluate"); return -1; }
    if (depth < 1 || depth > c->num_hidden_layers || n < 1 || n > c->n_routed_experts) {
        error_set(err, errlen, "lookahead depth %d / guesses %d: expected 1..%d layers and 1..%d guesses", depth, n,
                  c->num_hidden_layers, c->n_routed_experts);
        return -1;
    }
    if (dsspec_check_ids(e, ids, T, err, errlen)) return -1;
    if (chunk < 1) chunk = 1;
    if (chunk > T) chunk = T;
    if (model_reserve_scratch(e->m, chunk, T + 1, err, errlen)) return -1;
    guess_recorder g = {.inner = e->provider, .out = guesses, .T = T, .depth = depth, .n = n,
                        .n_layers = c->num_hidden_layers, .calls = calloc((size_t)c->num_hidden_layers, sizeof(int))};
    expert_provider ep = {&g, rec_want, rec_acquire_any, NULL, rec_release, rec_prefetch, rec_holds_layer, rec_error};
    for (size_t i = 0; i < (size_t)c->num_hidden_layers * depth * T * n; i++) guesses[i] = -1;
    kv_cache *kv = kv_cache_create(c, 0, c->num_hidden_layers, T + 1, e->opt.kv_bf16 ? DTYPE_BF16 : DTYPE_F32);
    int *pos = malloc((size_t)T * sizeof(int)), rc = kv && pos && g.calls ? 0 : -1;
    if (rc) error_set(err, errlen, "out of memory for %d positions", T);
    for (int t = 0; t < T && pos; t++) pos[t] = t;
    for (int s = 0; s < T && rc == 0; s += chunk) {
        g.base = s;
        g.nb = T - s < chunk ? T - s : chunk;
        memset(g.calls, 0, (size_t)c->num_hidden_layers * sizeof(int));
        forward_request req = {.prefetch = depth, .prefetch_guesses = n};
        rc = model_forward(e->m, kv, &ep, ids + s, pos + s, g.nb, &req, err, errlen);
    }
    kv_cache_free(kv);
    free(pos);
    free(g.calls);
    return rc;
}

int dsspec_eval(dsspec *e, const int *ids, int T, int chunk, float *logits, int *routes, float *mtp_logits,
                char *err, size_t errlen)
{
    const model_config *c = model_get_config(e->m);
    if (T < 1) { error_set(err, errlen, "no token ids to evaluate"); return -1; }
    if (mtp_logits && !e->info.has_mtp) { error_set(err, errlen, "--mtp: %s has no MTP layer (num_nextn_predict_layers 0)", e->opt.model_dir); return -1; }
    if (dsspec_check_ids(e, ids, T, err, errlen)) return -1;
    if (chunk < 1) chunk = 1;
    if (chunk > T) chunk = T;
    if (model_reserve_scratch(e->m, chunk, T + 1, err, errlen)) return -1;
    int rc = -1;
    dtype_t kvt = e->opt.kv_bf16 ? DTYPE_BF16 : DTYPE_F32;
    kv_cache *kv = kv_cache_create(c, 0, c->num_hidden_layers, T + 1, kvt);
    kv_cache *mkv = mtp_logits ? kv_cache_create(c, c->num_hidden_layers, 1, T + 1, kvt) : NULL;
    float *hidden = malloc((size_t)T * c->hidden_size * sizeof(float));
    int *pos = malloc((size_t)T * sizeof(int));
    route_table rt = {T, c->num_experts_per_tok, 0, routes};
    if (!kv || (mtp_logits && !mkv) || !hidden || !pos) { error_set(err, errlen, "out of memory for %d positions", T); goto done; }
    for (int t = 0; t < T; t++) pos[t] = t;
    if (main_pass(e, kv, ids, pos, T, chunk, logits, hidden, &rt, err, errlen)) goto done;
    if (mtp_logits && mtp_pass(e, mkv, ids, pos, T, chunk, logits, hidden, mtp_logits, err, errlen)) goto done;
    rc = 0;
done:
    kv_cache_free(kv);
    kv_cache_free(mkv);
    free(hidden);
    free(pos);
    return rc;
}
