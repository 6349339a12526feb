/* dsspec ab: the same prompt with MTP off, then on, same seed, each from a cold expert cache
 * (a fresh, empty arena; O_DIRECT reads bypass the page cache), and one table of what differs. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/runner.h"

typedef struct {
    const char *name;
    double off, on;
    const char *fmt;
} ab_row;

static double per_token(double x, const run_result *r) { return r->gen.generated ? x / r->gen.generated : 0; }

static double hit_rate(const run_result *r)
{
    if (!r->have_cache) return 0;
    double req = (double)r->cache.hits + r->cache.misses;
    return req ? r->cache.hits / req : 0;
}

static double stall_pct(const run_result *r)
{
    double total = r->gen.prefill_seconds + r->gen.decode_seconds;
    return r->have_cache && total > 0 ? 100.0 * r->cache.stall_ns * 1e-9 / total : 0;
}

static int collect_rows(const run_result *off, const run_result *on, ab_row *rows)
{
    int n = 0;
    const run_result *rr[2] = {off, on};
    double v[12][2];
    for (int i = 0; i < 2; i++) {
        const run_result *r = rr[i];
        v[0][i] = dsspec_decode_tokens_per_second(&r->gen);
        v[1][i] = r->gen.generated;
        v[2][i] = r->gen.main_passes;
        v[3][i] = r->gen.main_passes ? (r->gen.generated - 1.0) / r->gen.main_passes : 0;
        v[4][i] = r->gen.drafts ? 100.0 * r->gen.accepted / r->gen.drafts : 0;
        v[5][i] = r->have_cache ? per_token((double)r->cache.misses, r) : 0;
        v[6][i] = r->have_cache ? per_token((double)r->cache.bytes_read, r) / 1048576.0 : 0;
        v[7][i] = 100.0 * hit_rate(r);
        v[8][i] = stall_pct(r);
        v[9][i] = r->peak_rss / 1048576.0;
    }
    static const char *names[] = {"decode tokens/s", "generated tokens", "main-model passes", "tokens per main pass",
                                  "MTP acceptance %", "experts loaded / token", "MiB read / token", "cache hit rate %",
                                  "I/O stall % of time", "peak RSS MiB"};
    static const char *fmts[] = {"%.2f", "%.0f", "%.0f", "%.3f", "%.1f", "%.2f", "%.2f", "%.1f", "%.1f", "%.1f"};
    for (int k = 0; k < 10; k++) rows[n++] = (ab_row){names[k], v[k][0], v[k][1], fmts[k]};
    return n;
}

static void print_table(const ab_row *rows, int n, int greedy, int identical, const run_result *on, FILE *out)
{
    fprintf(out, "%-24s %14s %14s\n", "", "MTP off", "MTP on");
    for (int i = 0; i < n; i++) {
        char a[32], b[32];
        snprintf(a, sizeof a, rows[i].fmt, rows[i].off);
        snprintf(b, sizeof b, rows[i].fmt, rows[i].on);
        fprintf(out, "%-24s %14s %14s\n", rows[i].name, a, b);
    }
    fprintf(out, "%-24s %29s\n", "greedy outputs identical", greedy ? (identical ? "yes" : "NO") : "n/a (sampling)");
    fprintf(out, "cache: %d slots of %d experts, each run from a cold (empty) cache; io %s\n", on->plan.slots,
            on->plan.total_experts, on->plan.io_backend ? on->plan.io_backend : "?");
}

static int write_ab_report(const char *path, const ab_row *rows, int n, int greedy, int identical)
{
    cJSON *j = cJSON_CreateObject(), *off = cJSON_AddObjectToObject(j, "mtp_off"), *on = cJSON_AddObjectToObject(j, "mtp_on");
    for (int i = 0; i < n; i++) {
        cJSON_AddNumberToObject(off, rows[i].name, rows[i].off);
        cJSON_AddNumberToObject(on, rows[i].name, rows[i].on);
    }
    cJSON_AddBoolToObject(j, "greedy", greedy);
    if (greedy) cJSON_AddBoolToObject(j, "outputs_identical", identical);
    cJSON_AddStringToObject(j, "cache_state", "cold: each run starts with an empty expert cache");
    char *text = cJSON_Print(j);
    FILE *f = fopen(path, "w");
    int ok = f && text && fputs(text, f) >= 0;
    if (f && fclose(f)) ok = 0;
    if (!ok) fprintf(stderr, "dsspec ab: --report %s: cannot write: %s\n", path, strerror(errno));
    free(text);
    cJSON_Delete(j);
    return ok ? 0 : 1;
}

/* Run flags ab cannot honour: it runs the prompt twice (MTP off, then on) and prints one table. */
static int refuse_run_only_flags(const run_options *o)
{
    if (o->engine.mtp >= 0) return flags_usage_error("ab", "--mtp: ab runs MTP off and then on; use dsspec run for one setting");
    if (o->telemetry_path) return flags_usage_error("ab", "--telemetry: two runs would mix in one file; use dsspec run --telemetry");
    if (o->trace_out) return flags_usage_error("ab", "--trace-out: the second run would overwrite the first's trace; use dsspec run --trace-out");
    if (o->print_ids) return flags_usage_error("ab", "--print-ids: ab prints its comparison table, not ids; use dsspec run --print-ids");
    if (o->quiet) return flags_usage_error("ab", "--quiet: ab prints only its table already");
    return 0;
}

int cli_ab(int argc, char **argv)
{
    run_options o;
    run_options_defaults(&o);
    int n;
    const flag *flags = run_flags(&o, &n);
    int rc = flags_parse("ab", "usage: dsspec ab [run flags]\nRuns the prompt with --mtp off, then on (same seed, cold cache each), and prints one table.\n--report FILE writes the table as JSON; --mtp, --telemetry, --trace-out, --print-ids and --quiet are refused.\n",
                         flags, n, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : rc;
    if ((rc = run_options_finish(&o, "ab")) || (rc = refuse_run_only_flags(&o))) return rc;
    const char *report = o.report_path;
    o.report_path = NULL;
    o.quiet = 1;
    run_result off, on;
    o.engine.mtp = 0;
    rc = run_once(&o, 1, &off);
    if (rc) { run_result_free(&off); return rc; }
    o.engine.mtp = 1;
    rc = run_once(&o, 1, &on);
    if (rc == 0) {
        int greedy = o.gen.temperature == 0;
        int identical = off.n_tokens == on.n_tokens && !memcmp(off.tokens, on.tokens, off.n_tokens * sizeof(int));
        ab_row rows[16];
        int nrows = collect_rows(&off, &on, rows);
        print_table(rows, nrows, greedy, identical, &on, stdout);
        if (report) rc = write_ab_report(report, rows, nrows, greedy, identical);
        if (greedy && !identical) rc = 1;
    }
    run_result_free(&off);
    run_result_free(&on);
    return rc;
}
