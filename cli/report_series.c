/* The telemetry stream as a time series, and two reports compared. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli/report_render.h"
#include "engine/dsspec.h"

/* The cumulative counters of one telemetry line. */
typedef struct {
    double t, generated, drafts, accepted, hits, misses, bytes, stall_ns;
} sample;

static sample parse_sample(const cJSON *line)
{
    const cJSON *c = cJSON_GetObjectItem(line, "cache");
    return (sample){report_num(line, "elapsed_s"), report_num(line, "generated"), report_num(line, "drafts"),
                    report_num(line, "accepted"), report_num(c, "hits"), report_num(c, "misses"),
                    report_num(c, "bytes_read"), report_num(c, "stall_ns")};
}

static int series_push(report_series *s, int *cap, double prompt, const sample *a, const sample *b)
{
    double **arrays[] = {&s->x, &s->tok_s, &s->hit_pct, &s->mib_per_token, &s->stall_pct, &s->accept_pct,
                         &s->seconds, &s->tokens, &s->drafts, &s->accepted};
    enum { N_ARRAYS = sizeof arrays / sizeof arrays[0] };
    if (s->n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        for (int i = 0; i < N_ARRAYS; i++) {
            double *x = realloc(*arrays[i], (size_t)*cap * sizeof *x);
            if (!x) return -1;
            *arrays[i] = x;
        }
    }
    double dt = b->t - a->t, dg = b->generated - a->generated, req = (b->hits - a->hits) + (b->misses - a->misses);
    double dd = b->drafts - a->drafts;
    int i = s->n++;
    s->x[i] = prompt + b->generated;
    s->tok_s[i] = dt > 0 ? dg / dt : 0;
    s->hit_pct[i] = req > 0 ? 100 * (b->hits - a->hits) / req : 0;
    s->mib_per_token[i] = dg > 0 ? (b->bytes - a->bytes) / dg / 1048576.0 : 0;
    s->stall_pct[i] = dt > 0 ? 100 * (b->stall_ns - a->stall_ns) * 1e-9 / dt : 0;
    s->accept_pct[i] = dd > 0 ? 100 * (b->accepted - a->accepted) / dd : 0;
    s->seconds[i] = dt;
    s->tokens[i] = dg;
    s->drafts[i] = dd;
    s->accepted[i] = b->accepted - a->accepted;
    return 0;
}

int report_series_load(const char *path, double prompt_tokens, report_series *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    char *text = dsspec_read_file(path, NULL, err, errlen);
    if (!text) return -1;
    sample prev = {0};
    int cap = 0, have_prev = 1;
    for (char *p = text, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        if (nl) *nl = 0;
        cJSON *line = cJSON_Parse(p);
        if (!line) continue; /* a line torn by a kill */
        sample cur = parse_sample(line);
        cJSON_Delete(line);
        if (cur.generated < prev.generated) { s->n = 0; prev = (sample){0}; have_prev = 1; } /* a new run appended */
        /* A resumed process restarts its clock and counters: its first line is a new baseline. */
        if (have_prev && cur.t > prev.t && cur.generated > prev.generated && cur.hits >= prev.hits &&
            series_push(s, &cap, prompt_tokens, &prev, &cur)) {
            snprintf(err, errlen, "out of memory");
            free(text);
            return -1;
        }
        have_prev = 1;
        prev = cur;
    }
    free(text);
    return 0;
}

