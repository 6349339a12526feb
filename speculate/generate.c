/* The decode loop, MTP off and on. With MTP on, each step verifies [last, draft] at positions
 * [L, L+1] in one main-model pass; a rejected draft's position is not counted in the sequence, and
 * the MTP layer then runs over the accepted rows to draft the next token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "speculate/speculate.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    model *m;
    expert_provider *ep;
    const gen_options *o;
    gen_stats *st;
    kv_cache *kv, *mtp_kv;
    int len;         /* positions of kv that hold the sequence: the next row goes at len */
    int n_prompt;
    int V, H;
    float *logits;   /* [2][V] */
    float *hidden;   /* [max(chunk, 2)][H] */
    float *mtp_logits;
    char *err;
    size_t errlen;
} decoder;

/* Emit one generated token; returns 1 when generation must stop after it. */
static int emit(decoder *d, int token)
{
    d->st->generated++;
    if (d->o->on_token) d->o->on_token(d->o->token_ctx, token);
    if (token == d->o->eos_id) { d->st->stopped_by_eos = 1; return 1; }
    return d->st->generated >= d->o->max_new;
}

static int step_hook(decoder *d)
{
    return d->o->on_step ? d->o->on_step(d->o->step_ctx, d->st->generated) : 0;
}

/* Reports a step boundary (gen_checkpoint); -1 when the observer failed. */
static int report_boundary(decoder *d, int prefill_done, int last, int draft)
{
    const gen_options *o = d->o;
    if (!o->on_checkpoint) return 0;
    const gen_stats *st = d->st;
    gen_checkpoint cp = {d->len, prefill_done, last, draft, o->sampler->state,
                         st->generated, st->main_passes, st->drafts, st->accepted};
    return o->on_checkpoint(o->checkpoint_ctx, &cp, d->kv, d->mtp_kv, d->err, d->errlen) ? -1 : 0;
}

/* MTP over rows pairing hidden[i] with next[i] at pos0 + i; *draft = argmax of the last row. */
static int draft_next(decoder *d, const float *hidden, const int *next, int pos0, int nb, int *draft)
{
    int pos[2] = {pos0, pos0 + 1};
    if (mtp_forward(d->m, d->mtp_kv, d->ep, hidden, next, pos, nb, d->mtp_logits, nb - 1, d->err, d->errlen)) return -1;
    *draft = sampler_argmax(d->mtp_logits, d->V);
    return 0;
}

/* One prompt chunk [start, start + nb); the MTP (when on) runs over every row whose next token is
 * known. */
static int prefill_chunk(decoder *d, const int *prompt, int start, int nb, int *pos)
{
    const gen_options *o = d->o;
    int n = d->n_prompt, last_chunk = start + nb == n;
    for (int b = 0; b < nb; b++) pos[b] = start + b;
    forward_request req = {.hidden = d->hidden, .logits = last_chunk ? d->logits : NULL, .logits_from = nb - 1,
                           .on_route = o->on_route, .route_ctx = o->route_ctx, .prefetch = o->prefetch};
    if (model_forward(d->m, d->kv, d->ep, prompt + start, pos, nb, &req, d->err, d->errlen)) return -1;
    int known = last_chunk ? nb - 1 : nb; /* the last prompt row waits for the sampled token */
    if (o->mtp && known > 0 &&
        mtp_forward(d->m, d->mtp_kv, d->ep, d->hidden, prompt + start + 1, pos, known, NULL, 0, d->err, d->errlen))
        return -1;
    if (o->mtp && last_chunk) /* keep h_{n-1} for the draft */
        memmove(d->hidden, d->hidden + (size_t)(nb - 1) * d->H, d->H * sizeof(float));
    return 0;
}

/* Prompt rows [from, n) in chunks. Each non-final chunk is a step boundary (its rows' main and MTP
 * KV are complete); the final one is not, since its last MTP row waits for the first token. */
