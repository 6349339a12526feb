/* dsspec batch JOBS.jsonl --out RESULTS.jsonl: many prompts in one process, one warm expert cache.
 *
 * Each JOBS line is a JSON object: "id" (string or number; default: the line number), one of
 * "prompt" (text), "messages" (an OpenAI-style array, rendered with the chat template) or "ids"
 * (token ids), and optionally "n", "temperature", "top_p", "seed", "chat" (wrap the prompt as one
 * user turn), "ignore_eos"; what a job leaves out comes from the command line's run flags.
 *
 * One RESULTS line per finished job, appended with one write() and fsync'ed: its id, text, ids,
 * stop reason, timing and the cache's numbers for that job (or "error"). On restart, jobs whose id
 * is already in RESULTS are skipped; a last line torn by a kill is detected (no newline, or not
 * JSON), cut off, and its job run again. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/progress.h"
#include "cli/runner.h"

typedef struct {
    cJSON *all;                   /* the parsed JOBS lines (an array we own) */
    int n;
    char **done;                  /* ids already in RESULTS */
    int n_done;
} batch_jobs;

/* The id as text: a string as is, a number printed, absent: "line N". */
static void job_id(const cJSON *job, int line, char *buf, size_t n)
{
    const cJSON *id = cJSON_GetObjectItem(job, "id");
    if (cJSON_IsString(id)) snprintf(buf, n, "%s", id->valuestring);
    else if (cJSON_IsNumber(id)) snprintf(buf, n, "%.17g", id->valuedouble);
    else snprintf(buf, n, "line %d", line);
}

static int load_jobs(const char *path, batch_jobs *b, char *err, size_t errlen)
{
    char *text = dsspec_read_file(path, NULL, err, errlen);
    if (!text) return -1;
    b->all = cJSON_CreateArray();
    int line = 0, rc = 0;
    for (char *p = text, *nl; p && *p && rc == 0; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        if (nl) *nl = 0;
        line++;
        if (strspn(p, " \t\r") == strlen(p)) continue;
        cJSON *job = cJSON_Parse(p);
        const cJSON *prompt = job ? cJSON_GetObjectItem(job, "prompt") : NULL, *msgs = job ? cJSON_GetObjectItem(job, "messages") : NULL;
        const cJSON *ids = job ? cJSON_GetObjectItem(job, "ids") : NULL;
        if (!cJSON_IsObject(job) || (!cJSON_IsString(prompt) && !cJSON_IsArray(msgs) && !cJSON_IsArray(ids))) {
            snprintf(err, errlen, "%s:%d: expected a JSON object with \"prompt\" (text), \"messages\" (array) or \"ids\" (array)", path, line);
            cJSON_Delete(job);
            rc = -1;
            break;
        }
        cJSON_AddNumberToObject(job, "_line", line);
        cJSON_AddItemToArray(b->all, job);
    }
    free(text);
    b->n = cJSON_GetArraySize(b->all);
    if (rc == 0 && b->n == 0) { snprintf(err, errlen, "%s: no jobs", path); rc = -1; }
    return rc;
}

static void add_done(batch_jobs *b, const char *id)
{
    char **d = realloc(b->done, (size_t)(b->n_done + 1) * sizeof *d);
    if (!d) return;
    b->done = d;
    b->done[b->n_done++] = strdup(id);
}

static int is_done(const batch_jobs *b, const char *id)
{
    for (int i = 0; i < b->n_done; i++)
        if (b->done[i] && !strcmp(b->done[i], id)) return 1;
    return 0;
}

/* Reads RESULTS: ids of finished jobs. A torn last line is cut off (it is the job that was
 * running when the process died); a damaged line before it is refused. */
static int load_results(const char *path, batch_jobs *b, char *err, size_t errlen)
{
    if (access(path, F_OK) != 0) return 0;
    size_t len;
    char *text = dsspec_read_file(path, &len, err, errlen);
    if (!text) return -1;
    size_t good = 0;
    int line = 0, rc = 0;
    for (char *p = text; p < text + len; line++) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        if (nl) *nl = 0;
        cJSON *r = nl ? cJSON_Parse(p) : NULL;
        const cJSON *id = r ? cJSON_GetObjectItem(r, "id") : NULL;
        if (!cJSON_IsString(id)) {
            cJSON_Delete(r);
            if (nl && nl + 1 < text + len) { snprintf(err, errlen, "--out %s:%d: not a result line (expected JSON with an \"id\")", path, line + 1); rc = -1; }
            break;
        }
        add_done(b, id->valuestring);
        cJSON_Delete(r);
        p = nl + 1;
        good = (size_t)(p - text);
    }
    free(text);
    if (rc == 0 && good < len) {
        if (truncate(path, (off_t)good)) { snprintf(err, errlen, "--out %s: cannot cut off its torn last line: %s", path, strerror(errno)); return -1; }
        fprintf(stderr, "dsspec batch: --out %s: dropped a torn last line (%zu bytes); its job runs again\n", path, len - good);
    }
    return rc;
}

