/* dsspec batch against `dsspec run`: every job's ids equal a separate run of the same prompt and
 * sampling settings; one process keeps the expert cache warm (a repeated prompt reads fewer
 * experts); kill -9 at random points plus a torn last line, then restarts, end with exactly one
 * correct line per job; bad jobs files and duplicate ids are refused in one line. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/engine/cli_proc.h"
#include "tests/test_check.h"

static const char *bin, *model;
static char dir[] = "/tmp/dsspec_batch_XXXXXX";

typedef struct {
    const char *id, *json;        /* the jobs line */
    const char *run[12];          /* the same job as `dsspec run` flags */
} job;

static char chat_path[1100];

static const job jobs[] = {
    {"a", "{\"id\": \"a\", \"prompt\": \"def fibonacci(n):\", \"n\": 20, \"temperature\": 0}",
     {"-p", "def fibonacci(n):", "-n", "20", "--temp", "0"}},
    {"b", "{\"id\": \"b\", \"messages\": [{\"role\": \"user\", \"content\": \"What is 2+2?\"}], \"n\": 16, \"temperature\": 0.7, \"seed\": 3}",
     {"--chat=CHAT", "-n", "16", "--temp", "0.7", "--seed", "3"}},
    {"7", "{\"id\": 7, \"ids\": [0, 5, 9], \"n\": 12, \"temperature\": 0, \"ignore_eos\": true}",
     {"--ids", "0,5,9", "-n", "12", "--temp", "0", "--ignore-eos"}},
    {"e", "{\"id\": \"e\", \"prompt\": \"The history of\", \"n\": 30, \"temperature\": 0.9, \"seed\": 11, \"top_p\": 0.8}",
     {"-p", "The history of", "-n", "30", "--temp", "0.9", "--seed", "11", "--top-p", "0.8"}},
    {"a2", "{\"id\": \"a2\", \"prompt\": \"def fibonacci(n):\", \"n\": 20, \"temperature\": 0}",
     {"-p", "def fibonacci(n):", "-n", "20", "--temp", "0"}},
    {"f", "{\"id\": \"f\", \"prompt\": \"Once upon a time\", \"n\": 25, \"chat\": true, \"temperature\": 0}",
     {"-p", "Once upon a time", "--chat-wrap", "-n", "25", "--temp", "0"}},
};
enum { N_JOBS = sizeof jobs / sizeof jobs[0] };
static char want[N_JOBS][4096];

static void path_in_dir(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0, "write %s", path);
    if (f) fclose(f);
}

/* The ids a separate `dsspec run` generates for job i. */
static void reference_ids(int i)
{
    char chat_flag[1200];
    snprintf(chat_flag, sizeof chat_flag, "--chat=%s", chat_path);
    const char *base[] = {bin, "run", "-m", model, "--print-ids", "--quiet", "--ctx", "512", NULL}, *extra[16];
    int n = 0;
    for (const char *const *a = jobs[i].run; *a; a++) extra[n++] = strcmp(*a, "--chat=CHAT") ? *a : chat_flag;
    extra[n] = NULL;
    const char *argv[PROC_MAX_ARGS];
    proc_args(argv, base, extra);
    proc_result r;
    CHECK(proc_run(&r, (char *const *)argv) == 0, "reference run of job %s: %s", jobs[i].id, r.err);
    snprintf(want[i], sizeof want[i], "%s", r.out);
    char *nl = strchr(want[i], '\n');
    if (nl) *nl = 0;
}

static int batch(proc_result *r, const char *jobs_path, const char *out)
{
    const char *a[] = {bin, "batch", jobs_path, "--out", out, "-m", model, "--ctx", "512", "--quiet", NULL};
    return proc_run(r, (char *const *)a);
}

/* RESULTS holds exactly one line per job with the reference ids; returns the parsed lines. */
static cJSON *check_results(const char *out, const char *what)
{
    char *text = test_read_file(out, NULL);
    cJSON *by_id = cJSON_CreateObject();
    int lines = 0;
    for (char *p = text, *nl; p && *p; p = nl + 1, lines++) {
        nl = strchr(p, '\n');
        CHECK(nl != NULL, "%s: last line has no newline", what);
        if (!nl) break;
        *nl = 0;
        cJSON *line = cJSON_Parse(p);
        const char *id = line ? cJSON_GetStringValue(cJSON_GetObjectItem(line, "id")) : NULL;
        CHECK(id && !cJSON_GetObjectItem(by_id, id), "%s: line %d is not a new job's result: %.80s", what, lines + 1, p);
        if (id && !cJSON_GetObjectItem(by_id, id)) cJSON_AddItemToObject(by_id, id, line);
        else cJSON_Delete(line);
    }
    CHECK(lines == N_JOBS, "%s: %d lines, want %d", what, lines, N_JOBS);
    for (int i = 0; i < N_JOBS; i++) {
        cJSON *ids = cJSON_GetObjectItem(cJSON_GetObjectItem(by_id, jobs[i].id), "ids"), *x;
        char got[4096] = "";
        cJSON_ArrayForEach(x, ids) snprintf(got + strlen(got), sizeof got - strlen(got), got[0] ? " %d" : "%d", x->valueint);
        CHECK(!strcmp(got, want[i]), "%s: job %s ids '%s', `dsspec run` gives '%s'", what, jobs[i].id, got, want[i]);
    }
    free(text);
    return by_id;
}

