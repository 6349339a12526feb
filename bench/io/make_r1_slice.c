/* make_r1_slice: writes an R1-shaped checkpoint slice: DeepSeek-R1's real config values, tensor
 * names, shapes, dtypes and on-disk order (tools/r1_format.py's format), random values, ~4.3 GB
 * shards cut between tensors so experts straddle shard boundaries, and the index with R1's
 * misleading total_size. Only num_hidden_layers and num_nextn_predict_layers differ from R1.
 * One MoE layer is ~11.5 GB, so writing is one pass of large buffered writes from a cheap RNG. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The values of DeepSeek-R1's config.json. */
enum {
    R1_VOCAB = 129280, R1_HIDDEN = 7168, R1_INTER = 18432, R1_MOE_INTER = 2048, R1_HEADS = 128,
    R1_Q_RANK = 1536, R1_KV_RANK = 512, R1_NOPE = 128, R1_ROPE = 64, R1_V = 128, R1_EXPERTS = 256,
    R1_TOPK = 8, R1_GROUPS = 8, R1_TOPK_GROUPS = 4, R1_FIRST_DENSE = 3, R1_SHARED = 1, BLOCK = 128
};

typedef enum { DT_F8, DT_BF16, DT_F32 } dtype;
/* What the random values should look like, so a forward pass over the slice stays finite. */
typedef enum { FILL_FP8, FILL_SCALE, FILL_BIAS, FILL_NORM, FILL_SMALL } fill_kind;

typedef struct {
    char name[96];
    dtype dt;
    fill_kind fill;
    int64_t rows, cols; /* cols 0: a vector */
    uint64_t nbytes;
    int shard;
    uint64_t data_offset; /* relative to the start of the shard's data */
} tensor;

typedef struct {
    tensor *t;
    int n, cap;
} tensor_list;

typedef struct {
    const char *out;
    int layers, mtp;
    double shard_gb;
    uint64_t seed;
    int dry_run;
} options;

static const char *dtype_str[] = {"F8_E4M3", "BF16", "F32"};
static const int dtype_bytes[] = {1, 2, 4};

/* ---------------------------------------------------------------- the tensor list, in R1 order */

static void push(tensor_list *l, const char *name, dtype dt, fill_kind fill, int64_t rows, int64_t cols)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 4096;
        l->t = realloc(l->t, (size_t)l->cap * sizeof *l->t);
        if (!l->t) {
            fprintf(stderr, "make_r1_slice: out of memory\n");
            exit(1);
        }
    }
    tensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dt = dt;
    t->fill = fill;
    t->rows = rows;
    t->cols = cols;
    t->nbytes = (uint64_t)rows * (uint64_t)(cols ? cols : 1) * (uint64_t)dtype_bytes[dt];
}

/* An FP8 linear: the weight, then its F32 block-scale grid right after it (as R1 stores them). */
static void push_fp8_linear(tensor_list *l, const char *prefix, const char *what, int64_t rows, int64_t cols)
{
    char name[96];
    snprintf(name, sizeof name, "%s%s.weight", prefix, what);
    push(l, name, DT_F8, FILL_FP8, rows, cols);
    snprintf(name, sizeof name, "%s%s.weight_scale_inv", prefix, what);
    push(l, name, DT_F32, FILL_SCALE, (rows + BLOCK - 1) / BLOCK, (cols + BLOCK - 1) / BLOCK);
}

static void push_mlp(tensor_list *l, const char *prefix, int64_t inter)
{
    push_fp8_linear(l, prefix, "gate_proj", inter, R1_HIDDEN);
    push_fp8_linear(l, prefix, "up_proj", inter, R1_HIDDEN);
    push_fp8_linear(l, prefix, "down_proj", R1_HIDDEN, inter);
}

