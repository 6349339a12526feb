/* dsspec report: what a user reads in the morning. Renders a `run --report` or `ab --report` JSON
 * as text, and with --html as one self-contained page (inline SVG, no scripts, no network). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/flags.h"
#include "cli/report.h"
#include "engine/dsspec.h"

static double num(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItem(o, key);
    return cJSON_IsNumber(x) ? x->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItem(o, key);
    return cJSON_IsString(x) ? x->valuestring : "";
}

static void text_run(const cJSON *r, FILE *out)
{
    const cJSON *plan = cJSON_GetObjectItem(r, "plan"), *cache = cJSON_GetObjectItem(r, "cache");
    fprintf(out, "model            %s\n", str(r, "model"));
    fprintf(out, "tokens           %.0f prompt, %.0f generated (stopped by %s)\n", num(r, "prompt_tokens"), num(r, "generated"), str(r, "stopped_by"));
    fprintf(out, "speed            prefill %.1f tok/s, decode %.2f tok/s\n", num(r, "prefill_tokens_per_s"), num(r, "decode_tokens_per_s"));
    fprintf(out, "MTP              %s: %.0f of %.0f drafts accepted (%.1f%%), %.3f tokens per main pass\n",
            cJSON_IsTrue(cJSON_GetObjectItem(r, "mtp")) ? "on" : "off", num(r, "accepted"), num(r, "drafts"),
            100 * num(r, "acceptance"), num(r, "tokens_per_main_pass"));
    fprintf(out, "memory           peak RSS %.3f GiB of budget %.3f GiB (resident %.3f, KV %.3f, cache %.0f slots x %.2f MiB)\n",
            num(r, "peak_rss_bytes") / 1073741824.0, num(plan, "budget_bytes") / 1073741824.0, num(plan, "resident_bytes") / 1073741824.0,
            num(plan, "kv_bytes") / 1073741824.0, num(plan, "slots"), num(plan, "slot_bytes") / 1048576.0);
    if (!cache) return;
    fprintf(out, "expert cache     %s, hit rate %.1f%%, %.2f experts and %.2f MiB read per token\n", str(cache, "policy"),
            100 * num(cache, "hit_rate"), num(r, "experts_loaded_per_token"), num(r, "bytes_read_per_token") / 1048576.0);
    fprintf(out, "I/O              %s; read latency p50/p90/p99 %.2f/%.2f/%.2f ms; stalled %.2f s of %.2f s\n", str(plan, "io_backend"),
            num(cache, "read_latency_p50_ns") / 1e6, num(cache, "read_latency_p90_ns") / 1e6, num(cache, "read_latency_p99_ns") / 1e6,
            num(cache, "stall_ns") / 1e9, num(r, "prefill_seconds") + num(r, "decode_seconds"));
    const cJSON *pf = cJSON_GetObjectItem(cache, "prefetch");
    if (pf) fprintf(out, "prefetch         issued %.0f, used %.0f, wasted %.0f\n", num(pf, "issued"), num(pf, "used"), num(pf, "wasted"));
    const cJSON *layer;
    fprintf(out, "per layer        layer  hits  misses  hit%%\n");
    cJSON_ArrayForEach(layer, cJSON_GetObjectItem(cache, "layers")) {
        double h = num(layer, "hits"), m = num(layer, "misses");
        if (h + m > 0) fprintf(out, "                 %5.0f %5.0f %7.0f %5.1f\n", num(layer, "layer"), h, m, 100 * h / (h + m));
    }
}

static void text_ab(const cJSON *r, FILE *out)
{
    const cJSON *off = cJSON_GetObjectItem(r, "mtp_off"), *on = cJSON_GetObjectItem(r, "mtp_on"), *row;
    fprintf(out, "%-26s %14s %14s\n", "", "MTP off", "MTP on");
    cJSON_ArrayForEach(row, off) fprintf(out, "%-26s %14.3f %14.3f\n", row->string, row->valuedouble, num(on, row->string));
    const cJSON *same = cJSON_GetObjectItem(r, "outputs_identical");
    if (same) fprintf(out, "%-26s %29s\n", "greedy outputs identical", cJSON_IsTrue(same) ? "yes" : "NO");
    fprintf(out, "%s\n", str(r, "cache_state"));
}

/* Horizontal bars, one per (label, value in [0, max]). */
static void svg_bars(FILE *f, const char *title, const char **labels, const double *v, int n, double max, const char *unit)
{
    int h = 18 * n + 30;
    fprintf(f, "<h2>%s</h2><svg width='640' height='%d' xmlns='http://www.w3.org/2000/svg' font-family='sans-serif' font-size='12'>\n", title, h);
    for (int i = 0; i < n; i++) {
        double w = max > 0 ? 460 * v[i] / max : 0;
        fprintf(f, "<text x='0' y='%d'>%s</text><rect x='110' y='%d' width='%.1f' height='14' fill='#3b7dd8'/>"
                   "<text x='%.1f' y='%d'>%.3g%s</text>\n", 18 * i + 24, labels[i], 18 * i + 13, w, 115 + w, 18 * i + 24, v[i], unit);
    }
    fprintf(f, "</svg>\n");
}

