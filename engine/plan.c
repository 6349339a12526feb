/* The memory plan: budget = resident weights + latent KV for ctx + scratch + expert slots. The
 * cache gets what is left, because every other part has a size fixed by the model and the flags,
 * while the cache works at any size down to one layer's experts for the rows in flight. The
 * default budget is 90% of what the process can have: RAM, or a memory cgroup's limit when that is
 * lower (inside a container the cgroup, not the machine, is what the OOM killer enforces). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>
#include "engine/engine_internal.h"

static uint64_t current_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &pages, &rss) != 2) rss = 0;
        fclose(f);
    }
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t physical_ram(void)
{
    return (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* A limit file's value: a byte count, or "max" / a near-2^63 number meaning none (0 here). */
static uint64_t read_limit_file(const char *dir, const char *file)
{
    char path[PATH_MAX + 64], buf[64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long v = 0;
    int ok = fgets(buf, sizeof buf, f) && sscanf(buf, "%llu", &v) == 1;
    fclose(f);
    return ok && v < (1ull << 60) ? v : 0;
}

static uint64_t tighter(uint64_t a, uint64_t b) { return !a ? b : !b ? a : a < b ? a : b; }

/* The process's cgroup directory under base: /proc/self/cgroup names it relative to the host's
 * hierarchy, while a container mounts only its own subtree at base, so leading components are
 * dropped until a directory exists. Then the limits of it and every ancestor up to base count:
 * the kernel enforces the tightest. */
static uint64_t limit_along(const char *base, const char *rel, const char *file)
{
    char dir[PATH_MAX];
    const char *suffix = rel;
    struct stat st;
    for (;;) {
        snprintf(dir, sizeof dir, "%s%s", base, suffix);
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) break;
        const char *next = strchr(suffix + 1, '/');
        if (!next) { snprintf(dir, sizeof dir, "%s", base); break; }
        suffix = next;
    }
    uint64_t limit = 0;
    for (size_t base_len = strlen(base);;) {
        limit = tighter(limit, read_limit_file(dir, file));
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < base_len) break;
        *slash = 0;
    }
    return limit;
}

/* The memory limit of this process's cgroup (v2 memory.max or v1 memory.limit_in_bytes), 0 if none. */
static uint64_t cgroup_memory_limit(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[PATH_MAX + 64];
    uint64_t limit = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *controllers = c1 + 1, *rel = c2 + 1;
        if (!strcmp(line, "0") && !*controllers)
            limit = tighter(limit, limit_along("/sys/fs/cgroup", strcmp(rel, "/") ? rel : "", "memory.max"));
        else if (strstr(controllers, "memory"))
            limit = tighter(limit, limit_along("/sys/fs/cgroup/memory", strcmp(rel, "/") ? rel : "", "memory.limit_in_bytes"));
    }
    fclose(f);
    return limit;
}

/* What this process can have at most: physical RAM, or less under a memory cgroup. */
static uint64_t memory_available(uint64_t *cgroup)
{
    *cgroup = cgroup_memory_limit();
    return tighter(physical_ram(), *cgroup);
}

static int check_budget_fits(const dsspec_options *o, dsspec_plan *p, char *err, size_t errlen)
{
    uint64_t cgroup, avail = memory_available(&cgroup);
    char where[96];
    if (cgroup && cgroup < physical_ram()) snprintf(where, sizeof where, "the memory cgroup's limit %.3f GiB", cgroup / 1073741824.0);
    else snprintf(where, sizeof where, "physical RAM %.3f GiB", avail / 1073741824.0);
    p->budget = o->mem_budget ? (uint64_t)o->mem_budget : avail / 10 * 9;
    if (o->mem_budget && (uint64_t)o->mem_budget > avail) {
        error_set(err, errlen, "--mem-budget %.3f GiB is more than this process can have: %s", o->mem_budget / 1073741824.0, where);
        return -1;
    }
    if (o->cache_gib > 0 && o->cache_gib * 1073741824.0 > (double)avail) {
        error_set(err, errlen, "--cache-gib %g is more than this process can have: %s", o->cache_gib, where);
        return -1;
    }
    return 0;
}

uint64_t dsspec_peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