static int prefill(decoder *d, const int *prompt, int from)
{
    const gen_options *o = d->o;
    int chunk = o->prefill_chunk, n = d->n_prompt;
    int *pos = malloc((size_t)chunk * sizeof *pos);
    if (!pos) { snprintf(d->err, d->errlen, "out of memory"); return -1; }
    int rc = 0;
    for (int start = from; start < n && rc == 0; start += chunk) {
        int nb = n - start < chunk ? n - start : chunk;
        rc = prefill_chunk(d, prompt, start, nb, pos);
        if (rc == 0 && start + nb < n) {
            d->len = start + nb;
            rc = report_boundary(d, start + nb, -1, -1);
        }
        if (rc == 0 && o->on_prefill && o->on_prefill(o->prefill_ctx, start + nb, n) && start + nb < n) {
            d->st->stopped_in_prefill = 1;
            break;
        }
    }
    free(pos);
    return rc;
}

/* The top of every decode step: report the boundary, let the caller stop. 1: stop, -1: error. */
static int step_boundary(decoder *d, int last, int draft)
{
    if (report_boundary(d, d->n_prompt, last, draft)) return -1;
    return step_hook(d) || d->st->generated >= d->o->max_new;
}

static int decode_plain(decoder *d, int last)
{
    while (1) {
        int b = step_boundary(d, last, -1);
        if (b) return b < 0 ? -1 : 0;
        if (d->len + 1 > d->o->ctx) { d->st->stopped_by_ctx = 1; return 0; }
        forward_request req = {.logits = d->logits, .on_route = d->o->on_route, .route_ctx = d->o->route_ctx,
                               .prefetch = d->o->prefetch};
        if (model_forward(d->m, d->kv, d->ep, &last, &d->len, 1, &req, d->err, d->errlen)) return -1;
        d->st->main_passes++;
        last = sampler_pick(d->o->sampler, d->logits);
        d->len++;
        if (emit(d, last)) return 0;
    }
}

/* draft < 0: draft from the hidden state the prefill left (a fresh start); else a restored one. */
static int decode_speculative(decoder *d, int last, int draft)
{
    if (draft < 0 && draft_next(d, d->hidden, &last, d->len - 1, 1, &draft)) return -1;
    while (1) {
        int b = step_boundary(d, last, draft);
        if (b) return b < 0 ? -1 : 0;
        int L = d->len;
        if (L + 2 > d->o->ctx) { d->st->stopped_by_ctx = 1; return 0; }
        int rows[2] = {last, draft}, pos[2] = {L, L + 1};
        forward_request req = {.hidden = d->hidden, .logits = d->logits, .on_route = d->o->on_route,
                               .route_ctx = d->o->route_ctx, .prefetch = d->o->prefetch};
        if (model_forward(d->m, d->kv, d->ep, rows, pos, 2, &req, d->err, d->errlen)) return -1;
        d->st->main_passes++;
        d->st->drafts++;
        int t0;
        if (verify_draft(d->o->sampler, d->logits, draft, &t0)) {
            d->st->accepted++;
            d->len = L + 2;
            if (emit(d, draft)) return 0;
            int t1 = sampler_pick(d->o->sampler, d->logits + d->V);
            if (emit(d, t1)) return 0;
            int next[2] = {draft, t1};
            if (draft_next(d, d->hidden, next, L, 2, &draft)) return -1;
            last = t1;
        } else {
            /* The draft's KV row at L + 1 stays in the cache unread: rows attend to 0..pos only, and
             * the next pass writes position L + 1 (for t0) before any row reads it. */
            d->len = L + 1;
            if (emit(d, t0)) return 0;
            if (draft_next(d, d->hidden, &t0, L, 1, &draft)) return -1;
            last = t0;
        }
    }
}

static int decode(decoder *d, int last, int draft)
{
    return d->o->mtp ? decode_speculative(d, last, draft) : decode_plain(d, last);
}

