/* dsspec: the public C API of the engine.
 *
 * dsspec runs a DeepSeek-V3/R1 checkpoint (Hugging Face layout, FP8 weights) on a machine whose
 * memory is far smaller than the model. Everything a program needs goes through this header:
 *
 *     dsspec_options o;
 *     dsspec_options_default(&o);            // embedded model, 90% of RAM, MTP when present
 *     o.model_dir = "/nvme/DeepSeek-R1";
 *     o.mem_budget = 24ull << 30;
 *     dsspec *e = dsspec_open(&o, NULL, err, sizeof err);
 *     dsspec_plan_print(dsspec_get_plan(e), stderr);
 *     int *ids; int n = dsspec_encode_prompt(e, &(dsspec_prompt){.text = "Hello"}, &ids, err, sizeof err);
 *     dsspec_generate_params p;
 *     dsspec_generate_params_default(&p);
 *     p.on_token = print_token; p.ctx = &my_state;
 *     dsspec_gen_stats st;
 *     dsspec_generate(e, ids, n, &p, &st, err, sizeof err);
 *     dsspec_close(e);
 *
 * Opening wires the parts together in one place (engine/engine.c): the checkpoint is validated,
 * the resident weights load, the memory plan divides the budget into resident weights + latent KV
 * for ctx positions + scratch + expert-cache slots, the expert reader (io_uring O_DIRECT, or
 * pread) and the cache are created, and the per-model scratch arena is allocated once.
 *
 * Errors: every call that can fail returns -1 (or NULL) and writes one line into err naming the
 * file, tensor or option and what was expected. Nothing here prints unless asked to. One dsspec
 * handle is used by one thread at a time; it runs its own worker threads (options.threads). */
#ifndef DSSPEC_H
#define DSSPEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The tokenizer's API (tokenizer_encode/decode/stream, chat template) is part of this API: a
 * dsspec handle owns one tokenizer (dsspec_get_tokenizer), and tools that only tokenize open one
 * with tokenizer_load. */
#include "tokenizer/tokenizer.h"

struct cJSON;

typedef struct dsspec dsspec;
struct dsspec_generate_params;

/* ------------------------------------------------------------------ opening */

/* MTP speculation: off; a draft every step; or auto, which drafts on the steps where its running
 * estimates (pass times, acceptance) say a draft yields more tokens per second, keeping the MTP
 * layer's KV complete so drafting can resume at any step. All three give the same tokens for the
 * same seed (greedy and sampled). */
enum { DSSPEC_MTP_OFF = 0, DSSPEC_MTP_ON = 1, DSSPEC_MTP_AUTO = 2 };
/* "off" "on" "auto" -> DSSPEC_MTP_*; 0 ok, -1 otherwise. */
int dsspec_mtp_parse(const char *s, int *out);
const char *dsspec_mtp_name(int mtp);

typedef enum { DSSPEC_POLICY_LRU = 0, DSSPEC_POLICY_LFU, DSSPEC_POLICY_ARC } dsspec_cache_policy;
typedef enum { DSSPEC_IO_AUTO = 0, DSSPEC_IO_URING, DSSPEC_IO_PREAD } dsspec_io_backend;
/* Where routed experts come from: the bounded cache over the reader (what `run` uses), or read
 * straight from the checkpoint on every use with no cache and no plan (the reference path of
 * `eval`, whose numbers must not depend on any caching). */
typedef enum { DSSPEC_EXPERTS_CACHED = 0, DSSPEC_EXPERTS_DIRECT } dsspec_expert_source;