/* Working buffers beyond the model's arena: the decode loop's logits (2 rows), the sampler's
 * probabilities and order, and slack for stdio, the tokenizer's caches and the allocator. */
static uint64_t loop_buffer_bytes(const model_config *c)
{
    return 2ull * c->vocab_size * 4 * 2 + 2ull * c->vocab_size * 4 + (8ull << 20);
}

/* What the kernels keep per thread for their prepared x rows (kernels_scratch_bytes_per_thread). */
static uint64_t kernel_buffer_bytes(const model_config *c, int threads)
{
    return (uint64_t)(threads > 1 ? threads : 1) * kernels_scratch_bytes_per_thread(model_widest_input(c));
}

static int moe_layers_in_use(const model_config *c, int mtp)
{
    int n = 0;
    for (int l = 0; l < config_total_layers(c); l++) n += config_layer_is_moe(c, l);
    if (!mtp && c->num_nextn_predict_layers > 0) n--; /* the MTP layer's experts are never asked for */
    return n;
}

static int slots_from_budget(const dsspec_options *o, dsspec_plan *p, uint64_t fixed, char *err, size_t errlen)
{
    if (o->cache_gib > 0) {
        p->slots = expert_cache_slots_for_bytes((uint64_t)(o->cache_gib * (1ull << 30)), p->slot_bytes);
        if (o->mem_budget && fixed + (uint64_t)p->slots * p->slot_bytes > p->budget) {
            error_set(err, errlen, "--cache-gib %.3g does not fit --mem-budget %.3f GiB: resident %.3f GiB + KV %.3f GiB + buffers %.3f GiB + cache %.3f GiB",
                      o->cache_gib, p->budget / 1073741824.0, p->resident / 1073741824.0, p->kv / 1073741824.0,
                      p->scratch / 1073741824.0, (double)p->slots * p->slot_bytes / 1073741824.0);
            return -1;
        }
    } else {
        uint64_t left = fixed >= p->budget ? 0 : (p->budget - fixed) / p->slot_bytes;
        p->slots = left > (uint64_t)p->total_experts ? p->total_experts : (int)left;
    }
    if (p->slots > p->total_experts) p->slots = p->total_experts;
    return 0;
}

static int check_min_slots(const dsspec_options *o, const model_config *c, const dsspec_plan *p, char *err, size_t errlen)
{
    if (p->slots >= p->min_slots) return 0;
    if (o->cache_gib > 0)
        error_set(err, errlen, "--cache-gib %g buys %d expert slots of %.2f MiB; at least %d are needed (top-%d x %d rows in flight)",
                  o->cache_gib, p->slots, p->slot_bytes / 1048576.0, p->min_slots, c->num_experts_per_tok, p->mtp ? 2 : 1);
    else
        error_set(err, errlen, "memory budget too small: %.3f GiB holds resident weights %.3f GiB + KV for --ctx %d %.3f GiB + buffers %.3f GiB and only %d expert slots of %.2f MiB; at least %d are needed (top-%d x %d rows in flight)",
                  p->budget / 1073741824.0, p->resident / 1073741824.0, p->ctx, p->kv / 1073741824.0, p->scratch / 1073741824.0,
                  p->slots, p->slot_bytes / 1048576.0, p->min_slots, c->num_experts_per_tok, p->mtp ? 2 : 1);
    return -1;
}

/* A night's answer: R1's own evaluations let it generate up to 32,768 tokens of reasoning. */
#define DEFAULT_CTX 32768

static int kv_layers(const model_config *c, const dsspec_options *o)
{
    return c->num_hidden_layers + (o->mtp ? 1 : 0);
}

/* Bytes the budget leaves for the KV beside the resident weights, the buffers and the smallest
 * cache that runs (or the --cache-gib asked for). */
static uint64_t room_for_kv(const dsspec_options *o, const dsspec_plan *p)
{
    uint64_t cache = o->cache_gib > 0 ? (uint64_t)(o->cache_gib * (1ull << 30)) : (uint64_t)p->min_slots * p->slot_bytes;
    uint64_t fixed = p->resident + p->scratch + cache;
    return fixed < p->budget ? p->budget - fixed : 0;
}

