/* The decode loop, MTP off, on and auto. With a draft, a step verifies [last, draft] at positions
 * [L, L+1] in one main-model pass; a rejected draft's position is not counted in the sequence, and
 * the MTP layer then runs over the accepted rows to draft the next token. Without a draft (off, or
 * auto when a draft does not pay), a step is one row; its MTP row then only needs a KV entry (no
 * experts, no attention: see mtp_forward). MTP on writes every such entry; auto keeps the last
 * mtp_window of them unwritten and writes them only when a draft follows, so a stretch without
 * drafts costs no MTP work, and a draft after a longer one attends to the MTP rows from the
 * window's start on (the MTP KV holds holes; the loop tracks which rows are valid). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "speculate/speculate_internal.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A running mean that follows a regime change within ~8 samples; n = 0: no sample yet. The first
 * 8 samples weigh alike (their plain mean): a rarely sampled estimate (auto's tries) would otherwise
 * keep its first sample, taken at the cold start, for dozens of samples. A sample above 3x the mean
 * counts as 3x: on a shared machine one pass preempted for a few milliseconds would otherwise swing
 * the estimate for many steps, while a real slowdown still shows within a few samples. */
typedef struct { double v; int n; } ewma;

static void ewma_add(ewma *e, double x)
{
    if (e->n >= 4 && x > 3 * e->v) x = 3 * e->v;
    e->v += (x - e->v) * (e->n < 8 ? 1.0 / (e->n + 1) : 0.125);
    e->n++;
}

/* --mtp auto's state: per-part costs of a step, and when to try the mode the estimates do not pick
 * (a cache that fills or empties, a prompt whose acceptance changes, a machine that gets busy).
 * Expert loads a draft causes are charged to drafting: its own loads (already in the pass times)
 * and, for each that found no free slot, a later reload of what it evicted with the odds of the
 * hit rate (draft_charge, at miss_cost each); that reload lands in some later pass, whose booked
 * time leaves it out (debt:
 * charged reloads not yet seen, fading, since an evicted expert that is not asked for again
 * within a few tokens costs nothing). */
typedef struct {
    ewma plain_pass, verify_pass, mtp_kv, mtp_draft;
    ewma miss_cost;          /* seconds a pass waits per expert load */
    ewma hit_rate;           /* of expert requests: how likely an evicted expert was still to be hit */
    ewma draft_charge;       /* per drafting step: its draft loads x miss_cost */
    double step_charge;      /* the charge of the MTP pass whose draft the next verify checks */
    double draft_p_sum;      /* the MTP's own probability of each verified draft, summed: with
                                st->accepted it calibrates a draft's odds of acceptance */
    double pending_p;        /* that probability for the draft the next verify checks */
    double debt;
    explore_schedule explore;
} draft_policy;

enum { MTP_KV_BATCH = 16 }; /* KV-only MTP rows written per pass at most (within the reserved rows) */

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
    uint64_t rng_base;   /* the sampler's state the per-position draws are keyed from */
    draft_policy pol;
    expert_meter meter;      /* the provider every decode pass goes through */
    /* The MTP KV rows [mtp_lo, mtp_hi) were written for their positions (contiguous): a draft
     * attends to nothing below mtp_lo. mtp_new: the first row written since the last boundary. */
    int mtp_lo, mtp_hi, mtp_new;
    /* MTP rows that only need their KV entry (steps without a draft), not yet written: a ring of
     * ring_cap (hidden, next token) pairs at the consecutive positions ring_pos.., the oldest at
     * ring_head. On writes them kv_batch at a time (one read of the MTP's projections for many
     * rows instead of one per step) and at a reported boundary; auto only before a draft, which
     * attends to them, and forgets the oldest when the ring is full. */
    float *kv_hidden;        /* [ring_cap][H] */
    int *kv_next;            /* [ring_cap] */
    int *kv_pos;             /* [kv_batch]: one write's positions */
    int ring_pos, ring_head, kv_pending, ring_cap, kv_steps, kv_batch;
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

/* MTP rows [from, to) were just written: a start that does not follow the valid rows (a hole
 * before it) starts the window again. */
static void mtp_rows_written(decoder *d, int from, int to)
{
    if (from != d->mtp_hi) d->mtp_lo = from;
    d->mtp_hi = to;
    if (from < d->mtp_new) d->mtp_new = from;
}

/* One more KV-only MTP row, at the position after the ring's last (the loop's rows are consecutive);
 * a full ring forgets its oldest (auto only: on writes before it fills). */
