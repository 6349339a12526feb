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

/* ------------------------------------------------------------------ opening */

typedef enum { DSSPEC_POLICY_LRU = 0, DSSPEC_POLICY_LFU, DSSPEC_POLICY_ARC } dsspec_cache_policy;
typedef enum { DSSPEC_IO_AUTO = 0, DSSPEC_IO_URING, DSSPEC_IO_PREAD } dsspec_io_backend;
/* Where routed experts come from: the bounded cache over the reader (what `run` uses), or read
 * straight from the checkpoint on every use with no cache and no plan (the reference path of
 * `eval`, whose numbers must not depend on any caching). */
typedef enum { DSSPEC_EXPERTS_CACHED = 0, DSSPEC_EXPERTS_DIRECT } dsspec_expert_source;

typedef struct {
    const char *model_dir;       /* NULL: the embedded model (dsspec_default_model_dir) */
    int threads;                 /* worker threads, >= 1 */
    const char *cpu_features;    /* NULL: best kernel path; else "scalar" | "avx2" | "avx512" */
    int mtp;                     /* -1: on when the checkpoint has an MTP layer; 0 off; 1 on */
    int64_t mem_budget;          /* whole-process bytes; 0: 90% of physical RAM */
    double cache_gib;            /* expert cache size; 0: what the budget leaves */
    dsspec_cache_policy policy;
    int prefetch;                /* router-lookahead prefetch of the next layer's experts */
    dsspec_io_backend io;
    int queue_depth;             /* expert reads in flight at most */
    int ctx;                     /* positions the latent KV cache holds; 0: 4096, or the model's
                                    max_position_embeddings when lower; above that maximum: refused */
    int kv_bf16;                 /* latent KV in BF16 (half the memory) instead of F32 (exact) */
    int prefill_chunk;           /* prompt rows per forward pass */
    int load_tokenizer;          /* 1: load the checkpoint's tokenizer.json (text in and out) */
    dsspec_expert_source experts;
} dsspec_options;

void dsspec_options_default(dsspec_options *o);
/* The embedded model's directory (the checkpoint dsspec runs when none is named). */
const char *dsspec_default_model_dir(void);
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
 * (>= 0) or -1 with err. Needs the tokenizer. */
int dsspec_encode_prompt(dsspec *e, const dsspec_prompt *p, int **ids, char *err, size_t errlen);
/* Checks ids supplied directly (every id inside the vocabulary). 0 or -1 with err. */
int dsspec_check_ids(const dsspec *e, const int *ids, int n, char *err, size_t errlen);

/* ------------------------------------------------------------------ generation */

typedef struct {
    int max_new;                 /* tokens to generate at most */
    double temperature;          /* < 0: the model's default; 0: greedy */
    double top_p;                /* < 0: the model's default */
    uint64_t seed;
    int ignore_eos;
    /* Every generated token, in order. */
    void (*on_token)(void *ctx, int token);
    /* After each main-model pass with the number generated so far; non-zero stops generation. */
    int (*on_step)(void *ctx, int generated);
    /* The main model's routing of every row it processes: experts ascending, k of them. */
    void (*on_route)(void *ctx, int layer, int row, const int *experts, int k);
    void *ctx;
} dsspec_generate_params;

void dsspec_generate_params_default(dsspec_generate_params *p);

typedef enum {
    DSSPEC_STOP_MAX_TOKENS = 0, DSSPEC_STOP_EOS, DSSPEC_STOP_CTX_FULL, DSSPEC_STOP_CALLBACK, DSSPEC_STOP_IO_ERROR
} dsspec_stop_reason;
/* "max_tokens", "eos", "ctx_full", "callback", "io_error" (an expert read failed mid-run). */
const char *dsspec_stop_reason_name(dsspec_stop_reason r);

typedef struct {
    int prompt_tokens, generated;
    int main_passes;             /* decode passes of the main model (prefill excluded) */
    int drafts, accepted;        /* MTP drafts made and accepted */
    double prefill_seconds, decode_seconds;
    double temperature, top_p;   /* what was used after defaults */
    dsspec_stop_reason stopped_by;
} dsspec_gen_stats;

/* Prefill prompt[0..n) and generate; the expert cache stays warm across calls. Returns 0, or -1
 * with err (an expert read failed, out of memory); stats are filled in both cases (what was
 * generated before an error stays delivered through on_token). */
int dsspec_generate(dsspec *e, const int *prompt, int n, const dsspec_generate_params *p, dsspec_gen_stats *st,
                    char *err, size_t errlen);
/* Decode tokens per second of a finished generation (the first token belongs to prefill). */
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
