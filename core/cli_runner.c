/* run_once: prompt -> ids, the memory plan, expert reader + cache, generation, and what a user
 * reads in the morning (telemetry lines, report, summary). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/cli.h"
#include "core/cli_common.h"
#include "core/cli_runner.h"
#include "tokenizer/tokenizer.h"

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

static char *read_text_file(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(buf, (cap *= 2) + 1);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) { free(buf); snprintf(err, errlen, "%s: cannot read", path); return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* The one-user-turn message list for --chat, as JSON. */
static char *wrap_as_user_turn(const char *text)
{
    cJSON *msgs = cJSON_CreateArray(), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", text);
    cJSON_AddItemToArray(msgs, m);
    char *s = cJSON_PrintUnformatted(msgs);
    cJSON_Delete(msgs);
    return s;
}

/* Prompt ids from --ids, -p/-f text, or a chat rendering. */
static int prompt_ids(const run_options *o, tokenizer *tok, int **ids, char *err, size_t errlen)
{
    if (o->ids) return parse_id_list("--ids", o->ids, ids, err, errlen);
    char *text = NULL, *rendered = NULL;
    size_t len = 0;
    int add_bos = !o->no_bos, n = -1;
    if (o->prompt_text) text = strdup(o->prompt_text), len = strlen(o->prompt_text);
    else if (o->prompt_file && !(text = read_text_file(o->prompt_file, &len, err, errlen))) return -1;
    if (o->messages_file || o->chat_wrap) {
        char *json = NULL;
        size_t jl;
        if (o->messages_file) json = read_text_file(o->messages_file, &jl, err, errlen);
        else json = wrap_as_user_turn(text ? text : "");
        if (!json) goto done;
        rendered = tokenizer_render_chat(tok, json, 1, err, errlen);
        if (!rendered && o->messages_file) {
            char inner[768];
            snprintf(inner, sizeof inner, "%s", err);
            snprintf(err, errlen, "--chat=%s: %s", o->messages_file, inner);
        }
        free(json);
        if (!rendered) goto done;
        free(text);
        text = rendered;
        rendered = NULL;
        len = strlen(text);
        add_bos = 0; /* the template writes BOS itself */
    }
    int32_t *raw;
    size_t nraw;
    if (tokenizer_encode(tok, text, len, add_bos, &raw, &nraw) != 0) { snprintf(err, errlen, "out of memory encoding the prompt"); goto done; }
    *ids = malloc((nraw ? nraw : 1) * sizeof(int));
    if (*ids) {
        for (size_t i = 0; i < nraw; i++) (*ids)[i] = raw[i];
        n = (int)nraw;
    }
    free(raw);
done:
    free(text);
    free(rendered);
    return n;
}

/* ---- the memory plan ---- */

