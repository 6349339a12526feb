#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio_ext.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include "cli/run_output.h"

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) * 1e-9;
}

static FILE *open_output(const char *flag, const char *path, const char *mode, char *err, size_t errlen)
{
    FILE *f = fopen(path, mode);
    if (!f) snprintf(err, errlen, "%s %s: cannot open for writing: %s", flag, path, strerror(errno));
    return f;
}

/* The report is written to a temporary file beside it and renamed, so a reader (or a crash)
 * never sees half a report; making that file once now proves the directory is writable. */
static int check_report_path(const char *path, char *err, size_t errlen)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) { snprintf(err, errlen, "--report %s: cannot write there: %s", path, strerror(errno)); return -1; }
    fclose(f);
    unlink(tmp);
    return 0;
}

int run_output_open(run_output *out, const run_options *o, int quiet_output, run_result *res, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->o = o;
    out->quiet_output = quiet_output;
    out->res = res;
    if (o->report_path && check_report_path(o->report_path, err, errlen)) return -1;
    if (o->telemetry_path && !(out->telemetry = open_output("--telemetry", o->telemetry_path, "a", err, errlen))) return -1;
    if (o->trace_out && !(out->trace = open_output("--trace-out", o->trace_out, "w", err, errlen))) return -1;
    return 0;
}

void run_output_start(run_output *out, dsspec *e)
{
    const run_options *o = out->o;
    out->e = e;
    out->last_moe_layer = dsspec_get_model_info(e)->last_moe_layer;
    if (!o->quiet) dsspec_plan_print(dsspec_get_plan(e), stderr);
    tokenizer *tok = dsspec_get_tokenizer(e);
    if (tok && !out->quiet_output && !o->print_ids) {
        out->print_text = 1;
        /* A plain -p prompt is echoed so the continuation reads in context (chat prompts are not). */
        if (o->prompt_text && !o->chat_wrap && !o->messages_file) { fputs(o->prompt_text, stdout); fflush(stdout); }
    }
    clock_gettime(CLOCK_MONOTONIC, &out->start);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(out->res->started_at, sizeof out->res->started_at, "%Y-%m-%dT%H:%M:%S%z", &tm);
    int mode = o->progress_on ? 1 : o->progress_off ? 0 : -1;
    if (mode < 0 && o->quiet && !o->progress_label) mode = 0;
    progress_init(&out->progress, stderr, mode, o->progress_every, o->progress_label, o->gen.max_new);
}

static void on_token(void *ctx, int token)
{
    run_output *out = ctx;
    run_result *r = out->res;
    if (r->n_tokens == r->cap_tokens) {
        int cap = r->cap_tokens ? 2 * r->cap_tokens : 256;
        int *t = realloc(r->tokens, cap * sizeof *t);
        if (!t) return;
        r->tokens = t;
        r->cap_tokens = cap;
    }
    r->tokens[r->n_tokens++] = token;
}

/* The engine's text: stop strings (--stop) are already cut out of it. */
static void on_text(void *ctx, const char *text, size_t len)
{
    (void)ctx;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

/* Per decode step: drafted or not, and why not (dsspec_gen_stats). */
static void add_mtp_steps(cJSON *j, const dsspec_gen_stats *g)
{
    cJSON *m = cJSON_AddObjectToObject(j, "mtp_steps");
    cJSON_AddNumberToObject(m, "drafted", g->drafts);
    cJSON_AddNumberToObject(m, "plain", g->plain_steps);
    cJSON_AddNumberToObject(m, "no_draft_cost", g->no_draft_cost);
    cJSON_AddNumberToObject(m, "no_draft_explore", g->no_draft_explore);
    cJSON_AddNumberToObject(m, "no_draft_end", g->no_draft_end);
    cJSON_AddNumberToObject(m, "draft_explore", g->draft_explore);
    cJSON_AddNumberToObject(m, "rows_dropped", g->rows_dropped);
    cJSON_AddNumberToObject(m, "low_odds_drafts", g->low_odds_drafts);
    cJSON_AddNumberToObject(m, "expert_loads", (double)g->decode_expert_loads);
    cJSON_AddNumberToObject(m, "draft_expert_loads", (double)g->draft_expert_loads);
}

/* One whole line or none: a write that fails (a full disk) is cut back to where the line began
 * and the unwritten bytes stdio still holds are dropped, so every line in the file parses. 0 or -1
 * with errno. */
static int append_line(FILE *f, const char *text)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0) return -1;
    if (fputs(text, f) >= 0 && fputc('\n', f) != EOF && fflush(f) == 0) return 0;
    int e = errno;
    __fpurge(f);
    if (ftruncate(fileno(f), st.st_size) != 0) { /* nothing more can be done; the error names the file */ }
    errno = e;
    return -1;
}

