/* The flags of `dsspec run` (and `dsspec ab`, which takes the same ones). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/cli_common.h"
#include "core/cli_runner.h"

void run_options_defaults(run_options *o)
{
    memset(o, 0, sizeof *o);
    o->max_new = 128;
    o->temperature = 0.6;
    o->top_p = 0.95;
    o->seed = 42;
    o->mtp = -1; /* auto: on when the checkpoint has an MTP layer */
    o->prefetch = 1;
    o->policy = CACHE_POLICY_LFU;
    o->io = IO_BACKEND_AUTO;
    o->queue_depth = 16;
    o->threads = 1;
    o->ctx = 4096;
    o->prefill_chunk = 64;
    o->telemetry_every = 16;
}

void run_options_print_help(FILE *out)
{
    fprintf(out,
        "model and prompt:\n"
        "  -m, --model DIR        checkpoint directory (default: the embedded model)\n"
        "  -p, --prompt TEXT      prompt text (encoded with BOS as tokenizer_config.json says)\n"
        "  -f, --file FILE        prompt text from a file\n"
        "  --ids LIST             prompt as comma-separated token ids (no tokenizer needed)\n"
        "  --chat                 wrap the -p/-f text as one user turn of R1's chat template\n"
        "  --chat=FILE            render a JSON messages file with R1's chat template as the prompt\n"
        "  --no-bos               do not prepend BOS to -p/-f text\n"
        "sampling:\n"
        "  -n, --n-predict N      tokens to generate at most (default 128); stops earlier at EOS\n"
        "  --ignore-eos           keep generating past the end-of-sentence token\n"
        "  --temp T               temperature, 0 = greedy (default: generation_config.json, else 0.6)\n"
        "  --top-p P              nucleus mass (default: generation_config.json, else 0.95)\n"
        "  --seed S               random seed (default 42)\n"
        "speculation and memory:\n"
        "  --mtp on|off           draft with the checkpoint's MTP layer (default on when it has one)\n"
        "  --mem-budget SIZE      whole-process memory budget, e.g. 24G (default: 90%% of RAM)\n"
        "  --cache-gib G          expert cache size in GiB (default: what the budget leaves)\n"
        "  --cache-policy P       lfu | lru | arc (default lfu)\n"
        "  --prefetch on|off      router-lookahead prefetch of the next layer's experts (default on)\n"
        "  --io auto|uring|pread  expert read backend (default auto: io_uring + O_DIRECT, else pread)\n"
        "  --queue-depth N        expert reads in flight at most (default 16)\n"
        "  --ctx N                context length in tokens, KV is sized for it (default 4096)\n"
        "  --kv-dtype f32|bf16    latent KV cache precision (default f32, exact; bf16 halves its memory)\n"
        "compute:\n"
        "  -t, --threads N        worker threads (default 1)\n"
        "  --cpu-features P       highest kernel path: scalar | avx2 | avx512 (default: best available)\n"
        "  --prefill-chunk N      prompt rows per prefill pass (default 64)\n"
        "output and telemetry:\n"
        "  --print-ids            print the generated ids on one line of stdout instead of text\n"
        "  --quiet                no plan or summary on stderr\n"
        "  --telemetry FILE       append one JSON line of counters every --telemetry-every tokens\n"
        "  --telemetry-every N    (default 16)\n"
        "  --report FILE          write the run's totals as JSON at exit (also after Ctrl-C)\n"
        "  --trace-out FILE       write the routing trace (one JSON line per processed row) for cache-sim\n");
}

static int on_off(const char *flag, const char *v, int *out, char *err, size_t errlen)
{
    if (v && !strcmp(v, "on")) { *out = 1; return 1; }
    if (v && !strcmp(v, "off")) { *out = 0; return 1; }
    snprintf(err, errlen, "%s: expected on or off, got '%s'", flag, v ? v : "(nothing)");
    return -1;
}

int run_options_parse_flag(run_options *o, int argc, char **argv, int *i, char *err, size_t errlen)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long n;
    double d;