static int answer_ctx(const model_config *c)
{
    return c->max_position_embeddings < DEFAULT_CTX ? c->max_position_embeddings : DEFAULT_CTX;
}

/* The default is the room a reasoning answer needs, or the model's maximum when smaller. The
 * context is the answer's room and the expert cache only its speed (an answer cut short is lost
 * work, a smaller cache is a slower night), so the KV comes before the cache: the default shrinks
 * (to a multiple of 1024) only when the budget cannot hold its KV beside the resident weights, the
 * buffers and the smallest cache that runs (or the --cache-gib asked for). */
int engine_default_ctx(const model_config *c, const dsspec_options *o, const dsspec_plan *p, const char **why)
{
    int ctx = answer_ctx(c);
    const char *rule = ctx == DEFAULT_CTX ? "default: a reasoning answer's 32k" : "default: the model's maximum";
    dtype_t dt = o->kv_bf16 > 0 ? DTYPE_BF16 : DTYPE_F32;
    if (p && kv_cache_bytes(c, kv_layers(c, o), ctx, dt) > room_for_kv(o, p)) {
        uint64_t k = room_for_kv(o, p) / kv_cache_bytes(c, kv_layers(c, o), 1024, dt);
        ctx = k < 1 ? 1024 : (int)k * 1024 < ctx ? (int)k * 1024 : ctx;
        rule = "default: what the budget holds";
    }
    if (why) *why = rule;
    return ctx;
}

/* The KV precision when --kv-dtype is not given. Measured on the embedded model
 * (bench/attention/kv_precision.c): BF16 costs +0.009% held-out perplexity, but greedy runs leave
 * the F32 trajectory after 600-1500 tokens, while two F32 runs that differ only in summation order
 * agree on all 4096. So F32, exact and what `--temp 0` promises to match, whenever the budget holds
 * its KV for the context; BF16 only when F32 would not fit, since a context cut short costs more
 * than a 0.009% perplexity. */
static void choose_kv_dtype(dsspec_options *o, const model_config *c, dsspec_plan *p)
{
    if (o->kv_bf16 >= 0) {
        p->kv_note = "--kv-dtype";
        return;
    }
    int ctx = o->ctx > 0 ? o->ctx : answer_ctx(c);
    int fits = kv_cache_bytes(c, kv_layers(c, o), ctx, DTYPE_F32) <= room_for_kv(o, p);
    o->kv_bf16 = !fits;
    p->kv_note = fits ? "default: exact, the budget holds it" : "default: f32 would not fit the context";
}

/* The default prompt rows per prefill pass: as many as fit a quarter of what the budget leaves
 * after resident weights and KV (the rest stays for expert slots), less when that quarter would
 * leave fewer slots than the smallest cache that runs, at most ctx. A MoE layer reads
 * each expert a chunk needs once for all its rows, so the longer the chunk, the fewer times a long
 * prompt streams the experts; at least 2 rows (the verify pass). */
/* The arena plus the decode loop's hidden states, [rows][H] floats. */
static uint64_t rows_bytes(const model *m, int rows, int ctx)
{
    return model_scratch_bytes_for(m, rows, ctx) + (uint64_t)rows * model_get_config(m)->hidden_size * 4;
}

static int prefill_chunk_from_budget(const model *m, const dsspec_plan *p, int ctx, uint64_t kernel_bytes)
{
    uint64_t fixed = p->resident + p->kv + loop_buffer_bytes(model_get_config(m)) + kernel_bytes;
    uint64_t left = p->budget > fixed ? p->budget - fixed : 0, min_cache = (uint64_t)p->min_slots * p->slot_bytes;
    /* a quarter, but never the smallest cache that runs: the context was sized beside that cache */
    uint64_t above_min = left > min_cache ? left - min_cache : 0;
    uint64_t room = left / 4 < above_min ? left / 4 : above_min;
    int lo = 2, hi = ctx > 2 ? ctx : 2;
    if (rows_bytes(m, hi, ctx) <= room) return hi;
    while (hi - lo > 1) { /* the arena grows with rows: the largest chunk whose arena fits room */
        int mid = lo + (hi - lo) / 2;
        if (rows_bytes(m, mid, ctx) <= room) lo = mid;
        else hi = mid;
    }
    return lo;
}