typedef struct {
    const char *model_dir;       /* NULL: the embedded model (dsspec_default_model_dir) */
    int threads;                 /* worker threads, >= 1 (default: the physical cores) */
    const char *cpu_features;    /* NULL: best kernel path; else "scalar" | "avx2" | "avx512" */
    int mtp;                     /* DSSPEC_MTP_*; -1: auto when the checkpoint has an MTP layer, else off */
    int mtp_window;              /* auto: KV-only MTP rows kept for a later draft; 0: the default (64) */
    int64_t mem_budget;          /* whole-process bytes; 0: 90% of physical RAM */
    double cache_gib;            /* expert cache size; 0: what the budget leaves */
    dsspec_cache_policy policy;
    int prefetch;                /* router-lookahead prefetch of later layers' experts */
    int prefetch_depth;          /* layers ahead to guess, >= 1 (default 1) */
    int prefetch_guesses;        /* guesses per row and layer, most confident first; 0: the router's top_k */
    dsspec_io_backend io;
    int queue_depth;             /* expert reads in flight at most */
    int ctx;                     /* positions the latent KV cache holds; 0: the default (the plan's ctx_note says which);
                                  * above the model's max_position_embeddings: refused */
    int kv_bf16;                 /* latent KV in BF16 (half the memory) instead of F32 (exact); -1: F32 when the budget holds it */
    int prefill_chunk;           /* prompt rows per forward pass; 0: as many as a quarter of what the
                                  * budget leaves after weights and KV holds, at most ctx (the plan says) */
    int load_tokenizer;          /* 1: load the checkpoint's tokenizer.json (text in and out) */
    dsspec_expert_source experts;
} dsspec_options;

void dsspec_options_default(dsspec_options *o);
/* The embedded model's directory (the checkpoint dsspec runs when none is named), found relative to
 * the executable: <exe>/../share/dsspec/models/dsspec-tiny (installed), <exe>/../models/dsspec-tiny
 * (a build directory inside the source tree), then the source tree it was configured from. NULL
 * when it is in none of them. */
const char *dsspec_default_model_dir(void);
/* *out = model_dir, or the embedded model's directory when model_dir is NULL. 0, or -1 with err
 * naming every place it looked. */
int dsspec_resolve_model_dir(const char *model_dir, const char **out, char *err, size_t errlen);
/* Distinct physical cores this process may run on (hyperthreads not counted), >= 1. */
int dsspec_physical_cores(void);
/* The version, the git commit it was configured from ("unknown" outside a git checkout), and
 * --version's report: those, the kernel path this CPU runs, and the I/O backend --io auto picks. */
const char *dsspec_version(void);
const char *dsspec_git_commit(void);
void dsspec_version_print(FILE *out);
const char *dsspec_cache_policy_name(dsspec_cache_policy p);
int dsspec_cache_policy_parse(const char *s, dsspec_cache_policy *out); /* "lru" "lfu" "arc"; 0 ok */
int dsspec_io_backend_parse(const char *s, dsspec_io_backend *out);     /* "auto" "uring" "pread" */
/* 0 when the named kernel path ("scalar" | "avx2" | "avx512") exists and this CPU runs it, else
 * -1 with err saying which. */
int dsspec_check_cpu_features(const char *name, char *err, size_t errlen);

/* Opens the checkpoint under the options' budget. NULL with one error line; a budget or cache
 * size that cannot be honoured sets *usage_error (when given) to 1: the caller asked for
 * something impossible rather than the machine failing. */
dsspec *dsspec_open(const dsspec_options *o, int *usage_error, char *err, size_t errlen);
void dsspec_close(dsspec *e);

/* ------------------------------------------------------------------ what was opened */

typedef struct {
    int vocab_size, hidden_size;
    int n_layers;                /* main decoder layers (the MTP layer not included) */
    int last_moe_layer;          /* highest main layer with routed experts, -1 if none */
    int n_routed_experts, experts_per_token;
    int has_mtp;
    int eos_id;                  /* the tokenizer's EOS when loaded, else config.json's; -1 none */
    int has_generation_config;
    double default_temperature, default_top_p; /* generation_config.json, else 0.6 and 0.95 */
    const char *kernel_path;     /* the SIMD path the kernels run: "scalar", "avx2" or "avx512" */
} dsspec_model_info;

const dsspec_model_info *dsspec_get_model_info(const dsspec *e);
/* The tokenizer loaded by options.load_tokenizer, else NULL. */
tokenizer *dsspec_get_tokenizer(dsspec *e);