static void push_layer(tensor_list *l, int layer, int is_mtp)
{
    char p[64], name[96], sub[96];
    snprintf(p, sizeof p, "model.layers.%d.", layer);
#define NAME(s) (snprintf(name, sizeof name, "%s%s", p, s), name)
    if (is_mtp) { /* the MTP extras come first in R1's layer 61 */
        push(l, NAME("embed_tokens.weight"), DT_BF16, FILL_SMALL, R1_VOCAB, R1_HIDDEN);
        push(l, NAME("enorm.weight"), DT_BF16, FILL_NORM, R1_HIDDEN, 0);
        push(l, NAME("hnorm.weight"), DT_BF16, FILL_NORM, R1_HIDDEN, 0);
        push(l, NAME("eh_proj.weight"), DT_BF16, FILL_SMALL, R1_HIDDEN, 2 * R1_HIDDEN);
    }
    push(l, NAME("input_layernorm.weight"), DT_BF16, FILL_NORM, R1_HIDDEN, 0);
    snprintf(sub, sizeof sub, "%sself_attn.", p);
    push_fp8_linear(l, sub, "q_a_proj", R1_Q_RANK, R1_HIDDEN);
    push(l, NAME("self_attn.q_a_layernorm.weight"), DT_BF16, FILL_NORM, R1_Q_RANK, 0);
    push_fp8_linear(l, sub, "q_b_proj", R1_HEADS * (R1_NOPE + R1_ROPE), R1_Q_RANK);
    push_fp8_linear(l, sub, "kv_a_proj_with_mqa", R1_KV_RANK + R1_ROPE, R1_HIDDEN);
    push(l, NAME("self_attn.kv_a_layernorm.weight"), DT_BF16, FILL_NORM, R1_KV_RANK, 0);
    push_fp8_linear(l, sub, "kv_b_proj", R1_HEADS * (R1_NOPE + R1_V), R1_KV_RANK);
    push_fp8_linear(l, sub, "o_proj", R1_HIDDEN, R1_HEADS * R1_V);
    push(l, NAME("post_attention_layernorm.weight"), DT_BF16, FILL_NORM, R1_HIDDEN, 0);
    if (is_mtp || layer >= R1_FIRST_DENSE) {
        push(l, NAME("mlp.gate.weight"), DT_BF16, FILL_SMALL, R1_EXPERTS, R1_HIDDEN);
        push(l, NAME("mlp.gate.e_score_correction_bias"), DT_F32, FILL_BIAS, R1_EXPERTS, 0);
        snprintf(sub, sizeof sub, "%smlp.shared_experts.", p);
        push_mlp(l, sub, (int64_t)R1_MOE_INTER * R1_SHARED);
        for (int e = 0; e < R1_EXPERTS; e++) {
            snprintf(sub, sizeof sub, "%smlp.experts.%d.", p, e);
            push_mlp(l, sub, R1_MOE_INTER);
        }
    } else {
        snprintf(sub, sizeof sub, "%smlp.", p);
        push_mlp(l, sub, R1_INTER);
    }
    if (is_mtp) {
        push(l, NAME("shared_head.norm.weight"), DT_BF16, FILL_NORM, R1_HIDDEN, 0);
        push(l, NAME("shared_head.head.weight"), DT_BF16, FILL_SMALL, R1_VOCAB, R1_HIDDEN);
    }
#undef NAME
}

static void build_tensor_list(tensor_list *l, const options *o)
{
    push(l, "model.embed_tokens.weight", DT_BF16, FILL_SMALL, R1_VOCAB, R1_HIDDEN);
    for (int i = 0; i < o->layers; i++) push_layer(l, i, 0);
    push(l, "model.norm.weight", DT_BF16, FILL_NORM, R1_HIDDEN, 0);
    push(l, "lm_head.weight", DT_BF16, FILL_SMALL, R1_VOCAB, R1_HIDDEN);
    for (int m = 0; m < o->mtp; m++) push_layer(l, o->layers + m, 1);
}

/* Cuts between tensors whenever the next one would take the shard past the target; a cut can
 * fall inside an expert's six tensors, which makes it straddle two shards, as in R1. */
static int plan_shards(tensor_list *l, uint64_t target)
{
    int shard = 0;
    uint64_t used = 0;
    for (int i = 0; i < l->n; i++) {
        if (used > 0 && used + l->t[i].nbytes > target) {
            shard++;
            used = 0;
        }
        l->t[i].shard = shard;
        l->t[i].data_offset = used;
        used += l->t[i].nbytes;
    }
    return shard + 1;
}