static uint64_t current_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &pages, &rss) != 2) rss = 0;
        fclose(f);
    }
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t physical_ram(void)
{
    return (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Working buffers of one decode pass beyond weights, KV and cache: logits, attention scores,
 * activations (an overestimate is the safe side of a budget). */
static uint64_t scratch_bytes(const model_config *c, const run_options *o)
{
    uint64_t rows = o->prefill_chunk > 2 ? o->prefill_chunk : 2;
    uint64_t attn = rows * c->num_attention_heads * (2ull * c->kv_lora_rank + o->ctx + c->qk_nope_head_dim + c->qk_rope_head_dim + c->v_head_dim) * 4;
    uint64_t wide = c->intermediate_size > c->moe_intermediate_size ? c->intermediate_size : c->moe_intermediate_size;
    uint64_t act = rows * (6ull * c->hidden_size * (c->num_experts_per_tok + 2) + 3 * wide + 2ull * c->n_routed_experts) * 4;
    uint64_t logits = 4ull * c->vocab_size * 4 + 2ull * c->vocab_size * 4; /* logits + sampler scratch */
    return attn + act + logits + (8ull << 20); /* + stdio, tokenizer, allocator slack */
}

typedef struct {
    uint64_t budget, baseline, kv, scratch, slot_bytes;
    int slots, min_slots, total_experts;
} memory_plan;

static int plan_memory(const run_options *o, const engine *e, int mtp, size_t slot_bytes, memory_plan *p,
                       char *err, size_t errlen)
{
    const model_config *c = model_get_config(e->m);
    memset(p, 0, sizeof *p);
    int moe_layers = 0;
    for (int l = 0; l < config_total_layers(c); l++) moe_layers += config_layer_is_moe(c, l);
    if (!mtp && c->num_nextn_predict_layers > 0) moe_layers--; /* the MTP layer's experts are never asked for */
    p->total_experts = moe_layers * c->n_routed_experts;
    p->budget = o->mem_budget ? (uint64_t)o->mem_budget : physical_ram() / 10 * 9;
    p->baseline = current_rss();
    p->kv = kv_cache_bytes(c, c->num_hidden_layers + (mtp ? 1 : 0), o->ctx, o->kv_bf16 ? DTYPE_BF16 : DTYPE_F32);
    p->scratch = scratch_bytes(c, o);
    p->slot_bytes = slot_bytes;
    p->min_slots = expert_cache_min_slots(c->num_experts_per_tok, mtp ? 2 : 1);
    uint64_t fixed = p->baseline + p->kv + p->scratch;
    if (o->cache_gib > 0) {
        p->slots = expert_cache_slots_for_bytes((uint64_t)(o->cache_gib * (1ull << 30)), slot_bytes);
        if (o->mem_budget && fixed + (uint64_t)p->slots * slot_bytes > p->budget) {
            snprintf(err, errlen, "--cache-gib %.3g does not fit --mem-budget %.3f GiB: resident %.3f GiB + KV %.3f GiB + buffers %.3f GiB + cache %.3f GiB",
                     o->cache_gib, p->budget / 1073741824.0, p->baseline / 1073741824.0, p->kv / 1073741824.0,
                     p->scratch / 1073741824.0, (double)p->slots * slot_bytes / 1073741824.0);
            return -1;
        }
    } else {
        p->slots = fixed >= p->budget ? 0 : (int)((p->budget - fixed) / slot_bytes > (uint64_t)p->total_experts ? (uint64_t)p->total_experts : (p->budget - fixed) / slot_bytes);
    }
    if (p->slots > p->total_experts) p->slots = p->total_experts;
    if (p->slots < p->min_slots && o->cache_gib > 0) {
        snprintf(err, errlen, "--cache-gib %g buys %d expert slots of %.2f MiB; at least %d are needed (top-%d x %d rows in flight)",
                 o->cache_gib, p->slots, slot_bytes / 1048576.0, p->min_slots, c->num_experts_per_tok, mtp ? 2 : 1);
        return -1;
    }
    if (p->slots < p->min_slots) {
        snprintf(err, errlen, "memory budget too small: %.3f GiB holds resident weights %.3f GiB + KV for --ctx %d %.3f GiB + buffers %.3f GiB and only %d expert slots of %.2f MiB; at least %d are needed (top-%d x %d rows in flight)",
                 p->budget / 1073741824.0, p->baseline / 1073741824.0, o->ctx, p->kv / 1073741824.0, p->scratch / 1073741824.0,
                 p->slots, slot_bytes / 1048576.0, p->min_slots, c->num_experts_per_tok, mtp ? 2 : 1);
        return -1;
    }
    return 0;
}

static void print_plan(const memory_plan *p, const char *backend, const char *note, FILE *out)
{
    fprintf(out, "dsspec plan: budget %.3f GiB = resident %.3f GiB + KV %.3f GiB + buffers %.3f GiB + expert cache %.3f GiB (%d of %d experts, %.2f MiB slots, %.1f%%); io %s%s%s\n",
            p->budget / 1073741824.0, p->baseline / 1073741824.0, p->kv / 1073741824.0, p->scratch / 1073741824.0,
            (double)p->slots * p->slot_bytes / 1073741824.0, p->slots, p->total_experts, p->slot_bytes / 1048576.0,
            100.0 * p->slots / (p->total_experts ? p->total_experts : 1), backend, note && *note ? ": " : "", note ? note : "");
}

/* ---- per-run state seen by the generation callbacks ---- */

typedef struct {
    const run_options *o;
    int quiet_output;
    tokenizer *tok;
    tokenizer_stream *stream;
    expert_cache *cache;
    run_result *res;
    int cap_tokens;
    FILE *telemetry, *trace;
    cJSON **trace_rows;        /* per batch row, the line being built */
    int trace_cap, last_moe_layer;
    struct timespec start;
    int last_telemetry_at;
    const gen_stats *live;     /* stats of the generation in progress */
    int io_error;
} run_state;

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void on_token(void *ctx, int token)
{
    run_state *s = ctx;
    run_result *r = s->res;
    if (r->n_tokens == s->cap_tokens) {
        int cap = s->cap_tokens ? 2 * s->cap_tokens : 256;
        int *t = realloc(r->tokens, cap * sizeof *t);
        if (!t) return;
        r->tokens = t;
        s->cap_tokens = cap;
    }
    r->tokens[r->n_tokens++] = token;
    if (s->quiet_output || s->o->print_ids || !s->stream) return;
    size_t len;
    const char *text = tokenizer_stream_push(s->stream, token, &len);
    if (text && len) { fwrite(text, 1, len, stdout); fflush(stdout); }
}

static cJSON *cache_json(const run_state *s)
{
    if (!s->cache) return NULL;
    expert_cache_stats st;
    if (expert_cache_stats_get(s->cache, &st)) return NULL;
    cJSON *j = expert_cache_stats_json(&st);
    expert_cache_stats_release(&st);
    return j;
}

static void write_telemetry_line(run_state *s, int generated)
{
    const gen_stats *g = s->live;
    double t = seconds_since(&s->start);
    cJSON *line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "elapsed_s", t);
    cJSON_AddNumberToObject(line, "generated", generated);
    cJSON_AddNumberToObject(line, "main_passes", g->main_passes);
    cJSON_AddNumberToObject(line, "drafts", g->drafts);
    cJSON_AddNumberToObject(line, "accepted", g->accepted);
    cJSON *cj = cache_json(s);
    if (cj) cJSON_AddItemToObject(line, "cache", cj);
    char *text = cJSON_PrintUnformatted(line);
    if (text) { fprintf(s->telemetry, "%s\n", text); fflush(s->telemetry); }
    free(text);
    cJSON_Delete(line);
}

static int on_step(void *ctx, int generated)
{
    run_state *s = ctx;
    if (s->telemetry && generated - s->last_telemetry_at >= s->o->telemetry_every) {
        write_telemetry_line(s, generated);
        s->last_telemetry_at = generated;
    }
    return interrupted;
}

/* Trace lines: one per processed row, {"layer": [experts]}, written after the row's last MoE layer. */
static void on_route(void *ctx, int layer, int row, const int *experts, int k)
{
    run_state *s = ctx;
    if (row >= s->trace_cap) {
        int cap = row + 64;
        cJSON **t = realloc(s->trace_rows, cap * sizeof *t);
        if (!t) return;
        for (int i = s->trace_cap; i < cap; i++) t[i] = NULL;
        s->trace_rows = t;
        s->trace_cap = cap;
    }
    if (!s->trace_rows[row]) s->trace_rows[row] = cJSON_CreateObject();
    char key[16];
    snprintf(key, sizeof key, "%d", layer);
    cJSON_AddItemToObject(s->trace_rows[row], key, cJSON_CreateIntArray(experts, k));
    if (layer == s->last_moe_layer) {
        char *text = cJSON_PrintUnformatted(s->trace_rows[row]);
        if (text) fprintf(s->trace, "%s\n", text);
        free(text);
        cJSON_Delete(s->trace_rows[row]);
        s->trace_rows[row] = NULL;
    }
}

double run_tokens_per_second(const run_result *r)
{
    return r->gen.decode_seconds > 0 ? (r->gen.generated > 1 ? r->gen.generated - 1 : 0) / r->gen.decode_seconds : 0;
}

static cJSON *report_json(const run_options *o, const run_result *r, int mtp, const memory_plan *p, const run_state *s)
{
    const gen_stats *g = &r->gen;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model_dir);
    cJSON_AddBoolToObject(j, "mtp", mtp);
    cJSON_AddNumberToObject(j, "prompt_tokens", g->prompt_tokens);
    cJSON_AddNumberToObject(j, "generated", g->generated);
    cJSON_AddStringToObject(j, "stopped_by", r->interrupted ? "interrupt" : g->stopped_by_eos ? "eos" : g->stopped_by_ctx ? "ctx" : "max_tokens");
    cJSON_AddNumberToObject(j, "prefill_seconds", g->prefill_seconds);
    cJSON_AddNumberToObject(j, "decode_seconds", g->decode_seconds);
    cJSON_AddNumberToObject(j, "prefill_tokens_per_s", g->prefill_seconds > 0 ? g->prompt_tokens / g->prefill_seconds : 0);
    cJSON_AddNumberToObject(j, "decode_tokens_per_s", run_tokens_per_second(r));
    cJSON_AddNumberToObject(j, "main_passes", g->main_passes);
    cJSON_AddNumberToObject(j, "tokens_per_main_pass", g->main_passes ? (double)(g->generated - 1) / g->main_passes : 0);
    cJSON_AddNumberToObject(j, "drafts", g->drafts);
    cJSON_AddNumberToObject(j, "accepted", g->accepted);
    cJSON_AddNumberToObject(j, "acceptance", g->drafts ? (double)g->accepted / g->drafts : 0);
    cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)r->peak_rss);
    cJSON *plan = cJSON_AddObjectToObject(j, "plan");
    cJSON_AddNumberToObject(plan, "budget_bytes", (double)p->budget);
    cJSON_AddNumberToObject(plan, "resident_bytes", (double)p->baseline);
    cJSON_AddNumberToObject(plan, "kv_bytes", (double)p->kv);
    cJSON_AddNumberToObject(plan, "buffer_bytes", (double)p->scratch);
    cJSON_AddNumberToObject(plan, "slots", p->slots);
    cJSON_AddNumberToObject(plan, "slot_bytes", (double)p->slot_bytes);
    cJSON_AddNumberToObject(plan, "total_experts", p->total_experts);
    cJSON_AddStringToObject(plan, "io_backend", r->io_backend ? r->io_backend : "");
    cJSON_AddStringToObject(plan, "cache_policy", cache_policy_name(o->policy));
    cJSON_AddBoolToObject(plan, "prefetch", o->prefetch);
    cJSON *cj = cache_json(s);
    if (cj) {
        int gen = g->generated > 0 ? g->generated : 1;
        cJSON *m = cJSON_GetObjectItem(cj, "misses"), *b = cJSON_GetObjectItem(cj, "bytes_read");
        if (m) cJSON_AddNumberToObject(j, "experts_loaded_per_token", m->valuedouble / gen);
        if (b) cJSON_AddNumberToObject(j, "bytes_read_per_token", b->valuedouble / gen);
        cJSON_AddItemToObject(j, "cache", cj);
    }
    return j;
}

