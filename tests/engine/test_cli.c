/* The CLI contracts outside checkers rely on, driven through the real binary:
 *   dsspec eval --ids --dump OUT   -> logits.f32 [T][V] (vs transformers), routes.json, mtp_logits.f32
 *   dsspec run --ids -n 16 --temp 0 --print-ids -> exactly the greedy ids on one stdout line
 * plus bad flags (one line, exit 2), a memory budget that cannot be honoured (exit 2, says why),
 * and the process's peak RSS under --mem-budget, measured from outside with wait4(). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/engine/engine_test.h"

static const char *dsspec_bin;

typedef struct { int status; long max_rss_kb; char out[65536], err[65536]; } proc_result;

static void read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0) n += (size_t)r;
    buf[n] = 0;
}

/* Runs dsspec with the NULL-terminated args; stdout/stderr captured (small outputs only). */
static int run_dsspec(proc_result *r, const char *first, ...)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = dsspec_bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char out_path[] = "/tmp/dsspec_cli_out_XXXXXX", err_path[] = "/tmp/dsspec_cli_err_XXXXXX";
    int fo = mkstemp(out_path), fe = mkstemp(err_path);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fo, 1);
        dup2(fe, 2);
        execv(dsspec_bin, (char **)argv);
        _exit(127);
    }
    struct rusage ru;
    int st = 0;
    wait4(pid, &st, 0, &ru);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r->max_rss_kb = ru.ru_maxrss;
    lseek(fo, 0, SEEK_SET);
    lseek(fe, 0, SEEK_SET);
    read_all(fo, r->out, sizeof r->out);
    read_all(fe, r->err, sizeof r->err);
    close(fo); close(fe);
    unlink(out_path); unlink(err_path);
    return r->status;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static char *ids_text(const int *ids, int n)
{
    char *s = malloc((size_t)n * 12 + 1);
    s[0] = 0;
    for (int i = 0; i < n; i++) sprintf(s + strlen(s), i ? ",%d" : "%d", ids[i]);
    return s;
}