/* How the budget was divided. All sizes in bytes. */
typedef struct {
    uint64_t budget;             /* the whole process may use this much */
    uint64_t resident;           /* process size after loading the resident weights */
    uint64_t kv;                 /* latent KV of every layer for ctx positions */
    uint64_t scratch;            /* the forward pass's arena + logits and sampler buffers + slack */
    uint64_t slot_bytes;         /* one expert slot (4 KiB-widened pieces) */
    int slots, min_slots, total_experts;
    int ctx, prefill_chunk, mtp, prefetch, kv_bf16;
    int ctx_max;                 /* the model's max_position_embeddings */
    const char *ctx_note;        /* how ctx was chosen: "--ctx", or which default rule */
    const char *kv_note;         /* how the KV precision was chosen */
    const char *mtp_note;        /* set when --mtp auto was turned off at the plan (MTP's memory costs the cache) */
    int mtp_slots_cost;          /* then: the expert slots that MTP's memory would have taken */
    const char *cache_policy, *io_backend, *io_note;
} dsspec_plan;

/* NULL when the engine was opened with DSSPEC_EXPERTS_DIRECT (no cache, no plan). */
const dsspec_plan *dsspec_get_plan(const dsspec *e);
void dsspec_plan_print(const dsspec_plan *p, FILE *out);
struct cJSON *dsspec_plan_json(const dsspec_plan *p);  /* caller owns (cJSON_Delete) */

/* ------------------------------------------------------------------ prompts */

/* A prompt as text. With messages_json (an OpenAI-style messages array) or chat_wrap (the text as
 * one user turn) it is rendered with the checkpoint's chat template, which writes BOS itself;
 * plain text gets BOS as tokenizer_config.json says unless no_bos. */
typedef struct {
    const char *text;
    size_t len;                  /* 0: strlen(text) */
    const char *messages_json;
    int chat_wrap, no_bos;
} dsspec_prompt;

/* Token ids of a prompt (malloc'd into *ids), checked against the vocabulary. Returns the count
 * (>= 0) or -1 with err. Needs the tokenizer. It and dsspec_check_ids read only the tokenizer and
 * the model info, so a server may run them on its connection threads, one encode at a time, while
 * dsspec_generate runs on another. */
int dsspec_encode_prompt(dsspec *e, const dsspec_prompt *p, int **ids, char *err, size_t errlen);
/* Checks ids supplied directly (every id inside the vocabulary). 0 or -1 with err. */
int dsspec_check_ids(const dsspec *e, const int *ids, int n, char *err, size_t errlen);

/* ------------------------------------------------------------------ sessions */

/* A session file makes one generation resumable after any death of the process (kill -9, the OOM
 * killer, a reboot): it holds the prompt and every output-changing setting, the checkpoint's
 * identity (config.json + safetensors index), and at every step boundary the token ids so far,
 * the main and MTP latent KV rows, the sampler's state and the speculative loop's draft, in
 * append-only, CRC-checked records (format: engine/session.c). A resumed generation produces
 * exactly the tokens an uninterrupted one would. */
typedef struct dsspec_session dsspec_session;

/* Opens path before any model loads. resume 0: path must not exist yet. resume 1: an existing
 * file is read and checked (a torn or damaged tail is cut off and *note says so; a damaged header
 * or another checkpoint is refused); a missing one is created, so the same command both starts
 * and continues a run. sync_every: fsync after every this many generated tokens (0: only at the
 * end); every prefill chunk and the end are always fsync'ed. NULL with one error line. */
dsspec_session *dsspec_session_open(const char *path, const char *model_dir, int resume, int sync_every, char *note,
                                    size_t notelen, char *err, size_t errlen);
void dsspec_session_close(dsspec_session *s);
/* Whether generating prompt[0..n) with p (its sampling defaults resolved as dsspec_generate does)
 * may continue this session: 0, or -1 with one line naming the checkpoint, prompt or flag that
 * differs. dsspec_generate checks it too; calling it first lets a caller refuse before printing
 * anything. */
int dsspec_session_check(const dsspec_session *s, const dsspec *e, const int *prompt, int n,
                         const struct dsspec_generate_params *p, char *err, size_t errlen);
/* The generated ids the session holds (restored and added by this process); the count. */
int dsspec_session_tokens(const dsspec_session *s, const int **ids);

/* ------------------------------------------------------------------ generation */

