/* run_once: flags -> engine -> prompt -> generation, with what a user reads while it runs and in
 * the morning. Everything it touches goes through engine/dsspec.h. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "cli/run_conflicts.h"
#include "cli/run_output.h"

/* The signal that stopped the run (SIGINT, SIGTERM, SIGHUP), 0 while none has. */
static volatile sig_atomic_t interrupted;
static void on_stop_signal(int sig) { interrupted = sig; }
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

/* From the model's loading on, SIGINT/SIGTERM/SIGHUP stop generation cleanly: what was generated is
 * printed and reported. SA_RESETHAND makes a second signal kill at once. */
volatile sig_atomic_t *run_catch_stop_signals(struct sigaction *old)
{
    struct sigaction sa = {0};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    interrupted = 0;
    for (int i = 0; i < N_STOP_SIGNALS; i++) sigaction(stop_signals[i], &sa, &old[i]);
    return &interrupted;
}

void run_restore_signals(const struct sigaction *old)
{
    for (int i = 0; i < N_STOP_SIGNALS; i++) sigaction(stop_signals[i], &old[i], NULL);
}

void run_options_defaults(run_options *o)
{
    memset(o, 0, sizeof *o);
    dsspec_options_default(&o->engine);
    dsspec_generate_params_default(&o->gen);
    o->telemetry_every = 16;
    o->session_sync = 8;
}

static int parse_mtp(const char *flag, const char *v, void *dst, char *err, size_t errlen)
{
    if (dsspec_mtp_parse(v, dst) == 0) return 0;
    snprintf(err, errlen, "%s: expected auto, on or off, got '%s'", flag, v);
    return -1;
}

/* The engine's flags (speculation, memory, compute) with one help text each, for run, batch and
 * serve alike. Writes them to f; returns how many. */
int run_engine_flags(run_options *o, flag *f)
{
    static char threads_help[96];
    snprintf(threads_help, sizeof threads_help, "worker threads (default: the physical cores, %d here)", dsspec_physical_cores());
    dsspec_options *e = &o->engine;
    const flag table[] = {
        {FLAG_SECTION, .help = "speculation and memory"},
        {FLAG_CUSTOM, "--mtp", "auto|on|off", &e->mtp, .parse = parse_mtp, .help = "draft with the checkpoint's MTP layer: every step, or (auto, the default when it has one) on the steps where measured pass times and acceptance say a draft pays; same tokens either way"},
        {FLAG_INT, "--mtp-window", "N", &e->mtp_window, 1, 1 << 20, .help = "with --mtp auto: the KV-only MTP rows of steps without a draft it keeps for a later draft, which attends to those and to nothing older (default 64: bench/decode/mtp_window.c; more rows, a better first draft after a long stretch without)"},
        {FLAG_CUSTOM, "--mem-budget", "SIZE", &e->mem_budget, .parse = flag_parse_size, .help = "whole-process memory budget, e.g. 24G (default: 90% of RAM)"},
        {FLAG_DOUBLE, "--cache-gib", "G", &e->cache_gib, 1e-6, 1e6, .help = "expert cache size in GiB (default: what the budget leaves)"},
        {FLAG_STRING, "--cache-policy", "P", &o->policy, .help = "lfu | lru | arc (default lfu)"},
        {FLAG_CUSTOM, "--prefetch", "on|off", &e->prefetch, .parse = flag_parse_on_off, .help = "router-lookahead prefetch of later layers' experts (default on)"},
        {FLAG_INT, "--prefetch-depth", "N", &e->prefetch_depth, 1, 8, .help = "layers ahead the lookahead guesses, each from the current layer's residual (default 1: two layers catch more misses but read more unused guesses; bench/cache/prefetch_sweep.sh)"},
        {FLAG_INT, "--prefetch-guesses", "N", &e->prefetch_guesses, 0, 1 << 16, .help = "guesses per row and layer ahead, most confident first (default 0: the router's top-k)"},
        {FLAG_STRING, "--io", "auto|uring|pread", &o->io, .help = "expert read backend (default auto: io_uring + O_DIRECT, else pread)"},
        {FLAG_INT, "--queue-depth", "N", &e->queue_depth, 1, 4096, .help = "expert reads in flight at most (default 16)"},
        {FLAG_INT, "--ctx|-c|--ctx-size", "N", &e->ctx, 2, 1 << 24, .help = "context length in tokens, KV is sized for it (default: the model's maximum up to 32768, less only if the budget cannot hold its KV; the plan says; above the model's maximum: refused)"},
        {FLAG_STRING, "--kv-dtype", "f32|bf16", &o->kv_dtype, .help = "latent KV cache precision (default f32, exact, when the budget holds it for the context, else bf16: half the memory, +0.009% held-out perplexity)"},
        {FLAG_SECTION, .help = "compute"},
        {FLAG_INT, "-t|--threads", "N", &e->threads, 1, 1024, .help = threads_help},
        {FLAG_STRING, "--cpu-features", "P", &o->cpu, .help = "highest kernel path: scalar | avx2 | avx512 (default: best available)"},
        {FLAG_INT, "--prefill-chunk", "N", &e->prefill_chunk, 1, 1 << 16, .help = "prompt rows per prefill pass (default: as many as a quarter of the budget left after weights and KV holds, at most --ctx; the plan says)"},
    };
    _Static_assert(sizeof table / sizeof table[0] == RUN_ENGINE_FLAGS, "RUN_ENGINE_FLAGS counts this table");
    memcpy(f, table, sizeof table);
    return RUN_ENGINE_FLAGS;
}