static int plan_once(dsspec *e, size_t slot_bytes, char *err, size_t errlen)
{
    const dsspec_options *o = &e->opt;
    const model_config *c = model_get_config(e->m);
    dsspec_plan *p = &e->plan;
    memset(p, 0, sizeof *p);
    p->ctx = o->ctx;
    p->mtp = o->mtp;
    p->prefetch = o->prefetch;
    p->kv_bf16 = o->kv_bf16;
    p->cache_policy = dsspec_cache_policy_name(o->policy);
    p->total_experts = moe_layers_in_use(c, o->mtp) * c->n_routed_experts;
    if (check_budget_fits(o, p, err, errlen)) return -1;
    p->resident = current_rss();
    /* The decode's 2-row arena first: the context and KV precision defaults are sized beside it. */
    if (model_reserve_scratch(e->m, 2, o->ctx > 0 ? o->ctx : 1, err, errlen)) return -1;
    p->scratch = model_scratch_bytes(e->m) + loop_buffer_bytes(c) + kernel_buffer_bytes(c, o->threads);
    p->slot_bytes = slot_bytes;
    p->min_slots = expert_cache_min_slots(c->num_experts_per_tok, o->mtp ? 2 : 1);
    p->ctx_max = c->max_position_embeddings;
    p->ctx_note = "--ctx";
    choose_kv_dtype(&e->opt, c, p);
    p->kv_bf16 = o->kv_bf16;
    if (o->ctx <= 0) e->opt.ctx = p->ctx = engine_default_ctx(c, o, p, &p->ctx_note);
    p->kv = kv_cache_bytes(c, kv_layers(c, o), o->ctx, o->kv_bf16 ? DTYPE_BF16 : DTYPE_F32);
    /* Then the prompt's chunk, from what the budget leaves after weights and KV. The arena is
     * planned for a whole chunk but allocated for the decode's 2 rows here; a prompt grows it to
     * the rows it uses (dsspec_generate), so a short prompt never touches the rest. */
    if (e->opt.prefill_chunk <= 0) e->opt.prefill_chunk = prefill_chunk_from_budget(e->m, p, o->ctx, kernel_buffer_bytes(c, o->threads));
    p->prefill_chunk = o->prefill_chunk;
    int rows = o->prefill_chunk > 2 ? o->prefill_chunk : 2;
    if (model_reserve_scratch(e->m, 2, o->ctx, err, errlen)) return -1;
    p->scratch = rows_bytes(e->m, rows, o->ctx) + loop_buffer_bytes(c) + kernel_buffer_bytes(c, o->threads);
    if (slots_from_budget(o, p, p->resident + p->kv + p->scratch, err, errlen)) return -1;
    return check_min_slots(o, c, p, err, errlen);
}

/* Whether the MTP layer's memory (its KV layer and the 2-row minimum of slots) costs the cache
 * enough to lose more than drafting can win: a draft pays only while its step does not wait on
 * reads, and slots given up make steps wait. So: when it would keep the cache from holding every
 * expert the run uses, or take more than 1/32 of its slots (misses then grow by about that share,
 * past the 3% an accepted draft is worth when reads dominate a step). */
static int mtp_costs_cache(const dsspec_plan *with, const dsspec_plan *without)
{
    int all_without = without->slots >= without->total_experts, all_with = with->slots >= with->total_experts;
    if (all_without && !all_with) return 1;
    return !all_with && (without->slots - with->slots) * 32 > with->slots;
}

/* The plan; under --mtp auto with a cache sized from the budget, planned with and without the MTP
 * layer, and auto turned off here when the layer costs the cache too much (mtp_costs_cache): the
 * per-step decision cannot win back slots it never had. */