/* From o->resume's boundary (or the start): the rest of the prompt, then the decode. */
static int run_from(decoder *d, const int *prompt)
{
    const gen_checkpoint *r = d->o->resume;
    double t0 = now_seconds();
    if (r && r->prefill_done >= d->n_prompt) {
        int rc = decode(d, r->last, r->draft);
        d->st->decode_seconds = now_seconds() - t0;
        return rc;
    }
    if (prefill(d, prompt, r ? r->prefill_done : 0)) return -1;
    d->st->prefill_seconds = now_seconds() - t0;
    if (d->st->stopped_in_prefill) return 0;
    d->len = d->n_prompt;
    int first = sampler_pick(d->o->sampler, d->logits);
    t0 = now_seconds();
    int rc = 0;
    if (d->o->max_new > 0 && !emit(d, first)) rc = decode(d, first, -1);
    d->st->decode_seconds = now_seconds() - t0;
    return rc;
}

static int restore(decoder *d)
{
    const gen_checkpoint *r = d->o->resume;
    if (!r) return 0;
    if (r->len > d->o->ctx || r->prefill_done > d->n_prompt || (r->prefill_done == d->n_prompt && r->last < 0)) {
        snprintf(d->err, d->errlen, "resume point (position %d, prompt row %d) does not fit this prompt and --ctx %d",
                 r->len, r->prefill_done, d->o->ctx);
        return -1;
    }
    if (d->o->restore_kv(d->o->checkpoint_ctx, d->kv, d->mtp_kv, d->err, d->errlen)) return -1;
    d->len = r->len;
    d->st->generated = r->generated;
    d->st->main_passes = r->main_passes;
    d->st->drafts = r->drafts;
    d->st->accepted = r->accepted;
    return 0;
}

int generate(model *m, expert_provider *ep, const int *prompt, int n_prompt, const gen_options *o, gen_stats *st,
             char *err, size_t errlen)
{
    const model_config *c = model_get_config(m);
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n_prompt;
    if (n_prompt <= 0) { snprintf(err, errlen, "empty prompt: at least one token is needed"); return -1; }
    if (n_prompt + 1 > o->ctx) { snprintf(err, errlen, "prompt of %d tokens does not fit --ctx %d", n_prompt, o->ctx); return -1; }
    if (o->mtp && !model_has_mtp(m)) { snprintf(err, errlen, "--mtp on: the checkpoint has no MTP layer"); return -1; }
    int chunk = o->prefill_chunk > 0 ? o->prefill_chunk : 1;
    gen_options opts = *o;
    opts.prefill_chunk = chunk;
    decoder d = {m, ep, &opts, st, NULL, NULL, 0, n_prompt, c->vocab_size, c->hidden_size, NULL, NULL, NULL, err, errlen};
    int rc = -1;
    dtype_t kvt = o->kv_bf16 ? DTYPE_BF16 : DTYPE_F32;
    d.kv = kv_cache_create(c, 0, c->num_hidden_layers, o->ctx, kvt);
    d.mtp_kv = o->mtp ? kv_cache_create(c, c->num_hidden_layers, 1, o->ctx, kvt) : NULL;
    d.logits = malloc(2 * (size_t)d.V * sizeof(float));
    d.mtp_logits = malloc(2 * (size_t)d.V * sizeof(float));
    d.hidden = malloc((size_t)(chunk > 2 ? chunk : 2) * d.H * sizeof(float));
    if (!d.kv || (o->mtp && !d.mtp_kv) || !d.logits || !d.mtp_logits || !d.hidden)
        snprintf(err, errlen, "out of memory for the KV cache (--ctx %d)", o->ctx);
    else if (restore(&d) == 0)
        rc = run_from(&d, prompt);
    kv_cache_free(d.kv);
    kv_cache_free(d.mtp_kv);
    free(d.logits);
    free(d.mtp_logits);
    free(d.hidden);
    return rc;
}