static void write_telemetry_line(run_output *out, int generated, const dsspec_gen_stats *g)
{
    cJSON *line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "elapsed_s", seconds_since(&out->start));
    cJSON_AddNumberToObject(line, "generated", generated);
    cJSON_AddNumberToObject(line, "main_passes", g->main_passes);
    cJSON_AddNumberToObject(line, "drafts", g->drafts);
    cJSON_AddNumberToObject(line, "accepted", g->accepted);
    add_mtp_steps(line, g);
    cJSON *cj = dsspec_cache_stats_json(out->e);
    if (cj) cJSON_AddItemToObject(line, "cache", cj);
    char *text = cJSON_PrintUnformatted(line);
    if (text && append_line(out->telemetry, text)) {
        fprintf(stderr, "dsspec: --telemetry %s: cannot write (%s); it keeps its complete lines, no more are written\n",
                out->o->telemetry_path, strerror(errno));
        fclose(out->telemetry);
        out->telemetry = NULL;
        out->write_failed = 1;
    }
    free(text);
    cJSON_Delete(line);
}

static int write_report(run_output *out, const run_result *res, dsspec *e);

/* How often the report on disk is brought up to date while a run goes, so a crash or a kill -9
 * still leaves a recent one. */
#define REPORT_REFRESH_SECONDS 10.0

static int on_step(void *ctx, int generated)
{
    run_output *out = ctx;
    if (out->telemetry && generated - out->last_telemetry_at >= out->o->telemetry_every) {
        write_telemetry_line(out, generated, &out->live);
        out->last_telemetry_at = generated;
    }
    progress_step(&out->progress, out->e, &out->live);
    double now = seconds_since(&out->start);
    if (out->o->report_path && now - out->last_report_at >= REPORT_REFRESH_SECONDS) {
        /* the counters so far, and "running": what a kill -9 leaves must not read as an ending */
        run_result now_res = *out->res;
        now_res.gen = out->live;
        now_res.gen.prompt_tokens = out->res->gen.prompt_tokens;
        now_res.gen.temperature = out->res->gen.temperature;
        now_res.gen.top_p = out->res->gen.top_p;
        now_res.gen.restored_tokens = out->res->gen.restored_tokens;
        now_res.running = 1;
        now_res.peak_rss = out->res->peak_rss = dsspec_peak_rss();
        write_report(out, &now_res, out->e);
        out->last_report_at = now;
    }
    return *out->stop != 0;
}

/* Trace lines: one per processed row, {"layer": [experts]}, written after the row's last MoE layer. */
static void on_route(void *ctx, int layer, int row, const int *experts, int k)
{
    run_output *out = ctx;
    if (row >= out->trace_cap) {
        int cap = row + 64;
        cJSON **t = realloc(out->trace_rows, cap * sizeof *t);
        if (!t) return;
        for (int i = out->trace_cap; i < cap; i++) t[i] = NULL;
        out->trace_rows = t;
        out->trace_cap = cap;
    }
    if (!out->trace_rows[row]) out->trace_rows[row] = cJSON_CreateObject();
    char key[16];
    snprintf(key, sizeof key, "%d", layer);
    cJSON_AddItemToObject(out->trace_rows[row], key, cJSON_CreateIntArray(experts, k));
    if (layer != out->last_moe_layer) return;
    char *text = cJSON_PrintUnformatted(out->trace_rows[row]);
    if (text) fprintf(out->trace, "%s\n", text);
    free(text);
    cJSON_Delete(out->trace_rows[row]);
    out->trace_rows[row] = NULL;
}

static int on_prefill(void *ctx, int done, int n)
{
    run_output *out = ctx;
    progress_prefill(&out->progress, done, n);
    return *out->stop != 0;
}