int engine_plan_memory(dsspec *e, size_t slot_bytes, char *err, size_t errlen)
{
    if (plan_once(e, slot_bytes, err, errlen)) return -1;
    if (e->opt.mtp != DSSPEC_MTP_AUTO || e->opt.cache_gib > 0) return 0;
    dsspec_plan with = e->plan;
    e->opt.mtp = DSSPEC_MTP_OFF;
    char scratch_err[256];
    if (plan_once(e, slot_bytes, scratch_err, sizeof scratch_err) == 0 && mtp_costs_cache(&with, &e->plan)) {
        e->plan.mtp_note = "auto, off at the plan: MTP's KV would cost the cache";
        e->plan.mtp_slots_cost = e->plan.slots - with.slots;
        return 0;
    }
    e->opt.mtp = DSSPEC_MTP_AUTO;
    e->plan = with;
    return 0;
}

/* The context's line: how it was chosen, and what each 1k more of it costs, in bytes and in the
 * expert slots the cache would give up for it. */
static void print_ctx_line(const dsspec_plan *p, FILE *out)
{
    double per_1k = p->ctx ? (double)p->kv / p->ctx * 1024 : 0;
    fprintf(out, "dsspec plan: ctx %d (%s; model maximum %d), KV %s (%s): each 1k of context costs %.2f MiB = %.2f expert slots\n",
            p->ctx, p->ctx_note ? p->ctx_note : "--ctx", p->ctx_max, p->kv_bf16 ? "bf16" : "f32",
            p->kv_note ? p->kv_note : "--kv-dtype", per_1k / 1048576.0, p->slot_bytes ? per_1k / p->slot_bytes : 0.0);
}

void dsspec_plan_print(const dsspec_plan *p, FILE *out)
{
    print_ctx_line(p, out);
    fprintf(out, "dsspec plan: budget %.3f GiB = resident %.3f GiB + KV %.3f GiB + buffers %.3f GiB + expert cache %.3f GiB (%d of %d experts, %.2f MiB slots, %.1f%%); io %s%s%s\n",
            p->budget / 1073741824.0, p->resident / 1073741824.0, p->kv / 1073741824.0, p->scratch / 1073741824.0,
            (double)p->slots * p->slot_bytes / 1073741824.0, p->slots, p->total_experts, p->slot_bytes / 1048576.0,
            100.0 * p->slots / (p->total_experts ? p->total_experts : 1), p->io_backend,
            p->io_note && *p->io_note ? ": " : "", p->io_note ? p->io_note : "");
    fprintf(out, "dsspec plan: prefill %d prompt rows per pass, context %d positions, MTP %s", p->prefill_chunk, p->ctx,
            dsspec_mtp_name(p->mtp));
    if (p->mtp_note) fprintf(out, " (%s %d of its slots; --mtp on keeps it)", p->mtp_note, p->mtp_slots_cost);
    fputc('\n', out);
}

cJSON *dsspec_plan_json(const dsspec_plan *p)
{
    cJSON *plan = cJSON_CreateObject();
    cJSON_AddNumberToObject(plan, "budget_bytes", (double)p->budget);
    cJSON_AddNumberToObject(plan, "resident_bytes", (double)p->resident);
    cJSON_AddNumberToObject(plan, "kv_bytes", (double)p->kv);
    cJSON_AddNumberToObject(plan, "ctx", p->ctx);
    cJSON_AddStringToObject(plan, "ctx_note", p->ctx_note ? p->ctx_note : "--ctx");
    cJSON_AddStringToObject(plan, "kv_dtype", p->kv_bf16 ? "bf16" : "f32");
    cJSON_AddNumberToObject(plan, "buffer_bytes", (double)p->scratch);
    cJSON_AddNumberToObject(plan, "slots", p->slots);
    cJSON_AddNumberToObject(plan, "slot_bytes", (double)p->slot_bytes);
    cJSON_AddNumberToObject(plan, "total_experts", p->total_experts);
    cJSON_AddStringToObject(plan, "io_backend", p->io_backend ? p->io_backend : "");
    cJSON_AddStringToObject(plan, "cache_policy", p->cache_policy);
    cJSON_AddBoolToObject(plan, "prefetch", p->prefetch);
    cJSON_AddNumberToObject(plan, "prefill_chunk", p->prefill_chunk);
    cJSON_AddStringToObject(plan, "mtp", dsspec_mtp_name(p->mtp));
    if (p->mtp_note) cJSON_AddNumberToObject(plan, "mtp_off_slots", p->mtp_slots_cost);
    return plan;
}