const flag *run_flags(run_options *o, int *n)
{
    static flag f[64];
    dsspec_options *e = &o->engine;
    dsspec_generate_params *g = &o->gen;
    const flag head[] = {
        {FLAG_SECTION, .help = "model and prompt"},
        {FLAG_STRING, "-m|--model", "DIR", &e->model_dir, .help = "checkpoint directory (default: the embedded model)"},
        {FLAG_STRING, "-p|--prompt", "TEXT", &o->prompt_text, .help = "prompt text (encoded with BOS as tokenizer_config.json says)"},
        {FLAG_STRING, "-f|--file", "FILE", &o->prompt_file, .help = "prompt text from a file"},
        {FLAG_CUSTOM, "--ids", "LIST", &o->ids, .parse = flag_parse_id_list_check, .help = "prompt as comma-separated token ids (no tokenizer needed)"},
        {FLAG_STRING, "--chat", "FILE", &o->messages_file, .help = "prompt from a JSON messages file [{role, content}...] (R1's chat template)"},
        {FLAG_SWITCH, "--chat-wrap", NULL, &o->chat_wrap, .help = "wrap the -p/-f text as one user turn of R1's chat template"},
        {FLAG_SWITCH, "--no-bos", NULL, &o->no_bos, .help = "do not prepend BOS to -p/-f text"},
        {FLAG_SECTION, .help = "sampling"},
        {FLAG_INT, "-n|--n-predict", "N", &g->max_new, 0, 100000000, .help = "tokens to generate at most (default 128); stops earlier at EOS"},
        {FLAG_SWITCH, "--ignore-eos", NULL, &g->ignore_eos, .help = "keep generating past the end-of-sentence token"},
        {FLAG_DOUBLE, "--temp", "T", &g->temperature, 0, 100, .help = "temperature, 0 = greedy (default: generation_config.json, else 0.6)"},
        {FLAG_DOUBLE, "--top-p", "P", &g->top_p, 1e-9, 1, .help = "nucleus mass (default: generation_config.json, else 0.95)"},
        {FLAG_INT, "--top-k", "K", &g->top_k, 0, 1 << 30, .help = "keep the K most probable tokens (default 0: all); applied before top-p"},
        {FLAG_DOUBLE, "--min-p", "P", &g->min_p, 0, 1, .help = "drop tokens under P x the top token's probability (default 0: none)"},
        {FLAG_STRING_LIST, "--stop", "TEXT", &o->stop, .help = "stop when the text contains TEXT (not printed; repeatable)"},
        {FLAG_CUSTOM, "--seed", "S", &g->seed, .parse = flag_parse_seed, .help = "random seed (default 42)"},
    };
    const flag tail[] = {
        {FLAG_SECTION, .help = "output and telemetry"},
        {FLAG_SWITCH, "--print-ids", NULL, &o->print_ids, .help = "print the generated ids on one line of stdout instead of text"},
        {FLAG_SWITCH, "--quiet", NULL, &o->quiet, .help = "no plan or summary on stderr"},
        {FLAG_SWITCH, "-v|--verbose", NULL, &o->verbose, .help = "also print the prompt's token ids on stderr"},
        {FLAG_STRING, "--telemetry", "FILE", &o->telemetry_path, .help = "append one JSON line of counters every --telemetry-every tokens"},
        {FLAG_INT, "--telemetry-every", "N", &o->telemetry_every, 1, 1 << 30, .help = "(default 16)"},
        {FLAG_STRING, "--report", "FILE", &o->report_path, .help = "the run's totals and metadata as JSON: refreshed every 10 s, written atomically at exit (also after a signal)"},
        {FLAG_STRING, "--trace-out", "FILE", &o->trace_out, .help = "write the routing trace (one JSON line per processed row) for cache-sim"},
        {FLAG_SWITCH, "--progress", NULL, &o->progress_on, .help = "live progress on stderr even when it is not a terminal (plain lines)"},
        {FLAG_SWITCH, "--no-progress", NULL, &o->progress_off, .help = "no progress line (default: one redrawn line when stderr is a terminal)"},
        {FLAG_DOUBLE, "--progress-every", "S", &o->progress_every, 0.01, 1e6, .help = "seconds between progress lines (default 0.5 on a terminal, 30 otherwise)"},
        {FLAG_SECTION, .help = "overnight runs (sessions survive kill -9, the OOM killer and reboots)"},
        {FLAG_STRING, "--session", "FILE", &o->session_path, .help = "record the run into FILE (must not exist) so that it can be resumed exactly"},
        {FLAG_SWITCH, "--resume", NULL, &o->resume, .help = "continue --session FILE (same prompt and output-changing flags; -n may grow); a missing FILE starts it"},
        {FLAG_INT, "--session-sync", "N", &o->session_sync, 0, 1 << 30, .help = "fsync the session every N tokens (default 8; 0: only at the end); prefill chunks always"},
    };
    _Static_assert(sizeof head / sizeof head[0] + RUN_ENGINE_FLAGS + sizeof tail / sizeof tail[0] <= sizeof f / sizeof f[0],
                   "run's flags fit f");
    int k = 0;
    memcpy(f, head, sizeof head);
    k += (int)(sizeof head / sizeof head[0]);
    k += run_engine_flags(o, f + k);
    memcpy(f + k, tail, sizeof tail);
    *n = k + (int)(sizeof tail / sizeof tail[0]);
    return f;
}

