/* The pieces of `dsspec report` (cli/report.c): number formats, the telemetry time series, the
 * side-by-side comparison and the self-contained HTML page with inline SVG charts. */
#ifndef DSSPEC_CLI_REPORT_RENDER_H
#define DSSPEC_CLI_REPORT_RENDER_H

#include <stddef.h>
#include <stdio.h>

struct cJSON;

double report_num(const struct cJSON *o, const char *key);   /* 0 when absent */
/* A layer number from a report: -1 when absent, not a number or outside int's range. */
int report_layer(const struct cJSON *o);
const char *report_str(const struct cJSON *o, const char *key); /* "" when absent */
/* Grouped thousands, fixed decimals, never an exponent: "4,730", "0.123". Returns buf. */
const char *report_fmt(double v, int decimals, char *buf, size_t n);
const char *report_bytes(double v, char *buf, size_t n);   /* "15.12 MiB" */
void report_layer_label(const struct cJSON *r, int layer, char *buf, size_t n); /* "MTP (layer 4)" */

/* Per telemetry interval (between consecutive lines of one run), at the generated count x. */
typedef struct {
    int n;
    double *x, *tok_s, *hit_pct, *mib_per_token, *stall_pct, *accept_pct;
} report_series;

/* Reads a --telemetry file (the last run in it when several were appended). 0 or -1 with err. */
int report_series_load(const char *path, report_series *s, char *err, size_t errlen);
void report_series_free(report_series *s);
void report_series_text(const report_series *s, FILE *out);

/* The compared metrics (decode tok/s, hit rate, ...): how many, and the i-th's name and value. */
int report_metric_count(void);
const char *report_metric(int i, const struct cJSON *r, double *v);

/* Two run reports side by side: the numbers, what changed between them, and its effect on speed. */
void report_compare_text(const struct cJSON *a, const struct cJSON *b, const char *a_name, const char *b_name, FILE *out);

/* The page: the text, then charts. b != NULL: a comparison of r and b. 0, or 1 after an error line. */
int report_write_html(const struct cJSON *r, const struct cJSON *b, const report_series *s, const char *path, const char *text);

#endif