static void ring_push(decoder *d, const float *hidden, int next, int pos)
{
    if (!d->kv_pending) {
        d->ring_pos = pos;
        d->ring_head = 0;
    }
    if (d->kv_pending == d->ring_cap) {
        d->ring_head = (d->ring_head + 1) % d->ring_cap;
        d->ring_pos++;
        d->kv_pending--;
    }
    int at = (d->ring_head + d->kv_pending++) % d->ring_cap;
    memcpy(d->kv_hidden + (size_t)at * d->H, hidden, d->H * sizeof(float));
    d->kv_next[at] = next;
}

/* The ring's rows written, up to kv_batch per pass (and not across its wrap); the time per step
 * they stood for into the mtp_kv estimate. */
static int flush_mtp_kv(decoder *d)
{
    if (!d->kv_pending) return 0;
    double t = now_seconds();
    int first = d->ring_pos, n = d->kv_pending;
    for (int done = 0, nb; done < n; done += nb) {
        int at = (d->ring_head + done) % d->ring_cap;
        nb = n - done < d->ring_cap - at ? n - done : d->ring_cap - at;
        nb = nb < d->kv_batch ? nb : d->kv_batch;
        for (int b = 0; b < nb; b++) d->kv_pos[b] = first + done + b;
        if (mtp_forward(d->m, d->mtp_kv, d->ep, d->kv_hidden + (size_t)at * d->H, d->kv_next + at, d->kv_pos, nb, NULL, 0,
                        0, d->err, d->errlen))
            return -1;
    }
    double dt = now_seconds() - t;
    ewma_add(&d->pol.mtp_kv, dt / d->kv_steps);
    d->st->mtp_kv_seconds += dt;
    mtp_rows_written(d, first, first + n);
    d->kv_pending = d->kv_steps = 0;
    return 0;
}

/* Reports a step boundary (gen_checkpoint); -1 when the observer failed. */
static int report_boundary(decoder *d, int prefill_done, int last, int draft)
{
    const gen_options *o = d->o;
    if (!o->on_checkpoint) return 0;
    if (o->mtp == GEN_MTP_ON && flush_mtp_kv(d)) return -1; /* on: a boundary's MTP rows [0, len) are whole */
    const gen_stats *st = d->st;
    int fresh = d->mtp_new < d->mtp_lo ? d->mtp_lo : d->mtp_new < d->mtp_hi ? d->mtp_new : d->mtp_hi;
    gen_checkpoint cp = {d->len, prefill_done, last, draft, d->rng_base, st->generated, st->main_passes,
                         st->drafts, st->accepted, d->mtp_lo, d->mtp_hi, fresh};
    d->mtp_new = INT_MAX;
    return o->on_checkpoint(o->checkpoint_ctx, &cp, d->kv, d->mtp_kv, d->err, d->errlen) ? -1 : 0;
}

/* MTP over rows pairing hidden[i] with next[i] at pos0 + i (the ring written first); *draft = argmax
 * of the last row, which attends to the valid rows before pos0 when they reach it, else from pos0. */
static int draft_next(decoder *d, const float *hidden, const int *next, int pos0, int nb, int *draft)
{
    int pos[2] = {pos0, pos0 + 1}, from = pos0 == d->mtp_hi ? d->mtp_lo : pos0;
    if (mtp_forward(d->m, d->mtp_kv, &d->meter.self, hidden, next, pos, nb, d->mtp_logits, nb - 1, from, d->err, d->errlen))
        return -1;
    mtp_rows_written(d, pos0, pos0 + nb);
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
                           .on_route = o->on_route, .route_ctx = o->route_ctx, .prefetch = o->prefetch,
                           .prefetch_guesses = o->prefetch_guesses};
    if (model_forward(d->m, d->kv, d->ep, prompt + start, pos, nb, &req, d->err, d->errlen)) return -1;
    int known = last_chunk ? nb - 1 : nb; /* the last prompt row waits for the sampled token */
    if (o->mtp && known > 0) {
        if (mtp_forward(d->m, d->mtp_kv, d->ep, d->hidden, prompt + start + 1, pos, known, NULL, 0, 0, d->err, d->errlen))
            return -1;
        mtp_rows_written(d, start, start + known);
    }
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

/* The token at sequence position pos from logits, with the generator keyed by (base, pos). */
static int pick_at(decoder *d, const float *logits, int pos)
{
    sampler *s = d->o->sampler;
    s->state = d->rng_base + (uint64_t)pos * 0xD1B54A32D192ED03ull;
    int t = sampler_pick(s, logits);
    s->state = d->rng_base;
    return t;
}