int run_options_finish(run_options *o, const char *cmd)
{
    dsspec_options *e = &o->engine;
    char err[256];
    if (run_options_check_conflicts(o, cmd)) return 2;
    if (o->policy && dsspec_cache_policy_parse(o->policy, &e->policy))
        return flags_usage_error(cmd, "--cache-policy: expected lfu, lru or arc, got '%s'", o->policy);
    if (o->io && dsspec_io_backend_parse(o->io, &e->io))
        return flags_usage_error(cmd, "--io: expected auto, uring or pread, got '%s'", o->io);
    if (o->kv_dtype && strcmp(o->kv_dtype, "f32") && strcmp(o->kv_dtype, "bf16"))
        return flags_usage_error(cmd, "--kv-dtype: expected f32 or bf16, got '%s'", o->kv_dtype);
    if (o->kv_dtype) e->kv_bf16 = !strcmp(o->kv_dtype, "bf16");
    if (o->cpu && dsspec_check_cpu_features(o->cpu, err, sizeof err)) return flags_usage_error(cmd, "%s", err);
    e->cpu_features = o->cpu;
    if (o->messages_file && o->messages_file[0] == '-' && o->messages_file[1])
        return flags_usage_error(cmd, "--chat FILE: got the flag '%s'; --chat-wrap wraps -p/-f text as one user turn", o->messages_file);
    if (o->messages_file && o->chat_wrap) return flags_usage_error(cmd, "--chat FILE and --chat-wrap exclude each other");
    o->gen.stop = o->stop.v;
    o->gen.n_stop = o->stop.n;
    for (int i = 0; i < o->stop.n; i++)
        if (!o->stop.v[i][0]) return flags_usage_error(cmd, "--stop: expected a non-empty string");
    if (o->resume && !o->session_path) return flags_usage_error(cmd, "--resume needs --session FILE");
    if (o->progress_on && o->progress_off) return flags_usage_error(cmd, "--progress and --no-progress contradict each other");
    return 0;
}

/* Prompt ids from --ids, -p/-f text, or a chat rendering. */
static int prompt_ids(const run_options *o, dsspec *e, int **ids, char *err, size_t errlen)
{
    if (o->ids) {
        int n = parse_id_list("--ids", o->ids, ids, err, errlen);
        if (n >= 0 && dsspec_check_ids(e, *ids, n, err, errlen)) { free(*ids); *ids = NULL; return -1; }
        return n;
    }
    dsspec_prompt p = {.text = o->prompt_text, .chat_wrap = o->chat_wrap, .no_bos = o->no_bos};
    char *file_text = NULL, *messages = NULL;
    int n = -1;
    if (o->prompt_file && !(file_text = dsspec_read_file(o->prompt_file, &p.len, err, errlen))) return -1;
    if (file_text) p.text = file_text;
    if (o->messages_file && !(messages = dsspec_read_file(o->messages_file, NULL, err, errlen))) goto done;
    p.messages_json = messages;
    n = dsspec_encode_prompt(e, &p, ids, err, errlen);
    if (n < 0 && messages) {
        char inner[768];
        snprintf(inner, sizeof inner, "%s", err);
        snprintf(err, errlen, "--chat %s: %s", o->messages_file, inner);
    }
done:
    free(file_text);
    free(messages);
    return n;
}