typedef struct {
    int *ids;
    int n, cap;
    volatile sig_atomic_t *stop;
    progress *progress;
    dsspec *e;
    dsspec_gen_stats live;
} job_state;

static void job_token(void *ctx, int t)
{
    job_state *j = ctx;
    if (j->n == j->cap) {
        int cap = j->cap ? 2 * j->cap : 256;
        int *x = realloc(j->ids, (size_t)cap * sizeof *x);
        if (!x) return;
        j->ids = x;
        j->cap = cap;
    }
    j->ids[j->n++] = t;
}

static int job_step(void *ctx, int generated)
{
    job_state *j = ctx;
    (void)generated;
    progress_step(j->progress, j->e, &j->live);
    return *j->stop != 0;
}

static int job_prefill(void *ctx, int done, int n)
{
    job_state *j = ctx;
    progress_prefill(j->progress, done, n);
    return *j->stop != 0;
}

static double job_number(const cJSON *job, const char *key, double dflt)
{
    const cJSON *x = cJSON_GetObjectItem(job, key);
    return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}

/* The job's prompt as ids: "ids" directly, "messages" through the chat template, else the text. */
static int job_prompt(dsspec *e, const cJSON *job, const run_options *o, int **ids, char *err, size_t errlen)
{
    const cJSON *list = cJSON_GetObjectItem(job, "ids"), *msgs = cJSON_GetObjectItem(job, "messages"), *x;
    if (cJSON_IsArray(list)) {
        int n = 0;
        *ids = malloc(((size_t)cJSON_GetArraySize(list) + 1) * sizeof **ids);
        cJSON_ArrayForEach(x, list) (*ids)[n++] = x->valueint;
        if (dsspec_check_ids(e, *ids, n, err, errlen)) return -1;
        return n;
    }
    char *messages = cJSON_IsArray(msgs) ? cJSON_PrintUnformatted(msgs) : NULL;
    const cJSON *chat = cJSON_GetObjectItem(job, "chat");
    dsspec_prompt p = {.text = cJSON_GetStringValue(cJSON_GetObjectItem(job, "prompt")), .messages_json = messages,
                       .chat_wrap = chat ? cJSON_IsTrue(chat) : o->chat_wrap, .no_bos = o->no_bos};
    int n = dsspec_encode_prompt(e, &p, ids, err, errlen);
    free(messages);
    return n;
}

/* Cache counters of this job alone: the difference over its run. */
static cJSON *cache_delta(const dsspec_cache_counters *a, const dsspec_cache_counters *b)
{
    cJSON *c = cJSON_CreateObject();
    double req = (double)(b->hits - a->hits) + (double)(b->misses - a->misses);
    cJSON_AddNumberToObject(c, "hits", (double)(b->hits - a->hits));
    cJSON_AddNumberToObject(c, "misses", (double)(b->misses - a->misses));
    cJSON_AddNumberToObject(c, "hit_rate", req > 0 ? (b->hits - a->hits) / req : 0);
    cJSON_AddNumberToObject(c, "bytes_read", (double)(b->bytes_read - a->bytes_read));
    cJSON_AddNumberToObject(c, "stall_seconds", (b->stall_ns - a->stall_ns) * 1e-9);
    return c;
}

/* One line, one write(), then fsync: a kill leaves either the whole line or a torn one. */
static int append_result(int fd, cJSON *line, const char *path)
{
    char *text = cJSON_PrintUnformatted(line);
    size_t n = text ? strlen(text) : 0;
    int ok = text != NULL;
    if (ok) text[n] = '\n';
    for (size_t off = 0; ok && off < n + 1;) {
        ssize_t w = write(fd, text + off, n + 1 - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) ok = 0;
        else off += (size_t)w;
    }
    if (ok && fsync(fd)) ok = 0;
    if (!ok) fprintf(stderr, "dsspec batch: --out %s: cannot append: %s\n", path, strerror(errno));
    free(text);
    return ok ? 0 : -1;
}