static int verify_at(decoder *d, const float *logits, int pos, int draft, int *token)
{
    sampler *s = d->o->sampler;
    s->state = d->rng_base + (uint64_t)pos * 0xD1B54A32D192ED03ull;
    int ok = verify_draft(s, logits, draft, token);
    s->state = d->rng_base;
    return ok;
}

/* The time a pass is booked at, after the meter's counts: its draft loads become debt (and the
 * step's charge), the reloads it made that drafting was already charged for leave its time. */
static double book_pass(decoder *d, double dt, double *charge)
{
    const expert_meter *mt = &d->meter;
    draft_policy *p = &d->pol;
    if (mt->misses > 0) ewma_add(&p->miss_cost, mt->wait_s / mt->misses);
    if (mt->requests > 0) ewma_add(&p->hit_rate, 1.0 - (double)mt->misses / mt->requests);
    /* an eviction costs a reload only when the evicted expert would otherwise have been hit
     * again before leaving the cache: counted at the cache's hit rate */
    double per_miss = p->miss_cost.n ? p->miss_cost.v : 0, reload = per_miss * (p->hit_rate.n ? p->hit_rate.v : 1);
    int own = mt->misses - mt->draft_misses;
    double repaid = own < p->debt ? own : p->debt;
    p->debt = (p->debt - repaid) * 0.875 + mt->draft_evictions * (p->hit_rate.n ? p->hit_rate.v : 1);
    if (charge) *charge += mt->draft_evictions * reload;
    d->st->expert_loads += mt->misses;
    d->st->draft_expert_loads += mt->draft_misses;
    double booked = dt - repaid * per_miss;
    return booked > 0.25 * dt ? booked : 0.25 * dt;
}

/* The evicting loads a draft row may make in one verify pass before it is dropped: each costs its
 * read now and (with the hit rate's odds) a reload later, against the plain step an accepted draft
 * saves. */
static int draft_load_allowance(const decoder *d)
{
    const draft_policy *p = &d->pol;
    if (d->o->drop_at_first_load || !p->miss_cost.n || p->miss_cost.v <= 0 || !p->plain_pass.n) return 0;
    double a = (d->st->accepted + 1.0) / (d->st->drafts + d->st->rows_dropped + 2.0);
    double n = a * p->plain_pass.v / ((1 + (p->hit_rate.n ? p->hit_rate.v : 1)) * p->miss_cost.v);
    return n < 1 << 20 ? (int)n : 1 << 20;
}

/* One main-model pass over rows at [len, len + nb) with hidden states kept; its booked time into
 * *cost. A verify pass (nb = 2) under auto may drop its draft row: *kept gets the rows that ran. */
static int main_pass(decoder *d, const int *rows, int nb, ewma *cost, double *charge, int *kept)
{
    int pos[2] = {d->len, d->len + 1};
    forward_request req = {.hidden = d->hidden, .logits = d->logits, .prefetch_guesses = d->o->prefetch_guesses};
    meter_begin(&d->meter, nb == 2 ? PASS_VERIFY : PASS_PLAIN, d->o->mtp == GEN_MTP_AUTO, draft_load_allowance(d), &req);
    double t = now_seconds();
    if (model_forward(d->m, d->kv, &d->meter.self, rows, pos, nb, &req, d->err, d->errlen)) return -1;
    double booked = book_pass(d, now_seconds() - t, charge);
    ewma_add(cost, booked);
    /* a pass whose draft row left is close to a plain one: it keeps that estimate current while
     * auto drafts */
    if (d->meter.dropped) ewma_add(&d->pol.plain_pass, booked);
    if (kept) *kept = d->meter.dropped ? 1 : nb;
    d->st->main_passes++;
    return 0;
}

static int decode_plain(decoder *d, int last)
{
    ewma unused = {0, 0};
    while (1) {
        int b = step_boundary(d, last, -1);
        if (b) return b < 0 ? -1 : 0;
        if (d->len + 1 > d->o->ctx) { d->st->stopped_by_ctx = 1; return 0; }
        if (main_pass(d, &last, 1, &unused, NULL, NULL)) return -1;
        last = pick_at(d, d->logits, d->len + 1);
        d->len++;
        if (emit(d, last)) return 0;
    }
}

