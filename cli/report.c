/* dsspec report: what a user reads in the morning. Renders a `run --report` or `ab --report` JSON
 * as text, and with --html as one self-contained page (inline SVG charts, no scripts, no network);
 * `dsspec report A.json B.json` compares two runs side by side. The charts over time come from
 * the run's --telemetry file (its path is in the report; --telemetry overrides it). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/flags.h"
#include "cli/report.h"
#include "cli/report_render.h"
#include "engine/dsspec.h"

static void text_metadata(const cJSON *r, FILE *out)
{
    const cJSON *s = cJSON_GetObjectItem(r, "sampling");
    char a[64], b[64];
    fprintf(out, "started          %s\n", report_str(r, "started_at"));
    fprintf(out, "version          %s\n", report_str(r, "version"));
    fprintf(out, "command          %s\n", report_str(r, "command_line"));
    fprintf(out, "model            %s\n", report_str(r, "model"));
    char c[64];
    if (s)
        fprintf(out, "sampling         temperature %s, top-p %s, seed %.0f, -n %s%s; %.0f threads\n",
                report_fmt(report_num(s, "temperature"), 2, a, sizeof a), report_fmt(report_num(s, "top_p"), 2, b, sizeof b),
                report_num(s, "seed"), report_fmt(report_num(s, "n_predict"), 0, c, sizeof c),
                cJSON_IsTrue(cJSON_GetObjectItem(s, "ignore_eos")) ? ", EOS ignored" : "", report_num(r, "threads"));
    if (cJSON_GetObjectItem(r, "session"))
        fprintf(out, "session          %s (%.0f tokens restored from it)\n", report_str(r, "session"), report_num(r, "restored_tokens"));
}

static void text_speed(const cJSON *r, FILE *out)
{
    char a[64], b[64], c[64], d[64];
    fprintf(out, "tokens           %s prompt, %s generated (stopped by %s)\n", report_fmt(report_num(r, "prompt_tokens"), 0, a, sizeof a),
            report_fmt(report_num(r, "generated"), 0, b, sizeof b), report_str(r, "stopped_by"));
    fprintf(out, "speed            prefill %s tok/s, decode %s tok/s\n", report_fmt(report_num(r, "prefill_tokens_per_s"), 1, a, sizeof a),
            report_fmt(report_num(r, "decode_tokens_per_s"), 2, b, sizeof b));
    fprintf(out, "MTP              %s: %s of %s drafts accepted (%s%%), %s tokens per main pass\n",
            cJSON_IsTrue(cJSON_GetObjectItem(r, "mtp")) ? "on" : "off", report_fmt(report_num(r, "accepted"), 0, a, sizeof a),
            report_fmt(report_num(r, "drafts"), 0, b, sizeof b), report_fmt(100 * report_num(r, "acceptance"), 1, c, sizeof c),
            report_fmt(report_num(r, "tokens_per_main_pass"), 3, d, sizeof d));
}

static void text_memory(const cJSON *r, FILE *out)
{
    const cJSON *plan = cJSON_GetObjectItem(r, "plan");
    char a[64], b[64], c[64], d[64], e[64];
    fprintf(out, "memory           peak RSS %s of budget %s (resident %s, KV %s, cache %.0f slots x %s)\n",
            report_bytes(report_num(r, "peak_rss_bytes"), a, sizeof a), report_bytes(report_num(plan, "budget_bytes"), b, sizeof b),
            report_bytes(report_num(plan, "resident_bytes"), c, sizeof c), report_bytes(report_num(plan, "kv_bytes"), d, sizeof d),
            report_num(plan, "slots"), report_bytes(report_num(plan, "slot_bytes"), e, sizeof e));
}

static void text_cache(const cJSON *r, FILE *out)
{
    const cJSON *cache = cJSON_GetObjectItem(r, "cache"), *plan = cJSON_GetObjectItem(r, "plan");
    if (!cache) return;
    char a[64], b[64], c[64], d[64], e[64];
    fprintf(out, "expert cache     %s, hit rate %s%%, %s experts and %s read per token\n", report_str(cache, "policy"),
            report_fmt(100 * report_num(cache, "hit_rate"), 1, a, sizeof a), report_fmt(report_num(r, "experts_loaded_per_token"), 2, b, sizeof b),
            report_bytes(report_num(r, "bytes_read_per_token"), c, sizeof c));
    fprintf(out, "I/O              %s; read latency p50/p90/p99 %s/%s/%s ms; stalled %s s of %s s\n", report_str(plan, "io_backend"),
            report_fmt(report_num(cache, "read_latency_p50_ns") / 1e6, 2, a, sizeof a), report_fmt(report_num(cache, "read_latency_p90_ns") / 1e6, 2, b, sizeof b),
            report_fmt(report_num(cache, "read_latency_p99_ns") / 1e6, 2, c, sizeof c), report_fmt(report_num(cache, "stall_ns") / 1e9, 2, d, sizeof d),
            report_fmt(report_num(r, "prefill_seconds") + report_num(r, "decode_seconds"), 2, e, sizeof e));
    const cJSON *pf = cJSON_GetObjectItem(cache, "prefetch"), *layer;
    if (pf)
        fprintf(out, "prefetch         issued %s, used %s, wasted %s\n", report_fmt(report_num(pf, "issued"), 0, a, sizeof a),
                report_fmt(report_num(pf, "used"), 0, b, sizeof b), report_fmt(report_num(pf, "wasted"), 0, c, sizeof c));
    fprintf(out, "per layer        %-15s %9s %9s %6s\n", "", "hits", "misses", "hit%");
    cJSON_ArrayForEach(layer, cJSON_GetObjectItem(cache, "layers")) {
        double h = report_num(layer, "hits"), m = report_num(layer, "misses");
        char label[40];
        report_layer_label(r, report_layer(layer), label, sizeof label);
        if (h + m > 0)
            fprintf(out, "                 %-15s %9s %9s %6s\n", label, report_fmt(h, 0, a, sizeof a), report_fmt(m, 0, b, sizeof b),
                    report_fmt(100 * h / (h + m), 1, c, sizeof c));
    }
}

/* A multi-line excerpt, its lines indented under the label. */
static void text_excerpt(FILE *out, const char *label, const char *s)
{
    fprintf(out, "%-16s ", label);
    for (; *s; s++) {
        fputc(*s, out);
        if (*s == '\n') fprintf(out, "%17s", "");
    }
    fputc('\n', out);
}