static int write_html(const cJSON *r, const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "dsspec report: --html %s: cannot open: %s\n", path, strerror(errno)); return 1; }
    fprintf(f, "<!doctype html><html><head><meta charset='utf-8'><title>dsspec report</title>"
               "<style>body{font-family:sans-serif;max-width:760px;margin:2em auto}pre{background:#f4f4f4;padding:1em;white-space:pre-wrap}</style>"
               "</head><body><h1>dsspec report</h1><pre>");
    for (const char *p = text; *p; p++) {
        if (*p == '<') fputs("&lt;", f);
        else if (*p == '&') fputs("&amp;", f);
        else fputc(*p, f);
    }
    fprintf(f, "</pre>\n");
    const cJSON *cache = cJSON_GetObjectItem(r, "cache");
    const cJSON *layers = cache ? cJSON_GetObjectItem(cache, "layers") : NULL, *hist = cache ? cJSON_GetObjectItem(cache, "read_latency_log2_ns_hist") : NULL;
    int n = cJSON_GetArraySize(layers), k = 0;
    if (n > 0) {
        const char **lab = calloc(n, sizeof *lab);
        double *v = calloc(n, sizeof *v);
        char (*names)[24] = calloc(n, sizeof *names);
        const cJSON *layer;
        cJSON_ArrayForEach(layer, layers) {
            double h = num(layer, "hits"), m = num(layer, "misses");
            if (h + m == 0) continue;
            snprintf(names[k], sizeof names[k], "layer %.0f", num(layer, "layer"));
            lab[k] = names[k];
            v[k++] = 100 * h / (h + m);
        }
        svg_bars(f, "Expert cache hit rate per layer", lab, v, k, 100, "%");
        free(lab); free(v); free(names);
    }
    int nh = cJSON_GetArraySize(hist), first = 0;
    if (nh > 64) nh = 64; /* log2 buckets of a 64-bit nanosecond count: a longer list is not ours */
    while (first < nh && cJSON_GetArrayItem(hist, first)->valuedouble == 0) first++; /* no reads that fast */
    if (nh > first) {
        const char **lab = calloc(nh, sizeof *lab);
        double *v = calloc(nh, sizeof *v), max = 0;
        char (*names)[24] = calloc(nh, sizeof *names);
        for (int b = first; b < nh; b++) {
            double us = (double)(1ull << b) / 1000.0;
            int i = b - first;
            snprintf(names[i], sizeof names[i], us < 1000 ? "%.3g us" : "%.3g ms", us < 1000 ? us : us / 1000);
            lab[i] = names[i];
            v[i] = cJSON_GetArrayItem(hist, b)->valuedouble;
            if (v[i] > max) max = v[i];
        }
        svg_bars(f, "Expert read latency (reads per log2 bucket, lower edge)", lab, v, nh - first, max, "");
        free(lab); free(v); free(names);
    }
    fprintf(f, "</body></html>\n");
    return fclose(f) ? 1 : 0;
}

/* The text of a report: run or ab, chosen by what the JSON holds. NULL when it is neither. */
static char *render_text(const cJSON *r)
{
    char *text = NULL;
    size_t tl = 0;
    FILE *mem = open_memstream(&text, &tl);
    if (!mem) return NULL;
    if (cJSON_GetObjectItem(r, "mtp_off")) text_ab(r, mem);
    else text_run(r, mem);
    fclose(mem);
    return text;
}

int report_render(const char *json_text, const char *name, const char *html_path, FILE *out)
{
    cJSON *r = cJSON_Parse(json_text);
    if (!cJSON_IsObject(r) || (!cJSON_GetObjectItem(r, "plan") && !cJSON_GetObjectItem(r, "mtp_off"))) {
        fprintf(stderr, "dsspec report: %s: not a dsspec run or ab report (expected JSON with \"plan\" or \"mtp_off\")\n", name);
        cJSON_Delete(r);
        return 1;
    }
    char *text = render_text(r);
    int rc = 1;
    if (text) {
        fputs(text, out);
        rc = html_path ? write_html(r, html_path, text) : 0;
    }
    free(text);
    cJSON_Delete(r);
    return rc;
}

int cli_report(int argc, char **argv)
{
    const char *html = NULL, *in = NULL;
    const flag flags[] = {
        {FLAG_STRING, "--html", "OUT.html", &html, .help = "also write a self-contained page with per-layer hit rates and the read-latency histogram"},
    };
    int n_in = 0;
    int rc = flags_parse("report", "usage: dsspec report FILE.json [--html OUT.html]\n"
                         "  Prints a `dsspec run --report` or `dsspec ab --report` file as text.",
                         flags, 1, argc, argv, &in, 1, &n_in);
    if (rc) return rc == 1 ? 0 : rc;
    if (!in) return flags_usage_error("report", "give the report file");
    char err[1024];
    char *buf = dsspec_read_file(in, NULL, err, sizeof err);
    if (!buf) { fprintf(stderr, "dsspec report: %s\n", err); return 1; }
    rc = report_render(buf, in, html, stdout);
    free(buf);
    return rc;
}
