/* dsspec_generate: the public parameters turned into the decode loop's options (speculate/), with
 * the model's own sampling defaults filled in where the caller left them open. */
#include <stdlib.h>
#include <string.h>
#include "engine/engine_internal.h"

void dsspec_generate_params_default(dsspec_generate_params *p)
{
    memset(p, 0, sizeof *p);
    p->max_new = 128;
    p->temperature = -1;
    p->top_p = -1;
    p->seed = 42;
}

const char *dsspec_stop_reason_name(dsspec_stop_reason r)
{
    static const char *names[] = {"max_tokens", "eos", "ctx_full", "callback", "io_error", "stop"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

double dsspec_decode_tokens_per_second(const dsspec_gen_stats *st)
{
    return st->decode_seconds > 0 ? (st->generated > 1 ? st->generated - 1 : 0) / st->decode_seconds : 0;
}

/* The generated text with stop strings cut out. pending holds text not yet delivered: it may
 * begin a stop string. Delivered text never contains the start of a match (the longest suffix
 * that is a prefix of a stop string is always held back), so a match is searched for only in
 * pending. */
typedef struct {
    const dsspec_generate_params *p;
    tokenizer_stream *stream;
    char *pending;
    size_t len, cap;
    int hit;
} text_relay;

static void deliver(text_relay *t, size_t n)
{
    if (n && t->p->on_text) t->p->on_text(t->p->ctx, t->pending, n);
    memmove(t->pending, t->pending + n, t->len - n);
    t->len -= n;
}

/* Bytes at the end of pending that could still grow into a stop string. */
static size_t held_back(const text_relay *t)
{
    size_t hold = 0;
    for (int i = 0; i < t->p->n_stop; i++) {
        const char *s = t->p->stop[i];
        size_t sl = strlen(s), l = sl - 1 < t->len ? sl - 1 : t->len;
        for (; l > hold; l--)
            if (!memcmp(t->pending + t->len - l, s, l)) { hold = l; break; }
    }
    return hold;
}

static int text_append(text_relay *t, const char *text, size_t n)
{
    if (t->len + n > t->cap) {
        size_t cap = (t->len + n) * 2 + 64;
        char *grown = realloc(t->pending, cap);
        if (!grown) return -1;
        t->pending = grown;
        t->cap = cap;
    }
    memcpy(t->pending + t->len, text, n);
    t->len += n;
    return 0;
}

/* New text: deliver up to the earliest stop string (and stop), else all but what may begin one. */
static void text_push(text_relay *t, const char *text, size_t n)
{
    if (t->hit || !n || text_append(t, text, n)) return;
    size_t first = t->len;
    for (int i = 0; i < t->p->n_stop; i++) {
        const char *at = memmem(t->pending, t->len, t->p->stop[i], strlen(t->p->stop[i]));
        if (at && (size_t)(at - t->pending) < first) first = (size_t)(at - t->pending);
    }
    if (first < t->len) { t->hit = 1; deliver(t, first); return; }
    deliver(t, t->len - held_back(t));
}

/* The step hook remembers whether the caller asked to stop, so the stop reason is the truth. */
typedef struct {
    const dsspec_generate_params *p;
    int stopped;
    text_relay text;
} step_relay;

static void relay_token(void *ctx, int token)
{
    step_relay *r = ctx;
    if (r->p->on_token) r->p->on_token(r->p->ctx, token);
    if (!r->text.stream || r->text.hit) return;
    size_t n;
    const char *s = tokenizer_stream_push(r->text.stream, token, &n);
    if (s) text_push(&r->text, s, n);
}

static int relay_step(void *ctx, int generated)
{
    step_relay *r = ctx;
    if (r->text.hit) return 1;
    if (!r->p->on_step) return 0;
    r->stopped = r->p->on_step(r->p->ctx, generated) != 0;
    return r->stopped;
}

/* What is left in the stream and held back is delivered when no stop string came. */
static void text_finish(text_relay *t)
{
    if (!t->stream) return;
    size_t n;
    const char *s = t->hit ? NULL : tokenizer_stream_flush(t->stream, &n);
    if (s) text_push(t, s, n);
    if (!t->hit) deliver(t, t->len);
    tokenizer_stream_free(t->stream);
    free(t->pending);
}

static int text_start(dsspec *e, const dsspec_generate_params *p, text_relay *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->p = p;
    for (int i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !p->stop[i][0]) { error_set(err, errlen, "stop string %d is empty", i + 1); return -1; }
    if (!p->on_text && p->n_stop == 0) return 0;
    if (!e->tok) { error_set(err, errlen, "stop strings and text output need the tokenizer (load_tokenizer)"); return -1; }
    if (!(t->stream = tokenizer_stream_create(e->tok, 1))) { error_set(err, errlen, "out of memory"); return -1; }
    return 0;
}

static dsspec_stop_reason stop_reason(const gen_stats *g, int rc, const step_relay *r)
{
    if (rc) return DSSPEC_STOP_IO_ERROR;
    if (r->text.hit) return DSSPEC_STOP_STRING;
    if (g->stopped_by_eos) return DSSPEC_STOP_EOS;
    if (g->stopped_by_ctx) return DSSPEC_STOP_CTX_FULL;
    return r->stopped ? DSSPEC_STOP_CALLBACK : DSSPEC_STOP_MAX_TOKENS;
}

int dsspec_generate(dsspec *e, const int *prompt, int n, const dsspec_generate_params *p, dsspec_gen_stats *st,
                    char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n;
    st->temperature = p->temperature >= 0 ? p->temperature : e->info.default_temperature;
    st->top_p = p->top_p >= 0 ? p->top_p : e->info.default_top_p;
    int rows = e->opt.prefill_chunk > 2 ? e->opt.prefill_chunk : 2;
    if (dsspec_check_ids(e, prompt, n, err, errlen) || model_reserve_scratch(e->m, rows, e->opt.ctx, err, errlen)) {
        st->stopped_by = DSSPEC_STOP_IO_ERROR;
        return -1;
    }
    step_relay relay = {p, 0, {0}};
    sampler *smp = sampler_create(e->info.vocab_size, st->temperature, st->top_p, p->seed);
    if (!smp) { error_set(err, errlen, "out of memory"); st->stopped_by = DSSPEC_STOP_IO_ERROR; return -1; }
    sampler_set_top_k_min_p(smp, p->top_k, p->min_p);
    if (text_start(e, p, &relay.text, err, errlen)) { sampler_free(smp); st->stopped_by = DSSPEC_STOP_IO_ERROR; return -1; }
    gen_options g = {.mtp = e->opt.mtp, .max_new = p->max_new, .eos_id = p->ignore_eos ? -1 : e->info.eos_id,
                     .ctx = e->opt.ctx, .prefill_chunk = e->opt.prefill_chunk, .prefetch = e->opt.prefetch,
                     .kv_bf16 = e->opt.kv_bf16, .sampler = smp, .on_token = relay_token, .token_ctx = &relay,
                     .on_step = relay_step, .step_ctx = &relay, .on_route = p->on_route, .route_ctx = p->ctx};
    gen_stats gs;
    int rc = generate(e->m, &e->provider, prompt, n, &g, &gs, err, errlen);
    sampler_free(smp);
    text_finish(&relay.text);
    st->generated = gs.generated;
    st->main_passes = gs.main_passes;
    st->drafts = gs.drafts;
    st->accepted = gs.accepted;
    st->prefill_seconds = gs.prefill_seconds;
    st->decode_seconds = gs.decode_seconds;
    st->stopped_by = stop_reason(&gs, rc, &relay);
    return rc ? -1 : 0;
}