static void add_result_fields(cJSON *line, dsspec *e, const job_state *js, const dsspec_gen_stats *st)
{
    tokenizer *tok = dsspec_get_tokenizer(e);
    char *text = tok ? tokenizer_decode(tok, js->ids, (size_t)js->n, 1, NULL) : NULL;
    if (text) cJSON_AddStringToObject(line, "text", text);
    free(text);
    cJSON_AddItemToObject(line, "ids", cJSON_CreateIntArray(js->ids, js->n));
    cJSON_AddNumberToObject(line, "prompt_tokens", st->prompt_tokens);
    cJSON_AddNumberToObject(line, "generated", st->generated);
    cJSON_AddStringToObject(line, "stopped_by", dsspec_stop_reason_name(st->stopped_by));
    cJSON_AddNumberToObject(line, "temperature", st->temperature);
    cJSON_AddNumberToObject(line, "prefill_seconds", st->prefill_seconds);
    cJSON_AddNumberToObject(line, "decode_seconds", st->decode_seconds);
    cJSON_AddNumberToObject(line, "decode_tokens_per_s", dsspec_decode_tokens_per_second(st));
    cJSON_AddNumberToObject(line, "drafts", st->drafts);
    cJSON_AddNumberToObject(line, "accepted", st->accepted);
}

typedef struct {
    const run_options *o;
    dsspec *e;
    int out_fd;
    const char *out_path;
    volatile sig_atomic_t *stop;
    progress progress;
} batch_ctx;

/* Runs one job and appends its line. 0 ok, 1 the job failed (its error recorded), -1 RESULTS
 * cannot be written, -2 interrupted by a signal. */
static int run_job(batch_ctx *b, const cJSON *job, const char *id)
{
    char err[1024] = "";
    int *prompt = NULL;
    job_state js = {.stop = b->stop, .progress = &b->progress, .e = b->e};
    dsspec_generate_params g = b->o->gen;
    g.max_new = (int)job_number(job, "n", g.max_new);
    g.temperature = job_number(job, "temperature", g.temperature);
    g.top_p = job_number(job, "top_p", g.top_p);
    g.seed = (uint64_t)job_number(job, "seed", (double)g.seed);
    const cJSON *ie = cJSON_GetObjectItem(job, "ignore_eos");
    if (ie) g.ignore_eos = cJSON_IsTrue(ie);
    g.on_token = job_token;
    g.on_step = job_step;
    g.on_prefill = job_prefill;
    g.live = &js.live;
    g.ctx = &js;
    dsspec_gen_stats st = {0};
    dsspec_cache_counters c0 = {0}, c1 = {0};
    dsspec_get_cache_counters(b->e, &c0);
    int n = job_prompt(b->e, job, b->o, &prompt, err, sizeof err);
    int ctx = dsspec_get_plan(b->e)->ctx; /* --ctx, or the default the plan chose when it is not given */
    if (n >= 0 && (n == 0 || n + 1 > ctx))
        snprintf(err, sizeof err, n == 0 ? "empty prompt" : "prompt of %d tokens does not fit --ctx %d", n, ctx), n = -1;
    int rc = n < 0 ? -1 : dsspec_generate(b->e, prompt, n, &g, &st, err, sizeof err);
    progress_end(&b->progress);
    free(prompt);
    if (*b->stop) { free(js.ids); return -2; } /* interrupted: not a result; it runs again on restart */
    dsspec_get_cache_counters(b->e, &c1);
    cJSON *line = cJSON_CreateObject();
    cJSON_AddStringToObject(line, "id", id);
    if (rc) cJSON_AddStringToObject(line, "error", err);
    else add_result_fields(line, b->e, &js, &st);
    cJSON_AddItemToObject(line, "cache", cache_delta(&c0, &c1));
    int wrc = append_result(b->out_fd, line, b->out_path);
    cJSON_Delete(line);
    free(js.ids);
    if (rc) fprintf(stderr, "dsspec batch: job %s: %s\n", id, err);
    return wrc ? -1 : rc ? 1 : 0;
}

static void free_jobs(batch_jobs *b)
{
    cJSON_Delete(b->all);
    for (int i = 0; i < b->n_done; i++) free(b->done[i]);
    free(b->done);
}

/* Flags that belong to a single run make no sense here. */
static int check_batch_flags(const run_options *o, const char *jobs, const char *out)
{
    if (!jobs) return flags_usage_error("batch", "give the jobs file (JSON lines)");
    if (!out) return flags_usage_error("batch", "give --out RESULTS.jsonl");
    if (o->prompt_text || o->prompt_file || o->ids || o->messages_file)
        return flags_usage_error("batch", "prompts come from the jobs file, not -p/-f/--ids/--chat FILE");
    if (o->session_path || o->report_path || o->trace_out || o->telemetry_path)
        return flags_usage_error("batch", "--session, --report, --telemetry and --trace-out belong to dsspec run");
    return 0;
}

