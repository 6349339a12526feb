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
    static const char *names[] = {"max_tokens", "eos", "ctx_full", "callback", "io_error", "stop"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

int dsspec_mtp_parse(const char *s, int *out)
{
    static const char *names[] = {"off", "on", "auto"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) { *out = i; return 0; }
    return -1;
}

const char *dsspec_mtp_name(int mtp)
{
    return mtp == DSSPEC_MTP_OFF ? "off" : mtp == DSSPEC_MTP_ON ? "on" : mtp == DSSPEC_MTP_AUTO ? "auto" : "?";
}

double dsspec_decode_tokens_per_second(const dsspec_gen_stats *st)
{
    int computed = st->generated - st->restored_tokens - (st->restored_tokens ? 0 : 1);
    return st->decode_seconds > 0 && computed > 0 ? computed / st->decode_seconds : 0;
}

static dsspec_stop_reason stop_reason(const gen_stats *g, int rc, int stopped_by_callback, int stop_string)
{
    if (rc) return DSSPEC_STOP_IO_ERROR;
    if (stop_string) return DSSPEC_STOP_STRING;
    if (g->stopped_by_eos) return DSSPEC_STOP_EOS;
    if (g->stopped_by_ctx) return DSSPEC_STOP_CTX_FULL;
    return stopped_by_callback ? DSSPEC_STOP_CALLBACK : DSSPEC_STOP_MAX_TOKENS;
}

/* Callbacks between the decode loop and the caller: the stop request is remembered so the stop
 * reason is the truth, live counters are kept for p->live, and every token also goes into the
 * session and the stop-string relay. */
typedef struct {
    const dsspec_generate_params *p;
    const gen_stats *gs;             /* the loop's counters, for p->live */
    int stopped;
    text_relay text;
    dsspec *e;
    dsspec_cache_counters at_start, after_prefill; /* have_counters: the engine has a cache */
    int have_counters, prefill_counted;
} step_relay;

static int relay_step(void *ctx, int generated)
{
    step_relay *r = ctx;
    if (r->text.hit) return 1;
    dsspec_gen_stats *live = r->p->live;
    if (live) {
        live->generated = generated;
        live->main_passes = r->gs->main_passes;
        live->drafts = r->gs->drafts;
        live->accepted = r->gs->accepted;
        live->prefill_seconds = r->gs->prefill_seconds;
        live->plain_steps = r->gs->plain_steps;
        live->no_draft_cost = r->gs->no_draft_cost;
        live->no_draft_explore = r->gs->no_draft_explore;
        live->no_draft_end = r->gs->no_draft_end;
        live->draft_explore = r->gs->draft_explore;
        live->rows_dropped = r->gs->rows_dropped;
    }
    if (!r->p->on_step) return 0;
    r->stopped = r->p->on_step(r->p->ctx, generated) != 0;
    return r->stopped;
}

static int relay_prefill(void *ctx, int done, int n)
{
    step_relay *r = ctx;
    if (done == n && r->have_counters && !r->prefill_counted)
        r->prefill_counted = dsspec_get_cache_counters(r->e, &r->after_prefill) == 0;
    if (!r->p->on_prefill) return 0;
    r->stopped = r->p->on_prefill(r->p->ctx, done, n) != 0;
    return r->stopped;
}

/* A token to the caller: on_token and the text relay (restored tokens from a session too). */
static void deliver_token(step_relay *r, int token)
{
    if (r->p->on_token) r->p->on_token(r->p->ctx, token);
    text_relay_push_token(&r->text, token);
}

static void relay_token(void *ctx, int token)
{
    step_relay *r = ctx;
    if (r->p->session) session_note_token(r->p->session, token);
    deliver_token(r, token);
}

/* Binds the session and replays what it holds. 1: the session already holds the whole answer
 * (st filled), 0: generate (g->resume set when there is a point to continue from), -1: error. */
static int session_start(dsspec *e, const int *prompt, int n, step_relay *relay, gen_options *g,
                         sampler *smp, dsspec_gen_stats *st, char *err, size_t errlen)
{
    const dsspec_generate_params *p = relay->p;
    dsspec_session *s = p->session;
    session_sampling ss = {st->temperature, st->top_p, p->min_p, p->top_k, p->seed};
    if (session_bind(s, e, prompt, n, g, &ss, err, errlen)) return -1;
    int count;
    int done = session_replay(s, p->max_new, &count);
    const int *ids;
    dsspec_session_tokens(s, &ids);
    for (int i = 0; i < count; i++) deliver_token(relay, ids[i]);
    st->generated = st->restored_tokens = count;
    if (done >= 0) {
        st->stopped_by = (dsspec_stop_reason)done;
        st->restored_rows = n;
        return 1;
    }
    const gen_checkpoint *r = session_resume_point(s);
    if (r) {
        g->resume = r;
        smp->state = r->rng;
        st->restored_rows = r->prefill_done;
    }
    g->on_checkpoint = session_on_checkpoint;
    g->restore_kv = session_restore_kv;
    g->checkpoint_ctx = s;
    return 0;
}

int dsspec_session_check(const dsspec_session *s, const dsspec *e, const int *prompt, int n, const dsspec_generate_params *p,
                         char *err, size_t errlen)
{
    gen_options g = {.mtp = e->opt.mtp, .eos_id = p->ignore_eos ? -1 : e->info.eos_id, .ctx = e->opt.ctx, .kv_bf16 = e->opt.kv_bf16};
    session_sampling ss = {p->temperature >= 0 ? p->temperature : e->info.default_temperature,
                           p->top_p >= 0 ? p->top_p : e->info.default_top_p, p->min_p, p->top_k, p->seed};
    return session_check(s, e, prompt, n, &g, &ss, err, errlen);
}

static void fill_stats(dsspec_gen_stats *st, const gen_stats *gs, int rc, const step_relay *r)
{
    st->generated = gs->generated;
    st->main_passes = gs->main_passes;
    st->drafts = gs->drafts;
    st->accepted = gs->accepted;
    st->prefill_seconds = gs->prefill_seconds;
    st->decode_seconds = gs->decode_seconds;
    st->stopped_by = stop_reason(gs, rc, r->stopped, r->text.hit);
    st->plain_steps = gs->plain_steps;
    st->no_draft_cost = gs->no_draft_cost;
    st->no_draft_explore = gs->no_draft_explore;
    st->no_draft_end = gs->no_draft_end;
    st->draft_explore = gs->draft_explore;
    st->mtp_kv_seconds = gs->mtp_kv_seconds;
    st->mtp_draft_seconds = gs->mtp_draft_seconds;
    st->est_plain_pass_s = gs->est_plain_s;
    st->est_verify_pass_s = gs->est_verify_s;
    st->est_mtp_kv_s = gs->est_mtp_kv_s;
    st->est_mtp_draft_s = gs->est_mtp_draft_s;
    st->rows_dropped = gs->rows_dropped;
    st->low_odds_drafts = gs->low_odds_drafts;
    st->decode_cpu_seconds = gs->decode_cpu_seconds;
    st->decode_expert_loads = (uint64_t)gs->expert_loads;
    st->draft_expert_loads = (uint64_t)gs->draft_expert_loads;
    if (r->prefill_counted) {
        const dsspec_cache_counters *a = &r->at_start, *b = &r->after_prefill;
        st->prefill_expert_requests = (b->hits + b->misses) - (a->hits + a->misses);
        st->prefill_expert_loads = b->misses - a->misses;
        st->prefill_bytes_read = b->bytes_read - a->bytes_read;
    }
}

static int expert_resident(void *cache, int layer, int expert)
{
    return expert_cache_resident(cache, layer, expert);
}

static int expert_free_slots(void *cache)
{
    return expert_cache_free_slots(cache);
}

int dsspec_generate(dsspec *e, const int *prompt, int n, const dsspec_generate_params *p, dsspec_gen_stats *st,
                    char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n;
    st->temperature = p->temperature >= 0 ? p->temperature : e->info.default_temperature;
    st->top_p = p->top_p >= 0 ? p->top_p : e->info.default_top_p;
    st->stopped_by = DSSPEC_STOP_IO_ERROR;
    /* A chunk longer than the prompt buys nothing: the arena grows only to the rows used. */
    int chunk = e->opt.prefill_chunk < n ? e->opt.prefill_chunk : n;
    int rows = chunk > 2 ? chunk : 2;
    if (dsspec_check_ids(e, prompt, n, err, errlen) || model_reserve_scratch(e->m, rows, e->opt.ctx, err, errlen)) return -1;
    sampler *smp = sampler_create(e->info.vocab_size, st->temperature, st->top_p, p->seed);
    if (!smp) { error_set(err, errlen, "out of memory"); return -1; }
    sampler_set_top_k_min_p(smp, p->top_k, p->min_p);
    gen_stats gs;
    memset(&gs, 0, sizeof gs);
    step_relay relay = {p, &gs, 0, {0}, e, {0}, {0}, 0, 0};
    relay.have_counters = dsspec_get_cache_counters(e, &relay.at_start) == 0;
    if (text_relay_start(&relay.text, e, p, err, errlen)) { sampler_free(smp); return -1; }
    gen_options g = {.mtp = e->opt.mtp, .max_new = p->max_new, .eos_id = p->ignore_eos ? -1 : e->info.eos_id,
                     .ctx = e->opt.ctx, .prefill_chunk = chunk, .prefetch = e->opt.prefetch ? (e->opt.prefetch_depth > 1 ? e->opt.prefetch_depth : 1) : 0,
                     .prefetch_guesses = e->opt.prefetch_guesses, .mtp_window = e->opt.mtp_window,
                     .kv_bf16 = e->opt.kv_bf16, .sampler = smp, .on_token = relay_token, .token_ctx = &relay,
                     .on_step = relay_step, .step_ctx = &relay, .on_route = p->on_route, .route_ctx = p->ctx,
                     .on_prefill = relay_prefill, .prefill_ctx = &relay,
                     .expert_resident = e->cache ? expert_resident : NULL,
                     .expert_free_slots = e->cache ? expert_free_slots : NULL, .resident_ctx = e->cache};
    /* The engine's KV caches are made by the first run and kept: a server's or a batch's every
     * request would otherwise fault in and zero fresh pages (2 MiB at a time on huge pages:
     * measured ~10% of a 64-token prompt's prefill on the embedded model). */
    if (gen_kv_caches(e->m, &g, &e->kv, &e->mtp_kv, err, errlen)) {
        sampler_free(smp);
        text_relay_finish(&relay.text);
        return -1;
    }
    g.kv = e->kv;
    g.mtp_kv = e->mtp_kv;
    int started = p->session ? session_start(e, prompt, n, &relay, &g, smp, st, err, errlen) : 0;
    int rc = started < 0 ? -1 : 0;
    if (started == 0) {
        rc = generate(e->m, &e->provider, prompt, n, &g, &gs, err, errlen);
        fill_stats(st, &gs, rc, &relay);
    }
    /* The session's last record and fsync; its failure is the run's error unless one came first. */
    if (p->session && started >= 0 && session_finish(p->session, st->stopped_by, rc ? NULL : err, rc ? 0 : errlen) && !rc) {
        st->stopped_by = DSSPEC_STOP_IO_ERROR;
        rc = -1;
    }
    sampler_free(smp);
    text_relay_finish(&relay.text);
    return rc ? -1 : 0;
}