void run_output_bind(run_output *out, dsspec_generate_params *g, volatile sig_atomic_t *stop)
{
    out->stop = stop;
    g->on_token = on_token;
    g->on_text = out->print_text ? on_text : NULL;
    g->on_step = on_step;
    g->on_prefill = on_prefill;
    g->live = &out->live;
    g->on_route = out->trace ? on_route : NULL;
    g->ctx = out;
}

const char *run_signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "signal";
}

static const char *stop_text(const run_result *r)
{
    if (r->interrupted) return run_signal_name(r->interrupted);
    switch (r->gen.stopped_by) {
    case DSSPEC_STOP_EOS: return "EOS";
    case DSSPEC_STOP_CTX_FULL: return "context full";
    case DSSPEC_STOP_IO_ERROR: return "I/O error";
    case DSSPEC_STOP_STRING: return "stop string";
    default: return "-n reached";
    }
}

static void print_summary(const run_result *r, FILE *f)
{
    const dsspec_gen_stats *g = &r->gen;
    char prefill[48];
    if (g->restored_rows == g->prompt_tokens && g->prompt_tokens > 0) snprintf(prefill, sizeof prefill, "prefill restored");
    else snprintf(prefill, sizeof prefill, "prefill %.1f tok/s", g->prefill_seconds > 0 ? (g->prompt_tokens - g->restored_rows) / g->prefill_seconds : 0);
    fprintf(f, "\ndsspec: %d prompt tokens, %d generated (%s); %s, decode %.2f tok/s; %d main passes", g->prompt_tokens,
            g->generated, stop_text(r), prefill, dsspec_decode_tokens_per_second(g), g->main_passes);
    if (r->plan.mtp)
        fprintf(f, "; MTP %s accepted %d of %d drafts (%.1f%%), %d steps without a draft", dsspec_mtp_name(r->plan.mtp),
                g->accepted, g->drafts, g->drafts ? 100.0 * g->accepted / g->drafts : 0, g->plain_steps);
    if (g->restored_tokens || g->restored_rows)
        fprintf(f, "; resumed: %d tokens and %d prompt rows restored from the session", g->restored_tokens, g->restored_rows);
    fprintf(f, "; peak RSS %.3f GiB\n", r->peak_rss / 1073741824.0);
}

/* The report is replaced whole (a temporary file renamed over it) or not at all, so the one on
 * disk is always the last complete one. A failure is said once per run. 0 or -1. */
static int write_report(run_output *out, const run_result *res, dsspec *e)
{
    cJSON *j = run_report_json(out->o, res, e);
    char *text = cJSON_Print(j);
    const char *path = out->o->report_path;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = text ? fopen(tmp, "w") : NULL;
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, path) != 0) ok = 0;
    if (!ok) {
        if (!out->report_failed)
            fprintf(stderr, "dsspec: --report %s: cannot write: %s%s\n", path, strerror(errno),
                    out->report_written ? " (the last report written stays)" : "");
        out->report_failed = 1;
        unlink(tmp);
    }
    out->report_written |= ok;
    free(text);
    cJSON_Delete(j);
    return ok ? 0 : -1;
}

void run_output_finish(run_output *out, dsspec *e)
{
    run_result *res = out->res;
    progress_end(&out->progress);
    if (out->print_text) fputc('\n', stdout);
    if (out->o->print_ids && !out->quiet_output) {
        for (int i = 0; i < res->n_tokens; i++) printf(i ? " %d" : "%d", res->tokens[i]);
        printf("\n");
    }
    fflush(stdout);
    res->peak_rss = dsspec_peak_rss();
    if (out->telemetry) write_telemetry_line(out, res->gen.generated, &res->gen);
    res->have_cache = dsspec_get_cache_counters(e, &res->cache) == 0;
    if (!out->o->quiet) {
        print_summary(res, stderr);
        dsspec_cache_stats_print(e, stderr);
    }
    if (out->o->report_path && write_report(out, out->res, e)) out->write_failed = 1;
}

void run_output_close(run_output *out)
{
    if (out->telemetry) fclose(out->telemetry);
    if (out->trace) fclose(out->trace);
    for (int i = 0; i < out->trace_cap; i++) cJSON_Delete(out->trace_rows[i]);
    free(out->trace_rows);
}