typedef struct dsspec_generate_params {
    int max_new;                 /* tokens to generate at most */
    double temperature;          /* < 0: the model's default; 0: greedy */
    double top_p;                /* < 0: the model's default */
    int top_k;                   /* keep the k most probable tokens; 0: all */
    double min_p;                /* drop tokens under min_p x the most probable one's probability; 0: none */
    uint64_t seed;
    int ignore_eos;
    /* Generation stops once the generated text contains one of these (non-empty) strings; on_text
     * never delivers the stop string or anything after it. Needs the tokenizer. */
    const char *const *stop;
    int n_stop;
    /* Every generated token, in order. */
    void (*on_token)(void *ctx, int token);
    /* The generated text (special tokens skipped, UTF-8 characters whole), in pieces; text that may
     * begin a stop string is held back until it is known not to. Needs the tokenizer. */
    void (*on_text)(void *ctx, const char *text, size_t len);
    /* After each main-model pass with the number generated so far; non-zero stops generation. */
    int (*on_step)(void *ctx, int generated);
    /* The main model's routing of every row it processes: experts ascending, k of them. */
    void (*on_route)(void *ctx, int layer, int row, const int *experts, int k);
    /* After each prefill chunk: prompt rows done of n; non-zero stops before the next chunk. */
    int (*on_prefill)(void *ctx, int done, int n);
    void *ctx;
    /* Optional (dsspec_session_open): continue from it and record into it. Tokens it already
     * holds are delivered through on_token first, so the callbacks see the whole output. */
    dsspec_session *session;
    /* Optional: counters so far (generated, main passes, drafts, accepted, prefill seconds),
     * brought up to date before every on_step call, for progress lines and telemetry. */
    struct dsspec_gen_stats *live;
} dsspec_generate_params;

void dsspec_generate_params_default(dsspec_generate_params *p);

typedef enum {
    DSSPEC_STOP_MAX_TOKENS = 0, DSSPEC_STOP_EOS, DSSPEC_STOP_CTX_FULL, DSSPEC_STOP_CALLBACK, DSSPEC_STOP_IO_ERROR,
    DSSPEC_STOP_STRING
} dsspec_stop_reason;
/* "max_tokens", "eos", "ctx_full", "callback", "io_error" (an expert read failed mid-run), "stop"
 * (the text reached a stop string). */
const char *dsspec_stop_reason_name(dsspec_stop_reason r);

typedef struct dsspec_gen_stats {
    int prompt_tokens, generated;
    int main_passes;             /* decode passes of the main model (prefill excluded) */
    int drafts, accepted;        /* MTP drafts made and accepted */
    double prefill_seconds, decode_seconds;
    double temperature, top_p;   /* what was used after defaults */
    dsspec_stop_reason stopped_by;
    int restored_tokens;         /* of generated, those replayed from the session, not computed now */
    int restored_rows;           /* prompt rows whose KV came from the session */
    /* MTP per decode step (this process's steps only, not restored ones): passes without a draft,
     * and why: the estimates favour no draft, a re-measurement of the plain step while drafting
     * wins, no room for a draft row (--ctx or -n ends); drafts made only to re-measure. Seconds in
     * MTP passes that only keep its KV complete and in those that draft; the final running
     * estimates of each part of a step (seconds). */
    int plain_steps, no_draft_cost, no_draft_explore, no_draft_end, draft_explore;
    double mtp_kv_seconds, mtp_draft_seconds;
    double est_plain_pass_s, est_verify_pass_s, est_mtp_kv_s, est_mtp_draft_s;
    /* Verify passes whose draft row was dropped mid-pass (auto: its next layer's experts would have
     * been loaded; the step emits one token, not counted in drafts), and the decode's expert loads
     * with those only drafting needed (the draft row's own experts, the MTP layer's). */
    int rows_dropped;
    int low_odds_drafts;         /* auto drafts not verified: their calibrated odds did not pay (plain steps) */
    uint64_t decode_expert_loads, draft_expert_loads;
    double decode_cpu_seconds;   /* the process's CPU time while decoding: a cost a busy machine barely changes */
    /* Expert requests to the cache and loads from disk (with bytes) while the prompt was processed
     * (0 with DSSPEC_EXPERTS_DIRECT); per prompt row they show whether each needed expert is read
     * once per chunk. */
    uint64_t prefill_expert_requests, prefill_expert_loads, prefill_bytes_read;
} dsspec_gen_stats;

/* Prefill prompt[0..n) and generate; the expert cache and the KV cache's memory stay with the
 * engine across calls (one call at a time per engine: they are its single set). Returns 0, or -1
 * with err (an expert read failed, out of memory); stats are filled in both cases (what was
 * generated before an error stays delivered through on_token). */
