/* The report page: one HTML file with the text and inline SVG charts (no scripts, no network).
 * Every chart is an <svg data-chart=NAME data-points=N>, one mark (circle or rect) per point, so
 * a test can count them in the browser's DOM. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli/report_render.h"

enum { CHART_W = 720, PLOT_L = 70, PLOT_R = 20, PLOT_T = 14, PLOT_H = 170 };

static void html_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '\'') fputs("&#39;", f);
        else fputc(*s, f);
    }
}

/* A round axis maximum at or above v: 1, 2 or 5 times a power of ten. */
static double nice_max(double v)
{
    if (!(v > 0)) return 1;
    double p = pow(10, floor(log10(v)));
    return v <= p ? p : v <= 2 * p ? 2 * p : v <= 5 * p ? 5 * p : 10 * p;
}

/* A line over x with one circle per point; ymax <= 0: from the data. */
static void svg_line(FILE *f, const char *key, const char *title, const double *x, const double *y, int n, double ymax)
{
    double x0 = x[0], x1 = x[n - 1], top = 0;
    for (int i = 0; i < n; i++) top = y[i] > top ? y[i] : top;
    if (ymax <= 0) ymax = nice_max(top * 1.05);
    if (x1 <= x0) x1 = x0 + 1;
    int pw = CHART_W - PLOT_L - PLOT_R, h = PLOT_T + PLOT_H + 40;
    char a[64];
    fprintf(f, "<h3>%s</h3><svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' data-chart='%s' data-points='%d' role='img' aria-label='", title, CHART_W, h, key, n);
    html_escape(f, title);
    fprintf(f, "'>\n");
    for (int g = 0; g <= 4; g++) {
        double gy = PLOT_T + PLOT_H - PLOT_H * g / 4.0;
        fprintf(f, "<line x1='%d' x2='%d' y1='%.1f' y2='%.1f' class='grid'/><text x='%d' y='%.1f' class='ytick'>%s</text>\n", PLOT_L,
                CHART_W - PLOT_R, gy, gy, PLOT_L - 6, gy + 4, report_fmt(ymax * g / 4, ymax >= 20 ? 0 : 2, a, sizeof a));
    }
    fprintf(f, "<polyline class='series' points='");
    for (int i = 0; i < n; i++)
        fprintf(f, "%.1f,%.1f ", PLOT_L + pw * (x[i] - x0) / (x1 - x0), PLOT_T + PLOT_H - PLOT_H * fmin(y[i], ymax) / ymax);
    fprintf(f, "'/>\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "<circle class='pt' r='2.5' cx='%.1f' cy='%.1f'><title>context %.0f: %s</title></circle>\n", PLOT_L + pw * (x[i] - x0) / (x1 - x0),
                PLOT_T + PLOT_H - PLOT_H * fmin(y[i], ymax) / ymax, x[i], report_fmt(y[i], 2, a, sizeof a));
    fprintf(f, "<text x='%d' y='%d' class='xtick'>%s</text>", PLOT_L, PLOT_T + PLOT_H + 18, report_fmt(x0, 0, a, sizeof a));
    fprintf(f, "<text x='%d' y='%d' class='xtick end'>%s</text>", CHART_W - PLOT_R, PLOT_T + PLOT_H + 18, report_fmt(x1, 0, a, sizeof a));
    fprintf(f, "<text x='%d' y='%d' class='xlabel'>context (prompt + generated tokens)</text></svg>\n", PLOT_L + pw / 2, PLOT_T + PLOT_H + 34);
}

/* Horizontal bars, one per (label, value); values printed readable beside them. */
static void svg_bars(FILE *f, const char *key, const char *title, char (*labels)[48], const double *v, int n, double max,
                     const char *unit, int decimals)
{
    int h = 22 * n + 16, lw = 150, bw = CHART_W - lw - 110;
    char a[64];
    fprintf(f, "<h3>%s</h3><svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' data-chart='%s' data-points='%d' role='img'>\n",
            title, CHART_W, h, key, n);
    for (int i = 0; i < n; i++) {
        double w = max > 0 ? bw * v[i] / max : 0;
        fprintf(f, "<text x='%d' y='%d' class='blabel'>", lw - 8, 22 * i + 22);
        html_escape(f, labels[i]);
        fprintf(f, "</text><rect class='bar%s' x='%d' y='%d' width='%.1f' height='16'/><text x='%.1f' y='%d'>%s%s</text>\n",
                strstr(labels[i], "MTP") ? " mtp" : "", lw, 22 * i + 9, w, lw + w + 6, 22 * i + 22, report_fmt(v[i], decimals, a, sizeof a), unit);
    }
    fprintf(f, "</svg>\n");
}