static double misses(const cJSON *by_id, const char *id)
{
    return cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(by_id, id), "cache"), "misses")->valuedouble;
}

static void check_kill_and_restart(const char *jobs_path, long full_size)
{
    char out[1100];
    path_in_dir(out, sizeof out, "killed.jsonl");
    const char *a[] = {bin, "batch", jobs_path, "--out", out, "-m", model, "--ctx", "512", "--quiet", NULL};
    int kills = 0;
    for (int k = 0; k < 4; k++) {
        long have = proc_file_size(out), target = (have > 0 ? have : 0) + 1 + rand() % (full_size / 6);
        if (proc_kill_at_size((char *const *)a, out, target) >= 0) kills++;
    }
    CHECK(kills >= 2, "only %d of 4 kills landed before the batch finished", kills);
    /* A write torn by a kill: half of a real line, no newline. */
    FILE *f = fopen(out, "a");
    if (f) { fputs("{\"id\":\"f\",\"text\":\"Once upon", f); fclose(f); }
    proc_result r;
    CHECK(batch(&r, jobs_path, out) == 0 && strstr(r.err, "torn"), "restart after a torn line: %d %s", r.status, r.err);
    cJSON_Delete(check_results(out, "after kill -9 and restarts"));
    printf("batch: %d SIGKILLs and a torn last line, restarted: one correct line per job\n", kills);
}

static void check_bad_input(void)
{
    char bad[1100], out[1100];
    path_in_dir(bad, sizeof bad, "bad.jsonl");
    path_in_dir(out, sizeof out, "bad_out.jsonl");
    struct { const char *text, *needle; } cases[] = {
        {"{\"id\": 1, \"prompt\": \"x\"}\n{\"id\": 2, \"prompt\": \n", "bad.jsonl:2"},
        {"{\"id\": 1, \"n\": 3}\n", "bad.jsonl:1"},
        {"{\"id\": \"x\", \"prompt\": \"a\"}\n{\"id\": \"x\", \"prompt\": \"b\"}\n", "repeats"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(bad, cases[i].text);
        proc_result r;
        batch(&r, bad, out);
        CHECK(r.status == 1 && strstr(r.err, cases[i].needle) && strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
              "bad jobs case %zu: status %d, want 1 and one line naming '%s': %s", i, r.status, cases[i].needle, r.err);
    }
    /* Without --ctx the plan's default context holds the prompts (it once compared them with 0). */
    write_file(bad, "{\"id\": \"d\", \"ids\": [1, 2, 3], \"n\": 2}\n");
    unlink(out);
    {
        const char *a[] = {bin, "batch", bad, "--out", out, "-m", model, "--quiet", NULL};
        proc_result d;
        proc_run(&d, (char *const *)a);
        char *got = test_read_file(out, NULL);
        CHECK(d.status == 0 && got && strstr(got, "\"id\":\"d\",\"text\""), "batch without --ctx: status %d, %s, results %s",
              d.status, d.err, got ? got : "(none)");
        free(got);
    }
    /* A job that cannot run is recorded with its error, the others still run, and the exit is 1. */
    write_file(bad, "{\"id\": \"big\", \"ids\": [1, 99999], \"n\": 2}\n{\"id\": \"ok\", \"ids\": [1, 2], \"n\": 2}\n");
    unlink(out);
    proc_result r;
    batch(&r, bad, out);
    char *text = test_read_file(out, NULL);
    CHECK(r.status == 1 && text && strstr(text, "\"id\":\"big\",\"error\"") && strstr(text, "\"id\":\"ok\",\"text\""),
          "a failing job: status %d, results %s", r.status, text ? text : "(none)");
    free(text);
}

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: test_batch DSSPEC MODEL\n"); return 2; }
    bin = argv[1];
    model = argv[2];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    srand(4242);
    char jobs_path[1100], out[1100], text[8192] = "";
    path_in_dir(chat_path, sizeof chat_path, "chat.json");
    path_in_dir(jobs_path, sizeof jobs_path, "jobs.jsonl");
    path_in_dir(out, sizeof out, "results.jsonl");
    write_file(chat_path, "[{\"role\": \"user\", \"content\": \"What is 2+2?\"}]");
    for (int i = 0; i < N_JOBS; i++) {
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s\n", jobs[i].json);
        reference_ids(i);
    }
    write_file(jobs_path, text);
    proc_result r;
    CHECK(batch(&r, jobs_path, out) == 0, "batch failed: %s", r.err);
    cJSON *by_id = check_results(out, "one batch run");
    CHECK(misses(by_id, "a2") < misses(by_id, "a"), "the repeated prompt read %.0f experts, the first %.0f: the cache is not warm",
          misses(by_id, "a2"), misses(by_id, "a"));
    printf("batch: %d jobs equal separate runs; the repeated prompt read %.0f experts after %.0f (warm cache)\n", N_JOBS,
           misses(by_id, "a2"), misses(by_id, "a"));
    cJSON_Delete(by_id);
    CHECK(batch(&r, jobs_path, out) == 0 && strstr(r.err, "0 run now") && proc_file_size(out) > 0, "a rerun must skip every job: %s", r.err);
    check_kill_and_restart(jobs_path, proc_file_size(out));
    check_bad_input();
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    printf("%s\n", test_failures ? "FAILED" : "batch: all checks passed");
    return test_failures ? 1 : 0;
}