static void print_summary(const run_result *r, int mtp, FILE *out)
{
    const gen_stats *g = &r->gen;
    fprintf(out, "\ndsspec: %d prompt tokens, %d generated (%s); prefill %.1f tok/s, decode %.2f tok/s; %d main passes",
            g->prompt_tokens, g->generated, r->interrupted ? "interrupted" : g->stopped_by_eos ? "EOS" : g->stopped_by_ctx ? "context full" : "-n reached",
            g->prefill_seconds > 0 ? g->prompt_tokens / g->prefill_seconds : 0, run_tokens_per_second(r), g->main_passes);
    if (mtp) fprintf(out, "; MTP accepted %d of %d drafts (%.1f%%)", g->accepted, g->drafts, g->drafts ? 100.0 * g->accepted / g->drafts : 0);
    fprintf(out, "; peak RSS %.3f GiB\n", r->peak_rss / 1073741824.0);
}

static FILE *open_output(const char *flag, const char *path, const char *mode, char *err, size_t errlen)
{
    FILE *f = fopen(path, mode);
    if (!f) snprintf(err, errlen, "%s %s: cannot open for writing: %s", flag, path, strerror(errno));
    return f;
}

static int write_report(const char *path, cJSON *j, char *err, size_t errlen)
{
    char *text = cJSON_Print(j);
    FILE *f = text ? open_output("--report", path, "w", err, errlen) : NULL;
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok && f) snprintf(err, errlen, "--report %s: write failed", path);
    free(text);
    return ok ? 0 : -1;
}