/* Whether the next step drafts. The choice uses only what is already known (timings, past
 * acceptance, room left), never the token the step will draw, so the output stays exact. Tokens per
 * second: drafting (1 + a) / (verify pass + drafting MTP pass + draft_charge), plain 1 / 1-row pass
 * (its KV-only MTP row is written only if a draft follows: a one-off when drafting resumes, left
 * out), a counting drafts dropped mid-pass as rejected. Until both are measured it tries each;
 * after that the mode the estimates do not pick is tried within the exploration budget
 * (EXPLORE_SHARE). */
static int choose_draft(decoder *d)
{
    const gen_options *o = d->o;
    gen_stats *st = d->st;
    draft_policy *p = &d->pol;
    if (d->len + 2 > o->ctx || st->generated + 2 > o->max_new) { st->no_draft_end++; return 0; }
    if (o->mtp == GEN_MTP_ON) return 1;
    if (o->draft_schedule) {
        int pick = o->draft_schedule(o->schedule_ctx, st->generated) != 0;
        st->no_draft_cost += !pick;
        return pick;
    }
    if (!p->verify_pass.n || !p->mtp_draft.n) return 1;
    if (!p->plain_pass.n) { st->no_draft_explore++; return 0; } /* mtp_kv: 0 until its first batch */
    double a = (st->accepted + 1.0) / (st->drafts + st->rows_dropped + 2.0);
    double draft_cost = p->verify_pass.v + p->mtp_draft.v + (p->draft_charge.n ? p->draft_charge.v : 0);
    double plain_cost = p->plain_pass.v;
    int best = (1 + a) / draft_cost > 1 / plain_cost;
    /* what one step of the other mode loses against the pick, for the tokens it yields */
    double loss = best ? plain_cost - draft_cost / (1 + a) : draft_cost - (1 + a) * plain_cost;
    if (explore_schedule_step(&p->explore, best, best ? draft_cost : plain_cost, loss)) {
        if (best) st->no_draft_explore++;
        else st->draft_explore++;
        return !best;
    }
    if (!best) st->no_draft_cost++;
    return best;
}

/* The MTP's probability of its own draft (softmax of the drafting row's logits at the argmax). */
static double draft_probability(const decoder *d, int draft)
{
    const float *l = d->mtp_logits;
    double z = 0;
    for (int v = 0; v < d->V; v++) z += exp((double)l[v] - l[draft]);
    return 1 / z;
}

/* Auto, after drafting: whether verifying this draft pays. Its odds of acceptance are the MTP's
 * probability scaled by how often such probabilities were right so far; verifying costs the
 * 2-row pass over a plain one plus the draft row's loads, and an accepted draft saves a plain step.
 * The MTP pass is already paid either way; the emitted token never depends on this choice. */
static int verify_pays(decoder *d, int draft)
{
    const draft_policy *p = &d->pol;
    d->pol.pending_p = draft_probability(d, draft);
    if (d->o->mtp != GEN_MTP_AUTO || d->o->draft_schedule || !p->plain_pass.n || !p->verify_pass.n || d->st->drafts < 8)
        return 1;
    double odds = d->pol.pending_p * (d->st->accepted + 1.0) / (p->draft_p_sum + 1.0);
    double extra = p->verify_pass.v - p->plain_pass.v + (p->draft_charge.n ? p->draft_charge.v : 0);
    return (odds < 1 ? odds : 1) * p->plain_pass.v > extra;
}

/* After a pass: the MTP over its rows (hidden[i] with next[i] at pos0 + i), drafting the next token
 * when choose_draft says so (*draft, else -1), else only writing the MTP KV entries. */
static int mtp_after(decoder *d, const float *hidden, const int *next, int pos0, int nb, int *draft)
{
    if (choose_draft(d)) {
        if (flush_mtp_kv(d)) return -1;
        double t = now_seconds(), charge = 0;
        meter_begin(&d->meter, PASS_DRAFT, 0, 0, NULL);
        if (draft_next(d, hidden, next, pos0, nb, draft)) return -1;
        double dt = now_seconds() - t;
        ewma_add(&d->pol.mtp_draft, book_pass(d, dt, &charge));
        d->pol.step_charge = charge;
        d->st->mtp_draft_seconds += dt;
        if (!verify_pays(d, *draft)) {
            d->st->low_odds_drafts++;
            *draft = -1;
        }
        return 0;
    }
    *draft = -1;
    int eager = d->o->mtp == GEN_MTP_ON;
    if (eager && d->kv_pending + nb > d->kv_batch && flush_mtp_kv(d)) return -1;
    for (int b = 0; b < nb; b++) ring_push(d, hidden + (size_t)b * d->H, next[b], pos0 + b);
    d->kv_steps++;
    return eager && d->kv_pending == d->kv_batch ? flush_mtp_kv(d) : 0;
}