/* ---------------------------------------------------------------- random contents */

static uint64_t rng_state;
static inline uint64_t rng_next(void)
{
    /* xorshift64*: ~1 ns per 8 bytes; quality is irrelevant, speed is not (11 GB per layer). */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static float rng_uniform(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rng_next() >> 40) * (1.0f / 16777216.0f);
}

/* Random FP8 bytes with no NaN: a byte whose low 7 bits are all ones (0x7F, 0xFF) gets its
 * lowest bit cleared. Adding 1 to the low 7 bits sets bit 7 exactly for those bytes, with no
 * carry into the next byte. */
static void fill_fp8(uint8_t *dst, size_t n)
{
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7Full, ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x = rng_next();
        uint64_t nan = ((x & low7) + ones) & high;
        x ^= nan >> 7;
        memcpy(dst + i, &x, 8);
    }
    for (; i < n; i++) {
        uint8_t b = (uint8_t)rng_next();
        dst[i] = (b & 0x7F) == 0x7F ? (uint8_t)(b ^ 1) : b;
    }
}

/* BF16 bit patterns: norms in [0.5, 2), everything else +-[2^-9, 2^-5). */
static void fill_bf16(uint8_t *dst, size_t n_elems, fill_kind fill)
{
    uint16_t *out = (uint16_t *)(void *)dst;
    for (size_t i = 0; i < n_elems; i += 4) {
        uint64_t x = rng_next();
        for (int k = 0; k < 4 && i + k < n_elems; k++, x >>= 16) {
            uint16_t mant = x & 0x7F, exp, sign;
            if (fill == FILL_NORM) {
                exp = 126 + ((x >> 7) & 1);
                sign = 0;
            } else {
                exp = 118 + ((x >> 7) & 3);
                sign = (uint16_t)((x >> 9) & 1) << 15;
            }
            out[i + k] = (uint16_t)(sign | (exp << 7) | mant);
        }
    }
}

static void fill_f32(uint8_t *dst, size_t n_elems, fill_kind fill)
{
    float *out = (float *)(void *)dst;
    for (size_t i = 0; i < n_elems; i++)
        out[i] = fill == FILL_SCALE ? rng_uniform(1e-3f, 1e-2f) : rng_uniform(-0.01f, 0.01f);
}

static void fill_tensor_bytes(const tensor *t, uint8_t *dst, size_t n)
{
    switch (t->dt) {
    case DT_F8: fill_fp8(dst, n); break;
    case DT_BF16: fill_bf16(dst, n / 2, t->fill); break;
    case DT_F32: fill_f32(dst, n / 4, t->fill); break;
    }
}

/* ---------------------------------------------------------------- writing */

typedef struct {
    int fd;
    const char *path;
    uint8_t *buf;
    size_t used, cap;
    uint64_t written;
} writer;