static int open_engine(const run_options *o, int quiet_output, dsspec **e, char *err, size_t errlen)
{
    dsspec_options eo = o->engine;
    eo.load_tokenizer = !o->ids || (!o->print_ids && !quiet_output);
    int usage = 0;
    *e = dsspec_open(&eo, &usage, err, errlen);
    return *e ? 0 : usage ? 2 : 1;
}

/* A prompt that cannot run fails here, before the plan or anything else is printed. */
static int check_prompt_fits(int ctx, int n_prompt, char *err, size_t errlen)
{
    if (n_prompt == 0) { snprintf(err, errlen, "empty prompt: at least one token is needed"); return -1; }
    if (n_prompt + 1 > ctx) {
        snprintf(err, errlen, "prompt of %d tokens does not fit --ctx %d (the first generated token needs one more position)", n_prompt, ctx);
        return -1;
    }
    return 0;
}

static void print_prompt_ids(const int *ids, int n)
{
    fprintf(stderr, "dsspec: prompt of %d tokens:", n);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fputc('\n', stderr);
}

static int generate_and_report(run_output *out, const run_options *o, dsspec *e, dsspec_session *session,
                               const int *prompt, int n_prompt, run_result *res, char *err, size_t errlen)
{
    run_output_start(out, e);
    dsspec_generate_params g = o->gen;
    run_output_bind(out, &g, &interrupted);
    g.session = session;
    int gen_rc = interrupted ? 0 : dsspec_generate(e, prompt, n_prompt, &g, &res->gen, err, errlen);
    res->interrupted = interrupted;
    if (gen_rc && res->n_tokens == 0) out->quiet_output = 1; /* refused before any token: the error line alone */
    run_output_finish(out, e);
    if (gen_rc) return 1;
    return interrupted ? DSSPEC_EXIT_SIGNAL : out->write_failed;
}

/* The session file, opened (and its records checked) before the model loads. */
static int open_session(const run_options *o, dsspec_session **s, char *err, size_t errlen)
{
    *s = NULL;
    if (!o->session_path) return 0;
    char note[1200];
    *s = dsspec_session_open(o->session_path, o->engine.model_dir, o->resume, o->session_sync, note, sizeof note, err, errlen);
    if (*s && note[0]) fprintf(stderr, "dsspec: %s\n", note);
    return *s ? 0 : -1;
}

int run_once(const run_options *o, int quiet_output, run_result *res)
{
    char err[1024] = "";
    int *prompt = NULL, n_prompt = 0, rc;
    dsspec *e = NULL;
    dsspec_session *session = NULL;
    run_output out;
    struct sigaction old[N_STOP_SIGNALS];
    memset(res, 0, sizeof *res);
    if (!o->ids && !o->prompt_text && !o->prompt_file && !o->messages_file) {
        fprintf(stderr, "dsspec: no prompt: give -p TEXT, -f FILE, --ids LIST or --chat FILE\n");
        return 2;
    }
    /* Every output is checked before the model loads: a bad path costs seconds, not a night. */
    if (run_output_open(&out, o, quiet_output, res, err, sizeof err) || open_session(o, &session, err, sizeof err)) {
        fprintf(stderr, "dsspec: %s\n", err);
        run_output_close(&out);
        return 1;
    }
    run_catch_stop_signals(old);
    if ((rc = open_engine(o, quiet_output, &e, err, sizeof err)) == 0) {
        res->plan = *dsspec_get_plan(e);
        res->plan.io_note = NULL; /* owned by the reader, gone after close */
        rc = (n_prompt = prompt_ids(o, e, &prompt, err, sizeof err)) < 0 || check_prompt_fits(res->plan.ctx, n_prompt, err, sizeof err);
        if (!rc && o->verbose) print_prompt_ids(prompt, n_prompt);
        if (!rc && session) rc = dsspec_session_check(session, e, prompt, n_prompt, &o->gen, err, sizeof err) ? 1 : 0;
        if (!rc) rc = generate_and_report(&out, o, e, session, prompt, n_prompt, res, err, sizeof err);
    }
    if (rc && rc != DSSPEC_EXIT_SIGNAL && err[0]) fprintf(stderr, "dsspec: %s\n", err);
    run_output_close(&out);
    free(prompt);
    dsspec_session_close(session);
    dsspec_close(e);
    run_restore_signals(old);
    return rc;
}

void run_result_free(run_result *r)
{
    free(r->tokens);
    memset(r, 0, sizeof *r);
}