void report_series_free(report_series *s)
{
    free(s->x); free(s->tok_s); free(s->hit_pct); free(s->mib_per_token); free(s->stall_pct); free(s->accept_pct);
    free(s->seconds); free(s->tokens); free(s->drafts); free(s->accepted);
    memset(s, 0, sizeof *s);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Decode tok/s and MTP acceptance per context band (below 1k, then doubling), intervals assigned
 * by the context at their end. */
static void series_bands_text(const report_series *s, FILE *out)
{
    fprintf(out, "by context      ");
    for (double lo = 0, hi = 1024; lo <= s->x[s->n - 1]; lo = hi, hi *= 2) {
        double sec = 0, tok = 0, dr = 0, ac = 0;
        for (int i = 0; i < s->n; i++)
            if (s->x[i] >= lo && s->x[i] < hi) { sec += s->seconds[i]; tok += s->tokens[i]; dr += s->drafts[i]; ac += s->accepted[i]; }
        if (tok <= 0 || sec <= 0) continue;
        char a[64], b[64], c[64];
        fprintf(out, " %sk-%sk: %s tok/s", report_fmt(lo / 1024, 0, a, sizeof a), report_fmt(hi / 1024, 0, b, sizeof b),
                report_fmt(tok / sec, 1, c, sizeof c));
        if (dr > 0) fprintf(out, " (%s%% accepted)", report_fmt(100 * ac / dr, 1, a, sizeof a));
        fprintf(out, ";");
    }
    fprintf(out, "\n");
}

void report_series_text(const report_series *s, FILE *out)
{
    double *v = malloc((size_t)s->n * sizeof *v);
    if (!v) return;
    memcpy(v, s->tok_s, (size_t)s->n * sizeof *v);
    qsort(v, (size_t)s->n, sizeof *v, by_value);
    char a[64], b[64], c[64];
    fprintf(out, "over time        %d telemetry intervals up to context %.0f; decode tok/s min %s, median %s, max %s\n", s->n,
            s->x[s->n - 1], report_fmt(v[0], 2, a, sizeof a), report_fmt(v[s->n / 2], 2, b, sizeof b), report_fmt(v[s->n - 1], 2, c, sizeof c));
    free(v);
    series_bands_text(s, out);
}

/* ------------------------------------------------------------------ comparison */

typedef struct {
    const char *name;
    double (*get)(const cJSON *r);
    int decimals;
} metric;

static double m_decode(const cJSON *r) { return report_num(r, "decode_tokens_per_s"); }
static double m_prefill(const cJSON *r) { return report_num(r, "prefill_tokens_per_s"); }
static double m_generated(const cJSON *r) { return report_num(r, "generated"); }
static double m_hit(const cJSON *r) { return 100 * report_num(cJSON_GetObjectItem(r, "cache"), "hit_rate"); }
static double m_experts(const cJSON *r) { return report_num(r, "experts_loaded_per_token"); }
static double m_mib(const cJSON *r) { return report_num(r, "bytes_read_per_token") / 1048576.0; }
static double m_accept(const cJSON *r) { return 100 * report_num(r, "acceptance"); }
static double m_per_pass(const cJSON *r) { return report_num(r, "tokens_per_main_pass"); }
static double m_rss(const cJSON *r) { return report_num(r, "peak_rss_bytes") / 1048576.0; }
static double m_stall(const cJSON *r)
{
    double total = report_num(r, "prefill_seconds") + report_num(r, "decode_seconds");
    return total > 0 ? 100 * report_num(cJSON_GetObjectItem(r, "cache"), "stall_ns") * 1e-9 / total : 0;
}

static const metric metrics[] = {
    {"decode tokens/s", m_decode, 2}, {"prefill tokens/s", m_prefill, 1}, {"generated tokens", m_generated, 0},
    {"cache hit rate %", m_hit, 1}, {"experts loaded / token", m_experts, 2}, {"MiB read / token", m_mib, 2},
    {"I/O stall % of time", m_stall, 1}, {"MTP acceptance %", m_accept, 1}, {"tokens per main pass", m_per_pass, 3},
    {"peak RSS MiB", m_rss, 1},
};
enum { N_METRICS = sizeof metrics / sizeof metrics[0] };

int report_metric_count(void) { return N_METRICS; }
const char *report_metric(int i, const cJSON *r, double *v)
{
    *v = metrics[i].get(r);
    return metrics[i].name;
}

/* A setting as text for "what changed": plan entries, sampling, top-level flags. */
static void setting_text(const cJSON *r, const char *where, const char *key, char *buf, size_t n)
{
    const cJSON *o = where ? cJSON_GetObjectItem(r, where) : r, *x = cJSON_GetObjectItem(o, key);
    if (cJSON_IsString(x)) snprintf(buf, n, "%s", x->valuestring);
    else if (cJSON_IsBool(x)) snprintf(buf, n, "%s", cJSON_IsTrue(x) ? "on" : "off");
    else if (cJSON_IsNumber(x)) report_fmt(x->valuedouble, x->valuedouble == floor(x->valuedouble) ? 0 : 3, buf, n);
    else snprintf(buf, n, "-");
}

static void what_changed(const cJSON *a, const cJSON *b, FILE *out)
{
    static const char *keys[][3] = {
        {NULL, "model", "model"}, {NULL, "mtp", "MTP"}, {NULL, "threads", "threads"}, {"plan", "cache_policy", "cache policy"},
        {"plan", "slots", "expert cache slots"}, {"plan", "budget_bytes", "memory budget (bytes)"}, {"plan", "prefetch", "prefetch"},
        {"plan", "io_backend", "I/O backend"}, {"plan", "ctx", "ctx"}, {"sampling", "temperature", "temperature"},
        {"sampling", "top_p", "top-p"}, {"sampling", "seed", "seed"}, {"sampling", "n_predict", "-n"}, {NULL, "version", "version"},
    };
    int changed = 0;
    fprintf(out, "\nwhat changed\n");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char x[512], y[512];
        setting_text(a, keys[i][0], keys[i][1], x, sizeof x);
        setting_text(b, keys[i][0], keys[i][1], y, sizeof y);
        if (strcmp(x, y)) { fprintf(out, "  %-22s %s -> %s\n", keys[i][2], x, y); changed++; }
    }
    if (!changed) fprintf(out, "  no setting differs (the difference is the machine's noise)\n");
}

void report_compare_text(const cJSON *a, const cJSON *b, const char *a_name, const char *b_name, FILE *out)
{
    char x[64], y[64], d[64];
    fprintf(out, "A: %s  (%s)\n   %s\nB: %s  (%s)\n   %s\n\n", a_name, report_str(a, "started_at"), report_str(a, "command_line"), b_name,
            report_str(b, "started_at"), report_str(b, "command_line"));
    fprintf(out, "%-24s %14s %14s %10s\n", "", "A", "B", "B vs A");
    for (int i = 0; i < N_METRICS; i++) {
        double va = metrics[i].get(a), vb = metrics[i].get(b);
        if (va > 0) snprintf(d, sizeof d, "x%s", report_fmt(vb / va, 3, y, sizeof y));
        else snprintf(d, sizeof d, "-");
        fprintf(out, "%-24s %14s %14s %10s\n", metrics[i].name, report_fmt(va, metrics[i].decimals, x, sizeof x),
                report_fmt(vb, metrics[i].decimals, y, sizeof y), d);
    }
    what_changed(a, b, out);
    double da = m_decode(a), db = m_decode(b);
    if (da > 0 && db > 0)
        fprintf(out, "\neffect on speed: decode %s -> %s tok/s, B is %s%% %s than A\n", report_fmt(da, 2, x, sizeof x),
                report_fmt(db, 2, y, sizeof y), report_fmt(fabs(db / da - 1) * 100, 1, d, sizeof d), db >= da ? "faster" : "slower");
}
