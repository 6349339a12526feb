/* dsspec ab: the same prompt with MTP off, on and auto, same seed, each from a cold expert cache
 * (a fresh, empty arena; O_DIRECT reads bypass the page cache), and one table of what differs. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/runner.h"

enum { AB_RUNS = 3 };
static const char *const run_names[AB_RUNS] = {"MTP off", "MTP on", "MTP auto"};
static const char *const run_keys[AB_RUNS] = {"mtp_off", "mtp_on", "mtp_auto"};
static const int run_modes[AB_RUNS] = {DSSPEC_MTP_OFF, DSSPEC_MTP_ON, DSSPEC_MTP_AUTO};

typedef struct {
    const char *name;
    double v[AB_RUNS];
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

/* cpu_s: each run's process CPU seconds (user + system), a cost a busy machine barely changes. */
static int collect_rows(const run_result *runs, const double *cpu_s, ab_row *rows)
{
    double v[14][AB_RUNS];
    for (int i = 0; i < AB_RUNS; i++) {
        const run_result *r = &runs[i];
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
        v[10][i] = r->plan.slots;
        v[11][i] = per_token((double)r->gen.draft_expert_loads, r);
        v[12][i] = per_token(r->gen.decode_cpu_seconds * 1e3, r);
        v[13][i] = per_token(cpu_s[i] * 1e3, r);
    }
    static const char *names[] = {"decode tokens/s", "generated tokens", "main-model passes", "tokens per main pass",
                                  "MTP acceptance %", "experts loaded / token", "MiB read / token",
                                  "cache hit rate %", "I/O stall % of time", "peak RSS MiB", "expert cache slots",
                                  "draft-only loads / token", "decode CPU ms / token",
                                  "CPU ms / token (whole run)"};
    static const char *fmts[] = {"%.2f", "%.0f", "%.0f", "%.3f", "%.1f", "%.2f", "%.2f", "%.1f", "%.1f", "%.1f", "%.0f", "%.2f", "%.3f", "%.3f"};
    int n = (int)(sizeof names / sizeof names[0]);
    for (int k = 0; k < n; k++) {
        rows[k] = (ab_row){.name = names[k], .fmt = fmts[k]};
        memcpy(rows[k].v, v[k], sizeof rows[k].v);
    }
    return n;
}