/* At most max bytes of s, cut back to a UTF-8 character boundary. */
static size_t utf8_cut(const char *s, size_t len, size_t max)
{
    if (len <= max) return len;
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80) max--;
    return max;
}

/* The head and tail of a long text joined by " [...] ", whole short ones as they are. */
static void add_excerpt(cJSON *j, const char *key, const char *text, size_t len)
{
    enum { EDGE = 400 };
    if (len <= 2 * EDGE + 20) {
        char *copy = strndup(text, len);
        cJSON_AddStringToObject(j, key, copy ? copy : "");
        free(copy);
        return;
    }
    size_t head = utf8_cut(text, len, EDGE), start = len - EDGE;
    while (start < len && ((unsigned char)text[start] & 0xC0) == 0x80) start++;
    char *buf = malloc(head + (len - start) + 16);
    if (!buf) return;
    sprintf(buf, "%.*s [...] %s", (int)head, text, text + start);
    cJSON_AddStringToObject(j, key, buf);
    free(buf);
}

static void add_prompt_excerpt(cJSON *j, const run_options *o)
{
    char err[256];
    if (o->prompt_text) add_excerpt(j, "prompt_excerpt", o->prompt_text, strlen(o->prompt_text));
    else if (o->ids) add_excerpt(j, "prompt_excerpt", o->ids, strlen(o->ids));
    else if (o->prompt_file && strcmp(o->prompt_file, "-")) {
        size_t len;
        char *text = dsspec_read_file(o->prompt_file, &len, err, sizeof err);
        if (text) add_excerpt(j, "prompt_excerpt", text, len);
        free(text);
    } else if (o->messages_file) {
        char *text = dsspec_read_file(o->messages_file, NULL, err, sizeof err);
        if (text) add_excerpt(j, "prompt_excerpt", text, strlen(text));
        free(text);
    }
}

static void add_output_excerpt(cJSON *j, const run_result *r, dsspec *e)
{
    tokenizer *tok = dsspec_get_tokenizer(e);
    size_t len = 0;
    char *text = tok ? tokenizer_decode(tok, r->tokens, (size_t)r->n_tokens, 1, &len) : NULL;
    if (text) add_excerpt(j, "output_excerpt", text, len);
    free(text);
}

void run_command_line(const run_options *o, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "dsspec");
    for (int i = 0; i < o->argc && k + 4 < n; i++) {
        const char *a = o->argv[i];
        int plain = a[0] && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:+@%") == strlen(a);
        k += (size_t)snprintf(buf + k, n - k, plain ? " %s" : " '", a);
        for (const char *p = a; !plain && *p && k + 6 < n; p++) /* ' inside single quotes: '\'' */
            k += (size_t)snprintf(buf + k, n - k, *p == '\'' ? "'\\''" : "%c", *p);
        if (!plain && k + 2 < n) k += (size_t)snprintf(buf + k, n - k, "'");
    }
}

static void add_run_metadata(cJSON *j, const run_options *o, const run_result *r, dsspec *e)
{
    char line[8192];
    run_command_line(o, line, sizeof line);
    cJSON_AddStringToObject(j, "version", dsspec_version());
    cJSON_AddStringToObject(j, "started_at", r->started_at);
    cJSON_AddStringToObject(j, "command_line", line);
    cJSON_AddNumberToObject(j, "model_layers", dsspec_get_model_info(e)->n_layers);
    cJSON *s = cJSON_AddObjectToObject(j, "sampling");
    cJSON_AddNumberToObject(s, "temperature", r->gen.temperature);
    cJSON_AddNumberToObject(s, "top_p", r->gen.top_p);
    cJSON_AddNumberToObject(s, "seed", (double)o->gen.seed);
    cJSON_AddNumberToObject(s, "n_predict", o->gen.max_new);
    cJSON_AddBoolToObject(s, "ignore_eos", o->gen.ignore_eos);
    cJSON_AddNumberToObject(j, "threads", o->engine.threads > 0 ? o->engine.threads : 1);
    if (o->telemetry_path) cJSON_AddStringToObject(j, "telemetry", o->telemetry_path);
    if (o->session_path) cJSON_AddStringToObject(j, "session", o->session_path);
    cJSON_AddNumberToObject(j, "restored_tokens", r->gen.restored_tokens);
    add_prompt_excerpt(j, o);
    add_output_excerpt(j, r, e);
}

