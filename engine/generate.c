/* dsspec_generate: the public parameters turned into the decode loop's options (speculate/), with
 * the model's own sampling defaults filled in where the caller left them open. */
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
    static const char *names[] = {"max_tokens", "eos", "ctx_full", "callback", "io_error"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

double dsspec_decode_tokens_per_second(const dsspec_gen_stats *st)
{
    return st->decode_seconds > 0 ? (st->generated > 1 ? st->generated - 1 : 0) / st->decode_seconds : 0;
}

static dsspec_stop_reason stop_reason(const gen_stats *g, int rc, int stopped_by_callback)
{
    if (rc) return DSSPEC_STOP_IO_ERROR;
    if (g->stopped_by_eos) return DSSPEC_STOP_EOS;
    if (g->stopped_by_ctx) return DSSPEC_STOP_CTX_FULL;
    return stopped_by_callback ? DSSPEC_STOP_CALLBACK : DSSPEC_STOP_MAX_TOKENS;
}

/* The step hook remembers whether the caller asked to stop, so the stop reason is the truth, and
 * brings the caller's counters up to date first, so telemetry read from them during the run is live
 * (acceptance against context length over a night). */
typedef struct {
    const dsspec_generate_params *p;
    int stopped;
    const gen_stats *live;
    dsspec_gen_stats *st;
} step_relay;

static int relay_step(void *ctx, int generated)
{
    step_relay *r = ctx;
    if (!r->p->on_step) return 0;
    r->st->generated = generated;
    r->st->main_passes = r->live->main_passes;
    r->st->drafts = r->live->drafts;
    r->st->accepted = r->live->accepted;
    r->stopped = r->p->on_step(r->p->ctx, generated) != 0;
    return r->stopped;
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
    sampler *smp = sampler_create(e->info.vocab_size, st->temperature, st->top_p, p->seed);
    if (!smp) { error_set(err, errlen, "out of memory"); st->stopped_by = DSSPEC_STOP_IO_ERROR; return -1; }
    gen_stats gs = {0};
    step_relay relay = {p, 0, &gs, st};
    gen_options g = {.mtp = e->opt.mtp, .max_new = p->max_new, .eos_id = p->ignore_eos ? -1 : e->info.eos_id,
                     .ctx = e->opt.ctx, .prefill_chunk = e->opt.prefill_chunk, .prefetch = e->opt.prefetch,
                     .kv_bf16 = e->opt.kv_bf16, .sampler = smp, .on_token = p->on_token, .token_ctx = p->ctx,
                     .on_step = relay_step, .step_ctx = &relay, .on_route = p->on_route, .route_ctx = p->ctx};
    int rc = generate(e->m, &e->provider, prompt, n, &g, &gs, err, errlen);
    sampler_free(smp);
    st->generated = gs.generated;
    st->main_passes = gs.main_passes;
    st->drafts = gs.drafts;
    st->accepted = gs.accepted;
    st->prefill_seconds = gs.prefill_seconds;
    st->decode_seconds = gs.decode_seconds;
    st->stopped_by = stop_reason(&gs, rc, relay.stopped);
    return rc ? -1 : 0;
}