#define TAKES_VALUE() do { if (!v) { snprintf(err, errlen, "%s needs a value", a); return -1; } (*i)++; } while (0)
#define IS(s) (!strcmp(a, s))
    if (IS("-m") || IS("--model")) { TAKES_VALUE(); o->model_dir = v; return 1; }
    if (IS("-p") || IS("--prompt")) { TAKES_VALUE(); o->prompt_text = v; return 1; }
    if (IS("-f") || IS("--file")) { TAKES_VALUE(); o->prompt_file = v; return 1; }
    if (IS("--ids")) {
        TAKES_VALUE();
        int *ids;
        if (parse_id_list("--ids", v, &ids, err, errlen) < 0) return -1; /* fail before loading anything */
        free(ids);
        o->ids = v;
        return 1;
    }
    if (IS("--chat")) { o->chat_wrap = 1; return 1; }
    if (!strncmp(a, "--chat=", 7)) { o->messages_file = a + 7; return 1; }
    if (IS("--no-bos")) { o->no_bos = 1; return 1; }
    if (IS("--print-ids")) { o->print_ids = 1; return 1; }
    if (IS("--quiet")) { o->quiet = 1; return 1; }
    if (IS("--ignore-eos")) { o->ignore_eos = 1; return 1; }
    if (IS("--kv-dtype")) {
        TAKES_VALUE();
        if (strcmp(v, "f32") && strcmp(v, "bf16")) { snprintf(err, errlen, "--kv-dtype: expected f32 or bf16, got '%s'", v); return -1; }
        o->kv_bf16 = !strcmp(v, "bf16");
        return 1;
    }
    if (IS("-n") || IS("--n-predict")) {
        TAKES_VALUE();
        if (parse_int_flag(a, v, 0, 100000000, &n, err, errlen)) return -1;
        o->max_new = (int)n;
        return 1;
    }
    if (IS("--temp")) { TAKES_VALUE(); if (parse_double_flag(a, v, 0, 100, &o->temperature, err, errlen)) return -1; o->temperature_set = 1; return 1; }
    if (IS("--top-p")) { TAKES_VALUE(); if (parse_double_flag(a, v, 1e-9, 1, &o->top_p, err, errlen)) return -1; o->top_p_set = 1; return 1; }
    if (IS("--seed")) { TAKES_VALUE(); if (parse_double_flag(a, v, 0, 1.8e19, &d, err, errlen)) return -1; o->seed = (uint64_t)d; return 1; }
    if (IS("--mtp")) { TAKES_VALUE(); return on_off(a, v, &o->mtp, err, errlen); }
    if (IS("--prefetch")) { TAKES_VALUE(); return on_off(a, v, &o->prefetch, err, errlen); }
    if (IS("--mem-budget")) {
        TAKES_VALUE();
        if ((o->mem_budget = parse_size(v)) <= 0) { snprintf(err, errlen, "--mem-budget: expected a size like 24G or 512M, got '%s'", v); return -1; }
        return 1;
    }
    if (IS("--cache-gib")) { TAKES_VALUE(); if (parse_double_flag(a, v, 1e-6, 1e6, &o->cache_gib, err, errlen)) return -1; return 1; }
    if (IS("--cache-policy")) {
        TAKES_VALUE();
        if (cache_policy_parse(v, 0, &o->policy)) { snprintf(err, errlen, "--cache-policy: expected lfu, lru or arc, got '%s'", v); return -1; }
        return 1;
    }
    if (IS("--io")) {
        TAKES_VALUE();
        if (io_backend_parse(v, &o->io)) { snprintf(err, errlen, "--io: expected auto, uring or pread, got '%s'", v); return -1; }
        return 1;
    }
    if (IS("--queue-depth")) { TAKES_VALUE(); if (parse_int_flag(a, v, 1, 4096, &n, err, errlen)) return -1; o->queue_depth = (int)n; return 1; }
    if (IS("--ctx")) { TAKES_VALUE(); if (parse_int_flag(a, v, 2, 1 << 24, &n, err, errlen)) return -1; o->ctx = (int)n; return 1; }
    if (IS("-t") || IS("--threads")) { TAKES_VALUE(); if (parse_int_flag(a, v, 1, 1024, &n, err, errlen)) return -1; o->threads = (int)n; return 1; }
    if (IS("--prefill-chunk")) { TAKES_VALUE(); if (parse_int_flag(a, v, 1, 1 << 16, &n, err, errlen)) return -1; o->prefill_chunk = (int)n; return 1; }
    if (IS("--cpu-features")) { TAKES_VALUE(); o->cpu = v; return 1; }
    if (IS("--telemetry")) { TAKES_VALUE(); o->telemetry_path = v; return 1; }
    if (IS("--telemetry-every")) { TAKES_VALUE(); if (parse_int_flag(a, v, 1, 1 << 30, &n, err, errlen)) return -1; o->telemetry_every = (int)n; return 1; }
    if (IS("--report")) { TAKES_VALUE(); o->report_path = v; return 1; }
    if (IS("--trace-out")) { TAKES_VALUE(); o->trace_out = v; return 1; }
#undef IS
#undef TAKES_VALUE
    return 0;
}