static void check_eval(const char *dir, const ref_fixture *f, int vocab)
{
    const ref_prompt *p = &f->prompts[f->n_prompts - 1];
    char *ids = ids_text(p->ids, p->n_ids), out[] = "/tmp/dsspec_eval_XXXXXX";
    CHECK(mkdtemp(out) != NULL, "mkdtemp");
    proc_result r;
    CHECK(run_dsspec(&r, "eval", "-m", dir, "--ids", ids, "--dump", out, "--mtp", NULL) == 0, "eval failed: %s", r.err);
    CHECK(r.out[0] == 0, "eval printed on stdout: %s", r.out);
    char path[2048];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/logits.f32", out);
    float *lg = (float *)test_read_file(path, &len);
    CHECK(lg && len == (size_t)p->n_ids * vocab * 4, "logits.f32: %zu bytes, want %d x %d float32", len, p->n_ids, vocab);
    for (int t = 0; lg && t < p->n_ids; t++) {
        double mx = 0, d = 0;
        for (int v = 0; v < vocab; v++) {
            size_t i = (size_t)t * vocab + v;
            if (fabs(p->logits[i]) > mx) mx = fabs(p->logits[i]);
            if (fabs(lg[i] - p->logits[i]) > d) d = fabs(lg[i] - p->logits[i]);
        }
        CHECK(d <= 1e-3 * mx, "logits.f32 row %d: error %.3g of max %.3g", t, d, mx);
    }
    free(lg);
    snprintf(path, sizeof path, "%s/mtp_logits.f32", out);
    lg = (float *)test_read_file(path, &len);
    CHECK(lg && len == (size_t)p->n_ids * vocab * 4, "mtp_logits.f32: %zu bytes", len);
    free(lg);
    snprintf(path, sizeof path, "%s/routes.json", out);
    char *text = test_read_file(path, NULL);
    cJSON *routes = text ? cJSON_Parse(text) : NULL;
    CHECK(routes && cJSON_GetArraySize(routes) == p->n_moe, "routes.json: expected %d MoE layers", p->n_moe);
    for (int li = 0; routes && li < p->n_moe; li++) {
        char key[16];
        snprintf(key, sizeof key, "%d", p->moe_layer[li]);
        cJSON *rows = cJSON_GetObjectItem(routes, key);
        CHECK(cJSON_GetArraySize(rows) == p->n_ids, "routes.json layer %s: expected %d rows", key, p->n_ids);
        for (int t = 0; rows && t < p->n_ids; t++)
            for (int k = 0; k < f->top_k; k++) {
                cJSON *e = cJSON_GetArrayItem(cJSON_GetArrayItem(rows, t), k);
                CHECK(e && e->valueint == p->routes[((size_t)li * p->n_ids + t) * f->top_k + k], "routes.json layer %s row %d differs", key, t);
            }
    }
    cJSON_Delete(routes);
    free(text);
    free(ids);
    char cmd[2100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", out);
    CHECK(system(cmd) == 0, "cleanup");
}

static void check_run_ids(const char *dir, const ref_fixture *f)
{
    for (int i = 0; i < f->n_prompts; i++) {
        const ref_prompt *p = &f->prompts[i];
        char *ids = ids_text(p->ids, p->n_ids), want[4096] = "";
        for (int k = 0; k < p->n_greedy; k++) sprintf(want + strlen(want), k ? " %d" : "%d", p->greedy[k]);
        strcat(want, "\n");
        static const char *modes[] = {"off", "on", "auto"};
        for (int mtp = 0; mtp < 3; mtp++) {
            proc_result r;
            run_dsspec(&r, "run", "-m", dir, "--ids", ids, "-n", "16", "--temp", "0", "--print-ids", "--mtp", modes[mtp], NULL);
            CHECK(r.status == 0, "run --print-ids (mtp %s) failed: %s", modes[mtp], r.err);
            CHECK(!strcmp(r.out, want), "run --print-ids (mtp %s) printed '%s', transformers' greedy is '%s'", modes[mtp], r.out, want);
        }
        free(ids);
    }
}

/* Usage errors exit 2 with one line naming the flag, for every subcommand: malformed values,
 * conflicting flags (one would silently win) and flags the subcommand would ignore. */
static void check_bad_flags(const char *dir)
{
    const char *msgs = "/tmp/dsspec_cli_msgs.json";
    FILE *mf = fopen(msgs, "w");
    if (mf) { fputs("[{\"role\": \"user\", \"content\": \"hi\"}]", mf); fclose(mf); }
    struct { const char *a[12]; const char *needle; int code; } cases[] = {
        {{"run", "-m", dir, "--ids", "1,2", "--temp", "hot", NULL}, "--temp", 2},
        {{"run", "-m", dir, "--ids", "1,x", NULL}, "--ids", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--mtp", "maybe", NULL}, "--mtp", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--cache-policy", "fifo", NULL}, "--cache-policy", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--frobnicate", NULL}, "--frobnicate", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--kv-dtype", "f16", NULL}, "--kv-dtype", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--mem-budget", "lots", NULL}, "--mem-budget", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--mem-budget", "1M", "--print-ids", NULL}, "memory budget too small", 2},
        {{"run", "-m", dir, "--ids", "1,99999", "-n", "2", "--print-ids", NULL}, "99999", 1},
        {{"run", "-m", dir, "--ids", "1,2", NULL}, "tokenizer.json", 1},
        {{"run", "-m", "/nonexistent/model", "--ids", "1", NULL}, "/nonexistent/model", 1},
        {{"eval", "-m", dir, "--ids", "1,2", NULL}, "--dump", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--print-ids", "--report", "/nonexistent/dir/r.json", NULL}, "/nonexistent/dir/r.json", 1},
        {{"run", "-m", dir, "--ids", "1,2", "--print-ids", "--telemetry", "/nonexistent/dir/t.jsonl", NULL}, "--telemetry", 1},
        {{"run", "-m", dir, "--ids", "1,2,3,4,5,6,7,8", "--print-ids", "--ctx", "8", NULL}, "does not fit --ctx 8", 1},
        {{"run", "-m", dir, "--ids", "1,2", "--cpu-features", "avx9000", NULL}, "--cpu-features", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--print-ids", "--ctx", "129", NULL}, "max_position_embeddings = 128", 2},
        {{"frobnicate", NULL}, "frobnicate", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--resume", NULL}, "--resume needs --session", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--progress", "--no-progress", NULL}, "--no-progress", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--session", "/nonexistent/dir/s.session", NULL}, "/nonexistent/dir/s.session", 1},
        {{"batch", "jobs.jsonl", NULL}, "--out", 2},
        {{"batch", "/nonexistent/jobs.jsonl", "--out", "/tmp/dsspec_never.jsonl", "-m", dir, NULL}, "/nonexistent/jobs.jsonl", 1},
        {{"report", "/nonexistent/r.json", NULL}, "/nonexistent/r.json", 1},
        {{"run", "-m", dir, "-p", "x", "-f", msgs, NULL}, "-p and -f", 2},
        {{"run", "-m", dir, "--ids", "1,2", "-p", "x", NULL}, "--ids", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--chat", NULL}, "--chat", 2},
        {{"run", "-m", dir, "--chat=/tmp/dsspec_cli_msgs.json", "-p", "x", NULL}, "--chat=", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--no-bos", NULL}, "--no-bos", 2},
        {{"run", "-m", dir, "--chat-wrap", "-p", "x", "--no-bos", NULL}, "--no-bos", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--telemetry-every", "4", NULL}, "--telemetry-every", 2},
        {{"run", "-m", dir, "--ids", "1,2", "--ctx", "1", NULL}, "--ctx", 2},
        {{"ab", "-m", dir, "--ids", "1,2", "--telemetry", "/tmp/t.jsonl", NULL}, "--telemetry", 2},
        {{"ab", "-m", dir, "--ids", "1,2", "--print-ids", NULL}, "--print-ids", 2},
        {{"ab", "-m", dir, "--ids", "1,2", "--trace-out", "/tmp/t.jsonl", NULL}, "--trace-out", 2},
        {{"ab", "-m", dir, "--ids", "1,2", "--mtp", "on", NULL}, "--mtp", 2},
        {{"ab", "-m", dir, "--ids", "1,2", "--quiet", NULL}, "--quiet", 2},
        {{"ab", "-m", dir, "-p", "x", "-f", msgs, NULL}, "-p and -f", 2},
        {{"ab", "-m", dir, "--ids", "1,2", "--ctx", "129", NULL}, "max_position_embeddings", 2},
        {{"eval", "-m", dir, "--ids", "1,2", "--ppl", "--mtp", NULL}, "--mtp", 2},
        {{"eval", "-m", dir, "--ids", "1,2", "--ids-file", msgs, "--ppl", NULL}, "--ids", 2},
        {{"eval", "-m", dir, "--ids", "1,2", "--chunk", "0", "--ppl", NULL}, "--chunk", 2},
        {{"tokenize", "-p", "x", "-f", msgs, NULL}, "-p TEXT", 2},
        {{"tokenize", "--chat", msgs, "--no-bos", NULL}, "--no-bos", 2},
        {{"tokenize", "-p", "x", "--no-generation-prompt", NULL}, "--no-generation-prompt", 2},
        {{"detokenize", NULL}, "--ids", 2},
        {{"detokenize", "--ids", "1,x", NULL}, "--ids", 2},
        {{"cache-sim", "--slots", "4", NULL}, "--trace", 2},
        {{"cache-sim", "--trace", msgs, "--slots", "x", NULL}, "--slots", 2},
        {{"inspect", "-m", dir, "extra", NULL}, "extra", 2},
        {{"report", NULL}, "report file", 2},
        {{"report", "a.json", "b.json", "c.json", NULL}, "c.json", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        proc_result r;
        const char **a = cases[i].a;
        run_dsspec(&r, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], NULL);
        CHECK(r.status == cases[i].code, "case %zu (%s): exit %d, want %d", i, cases[i].needle, r.status, cases[i].code);
        CHECK(count_lines(r.err) == 1 && strstr(r.err, cases[i].needle), "case %zu: want one stderr line naming '%s', got: %s", i, cases[i].needle, r.err);
        CHECK(r.out[0] == 0, "case %zu printed on stdout", i);
    }
    unlink(msgs);
}

static cJSON *read_json(const char *path)
{
    char *text = test_read_file(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    return j;
}

static double plan_value(const cJSON *report, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(report, "plan"), key);
    return v ? v->valuedouble : -1;
}

/* Peak RSS (measured by the kernel for the child) stays under the budget the user gave. The
 * budgets are set from a first run's plan (its baseline differs under ASan) so that they leave
 * room for a quarter and a half of the experts: a partial cache that must evict. */
static void check_budget(const char *dir)
{
    char report[] = "/tmp/dsspec_report_XXXXXX";
    int fd = mkstemp(report);
    close(fd);
    proc_result r;
    run_dsspec(&r, "run", "-m", dir, "-p", "def fibonacci(n):", "-n", "4", "--print-ids", "--ctx", "256", "--report", report, NULL);
    cJSON *first = read_json(report);
    CHECK(r.status == 0 && first, "plan run failed: %s", r.err);
    if (!first) return;
    double fixed = plan_value(first, "resident_bytes") + plan_value(first, "kv_bytes") + plan_value(first, "buffer_bytes");
    double kv_f32 = plan_value(first, "kv_bytes");
    run_dsspec(&r, "run", "-m", dir, "-p", "def fibonacci(n):", "-n", "4", "--print-ids", "--ctx", "256", "--kv-dtype", "bf16",
               "--report", report, NULL);
    cJSON *half = read_json(report);
    CHECK(r.status == 0 && half && plan_value(half, "kv_bytes") * 2 == kv_f32, "--kv-dtype bf16 must halve the KV plan: %s", r.err);
    cJSON_Delete(half);
    double slot = plan_value(first, "slot_bytes"), total = plan_value(first, "total_experts");
    cJSON_Delete(first);
    for (int i = 1; i <= 2; i++) {
        char budget[32];
        snprintf(budget, sizeof budget, "%.0f", fixed + slot * total * i / 4);
        run_dsspec(&r, "run", "-m", dir, "-p", "def fibonacci(n):", "-n", "40", "--temp", "0", "--print-ids", "--mem-budget",
                   budget, "--report", report, "--cache-policy", "lfu", "--ctx", "256", NULL);
        CHECK(r.status == 0, "run under --mem-budget %s failed: %s", budget, r.err);
        CHECK(r.max_rss_kb > 0 && r.max_rss_kb * 1024.0 <= atof(budget), "peak RSS %ld KiB exceeds --mem-budget %s", r.max_rss_kb, budget);
        cJSON *j = read_json(report);
        int slots = j ? (int)plan_value(j, "slots") : -1;
        CHECK(slots >= 1 && slots < total, "the budget must force a partial expert cache (%d of %.0f slots)", slots, total);
        CHECK(j && cJSON_GetObjectItem(j, "generated")->valueint == 40, "report: generated");
        printf("--mem-budget %s bytes: peak RSS %.1f MiB (kernel's ru_maxrss), %d of %.0f expert slots\n", budget,
               r.max_rss_kb / 1024.0, slots, total);
        cJSON_Delete(j);
        proc_result rr;
        CHECK(run_dsspec(&rr, "report", report, NULL) == 0 && strstr(rr.out, "40 generated") && strstr(rr.out, "hit rate"),
              "dsspec report did not render the run: %s%s", rr.out, rr.err);
    }
    unlink(report);
    CHECK(run_dsspec(&r, "report", "/nonexistent.json", NULL) == 1 && count_lines(r.err) == 1, "report of a missing file");
}

/* SIGINT (Ctrl-C) or SIGTERM (timeout, systemd) during a long run: the generation stops, the
 * report is still written and says which signal, and the exit status is 3, not success. */
static void check_interrupt(const char *dir, int sig, const char *sig_name)
{
    char report[] = "/tmp/dsspec_int_XXXXXX";
    int fd = mkstemp(report);
    close(fd);
    unlink(report);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execl(dsspec_bin, dsspec_bin, "run", "-m", dir, "--ids", "0,5,9", "-n", "100000000", "--temp", "0", "--print-ids",
              "--ctx", "20000", "--mtp", "off", "--ignore-eos", "--report", report, (char *)NULL);
        _exit(127);
    }
    usleep(1500 * 1000);
    kill(pid, sig);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3, "run stopped by %s: status %d, want exit 3", sig_name, st);
    char *text = test_read_file(report, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    const cJSON *why = j ? cJSON_GetObjectItem(j, "stopped_by") : NULL, *which = j ? cJSON_GetObjectItem(j, "signal") : NULL;
    CHECK(why && !strcmp(why->valuestring, "signal") && which && !strcmp(which->valuestring, sig_name) &&
          cJSON_GetObjectItem(j, "generated")->valueint > 0,
          "report after %s missing or wrong: %s", sig_name, text ? text : "(none)");
    cJSON_Delete(j);
    free(text);
    unlink(report);
}

/* Progress on a non-terminal stderr: off by default, plain lines with --progress (prefill rows,
 * then tokens with tok/s, ETA, hit rate, MTP acceptance); ab says which run it is in. Telemetry
 * lines carry the live draft counts, not zeros. */
static void check_progress(const char *dir)
{
    char tele[] = "/tmp/dsspec_tele_XXXXXX";
    int fd = mkstemp(tele);
    close(fd);
    unlink(tele);
    proc_result r;
    run_dsspec(&r, "run", "-m", dir, "--ids", "0,5,9,14,3,8,22,31", "-n", "40", "--temp", "0", "--print-ids", "--quiet",
               "--prefill-chunk", "2", "--mtp", "on", "--ignore-eos", NULL);
    CHECK(r.status == 0 && r.err[0] == 0, "no progress by default when stderr is not a terminal: %s", r.err);
    run_dsspec(&r, "run", "-m", dir, "--ids", "0,5,9,14,3,8,22,31", "-n", "40", "--temp", "0", "--print-ids", "--quiet",
               "--prefill-chunk", "2", "--mtp", "on", "--ignore-eos", "--progress", "--progress-every", "0.01", "--telemetry", tele,
               "--telemetry-every", "4", NULL);
    CHECK(r.status == 0 && strstr(r.err, "] prefill 2/8 prompt rows") && strstr(r.err, "] prefill 8/8 prompt rows") &&
          strstr(r.err, "/40 tokens | ") && strstr(r.err, "tok/s (recent ") && strstr(r.err, "| ETA ") &&
          strstr(r.err, "| hit ") && strstr(r.err, "accepted") && !strchr(r.err, '\r'),
          "--progress on a pipe: %s", r.err);
    char *t = test_read_file(tele, NULL);
    CHECK(t && strstr(t, "\"drafts\":") && !strstr(t, "\"drafts\":0,\"accepted\":0}"), "telemetry lines must carry live draft counts");
    free(t);
    unlink(tele);
    run_dsspec(&r, "ab", "-m", dir, "--ids", "0,5,9", "-n", "20", "--temp", "0", "--progress", "--progress-every", "0.01", NULL);
    CHECK(r.status == 0 && strstr(r.err, "[ab 1/3 MTP off") && strstr(r.err, "[ab 2/3 MTP on") && strstr(r.err, "[ab 3/3 MTP auto"),
          "ab progress must name the run: %s", r.err);
    CHECK(strstr(r.out, "MTP auto") && strstr(r.out, "greedy outputs identical") && strstr(r.out, "yes"), "ab table: %s", r.out);
}

/* Sampled output is the same for one seed with MTP off, on and auto (draws keyed by position). */
static void check_sampled_paths(const char *dir)
{
    static const char *modes[] = {"off", "on", "auto"};
    char first[4096] = "";
    for (int m = 0; m < 3; m++) {
        proc_result r;
        run_dsspec(&r, "run", "-m", dir, "--ids", "0,5,9,14", "-n", "48", "--temp", "0.9", "--seed", "11", "--print-ids",
                   "--ignore-eos", "--quiet", "--mtp", modes[m], NULL);
        CHECK(r.status == 0, "sampled run --mtp %s failed: %s", modes[m], r.err);
        if (m == 0) snprintf(first, sizeof first, "%s", r.out);
        else CHECK(!strcmp(first, r.out), "sampled --seed 11: --mtp %s printed '%s', --mtp off '%s'", modes[m], r.out, first);
    }
}

/* The default prefill chunk comes from the budget and the plan says it; prompt rows one at a time
 * and in the default chunk give the same greedy continuation, and the report counts the experts
 * the prompt asked the cache for. */
static void check_prefill_chunk(const char *dir)
{
    char report[] = "/tmp/dsspec_prefill_XXXXXX";
    int fd = mkstemp(report);
    close(fd);
    const char *text = "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n";
    proc_result one, dflt;
    run_dsspec(&one, "run", "-m", dir, "-p", text, "-n", "24", "--temp", "0", "--print-ids", "--prefill-chunk", "1", "--ctx", "512", NULL);
    run_dsspec(&dflt, "run", "-m", dir, "-p", text, "-n", "24", "--temp", "0", "--print-ids", "--ctx", "512", "--report", report, NULL);
    CHECK(one.status == 0 && dflt.status == 0, "prefill runs failed: %s %s", one.err, dflt.err);
    CHECK(!strcmp(one.out, dflt.out), "greedy after --prefill-chunk 1 '%s' differs from the default chunk's '%s'", one.out, dflt.out);
    CHECK(strstr(dflt.err, "dsspec plan: prefill 512 prompt rows per pass"), "the plan must name the chunk (ctx 512): %s", dflt.err);
    cJSON *j = read_json(report);
    const cJSON *pf = j ? cJSON_GetObjectItem(j, "prefill_experts") : NULL;
    int n = j ? cJSON_GetObjectItem(j, "prompt_tokens")->valueint : 0;
    double req = pf ? cJSON_GetObjectItem(pf, "requests")->valuedouble : -1;
    /* one chunk: each MoE layer asks once for each expert its rows use, so at most E per layer
     * (row by row it would be n k per layer) */
    /* the embedded model: 3 main MoE layers, top-6 of 64 experts; the MTP layer reads none in prefill */
    CHECK(pf && n > 11 && req >= 3 * 6 && req <= 3 * 64,
          "prefill expert requests %.0f for %d prompt rows in one chunk (3 MoE layers, top-6 of 64: at most 192)", req, n);
    printf("prefill: %d rows in one chunk asked for %.0f experts (%.2f per prompt token)\n", n, req, req / (n ? n : 1));
    cJSON_Delete(j);
    unlink(report);
}

int main(int argc, char **argv)
{
    if (argc < 4) { fprintf(stderr, "usage: test_cli DSSPEC EMBEDDED_MODEL FIXTURE...\n"); return 2; }
    dsspec_bin = argv[1];
    CHECK(access(dsspec_bin, X_OK) == 0, "%s is not built", dsspec_bin);
    check_budget(argv[2]);
    check_prefill_chunk(argv[2]);
    for (int i = 3; i < argc && !test_failures; i++) {
        char cfg[2048];
        snprintf(cfg, sizeof cfg, "%s/config.json", argv[i]);
        char *text = test_read_file(cfg, NULL);
        cJSON *c = text ? cJSON_Parse(text) : NULL;
        int vocab = c ? cJSON_GetObjectItem(c, "vocab_size")->valueint : 0, topk = c ? cJSON_GetObjectItem(c, "num_experts_per_tok")->valueint : 0;
        cJSON_Delete(c);
        free(text);
        ref_fixture f;
        if (ref_fixture_load(argv[i], vocab, topk, &f)) { CHECK(0, "%s: no reference", argv[i]); continue; }
        check_eval(argv[i], &f, vocab);
        check_run_ids(argv[i], &f);
        if (i == 3) {
            check_bad_flags(argv[i]);
            check_interrupt(argv[2], SIGINT, "SIGINT"); /* the embedded model: 163840 positions, a long run */
            check_interrupt(argv[2], SIGTERM, "SIGTERM");
            check_progress(argv[i]);
            check_sampled_paths(argv[i]);
        }
        ref_fixture_free(&f);
    }
    printf("%s\n", test_failures ? "FAILED" : "cli: all checks passed");
    return test_failures ? 1 : 0;
}