/* Every job not yet in RESULTS, in order. The exit code. */
static int run_all(batch_ctx *b, batch_jobs *jobs)
{
    int ran = 0, failed = 0, skipped = 0, rc = 0;
    for (int i = 0; i < jobs->n && rc == 0; i++) {
        const cJSON *job = cJSON_GetArrayItem(jobs->all, i);
        char id[256], label[300];
        job_id(job, (int)job_number(job, "_line", 0), id, sizeof id);
        if (is_done(jobs, id)) { skipped++; continue; }
        snprintf(label, sizeof label, "batch %d/%d %s", i + 1, jobs->n, id);
        int mode = b->o->progress_on ? 1 : b->o->progress_off ? 0 : -1;
        progress_init(&b->progress, stderr, mode, b->o->progress_every, label, (int)job_number(job, "n", b->o->gen.max_new));
        int r = run_job(b, job, id);
        if (r == -2) rc = DSSPEC_EXIT_SIGNAL;
        else if (r < 0) rc = 1;
        else { ran++; failed += r; add_done(jobs, id); }
    }
    fprintf(stderr, "dsspec batch: %d jobs: %d run now (%d failed), %d were already in %s%s\n", jobs->n, ran, failed,
            skipped, b->out_path, rc == DSSPEC_EXIT_SIGNAL ? "; stopped by a signal" : "");
    return rc ? rc : failed ? 1 : 0;
}

static int check_unique_ids(const batch_jobs *jobs, const char *path, char *err, size_t errlen)
{
    for (int i = 0; i < jobs->n; i++)
        for (int k = 0; k < i; k++) {
            char a[256], b[256];
            const cJSON *x = cJSON_GetArrayItem(jobs->all, i), *y = cJSON_GetArrayItem(jobs->all, k);
            job_id(x, (int)job_number(x, "_line", 0), a, sizeof a);
            job_id(y, (int)job_number(y, "_line", 0), b, sizeof b);
            if (!strcmp(a, b)) {
                snprintf(err, errlen, "%s:%.0f: id \"%s\" repeats line %.0f (ids must be unique to skip finished jobs)", path,
                         job_number(x, "_line", 0), a, job_number(y, "_line", 0));
                return -1;
            }
        }
    return 0;
}

int cli_batch(int argc, char **argv)
{
    run_options o;
    run_options_defaults(&o);
    int n;
    const flag *rf = run_flags(&o, &n);
    flag flags[80];
    const char *out = NULL, *jobs_path = NULL;
    memcpy(flags, rf, (size_t)n * sizeof *flags);
    flags[n++] = (flag){FLAG_SECTION, .help = "batch"};
    flags[n++] = (flag){FLAG_STRING, "--out", "RESULTS.jsonl", &out, .help = "append one JSON line per finished job; jobs already there are skipped"};
    int n_pos = 0;
    int rc = flags_parse("batch", "usage: dsspec batch JOBS.jsonl --out RESULTS.jsonl [run flags]\n"
                         "Runs every job (one JSON object per line: id, prompt | messages | ids, n, temperature, top_p, seed, chat,\n"
                         "ignore_eos; what a job leaves out comes from the flags) in one process with one warm expert cache.\n"
                         "Restarting the same command skips finished jobs; a result line torn by a kill is redone.\n",
                         flags, n, argc, argv, &jobs_path, 1, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if ((rc = run_options_finish(&o, "batch")) || (rc = check_batch_flags(&o, jobs_path, out))) return rc;
    char err[1024];
    batch_jobs jobs = {0};
    batch_ctx b = {.o = &o, .out_path = out, .out_fd = -1};
    struct sigaction old[N_STOP_SIGNALS];
    if (load_jobs(jobs_path, &jobs, err, sizeof err) || check_unique_ids(&jobs, jobs_path, err, sizeof err) ||
        load_results(out, &jobs, err, sizeof err)) {
        rc = 1;
    } else if ((b.out_fd = open(out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0) {
        snprintf(err, sizeof err, "--out %s: cannot open for appending: %s", out, strerror(errno));
        rc = 1;
    } else {
        b.stop = run_catch_stop_signals(old);
        dsspec_options eo = o.engine;
        eo.load_tokenizer = 1;
        int usage = 0;
        if (!(b.e = dsspec_open(&eo, &usage, err, sizeof err))) rc = usage ? 2 : 1;
        else {
            if (!o.quiet) dsspec_plan_print(dsspec_get_plan(b.e), stderr);
            rc = run_all(&b, &jobs);
            if (!o.quiet) dsspec_cache_stats_print(b.e, stderr);
        }
        run_restore_signals(old);
        if (rc && !b.e) fprintf(stderr, "dsspec batch: %s\n", err);
        err[0] = 0;
    }
    if (rc && err[0]) fprintf(stderr, "dsspec batch: %s\n", err);
    if (b.out_fd >= 0) close(b.out_fd);
    dsspec_close(b.e);
    free_jobs(&jobs);
    return rc;
}
