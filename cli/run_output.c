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
        out->stream = tokenizer_stream_create(tok, 1);
        /* A plain -p prompt is echoed so the continuation reads in context (chat prompts are not). */
        if (o->prompt_text && !o->chat_wrap && !o->messages_file) { fputs(o->prompt_text, stdout); fflush(stdout); }
    }
    clock_gettime(CLOCK_MONOTONIC, &out->start);
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
    if (!out->stream) return;
    size_t len;
    const char *text = tokenizer_stream_push(out->stream, token, &len);
    if (text && len) { fwrite(text, 1, len, stdout); fflush(stdout); }
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

static void write_telemetry_line(run_output *out, int generated)
{
    const dsspec_gen_stats *g = &out->res->gen;
    cJSON *line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "elapsed_s", seconds_since(&out->start));
    cJSON_AddNumberToObject(line, "generated", generated);
    cJSON_AddNumberToObject(line, "main_passes", g->main_passes);
    cJSON_AddNumberToObject(line, "drafts", g->drafts);
    cJSON_AddNumberToObject(line, "accepted", g->accepted);
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

static int write_report(run_output *out, dsspec *e);

/* How often the report on disk is brought up to date while a run goes, so a crash or a kill -9
 * still leaves a recent one. */
#define REPORT_REFRESH_SECONDS 10.0

static int on_step(void *ctx, int generated)
{
    run_output *out = ctx;
    if (out->telemetry && generated - out->last_telemetry_at >= out->o->telemetry_every) {
        write_telemetry_line(out, generated);
        out->last_telemetry_at = generated;
    }
    double now = seconds_since(&out->start);
    if (out->o->report_path && now - out->last_report_at >= REPORT_REFRESH_SECONDS) {
        out->res->peak_rss = dsspec_peak_rss();
        write_report(out, out->e);
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

void run_output_bind(run_output *out, dsspec_generate_params *g, volatile sig_atomic_t *stop)
{
    out->stop = stop;
    g->on_token = on_token;
    g->on_step = on_step;
    g->on_route = out->trace ? on_route : NULL;
    g->ctx = out;
}

static const char *signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "signal";
}

static const char *stop_text(const run_result *r)
{
    if (r->interrupted) return signal_name(r->interrupted);
    switch (r->gen.stopped_by) {
    case DSSPEC_STOP_EOS: return "EOS";
    case DSSPEC_STOP_CTX_FULL: return "context full";
    case DSSPEC_STOP_IO_ERROR: return "I/O error";
    default: return "-n reached";
    }
}

static void print_summary(const run_result *r, FILE *f)
{
    const dsspec_gen_stats *g = &r->gen;
    fprintf(f, "\ndsspec: %d prompt tokens, %d generated (%s); prefill %.1f tok/s, decode %.2f tok/s; %d main passes",
            g->prompt_tokens, g->generated, stop_text(r), g->prefill_seconds > 0 ? g->prompt_tokens / g->prefill_seconds : 0,
            dsspec_decode_tokens_per_second(g), g->main_passes);
    if (r->plan.mtp)
        fprintf(f, "; MTP accepted %d of %d drafts (%.1f%%)", g->accepted, g->drafts, g->drafts ? 100.0 * g->accepted / g->drafts : 0);
    fprintf(f, "; peak RSS %.3f GiB\n", r->peak_rss / 1073741824.0);
}

/* The report is replaced whole (a temporary file renamed over it) or not at all, so the one on
 * disk is always the last complete one. A failure is said once per run. 0 or -1. */
static int write_report(run_output *out, dsspec *e)
{
    cJSON *j = run_report_json(out->o, out->res, e);
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
    if (out->stream) {
        size_t len;
        const char *tail = tokenizer_stream_flush(out->stream, &len);
        if (tail && len) fwrite(tail, 1, len, stdout);
        fputc('\n', stdout);
    }
    if (out->o->print_ids && !out->quiet_output) {
        for (int i = 0; i < res->n_tokens; i++) printf(i ? " %d" : "%d", res->tokens[i]);
        printf("\n");
    }
    fflush(stdout);
    res->peak_rss = dsspec_peak_rss();
    if (out->telemetry) write_telemetry_line(out, res->gen.generated);
    res->have_cache = dsspec_get_cache_counters(e, &res->cache) == 0;
    if (!out->o->quiet) {
        print_summary(res, stderr);
        dsspec_cache_stats_print(e, stderr);
    }
    if (out->o->report_path && write_report(out, e)) out->write_failed = 1;
}

void run_output_close(run_output *out)
{
    if (out->telemetry) fclose(out->telemetry);
    if (out->trace) fclose(out->trace);
    for (int i = 0; i < out->trace_cap; i++) cJSON_Delete(out->trace_rows[i]);
    free(out->trace_rows);
    tokenizer_stream_free(out->stream);
}

cJSON *run_report_json(const run_options *o, const run_result *r, dsspec *e)
{
    const dsspec_gen_stats *g = &r->gen;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->engine.model_dir ? o->engine.model_dir : dsspec_default_model_dir());
    cJSON_AddBoolToObject(j, "mtp", r->plan.mtp);
    cJSON_AddNumberToObject(j, "prompt_tokens", g->prompt_tokens);
    cJSON_AddNumberToObject(j, "generated", g->generated);
    cJSON_AddStringToObject(j, "stopped_by", r->interrupted ? "signal" : dsspec_stop_reason_name(g->stopped_by));
    if (r->interrupted) cJSON_AddStringToObject(j, "signal", signal_name(r->interrupted));
    cJSON_AddNumberToObject(j, "prefill_seconds", g->prefill_seconds);
    cJSON_AddNumberToObject(j, "decode_seconds", g->decode_seconds);
    cJSON_AddNumberToObject(j, "prefill_tokens_per_s", g->prefill_seconds > 0 ? g->prompt_tokens / g->prefill_seconds : 0);
    cJSON_AddNumberToObject(j, "decode_tokens_per_s", dsspec_decode_tokens_per_second(g));
    cJSON_AddNumberToObject(j, "main_passes", g->main_passes);
    cJSON_AddNumberToObject(j, "tokens_per_main_pass", g->main_passes ? (double)(g->generated - 1) / g->main_passes : 0);
    cJSON_AddNumberToObject(j, "drafts", g->drafts);
    cJSON_AddNumberToObject(j, "accepted", g->accepted);
    cJSON_AddNumberToObject(j, "acceptance", g->drafts ? (double)g->accepted / g->drafts : 0);
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