static void text_excerpts(const cJSON *r, FILE *out)
{
    if (cJSON_GetObjectItem(r, "prompt_excerpt")) text_excerpt(out, "prompt", report_str(r, "prompt_excerpt"));
    if (cJSON_GetObjectItem(r, "output_excerpt")) text_excerpt(out, "output", report_str(r, "output_excerpt"));
}

static void text_run(const cJSON *r, FILE *out)
{
    text_metadata(r, out);
    text_speed(r, out);
    text_memory(r, out);
    text_cache(r, out);
    text_excerpts(r, out);
}

static void text_ab(const cJSON *r, FILE *out)
{
    const cJSON *off = cJSON_GetObjectItem(r, "mtp_off"), *on = cJSON_GetObjectItem(r, "mtp_on"), *row;
    char a[64], b[64];
    if (cJSON_GetObjectItem(r, "command_line")) fprintf(out, "command  %s\nstarted  %s\n\n", report_str(r, "command_line"), report_str(r, "started_at"));
    fprintf(out, "%-26s %14s %14s\n", "", "MTP off", "MTP on");
    cJSON_ArrayForEach(row, off)
        fprintf(out, "%-26s %14s %14s\n", row->string, report_fmt(row->valuedouble, 2, a, sizeof a), report_fmt(report_num(on, row->string), 2, b, sizeof b));
    const cJSON *same = cJSON_GetObjectItem(r, "outputs_identical");
    if (same) fprintf(out, "%-26s %29s\n", "greedy outputs identical", cJSON_IsTrue(same) ? "yes" : "NO");
    fprintf(out, "%s\n", report_str(r, "cache_state"));
}

/* The text of a report: run or ab, chosen by what the JSON holds. */
static char *render_text(const cJSON *r, const report_series *ts)
{
    char *text = NULL;
    size_t tl = 0;
    FILE *mem = open_memstream(&text, &tl);
    if (!mem) return NULL;
    if (cJSON_GetObjectItem(r, "mtp_off")) text_ab(r, mem);
    else text_run(r, mem);
    if (ts && ts->n > 0) report_series_text(ts, mem);
    fclose(mem);
    return text;
}