static int writer_flush(writer *w)
{
    size_t off = 0;
    while (off < w->used) {
        ssize_t n = write(w->fd, w->buf + off, w->used - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            fprintf(stderr, "make_r1_slice: writing %s: %s\n", w->path, n < 0 ? strerror(errno) : "no progress");
            return -1;
        }
        off += (size_t)n;
    }
    w->written += w->used;
    /* Keep the page cache from filling up with a slice nobody will read through it. */
    if (w->written % (1ull << 30) < w->used) {
        fdatasync(w->fd);
        posix_fadvise(w->fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    w->used = 0;
    return 0;
}

static int writer_put(writer *w, const void *src, size_t n)
{
    while (n > 0) {
        size_t take = w->cap - w->used < n ? w->cap - w->used : n;
        memcpy(w->buf + w->used, src, take);
        w->used += take;
        src = (const uint8_t *)src + take;
        n -= take;
        if (w->used == w->cap && writer_flush(w) != 0) return -1;
    }
    return 0;
}

/* Random bytes are made straight in the write buffer: no second copy of 11 GB. Chunks stay
 * multiples of 8 so BF16/F32 elements never split across a flush. */
static int writer_put_random(writer *w, const tensor *t)
{
    uint64_t left = t->nbytes;
    while (left > 0) {
        size_t room = (w->cap - w->used) & ~(size_t)7;
        if (room == 0) {
            if (writer_flush(w) != 0) return -1;
            continue;
        }
        size_t take = left < room ? (size_t)left : room;
        fill_tensor_bytes(t, w->buf + w->used, take);
        w->used += take;
        left -= take;
    }
    return 0;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp((*(const tensor *const *)a)->name, (*(const tensor *const *)b)->name);
}

/* The safetensors header: keys sorted by name (as the safetensors library writes them, so key
 * order is not data order), padded with spaces to a multiple of 8 bytes. */
static char *shard_header(tensor_list *l, int shard, size_t *len)
{
    int n = 0;
    for (int i = 0; i < l->n; i++) n += l->t[i].shard == shard;
    tensor **sorted = malloc((size_t)n * sizeof *sorted);
    for (int i = 0, k = 0; i < l->n; i++)
        if (l->t[i].shard == shard) sorted[k++] = &l->t[i];
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_tensor_name);
    size_t cap = (size_t)n * 200 + 64, used = 0;
    char *h = malloc(cap);
    used += (size_t)snprintf(h + used, cap - used, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        const tensor *t = sorted[i];
        char shape[48];
        if (t->cols) snprintf(shape, sizeof shape, "%lld,%lld", (long long)t->rows, (long long)t->cols);
        else snprintf(shape, sizeof shape, "%lld", (long long)t->rows);
        used += (size_t)snprintf(h + used, cap - used, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%llu,%llu]}",
                                 t->name, dtype_str[t->dt], shape, (unsigned long long)t->data_offset,
                                 (unsigned long long)(t->data_offset + t->nbytes));
    }
    used += (size_t)snprintf(h + used, cap - used, "}");
    while (used % 8) h[used++] = ' ';
    *len = used;
    free(sorted);
    return h;
}

static void shard_name(char *dst, size_t n, int i, int count)
{
    snprintf(dst, n, "model-%05d-of-%06d.safetensors", i + 1, count);
}