cJSON *run_report_json(const run_options *o, const run_result *r, dsspec *e)
{
    const dsspec_gen_stats *g = &r->gen;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->engine.model_dir ? o->engine.model_dir : dsspec_default_model_dir());
    add_run_metadata(j, o, r, e);
    cJSON_AddBoolToObject(j, "mtp", r->plan.mtp);
    cJSON_AddStringToObject(j, "mtp_mode", dsspec_mtp_name(r->plan.mtp));
    cJSON_AddNumberToObject(j, "prompt_tokens", g->prompt_tokens);
    cJSON_AddNumberToObject(j, "generated", g->generated);
    cJSON_AddStringToObject(j, "stopped_by", r->running ? "running" : r->interrupted ? "signal" : dsspec_stop_reason_name(g->stopped_by));
    if (r->interrupted) cJSON_AddStringToObject(j, "signal", run_signal_name(r->interrupted));
    cJSON_AddNumberToObject(j, "prefill_seconds", g->prefill_seconds);
    cJSON_AddNumberToObject(j, "decode_seconds", g->decode_seconds);
    cJSON_AddNumberToObject(j, "prefill_tokens_per_s", g->prefill_seconds > 0 ? g->prompt_tokens / g->prefill_seconds : 0);
    cJSON_AddNumberToObject(j, "decode_tokens_per_s", dsspec_decode_tokens_per_second(g));
    cJSON_AddNumberToObject(j, "main_passes", g->main_passes);
    cJSON_AddNumberToObject(j, "tokens_per_main_pass", g->main_passes ? (double)(g->generated - 1) / g->main_passes : 0);
    cJSON_AddNumberToObject(j, "drafts", g->drafts);
    cJSON_AddNumberToObject(j, "accepted", g->accepted);
    cJSON_AddNumberToObject(j, "acceptance", g->drafts ? (double)g->accepted / g->drafts : 0);
    add_mtp_steps(j, g);
    cJSON *est = cJSON_AddObjectToObject(j, "mtp_costs");
    cJSON_AddNumberToObject(est, "kv_only_seconds", g->mtp_kv_seconds);
    cJSON_AddNumberToObject(est, "drafting_seconds", g->mtp_draft_seconds);
    cJSON_AddNumberToObject(est, "plain_pass_s", g->est_plain_pass_s);
    cJSON_AddNumberToObject(est, "verify_pass_s", g->est_verify_pass_s);
    cJSON_AddNumberToObject(est, "mtp_kv_pass_s", g->est_mtp_kv_s);
    cJSON_AddNumberToObject(est, "mtp_draft_pass_s", g->est_mtp_draft_s);
    cJSON *pf = cJSON_AddObjectToObject(j, "prefill_experts");
    int rows = g->prompt_tokens - g->restored_rows > 0 ? g->prompt_tokens - g->restored_rows : 1;
    cJSON_AddNumberToObject(pf, "requests", (double)g->prefill_expert_requests);
    cJSON_AddNumberToObject(pf, "loads", (double)g->prefill_expert_loads);
    cJSON_AddNumberToObject(pf, "bytes_read", (double)g->prefill_bytes_read);
    cJSON_AddNumberToObject(pf, "requests_per_prompt_token", (double)g->prefill_expert_requests / rows);
    cJSON_AddNumberToObject(pf, "bytes_read_per_prompt_token", (double)g->prefill_bytes_read / rows);
    cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)r->peak_rss);
    cJSON_AddItemToObject(j, "plan", dsspec_plan_json(&r->plan));
    if (r->have_cache) {
        int gen = g->generated > 0 ? g->generated : 1;
        cJSON_AddNumberToObject(j, "experts_loaded_per_token", (double)r->cache.misses / gen);
        cJSON_AddNumberToObject(j, "bytes_read_per_token", (double)r->cache.bytes_read / gen);
    }
    cJSON *cj = dsspec_cache_stats_json(e);
    if (cj) cJSON_AddItemToObject(j, "cache", cj);
    return j;
}