/* A report's JSON text, checked to be a run or ab report; NULL after one line naming `name`. */
static cJSON *parse_report(const char *json_text, const char *name)
{
    cJSON *r = cJSON_Parse(json_text);
    if (!r || (!cJSON_GetObjectItem(r, "plan") && !cJSON_GetObjectItem(r, "mtp_off"))) {
        fprintf(stderr, "dsspec report: %s: not a dsspec run or ab report (expected JSON with \"plan\" or \"mtp_off\")\n", name);
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

static cJSON *load_report(const char *path)
{
    char err[1024];
    char *buf = dsspec_read_file(path, NULL, err, sizeof err);
    if (!buf) { fprintf(stderr, "dsspec report: %s\n", err); return NULL; }
    cJSON *r = parse_report(buf, path);
    free(buf);
    return r;
}

int report_render(const char *json_text, const char *name, const char *html_path, FILE *out)
{
    cJSON *r = parse_report(json_text, name);
    if (!r) return 1;
    char *text = render_text(r, NULL);
    int rc = text ? 0 : 1;
    if (text) fputs(text, out);
    if (text && html_path) rc = report_write_html(r, NULL, NULL, html_path, text);
    free(text);
    cJSON_Delete(r);
    return rc;
}

/* One report: text to stdout, and the page when asked. */
static int report_one(const char *in, const char *html, const char *telemetry)
{
    cJSON *r = load_report(in);
    if (!r) return 1;
    report_series ts = {0};
    const char *tpath = telemetry ? telemetry : cJSON_GetObjectItem(r, "telemetry") ? report_str(r, "telemetry") : NULL;
    char err[1024];
    int rc = 0;
    if (tpath && report_series_load(tpath, report_num(r, "prompt_tokens"), &ts, err, sizeof err)) {
        /* A report without its telemetry still renders; a file the user named must exist. */
        fprintf(stderr, "dsspec report: %s%s\n", err, telemetry ? "" : " (charts over time left out)");
        if (telemetry) rc = 1;
    }
    char *text = rc ? NULL : render_text(r, &ts);
    if (text) {
        fputs(text, stdout);
        if (html) rc = report_write_html(r, NULL, &ts, html, text);
    } else if (!rc) rc = 1;
    free(text);
    report_series_free(&ts);
    cJSON_Delete(r);
    return rc;
}

static int report_two(const char *a_path, const char *b_path, const char *html)
{
    cJSON *a = load_report(a_path), *b = a ? load_report(b_path) : NULL;
    int rc = 1;
    if (a && b && (cJSON_GetObjectItem(a, "mtp_off") || cJSON_GetObjectItem(b, "mtp_off")))
        fprintf(stderr, "dsspec report: comparing needs two `dsspec run --report` files (an ab report compares itself)\n");
    else if (a && b) {
        char *text = NULL;
        size_t tl = 0;
        FILE *mem = open_memstream(&text, &tl);
        if (mem) { report_compare_text(a, b, a_path, b_path, mem); fclose(mem); }
        if (text) {
            fputs(text, stdout);
            rc = html ? report_write_html(a, b, NULL, html, text) : 0;
        }
        free(text);
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    return rc;
}

int cli_report(int argc, char **argv)
{
    const char *html = NULL, *telemetry = NULL, *in[2] = {NULL, NULL};
    const flag flags[] = {
        {FLAG_STRING, "--html", "OUT.html", &html, .help = "also write a self-contained page (inline SVG charts; no scripts, no network)"},
        {FLAG_STRING, "--telemetry", "FILE", &telemetry, .help = "the run's --telemetry file for the charts over time (default: the path the report records)"},
    };
    int n_in = 0;
    int rc = flags_parse("report", "usage: dsspec report RUN.json [--html OUT.html] [--telemetry FILE]\n"
                         "       dsspec report A.json B.json [--html OUT.html]   (two runs side by side)\n"
                         "  Prints a `dsspec run --report` or `dsspec ab --report` file as text.",
                         flags, 2, argc, argv, in, 2, &n_in);
    if (rc) return rc == 1 ? 0 : rc;
    if (n_in == 0) return flags_usage_error("report", "give the report file");
    if (n_in == 2 && telemetry) return flags_usage_error("report", "--telemetry goes with one report, not a comparison");
    return n_in == 1 ? report_one(in[0], html, telemetry) : report_two(in[0], in[1], html);
}