static int write_shard(const options *o, tensor_list *l, int shard, int n_shards, writer *w)
{
    char file[64], path[4096];
    shard_name(file, sizeof file, shard, n_shards);
    snprintf(path, sizeof path, "%s/%s", o->out, file);
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    w->path = path;
    w->used = 0;
    if (w->fd < 0) {
        fprintf(stderr, "make_r1_slice: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t hlen;
    char *h = shard_header(l, shard, &hlen);
    uint64_t n = hlen; /* little-endian u64 on x86-64 */
    int rc = writer_put(w, &n, 8) || writer_put(w, h, hlen) ? -1 : 0;
    free(h);
    for (int i = 0; rc == 0 && i < l->n; i++)
        if (l->t[i].shard == shard) rc = writer_put_random(w, &l->t[i]);
    if (rc == 0) rc = writer_flush(w);
    if (rc == 0 && fdatasync(w->fd) != 0) rc = -1;
    posix_fadvise(w->fd, 0, 0, POSIX_FADV_DONTNEED);
    if (close(w->fd) != 0) rc = -1;
    return rc;
}

static int write_text(const options *o, const char *file, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", o->out, file);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "make_r1_slice: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* R1's config.json with only the layer counts changed. */
static int write_config(const options *o)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\n  \"architectures\": [\"DeepseekV3ForCausalLM\"],\n  \"attention_bias\": false,\n"
             "  \"attention_dropout\": 0.0,\n  \"bos_token_id\": 0,\n  \"eos_token_id\": 1,\n  \"ep_size\": 1,\n"
             "  \"first_k_dense_replace\": %d,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n"
             "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %d,\n  \"kv_lora_rank\": %d,\n"
             "  \"max_position_embeddings\": 163840,\n  \"model_type\": \"deepseek_v3\",\n"
             "  \"moe_intermediate_size\": %d,\n  \"moe_layer_freq\": 1,\n  \"n_group\": %d,\n"
             "  \"n_routed_experts\": %d,\n  \"n_shared_experts\": %d,\n  \"norm_topk_prob\": true,\n"
             "  \"num_attention_heads\": %d,\n  \"num_experts_per_tok\": %d,\n  \"num_hidden_layers\": %d,\n"
             "  \"num_key_value_heads\": %d,\n  \"num_nextn_predict_layers\": %d,\n  \"q_lora_rank\": %d,\n"
             "  \"qk_nope_head_dim\": %d,\n  \"qk_rope_head_dim\": %d,\n  \"quantization_config\": {\n"
             "    \"activation_scheme\": \"dynamic\",\n    \"fmt\": \"e4m3\",\n    \"quant_method\": \"fp8\",\n"
             "    \"weight_block_size\": [128, 128]\n  },\n  \"rms_norm_eps\": 1e-06,\n  \"rope_scaling\": {\n"
             "    \"beta_fast\": 32,\n    \"beta_slow\": 1,\n    \"factor\": 40,\n    \"mscale\": 1.0,\n"
             "    \"mscale_all_dim\": 1.0,\n    \"original_max_position_embeddings\": 4096,\n    \"type\": \"yarn\"\n"
             "  },\n  \"rope_theta\": 10000,\n  \"routed_scaling_factor\": 2.5,\n  \"scoring_func\": \"sigmoid\",\n"
             "  \"tie_word_embeddings\": false,\n  \"topk_group\": %d,\n  \"topk_method\": \"noaux_tc\",\n"
             "  \"torch_dtype\": \"bfloat16\",\n  \"transformers_version\": \"4.46.3\",\n  \"use_cache\": true,\n"
             "  \"v_head_dim\": %d,\n  \"vocab_size\": %d\n}\n",
             R1_FIRST_DENSE, R1_HIDDEN, R1_INTER, R1_KV_RANK, R1_MOE_INTER, R1_GROUPS, R1_EXPERTS, R1_SHARED,
             R1_HEADS, R1_TOPK, o->layers, R1_HEADS, o->mtp, R1_Q_RANK, R1_NOPE, R1_ROPE, R1_TOPK_GROUPS, R1_V,
             R1_VOCAB);
    if (write_text(o, "config.json", text) != 0) return -1;
    return write_text(o, "generation_config.json",
                      "{\n  \"_from_model_config\": true,\n  \"bos_token_id\": 0,\n  \"eos_token_id\": 1,\n"
                      "  \"do_sample\": true,\n  \"temperature\": 0.6,\n  \"top_p\": 0.95,\n"
                      "  \"transformers_version\": \"4.46.3\"\n}\n");
}

/* weight_map sorted by name; metadata.total_size counts FP8 as 2 bytes, wrong as R1's is. */
static int write_index(const options *o, tensor_list *l, int n_shards)
{
    tensor **sorted = malloc((size_t)l->n * sizeof *sorted);
    uint64_t total_r1 = 0;
    for (int i = 0; i < l->n; i++) {
        sorted[i] = &l->t[i];
        total_r1 += l->t[i].dt == DT_F8 ? 2 * l->t[i].nbytes : l->t[i].nbytes;
    }
    qsort(sorted, (size_t)l->n, sizeof *sorted, cmp_tensor_name);
    char path[4096], file[64];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", o->out);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "make_r1_slice: cannot write %s: %s\n", path, strerror(errno));
        free(sorted);
        return -1;
    }
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n", (unsigned long long)total_r1);
    for (int i = 0; i < l->n; i++) {
        shard_name(file, sizeof file, sorted[i]->shard, n_shards);
        fprintf(f, "    \"%s\": \"%s\"%s\n", sorted[i]->name, file, i + 1 < l->n ? "," : "");
    }
    fprintf(f, "  }\n}\n");
    free(sorted);
    if (fclose(f) != 0) {
        fprintf(stderr, "make_r1_slice: writing %s failed\n", path);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: make_r1_slice --out DIR [--layers N] [--mtp N] [--shard-gb G] [--seed S] [--dry-run]\n"
            "Writes a DeepSeek-R1-shaped checkpoint slice: R1's config values, tensor names, shapes, dtypes\n"
            "and on-disk order, random values (FP8 without NaN codes, scales in [1e-3, 1e-2)).\n"
            "  --out DIR      output directory (created if missing)\n"
            "  --layers N     num_hidden_layers (default 4: 3 dense + 1 MoE, ~17.0 GB; each more MoE\n"
            "                 layer adds ~11.5 GB)\n"
            "  --mtp N        num_nextn_predict_layers (default 0; one adds ~15.4 GB)\n"
            "  --shard-gb G   target shard size in GB (default 4.3, R1's typical size)\n"
            "  --seed S       RNG seed (default 1)\n"
            "  --dry-run      print the plan (shards, sizes, straddling experts) and write nothing\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.layers = 4, .mtp = 0, .shard_gb = 4.3, .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--dry-run")) {
            o->dry_run = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "make_r1_slice: %s needs a value (see --help)\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--layers")) o->layers = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--mtp")) o->mtp = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--shard-gb")) o->shard_gb = strtod(v, &end);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, &end, 10);
        else {
            fprintf(stderr, "make_r1_slice: unknown flag %s (see --help)\n", a);
            return -1;
        }
        if (end && *end) {
            fprintf(stderr, "make_r1_slice: %s expects a number, got '%s'\n", a, v);
            return -1;
        }
    }
    if (!o->out) {
        fprintf(stderr, "make_r1_slice: --out DIR is required (see --help)\n");
        return -1;
    }
    if (o->layers < R1_FIRST_DENSE + 1 || o->layers > 61) {
        fprintf(stderr, "make_r1_slice: --layers %d out of range (expected %d..61: %d dense + at least 1 MoE)\n",
                o->layers, R1_FIRST_DENSE + 1, R1_FIRST_DENSE);
        return -1;
    }
    if (o->mtp < 0 || o->mtp > 1) {
        fprintf(stderr, "make_r1_slice: --mtp %d out of range (expected 0 or 1)\n", o->mtp);
        return -1;
    }
    if (!(o->shard_gb >= 0.5 && o->shard_gb <= 64)) {
        fprintf(stderr, "make_r1_slice: --shard-gb %g out of range (expected 0.5..64)\n", o->shard_gb);
        return -1;
    }
    return 0;
}