void run_result_free(run_result *r)
{
    free(r->tokens);
    if (r->have_cache_stats) expert_cache_stats_release(&r->cache);
    memset(r, 0, sizeof *r);
}

int run_once(const run_options *opts, int quiet_output, run_result *res)
{
    run_options o = *opts;
    if (!o.model_dir) o.model_dir = cli_default_model_dir();
    char err[1024] = "";
    int rc = 1, *prompt = NULL, n_prompt;
    engine e = {0};
    tokenizer *tok = NULL;
    expert_reader *reader = NULL;
    expert_cache *cache = NULL;
    sampler *smp = NULL;
    run_state s = {0};
    memset(res, 0, sizeof *res);
    /* Ctrl-C from here on stops generation cleanly (even while the model loads): what was generated
     * is printed and the report written. A second Ctrl-C kills at once (SA_RESETHAND). */
    interrupted = 0;
    struct sigaction sa = {0}, old_sigint;
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, &old_sigint);
    s.o = &o;
    s.quiet_output = quiet_output;
    s.res = res;

    if (!o.ids && !o.prompt_text && !o.prompt_file && !o.messages_file) {
        fprintf(stderr, "dsspec: no prompt: give -p TEXT, -f FILE, --ids LIST or --chat=FILE\n");
        sigaction(SIGINT, &old_sigint, NULL);
        return 2;
    }
    if (engine_open(&e, o.model_dir, o.threads, o.cpu, err, sizeof err)) goto done;
    const model_config *c = model_get_config(e.m);
    int need_text = !o.ids || (!o.print_ids && !quiet_output);
    if (need_text && !(tok = tokenizer_load(o.model_dir, err, sizeof err))) goto done;
    if ((n_prompt = prompt_ids(&o, tok, &prompt, err, sizeof err)) < 0) goto done;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] >= c->vocab_size) { snprintf(err, sizeof err, "prompt token id %d is outside the vocabulary [0, %d)", prompt[i], c->vocab_size); goto done; }
    int mtp = o.mtp < 0 ? model_has_mtp(e.m) : o.mtp;
    if (mtp && !model_has_mtp(e.m)) { snprintf(err, sizeof err, "--mtp on: %s has no MTP layer (num_nextn_predict_layers 0)", o.model_dir); goto done; }
    if (!o.temperature_set && e.ck->has_generation_config) o.temperature = e.ck->gen_temperature;
    if (!o.top_p_set && e.ck->has_generation_config) o.top_p = e.ck->gen_top_p;

    if (!(reader = expert_reader_create(e.ck, o.io, o.queue_depth, err, sizeof err))) goto done;
    memory_plan plan;
    if (plan_memory(&o, &e, mtp, expert_reader_slot_bytes(reader), &plan, err, sizeof err)) { rc = 2; goto done; }
    if (!(cache = expert_cache_create(e.ck, reader, plan.slots, o.policy, err, sizeof err))) goto done;
    res->io_backend = io_backend_name(expert_reader_backend(reader));
    res->n_slots = plan.slots;
    res->total_experts = plan.total_experts;
    res->slot_bytes = plan.slot_bytes;
    res->resident_bytes = model_resident_bytes(e.m);
    res->kv_bytes = plan.kv;
    if (!o.quiet) print_plan(&plan, res->io_backend, expert_reader_backend_note(reader), stderr);

    if (o.telemetry_path && !(s.telemetry = open_output("--telemetry", o.telemetry_path, "a", err, sizeof err))) goto done;
    if (o.trace_out && !(s.trace = open_output("--trace-out", o.trace_out, "w", err, sizeof err))) goto done;
    if (tok && !quiet_output && !o.print_ids) {
        s.stream = tokenizer_stream_create(tok, 1);
        /* A plain -p prompt is echoed so the continuation reads in context (chat prompts are not). */
        if (o.prompt_text && !o.chat_wrap && !o.messages_file) { fputs(o.prompt_text, stdout); fflush(stdout); }
    }
    if (!(smp = sampler_create(c->vocab_size, o.temperature, o.top_p, o.seed))) { snprintf(err, sizeof err, "out of memory"); goto done; }
    s.tok = tok;
    s.cache = cache;
    for (int l = 0; l < c->num_hidden_layers; l++) if (config_layer_is_moe(c, l)) s.last_moe_layer = l;

    if (model_reserve_scratch(e.m, o.prefill_chunk > 2 ? o.prefill_chunk : 2, o.ctx, err, sizeof err)) goto done;
    expert_provider ep = expert_cache_provider(cache);
    int eos = o.ignore_eos ? -1 : tok && tokenizer_eos_id(tok) >= 0 ? tokenizer_eos_id(tok) : c->eos_token_id;
    gen_options g = {.mtp = mtp, .max_new = o.max_new, .eos_id = eos, .ctx = o.ctx, .prefill_chunk = o.prefill_chunk,
                     .prefetch = o.prefetch, .kv_bf16 = o.kv_bf16, .sampler = smp, .on_token = on_token, .token_ctx = &s,
                     .on_step = on_step, .step_ctx = &s, .on_route = s.trace ? on_route : NULL, .route_ctx = &s};
    s.live = &res->gen;
    clock_gettime(CLOCK_MONOTONIC, &s.start);
    int gen_rc = interrupted ? 0 : generate(e.m, &ep, prompt, n_prompt, &g, &res->gen, err, sizeof err);
    res->interrupted = interrupted;

    /* What was generated is printed and reported even when a read failed midway: no lost work. */
    if (s.stream) {
        size_t len;
        const char *tail = tokenizer_stream_flush(s.stream, &len);
        if (tail && len) fwrite(tail, 1, len, stdout);
        if (!quiet_output) fputc('\n', stdout);
    }
    if (o.print_ids && !quiet_output) {
        for (int i = 0; i < res->n_tokens; i++) printf(i ? " %d" : "%d", res->tokens[i]);
        printf("\n");
    }
    fflush(stdout);
    res->peak_rss = process_peak_rss();
    if (s.telemetry) write_telemetry_line(&s, res->gen.generated);
    res->have_cache_stats = expert_cache_stats_get(cache, &res->cache) == 0;
    if (!o.quiet) {
        print_summary(res, mtp, stderr);
        if (res->have_cache_stats) expert_cache_stats_print(&res->cache, stderr);
    }
    char report_err[512];
    if (o.report_path) {
        cJSON *j = report_json(&o, res, mtp, &plan, &s);
        if (write_report(o.report_path, j, report_err, sizeof report_err)) fprintf(stderr, "dsspec: %s\n", report_err);
        cJSON_Delete(j);
    }
    rc = gen_rc ? 1 : 0;
done:
    if (rc && err[0]) fprintf(stderr, "dsspec: %s\n", err);
    if (s.telemetry) fclose(s.telemetry);
    if (s.trace) fclose(s.trace);
    for (int i = 0; i < s.trace_cap; i++) cJSON_Delete(s.trace_rows[i]);
    free(s.trace_rows);
    tokenizer_stream_free(s.stream);
    sampler_free(smp);
    expert_cache_free(cache);
    expert_reader_free(reader);
    tokenizer_free(tok);
    free(prompt);
    engine_close(&e);
    sigaction(SIGINT, &old_sigint, NULL);
    return rc;
}