static void chart_layers(FILE *f, const cJSON *r)
{
    const cJSON *layers = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "cache"), "layers"), *layer;
    int n = cJSON_GetArraySize(layers), k = 0;
    if (n <= 0) return;
    char (*lab)[48] = calloc((size_t)n, sizeof *lab);
    double *v = calloc((size_t)n, sizeof *v);
    cJSON_ArrayForEach(layer, layers) {
        double h = report_num(layer, "hits"), m = report_num(layer, "misses");
        if (h + m == 0 || !lab || !v) continue;
        report_layer_label(r, report_layer(layer), lab[k], sizeof lab[k]);
        v[k++] = 100 * h / (h + m);
    }
    if (k) svg_bars(f, "layer_hit_rate", "Expert cache hit rate per layer", lab, v, k, 100, "%", 1);
    free(lab);
    free(v);
}

static void chart_latency(FILE *f, const cJSON *r)
{
    const cJSON *hist = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "cache"), "read_latency_log2_ns_hist");
    int nh = cJSON_GetArraySize(hist), first = 0;
    if (nh > 64) nh = 64; /* log2 buckets of a 64-bit nanosecond count: a longer list is not ours */
    int last = nh - 1;
    while (first < nh && cJSON_GetArrayItem(hist, first)->valuedouble == 0) first++; /* no reads that fast */
    while (last > first && cJSON_GetArrayItem(hist, last)->valuedouble == 0) last--;
    if (first >= nh) return;
    int n = last - first + 1;
    char (*lab)[48] = calloc((size_t)n, sizeof *lab);
    double *v = calloc((size_t)n, sizeof *v), max = 0;
    for (int b = first; lab && v && b <= last; b++) {
        double us = ldexp(1, b) / 1000.0, us_hi = ldexp(1, b + 1) / 1000.0;
        char lo[32], hi[32];
        if (us_hi < 1000) snprintf(lab[b - first], sizeof lab[0], "%s-%s us", report_fmt(us, us < 10 ? 1 : 0, lo, sizeof lo), report_fmt(us_hi, us_hi < 10 ? 1 : 0, hi, sizeof hi));
        else snprintf(lab[b - first], sizeof lab[0], "%s-%s ms", report_fmt(us / 1000, us < 10000 ? 1 : 0, lo, sizeof lo), report_fmt(us_hi / 1000, us_hi < 10000 ? 1 : 0, hi, sizeof hi));
        v[b - first] = cJSON_GetArrayItem(hist, b)->valuedouble;
        max = v[b - first] > max ? v[b - first] : max;
    }
    if (lab && v) svg_bars(f, "read_latency", "Expert read latency (reads per bucket)", lab, v, n, max, "", 0);
    free(lab);
    free(v);
}

static void charts_over_time(FILE *f, const report_series *s)
{
    if (!s || s->n == 0) return;
    fprintf(f, "<h2>Over time (telemetry)</h2>\n");
    svg_line(f, "tok_s", "Decode tokens per second against the context", s->x, s->tok_s, s->n, 0);
    svg_line(f, "hit_rate", "Expert cache hit rate (%)", s->x, s->hit_pct, s->n, 100);
    svg_line(f, "mib_per_token", "MiB read from disk per token", s->x, s->mib_per_token, s->n, 0);
    svg_line(f, "stall", "Compute stalled on I/O (% of time)", s->x, s->stall_pct, s->n, 100);
    svg_line(f, "acceptance", "MTP draft acceptance (%) against the context", s->x, s->accept_pct, s->n, 100);
}