/* [last, draft] verified at [L, L + 1]. 1: generation stops, -1: error. */
static int verify_step(decoder *d, int *last, int *draft)
{
    int L = d->len, rows[2] = {*last, *draft}, t0, kept;
    double charge = d->pol.step_charge;
    if (main_pass(d, rows, 2, &d->pol.verify_pass, &charge, &kept)) return -1;
    ewma_add(&d->pol.draft_charge, charge);
    d->pol.step_charge = 0;
    int accepted = 0;
    if (kept < 2) { /* the draft row left the pass: row 0's token, exactly as a plain step */
        d->st->rows_dropped++;
        t0 = pick_at(d, d->logits, L + 1);
    } else {
        d->st->drafts++;
        d->pol.draft_p_sum += d->pol.pending_p;
        accepted = verify_at(d, d->logits, L + 1, *draft, &t0);
    }
    if (accepted) {
        d->st->accepted++;
        d->len = L + 2;
        if (emit(d, *draft)) return 1;
        int t1 = pick_at(d, d->logits + d->V, L + 2);
        if (emit(d, t1)) return 1;
        int next[2] = {*draft, t1};
        *last = t1;
        return mtp_after(d, d->hidden, next, L, 2, draft);
    }
    /* The draft's KV row at L + 1 (whole, or up to the layer where it was dropped) stays in the
     * cache unread: rows attend to 0..pos only, and the next pass writes position L + 1 (for t0)
     * before any row reads it. */
    d->len = L + 1;
    if (emit(d, t0)) return 1;
    *last = t0;
    return mtp_after(d, d->hidden, &t0, L, 1, draft);
}

/* last alone at L; the MTP row at L is written (and drafts when chosen). */
static int plain_step(decoder *d, int *last, int *draft)
{
    int L = d->len;
    if (L + 1 > d->o->ctx) { d->st->stopped_by_ctx = 1; return 1; }
    if (main_pass(d, last, 1, &d->pol.plain_pass, NULL, NULL)) return -1;
    d->st->plain_steps++;
    int t = pick_at(d, d->logits, L + 1);
    d->len = L + 1;
    if (emit(d, t)) return 1;
    *last = t;
    return mtp_after(d, d->hidden, &t, L, 1, draft);
}

/* MTP on or auto. fresh: the prefill left h_{len-1} in d->hidden and the MTP row at len - 1
 * unwritten; a restored boundary has its MTP rows complete and its draft (-1: none). */
static int decode_mtp(decoder *d, int last, int draft, int fresh)
{
    if (fresh && mtp_after(d, d->hidden, &last, d->len - 1, 1, &draft)) return -1;
    while (1) {
        int b = step_boundary(d, last, draft);
        if (b) return b < 0 ? -1 : 0;
        int rc = draft >= 0 && d->len + 2 <= d->o->ctx ? verify_step(d, &last, &draft) : plain_step(d, &last, &draft);
        if (rc) return rc < 0 ? -1 : 0;
    }
}

static int decode(decoder *d, int last, int draft, int fresh)
{
    double cpu0 = cpu_seconds();
    int rc = d->o->mtp ? decode_mtp(d, last, draft, fresh) : decode_plain(d, last);
    if (rc == 0 && d->o->mtp == GEN_MTP_ON && flush_mtp_kv(d)) rc = -1;
    gen_stats *st = d->st;
    st->decode_cpu_seconds = cpu_seconds() - cpu0;
    st->est_plain_s = d->pol.plain_pass.v;
    st->est_verify_s = d->pol.verify_pass.v;
    st->est_mtp_kv_s = d->pol.mtp_kv.v;
    st->est_mtp_draft_s = d->pol.mtp_draft.v;
    return rc;
}

/* From o->resume's boundary (or the start): the rest of the prompt, then the decode. */
static int run_from(decoder *d, const int *prompt)
{
    const gen_checkpoint *r = d->o->resume;
    double t0 = now_seconds();
    if (r && r->prefill_done >= d->n_prompt) {
        int rc = decode(d, r->last, r->draft, 0);
        d->st->decode_seconds = now_seconds() - t0;
        return rc;
    }
    if (prefill(d, prompt, r ? r->prefill_done : 0)) return -1;
    d->st->prefill_seconds = now_seconds() - t0;
    if (d->st->stopped_in_prefill) return 0;
    d->len = d->n_prompt;
    int first = pick_at(d, d->logits, d->n_prompt);
    t0 = now_seconds();
    int rc = 0;
    if (d->o->max_new > 0 && !emit(d, first)) rc = decode(d, first, -1, 1);
    d->st->decode_seconds = now_seconds() - t0;
    return rc;
}