int dsspec_generate(dsspec *e, const int *prompt, int n, const dsspec_generate_params *p, dsspec_gen_stats *st,
                    char *err, size_t errlen);
/* Decode tokens per second of a finished generation (the first token belongs to prefill; tokens
 * restored from a session are not counted). */
double dsspec_decode_tokens_per_second(const dsspec_gen_stats *st);

/* ------------------------------------------------------------------ telemetry */

typedef struct {
    uint64_t hits, misses, bytes_read, evictions, read_errors;
    uint64_t prefetch_issued, prefetch_used, prefetch_wasted;
    uint64_t stall_ns;           /* time the forward pass waited for a read with nothing ready */
    int n_slots;
} dsspec_cache_counters;

/* Counters since open; 0, or -1 when the engine has no cache (DSSPEC_EXPERTS_DIRECT). */
int dsspec_get_cache_counters(const dsspec *e, dsspec_cache_counters *out);
/* Everything the cache measured (per layer, latency histogram and percentiles) as JSON; NULL when
 * there is no cache. Caller owns it. */
struct cJSON *dsspec_cache_stats_json(const dsspec *e);
void dsspec_cache_stats_print(const dsspec *e, FILE *out);
/* Peak resident set of this process (VmHWM) in bytes, 0 if unknown. */
uint64_t dsspec_peak_rss(void);

/* The whole of a file ("-": standard input), NUL-terminated and malloc'd; NULL with err naming the
 * file. The one reader dsspec uses for every input file. */
char *dsspec_read_file(const char *path, size_t *len, char *err, size_t errlen);

/* ------------------------------------------------------------------ reference evaluation */

/* Logits of every position of ids[0..T) in one teacher-forced pass (rows in chunks of chunk), with
 * the latent KV in the precision the engine was opened with (options.kv_bf16).
 * logits: [T][vocab]. routes (optional): [n_layers][T][experts_per_token], rows of dense layers
 * untouched. mtp_logits (optional, needs an MTP layer): row t pairs h_t with ids[t+1] (the last
 * row with the argmax of the last main row), as the MTP layer is trained. 0 or -1 with err. */
int dsspec_eval(dsspec *e, const int *ids, int T, int chunk, float *logits, int *routes, float *mtp_logits,
                char *err, size_t errlen);

/* The router lookahead's guesses over the same teacher-forced pass, as the forward pass hands them
 * to the expert cache (--prefetch-depth depth, --prefetch-guesses n), recorded instead of read:
 * guesses [n_layers source][depth][T][n], entry (s, d, t) the n experts layer s + d is guessed to
 * use for row t, most confident first; -1 where layer s + d is not a MoE layer of the model. */
int dsspec_eval_guesses(dsspec *e, const int *ids, int T, int chunk, int depth, int n, int *guesses, char *err,
                        size_t errlen);

/* ------------------------------------------------------------------ offline tools */

/* Opens and fully validates a checkpoint and prints its census (tensors and bytes by dtype,
 * family and layer; resident vs routed-expert bytes; expert extents). 0 or -1 with err. */
int dsspec_inspect(const char *model_dir, FILE *out, char *err, size_t errlen);

/* A routing trace (one JSON object per processed row, {"<layer>": [expert ids]}) replayed
 * through the cache's own policy code, or Belady's offline optimum, at a given size. */
typedef struct dsspec_trace dsspec_trace;
/* Only MoE layers in [layer_lo, layer_hi] are kept (-1: open side). NULL with err naming the file
 * and line. */
dsspec_trace *dsspec_trace_load(const char *path, int layer_lo, int layer_hi, char *err, size_t errlen);
void dsspec_trace_free(dsspec_trace *t);
/* Rows, requests, and the key space: MoE layers seen x experts per layer. */
void dsspec_trace_shape(const dsspec_trace *t, int *rows, uint64_t *requests, int *n_layers, int *experts_per_layer);
/* policy: "lru" | "lfu" | "arc" | "opt". lfu_halve_every <= 0: the default aging. 0 or -1. */
int dsspec_trace_simulate(const dsspec_trace *t, const char *policy, int slots, int lfu_halve_every,
                          uint64_t *hits, uint64_t *misses);

#endif