static int count_straddlers(const tensor_list *l)
{
    int n = 0;
    for (int i = 0; i + 5 < l->n; i++) {
        const char *s = strstr(l->t[i].name, ".mlp.experts.");
        if (!s || !strstr(s, "gate_proj.weight") || strstr(s, "scale")) continue;
        n += l->t[i].shard != l->t[i + 5].shard;
    }
    return n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o) != 0) return 2;
    tensor_list l = {0};
    build_tensor_list(&l, &o);
    int n_shards = plan_shards(&l, (uint64_t)(o.shard_gb * 1e9));
    uint64_t total = 0;
    for (int i = 0; i < l.n; i++) total += l.t[i].nbytes;
    printf("R1 slice: %d layers (%d dense + %d MoE) + %d MTP, %d tensors, %.2f GB payload in %d shards, "
           "%d experts straddle a shard boundary\n",
           o.layers, R1_FIRST_DENSE, o.layers - R1_FIRST_DENSE, o.mtp, l.n, (double)total / 1e9, n_shards,
           count_straddlers(&l));
    if (o.dry_run) {
        free(l.t);
        return 0;
    }
    if (mkdir(o.out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "make_r1_slice: cannot create %s: %s\n", o.out, strerror(errno));
        free(l.t);
        return 1;
    }
    rng_state = o.seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    writer w = {.cap = 64u << 20};
    w.buf = malloc(w.cap);
    double t0 = now_s();
    int rc = w.buf ? 0 : -1;
    for (int s = 0; rc == 0 && s < n_shards; s++) {
        rc = write_shard(&o, &l, s, n_shards, &w);
        if (rc == 0) printf("  shard %d/%d written (%.1f s)\n", s + 1, n_shards, now_s() - t0);
        fflush(stdout);
    }
    if (rc == 0) rc = write_config(&o);
    if (rc == 0) rc = write_index(&o, &l, n_shards);
    double dt = now_s() - t0;
    if (rc == 0) printf("wrote %s: %.2f GB in %.1f s (%.2f GB/s)\n", o.out, (double)w.written / 1e9, dt, (double)w.written / 1e9 / dt);
    free(w.buf);
    free(l.t);
    return rc == 0 ? 0 : 1;
}