/* Pairs of bars (first, second) per metric, each pair scaled to its larger value. */
static void chart_pairs(FILE *f, const char *key, const char *title, char (*names)[48], const double *a, const double *b, int n,
                        const char *la, const char *lb)
{
    int h = 44 * n + 30, lw = 200, bw = CHART_W - lw - 120;
    char x[64];
    fprintf(f, "<h3>%s</h3><svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' data-chart='%s' data-points='%d' role='img'>\n",
            title, CHART_W, h, key, 2 * n);
    fprintf(f, "<rect class='bar' x='%d' y='4' width='12' height='10'/><text x='%d' y='13'>%s</text>", lw, lw + 16, la);
    fprintf(f, "<rect class='bar alt' x='%d' y='4' width='12' height='10'/><text x='%d' y='13'>%s</text>\n", lw + 140, lw + 156, lb);
    for (int i = 0; i < n; i++) {
        double m = fmax(a[i], b[i]), y = 44.0 * i + 24;
        fprintf(f, "<text x='%d' y='%.0f' class='blabel'>%s</text>", lw - 8, y + 22, names[i]);
        fprintf(f, "<rect class='bar' x='%d' y='%.0f' width='%.1f' height='16'/><text x='%.1f' y='%.0f'>%s</text>", lw, y,
                m > 0 ? bw * a[i] / m : 0, lw + (m > 0 ? bw * a[i] / m : 0) + 6, y + 13, report_fmt(a[i], 2, x, sizeof x));
        fprintf(f, "<rect class='bar alt' x='%d' y='%.0f' width='%.1f' height='16'/><text x='%.1f' y='%.0f'>%s</text>\n", lw, y + 18,
                m > 0 ? bw * b[i] / m : 0, lw + (m > 0 ? bw * b[i] / m : 0) + 6, y + 31, report_fmt(b[i], 2, x, sizeof x));
    }
    fprintf(f, "</svg>\n");
}

static void chart_ab(FILE *f, const cJSON *r)
{
    const cJSON *off = cJSON_GetObjectItem(r, "mtp_off"), *on = cJSON_GetObjectItem(r, "mtp_on"), *row;
    int n = cJSON_GetArraySize(off), k = 0;
    char (*names)[48] = calloc((size_t)n + 1, sizeof *names);
    double *a = calloc((size_t)n + 1, sizeof *a), *b = calloc((size_t)n + 1, sizeof *b);
    cJSON_ArrayForEach(row, off) {
        if (!names || !a || !b) break;
        snprintf(names[k], sizeof names[k], "%s", row->string);
        a[k] = row->valuedouble;
        b[k++] = report_num(on, row->string);
    }
    if (k) chart_pairs(f, "ab", "MTP off vs on (each pair scaled to its larger value)", names, a, b, k, "MTP off", "MTP on");
    free(names); free(a); free(b);
}

static void chart_compare(FILE *f, const cJSON *ra, const cJSON *rb)
{
    int n = report_metric_count();
    char (*names)[48] = calloc((size_t)n, sizeof *names);
    double *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
    for (int i = 0; names && a && b && i < n; i++) {
        snprintf(names[i], sizeof names[i], "%s", report_metric(i, ra, &a[i]));
        report_metric(i, rb, &b[i]);
    }
    if (names && a && b) chart_pairs(f, "compare", "A vs B (each pair scaled to its larger value)", names, a, b, n, "A", "B");
    free(names); free(a); free(b);
}

static const char *page_style =
    "body{font-family:system-ui,sans-serif;max-width:780px;margin:2em auto;color:#222}"
    "pre{background:#f5f5f5;padding:1em;white-space:pre-wrap;font-size:13px}h3{margin:1.4em 0 .3em;font-size:15px}"
    "svg{font-size:11px;font-family:system-ui,sans-serif}.grid{stroke:#ddd}.ytick,.blabel{text-anchor:end}"
    ".xtick.end{text-anchor:end}.xlabel{text-anchor:middle;fill:#555}.series{fill:none;stroke:#3b7dd8;stroke-width:1.5}"
    ".pt{fill:#3b7dd8}.bar{fill:#3b7dd8}.bar.alt{fill:#e8833a}.bar.mtp{fill:#9b59b6}";

int report_write_html(const cJSON *r, const cJSON *b, const report_series *s, const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "dsspec report: --html %s: cannot open: %s\n", path, strerror(errno)); return 1; }
    fprintf(f, "<!doctype html><html><head><meta charset='utf-8'><title>dsspec report</title><style>%s</style></head><body>"
               "<h1>dsspec %s</h1><pre>", page_style, b ? "comparison" : cJSON_GetObjectItem(r, "mtp_off") ? "MTP A/B" : "run report");
    html_escape(f, text);
    fprintf(f, "</pre>\n");
    if (b) chart_compare(f, r, b);
    else if (cJSON_GetObjectItem(r, "mtp_off")) chart_ab(f, r);
    else {
        charts_over_time(f, s);
        fprintf(f, "<h2>Expert cache</h2>\n");
        chart_layers(f, r);
        chart_latency(f, r);
    }
    fprintf(f, "</body></html>\n");
    if (fclose(f)) { fprintf(stderr, "dsspec report: --html %s: write failed: %s\n", path, strerror(errno)); return 1; }
    return 0;
}