static int restore(decoder *d)
{
    const gen_checkpoint *r = d->o->resume;
    if (!r) return 0;
    if (r->len > d->o->ctx || r->prefill_done > d->n_prompt || (r->prefill_done == d->n_prompt && r->last < 0) ||
        (d->o->mtp && !(0 <= r->mtp_from && r->mtp_from <= r->mtp_to && r->mtp_to <= r->len))) {
        snprintf(d->err, d->errlen,
                 "resume point (position %d, prompt row %d, MTP rows [%d, %d)) does not fit this prompt and --ctx %d",
                 r->len, r->prefill_done, r->mtp_from, r->mtp_to, d->o->ctx);
        return -1;
    }
    if (d->o->restore_kv(d->o->checkpoint_ctx, d->kv, d->mtp_kv, d->err, d->errlen)) return -1;
    d->len = r->len;
    if (d->o->mtp) {
        d->mtp_lo = r->mtp_from;
        d->mtp_hi = r->mtp_to;
    }
    d->st->generated = r->generated;
    d->st->main_passes = r->main_passes;
    d->st->drafts = r->drafts;
    d->st->accepted = r->accepted;
    return 0;
}

int gen_kv_caches(const model *m, const gen_options *o, kv_cache **kv, kv_cache **mtp_kv, char *err, size_t errlen)
{
    const model_config *c = model_get_config(m);
    dtype_t t = o->kv_bf16 ? DTYPE_BF16 : DTYPE_F32;
    if (!*kv) *kv = kv_cache_create(c, 0, c->num_hidden_layers, o->ctx, t);
    if (o->mtp && !*mtp_kv) *mtp_kv = kv_cache_create(c, c->num_hidden_layers, 1, o->ctx, t);
    if (*kv && (!o->mtp || *mtp_kv)) return 0;
    snprintf(err, errlen, "out of memory for the KV cache (--ctx %d)", o->ctx);
    return -1;
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
    decoder d = {.m = m, .ep = ep, .o = &opts, .st = st, .n_prompt = n_prompt, .V = c->vocab_size, .H = c->hidden_size,
                 .rng_base = o->sampler->state, .mtp_new = INT_MAX, .err = err, .errlen = errlen};
    int rc = -1;
    explore_schedule_init(&d.pol.explore);
    d.kv = o->kv;
    d.mtp_kv = o->mtp ? o->mtp_kv : NULL;
    int ready = gen_kv_caches(m, o, &d.kv, &d.mtp_kv, err, errlen) == 0;
    d.logits = malloc(2 * (size_t)d.V * sizeof(float));
    d.mtp_logits = malloc(2 * (size_t)d.V * sizeof(float));
    d.hidden = malloc((size_t)(chunk > 2 ? chunk : 2) * d.H * sizeof(float));
    d.kv_batch = chunk < 2 ? 2 : chunk < MTP_KV_BATCH ? chunk : MTP_KV_BATCH;
    d.ring_cap = o->mtp != GEN_MTP_AUTO ? d.kv_batch : o->mtp_window > 0 ? o->mtp_window : GEN_MTP_WINDOW_DEFAULT;
    d.kv_hidden = malloc((size_t)d.ring_cap * d.H * sizeof(float));
    d.kv_next = malloc((size_t)d.ring_cap * sizeof(int));
    d.kv_pos = malloc((size_t)d.kv_batch * sizeof(int));
    meter_init(&d.meter, ep, &opts, c->num_experts_per_tok);
    if (ready && !(d.logits && d.mtp_logits && d.hidden && d.kv_hidden && d.kv_next && d.kv_pos)) {
        snprintf(err, errlen, "out of memory for the decode loop's buffers");
        ready = 0;
    }
    if (ready && restore(&d) == 0) rc = run_from(&d, prompt);
    if (d.kv != o->kv) kv_cache_free(d.kv);
    if (d.mtp_kv != o->mtp_kv) kv_cache_free(d.mtp_kv);
    free(d.logits);
    free(d.mtp_logits);
    free(d.hidden);
    free(d.kv_hidden);
    free(d.kv_next);
    free(d.kv_pos);
    return rc;
}