static void print_table(const ab_row *rows, int n, int greedy, int identical, const run_result *on, FILE *out)
{
    fprintf(out, "%-24s", "");
    for (int r = 0; r < AB_RUNS; r++) fprintf(out, " %14s", run_names[r]);
    fprintf(out, "\n");
    for (int i = 0; i < n; i++) {
        fprintf(out, "%-24s", rows[i].name);
        for (int r = 0; r < AB_RUNS; r++) {
            char a[32];
            snprintf(a, sizeof a, rows[i].fmt, rows[i].v[r]);
            fprintf(out, " %14s", a);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "%-24s %44s\n", greedy ? "greedy outputs identical" : "sampled outputs identical", identical ? "yes" : "NO");
    const run_result *au = on + 1;
    fprintf(out, "MTP auto drafted on %.1f%% of its passes (%d without a draft: %d by the estimates, %d re-measuring, %d at the end, "
            "%d drafts whose odds did not pay; %d draft rows dropped mid-pass)\n",
            au->gen.main_passes ? 100.0 * au->gen.drafts / au->gen.main_passes : 0, au->gen.plain_steps, au->gen.no_draft_cost,
            au->gen.no_draft_explore, au->gen.no_draft_end, au->gen.low_odds_drafts, au->gen.rows_dropped);
    fprintf(out, "cache: %d slots of %d experts, each run from a cold (empty) cache; io %s%s\n", on->plan.slots,
            on->plan.total_experts, on->plan.io_backend ? on->plan.io_backend : "?", greedy ? "" : "; sampled (same seed)");
}

static int write_ab_report(const char *path, const run_options *o, const run_result *r, const ab_row *rows, int n,
                           int greedy, int identical)
{
    char line[8192];
    run_command_line(o, line, sizeof line);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->engine.model_dir ? o->engine.model_dir : dsspec_default_model_dir());
    cJSON_AddStringToObject(j, "started_at", r->started_at);
    cJSON_AddStringToObject(j, "command_line", line);
    for (int k = 0; k < AB_RUNS; k++) {
        cJSON *col = cJSON_AddObjectToObject(j, run_keys[k]);
        for (int i = 0; i < n; i++) cJSON_AddNumberToObject(col, rows[i].name, rows[i].v[k]);
    }
    const run_result *au = r + 2;
    cJSON_AddNumberToObject(j, "auto_draft_pass_pct", au->gen.main_passes ? 100.0 * au->gen.drafts / au->gen.main_passes : 0);
    cJSON_AddNumberToObject(j, "auto_rows_dropped", au->gen.rows_dropped);
    cJSON_AddNumberToObject(j, "cache_slots", r->plan.slots);
    cJSON_AddNumberToObject(j, "total_experts", r->plan.total_experts);
    cJSON_AddBoolToObject(j, "greedy", greedy);
    cJSON_AddBoolToObject(j, "outputs_identical", identical);
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

/* Writes all of buf to fd; 0, or -1 on a write error. */
static int write_all(int fd, const void *buf, size_t n)
{
    for (const char *p = buf; n > 0;) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
    for (char *p = buf; n > 0;) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The child's side: one run, its result and tokens down the pipe, its exit code as the status. */
static void child_run(run_options *o, int fd)
{
    run_result r;
    int rc = run_once(o, 1, &r);
    if (rc == 0 && (write_all(fd, &r, sizeof r) || write_all(fd, r.tokens, (size_t)r.n_tokens * sizeof(int)))) rc = 1;
    fflush(NULL);
    _exit(rc);
}

/* One run in a child process. A run leaves memory behind in the process that made it (the
 * allocator's arenas, libraries' caches), and the plan sizes the expert cache from the process's
 * resident size: run in one process, each mode would get a smaller cache than the one before. A
 * fresh child per mode plans from the same starting size, and its peak RSS is its own. */
static int run_in_child(run_options *o, run_result *res, double *cpu_s)
{
    int fds[2];
    memset(res, 0, sizeof *res);
    fflush(NULL);
    if (pipe(fds)) { fprintf(stderr, "dsspec ab: pipe: %s\n", strerror(errno)); return 1; }
    pid_t pid = fork();
    if (pid < 0) { fprintf(stderr, "dsspec ab: fork: %s\n", strerror(errno)); close(fds[0]); close(fds[1]); return 1; }
    if (pid == 0) { close(fds[0]); child_run(o, fds[1]); }
    close(fds[1]);
    int got = read_all(fds[0], res, sizeof *res) == 0;
    res->tokens = got && res->n_tokens > 0 ? malloc((size_t)res->n_tokens * sizeof(int)) : NULL;
    if (got && res->n_tokens > 0 && (!res->tokens || read_all(fds[0], res->tokens, (size_t)res->n_tokens * sizeof(int)))) got = 0;
    close(fds[0]);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {}
    *cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (rc == 0 && !got) rc = 1;
    if (rc) { free(res->tokens); memset(res, 0, sizeof *res); }
    else res->cap_tokens = res->n_tokens;
    return rc;
}

/* The three runs, interleaved with nothing else: each from a cold cache, each in its own process. */
static int run_all(run_options *o, run_result *runs, double *cpu_s)
{
    static const char *labels[AB_RUNS] = {"ab 1/3 MTP off", "ab 2/3 MTP on", "ab 3/3 MTP auto"};
    for (int k = 0; k < AB_RUNS; k++) {
        o->engine.mtp = run_modes[k];
        o->progress_label = labels[k];
        int rc = run_in_child(o, &runs[k], &cpu_s[k]);
        if (rc) {
            for (int i = 0; i < k; i++) run_result_free(&runs[i]);
            return rc;
        }
    }
    return 0;
}

static int same_tokens(const run_result *a, const run_result *b)
{
    return a->n_tokens == b->n_tokens && !memcmp(a->tokens, b->tokens, a->n_tokens * sizeof(int));
}

/* Run flags ab cannot honour: it runs the prompt three times (MTP off, on, auto) and prints one table. */
static int refuse_run_only_flags(const run_options *o)
{
    if (o->engine.mtp >= 0) return flags_usage_error("ab", "--mtp: ab runs MTP off, on and auto; use dsspec run for one setting");
    if (o->telemetry_path) return flags_usage_error("ab", "--telemetry: three runs would mix in one file; use dsspec run --telemetry");
    if (o->trace_out) return flags_usage_error("ab", "--trace-out: each run would overwrite the last one's trace; use dsspec run --trace-out");
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
    int rc = flags_parse("ab", "usage: dsspec ab [run flags]\nRuns the prompt with --mtp off, on and auto (same seed, each in its own process from a cold cache), and prints one table.\n--report FILE writes the table as JSON; --mtp, --telemetry, --trace-out, --print-ids and --quiet are refused. The three outputs must be identical (greedy or sampled).\n",
                         flags, n, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : rc;
    if ((rc = run_options_finish(&o, "ab")) || (rc = refuse_run_only_flags(&o))) return rc;
    if (o.session_path) return flags_usage_error("ab", "--session belongs to dsspec run (ab makes three runs)");
    const char *report = o.report_path;
    o.report_path = NULL;
    o.quiet = 1;
    o.argc = argc;
    o.argv = argv;
    run_result runs[AB_RUNS];
    double cpu_s[AB_RUNS];
    if ((rc = run_all(&o, runs, cpu_s))) return rc;
    int greedy = o.gen.temperature == 0;
    int identical = same_tokens(&runs[0], &runs[1]) && same_tokens(&runs[0], &runs[2]);
    ab_row rows[16];
    int nrows = collect_rows(runs, cpu_s, rows);
    print_table(rows, nrows, greedy, identical, &runs[1], stdout);
    if (report) rc = write_ab_report(report, &o, &runs[0], rows, nrows, greedy, identical);
    if (!identical) rc = 1;
    for (int k = 0; k < AB_RUNS; k++) run_result_free(&runs[k]);
    return rc;
}
