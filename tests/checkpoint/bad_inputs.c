/* Bad-input cases: each copies a valid checkpoint into a temp dir, corrupts one thing in C, and
 * asserts checkpoint_open returns NULL with one error line naming the right file and tensor.
 * A few also run `dsspec inspect` and check its exit status and single stderr line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "core/checkpoint.h"
#include "tests/checkpoint/ckpt_test_util.h"
#include "tests/checkpoint/synth_checkpoint.h"

extern int test_failures_add(int n, const char *what);

typedef struct {
    const char *dir;
    const tu_layout *lay;
    char want[3][256]; /* substrings the error must contain ("" = unused) */
} bad_ctx;

static void want(bad_ctx *x, int i, const char *s) { snprintf(x->want[i], sizeof x->want[i], "%s", s); }

static void path_of(const bad_ctx *x, const char *file, char *buf, size_t n) { snprintf(buf, n, "%s/%s", x->dir, file); }

static const char *file_of(const bad_ctx *x, const char *tensor)
{
    const tu_tensor *t = tu_layout_find(x->lay, tensor);
    return t ? t->file : "?";
}

/* the tensor of `file` whose data ends last (or begins last when by_begin) */
static const tu_tensor *last_in_file(const bad_ctx *x, const char *file)
{
    const tu_tensor *best = NULL;
    for (int i = 0; i < x->lay->n; i++)
        if (!strcmp(x->lay->t[i].file, file) && (!best || x->lay->t[i].end > best->end)) best = &x->lay->t[i];
    return best;
}

/* ---- JSON edits ---- */

typedef struct { const char *obj, *key, *str; double num; int kind; } set_arg; /* kind 0 str, 1 num, 2 null, 3 delete */

static void json_set(cJSON *root, void *arg)
{
    const set_arg *a = arg;
    cJSON *o = a->obj ? cJSON_GetObjectItem(root, a->obj) : root;
    if (!o) return;
    if (a->kind == 3) { cJSON_DeleteItemFromObject(o, a->key); return; }
    cJSON *v = a->kind == 0 ? cJSON_CreateString(a->str) : a->kind == 1 ? cJSON_CreateNumber(a->num) : cJSON_CreateNull();
    if (cJSON_GetObjectItem(o, a->key)) cJSON_ReplaceItemInObject(o, a->key, v);
    else cJSON_AddItemToObject(o, a->key, v);
}

static void edit_config(bad_ctx *x, set_arg a)
{
    char p[4096];
    path_of(x, "config.json", p, sizeof p);
    tu_edit_json_file(p, json_set, &a);
    want(x, 0, "config.json");
}

static void edit_index(bad_ctx *x, set_arg a)
{
    char p[4096];
    path_of(x, "model.safetensors.index.json", p, sizeof p);
    tu_edit_json_file(p, json_set, &a);
}

/* Edit one entry of a shard header: field "dtype" (string), "shape" or "data_offsets" (two numbers). */
typedef struct { const char *tensor, *field, *str; double a, b; } header_arg;

static void header_set(cJSON *root, void *arg)
{
    const header_arg *h = arg;
    cJSON *e = cJSON_GetObjectItem(root, h->tensor);
    if (!e) return;
    cJSON *v = h->str ? cJSON_CreateString(h->str) : cJSON_CreateArray();
    if (!h->str) { cJSON_AddItemToArray(v, cJSON_CreateNumber(h->a)); cJSON_AddItemToArray(v, cJSON_CreateNumber(h->b)); }
    cJSON_ReplaceItemInObject(e, h->field, v);
}

static void edit_header(bad_ctx *x, header_arg h)
{
    const tu_tensor *t = tu_layout_find(x->lay, h.tensor);
    char p[4096];
    path_of(x, t->file, p, sizeof p);
    tu_edit_shard_header(p, header_set, &h);
    want(x, 0, t->file);
    want(x, 1, h.tensor);
}

static void header_rename(cJSON *root, void *arg)
{
    const char **names = arg;
    cJSON *e = cJSON_DetachItemFromObject(root, names[0]);
    if (e) cJSON_AddItemToObject(root, names[1], e);
}

/* ---- the cases ---- */

static void bad_truncated_shard(bad_ctx *x)
{
    const char *file = file_of(x, "lm_head.weight");
    char p[4096];
    path_of(x, file, p, sizeof p);
    struct stat st;
    stat(p, &st);
    if (truncate(p, st.st_size - 1)) perror("truncate");
    want(x, 0, file);
    want(x, 1, last_in_file(x, file)->name);
    want(x, 2, "past end of file");
}

static void bad_header_len_past_eof(bad_ctx *x)
{
    const char *file = file_of(x, "model.embed_tokens.weight");
    char p[4096];
    path_of(x, file, p, sizeof p);
    struct stat st;
    stat(p, &st);
    FILE *f = fopen(p, "r+b");
    uint64_t n = (uint64_t)st.st_size; /* 8 + n > size */
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
    fwrite(b, 1, 8, f);
    fclose(f);
    want(x, 0, file);
    want(x, 1, "header length");
    want(x, 2, "past end of file");
}

static void bad_overlap(bad_ctx *x)
{
    /* move the last tensor of a shard one byte back into its predecessor */
    const tu_tensor *t = last_in_file(x, file_of(x, "model.layers.0.self_attn.o_proj.weight"));
    uint64_t hl = 0;
    for (int i = 0; i < x->lay->n; i++) /* smallest absolute begin in the file = 8 + N */
        if (!strcmp(x->lay->t[i].file, t->file) && (!hl || x->lay->t[i].begin < hl)) hl = x->lay->t[i].begin;
    edit_header(x, (header_arg){t->name, "data_offsets", NULL, (double)(t->begin - hl - 1), (double)(t->end - hl - 1)});
    want(x, 2, "overlap");
}

static void bad_out_of_range(bad_ctx *x)
{
    const tu_tensor *t = tu_layout_find(x->lay, "model.layers.0.self_attn.q_a_proj.weight");
    uint64_t len = t->end - t->begin;
    edit_header(x, (header_arg){t->name, "data_offsets", NULL, 1e12, 1e12 + (double)len});
    want(x, 2, "past end of file");
}

static void bad_span(bad_ctx *x)
{
    const tu_tensor *t = tu_layout_find(x->lay, "model.layers.1.self_attn.kv_b_proj.weight_scale_inv");
    uint64_t hl = t->begin; /* data_offsets are relative: recover them from a reference */
    for (int i = 0; i < x->lay->n; i++)
        if (!strcmp(x->lay->t[i].file, t->file) && x->lay->t[i].begin < hl) hl = x->lay->t[i].begin;
    edit_header(x, (header_arg){t->name, "data_offsets", NULL, (double)(t->begin - hl), (double)(t->end - hl - 4)});
    want(x, 2, "expected numel");
}

static void bad_dtype(bad_ctx *x)
{
    edit_header(x, (header_arg){"lm_head.weight", "dtype", "F16", 0, 0});
    want(x, 2, "expected BF16");
}

static void bad_unknown_dtype(bad_ctx *x)
{
    edit_header(x, (header_arg){"model.layers.0.self_attn.q_b_proj.weight", "dtype", "F8_E5M2", 0, 0});
    want(x, 2, "F8_E5M2");
}

static void bad_shape(bad_ctx *x)
{
    const tu_tensor *t = tu_layout_find(x->lay, "model.layers.0.self_attn.q_a_proj.weight");
    edit_header(x, (header_arg){t->name, "shape", NULL, 1, (double)(t->end - t->begin)}); /* same numel */
    want(x, 2, "expected F8_E4M3");
}

static void bad_not_in_index(bad_ctx *x)
{
    const char *name = "model.layers.0.self_attn.o_proj.weight";
    edit_index(x, (set_arg){"weight_map", name, NULL, 0, 3});
    want(x, 0, file_of(x, name));
    want(x, 1, name);
    want(x, 2, "missing from model.safetensors.index.json");
}

static void bad_missing_shard(bad_ctx *x)
{
    edit_index(x, (set_arg){"weight_map", "model.norm.weight", "model-99999-of-99999.safetensors", 0, 0});
    want(x, 0, "model-99999-of-99999.safetensors");
    want(x, 1, "model.norm.weight");
}

static void bad_wrong_shard_in_index(bad_ctx *x)
{
    /* the index maps the embedding to the shard that holds lm_head (another shard when there are several) */
    const char *a = file_of(x, "model.embed_tokens.weight"), *b = file_of(x, "lm_head.weight");
    edit_index(x, (set_arg){"weight_map", "model.embed_tokens.weight", b, 0, 0});
    want(x, 0, strcmp(a, b) ? b : "model.safetensors.index.json");
    want(x, 1, "model.embed_tokens.weight");
}

static void bad_tensor_absent(bad_ctx *x)
{
    /* renamed in both the header and the index: consistent files, but the forward pass's tensor is gone */
    const char *old = "model.layers.0.self_attn.kv_a_layernorm.weight", *renamed = "model.layers.0.self_attn.kv_a_layernorm.renamed";
    const char *names[2] = {old, renamed};
    char p[4096];
    path_of(x, file_of(x, old), p, sizeof p);
    tu_edit_shard_header(p, header_rename, names);
    edit_index(x, (set_arg){"weight_map", old, NULL, 0, 3});
    edit_index(x, (set_arg){"weight_map", renamed, file_of(x, old), 0, 0});
    want(x, 0, "model.safetensors.index.json");
    want(x, 1, "'model.layers.0.self_attn.kv_a_layernorm.weight' missing");
}

static void write_text(bad_ctx *x, const char *file, const char *text)
{
    char p[4096];
    path_of(x, file, p, sizeof p);
    tu_write_file(p, text, strlen(text));
    want(x, 0, file);
    want(x, 1, "malformed JSON");
}

static void bad_config_json(bad_ctx *x) { write_text(x, "config.json", "{\"model_type\": \"deepseek_v3\", "); }
static void bad_index_json(bad_ctx *x) { write_text(x, "model.safetensors.index.json", "{\"weight_map\": {\"a\": "); }
static void bad_generation_json(bad_ctx *x) { write_text(x, "generation_config.json", "{\"temperature\": 0.6,, }"); }

static void bad_header_json(bad_ctx *x)
{
    const char *file = file_of(x, "model.norm.weight");
    char p[4096];
    path_of(x, file, p, sizeof p);
    FILE *f = fopen(p, "r+b");
    fseek(f, 8, SEEK_SET);
    fputc('[', f); /* '{' -> '[': no longer an object */
    fclose(f);
    want(x, 0, file);
    want(x, 1, "malformed JSON");
}

static void bad_quant_fmt(bad_ctx *x)
{
    edit_config(x, (set_arg){"quantization_config", "fmt", "e5m2", 0, 0});
    want(x, 1, "quantization_config.fmt");
}

static void bad_quant_method(bad_ctx *x)
{
    edit_config(x, (set_arg){"quantization_config", "quant_method", "int4", 0, 0});
    want(x, 1, "quantization_config.quant_method");
}

static void bad_block_size(bad_ctx *x)
{
    edit_config(x, (set_arg){"quantization_config", "weight_block_size", NULL, 64, 1});
    want(x, 1, "weight_block_size");
}

static void bad_rope_type(bad_ctx *x)
{
    char p[4096];
    path_of(x, "config.json", p, sizeof p);
    set_arg a = {"rope_scaling", "type", "linear", 0, 0}, b = {"rope_scaling", "rope_type", NULL, 0, 3};
    tu_edit_json_file(p, json_set, &a);
    tu_edit_json_file(p, json_set, &b);
    want(x, 0, "config.json");
    want(x, 1, "rope_scaling.type");
    want(x, 2, "linear");
}

static void bad_model_type(bad_ctx *x)
{
    edit_config(x, (set_arg){NULL, "model_type", "deepseek_v2", 0, 0});
    want(x, 1, "model_type");
}

static void bad_q_lora_null(bad_ctx *x)
{
    edit_config(x, (set_arg){NULL, "q_lora_rank", NULL, 0, 2});
    want(x, 1, "q_lora_rank");
}

static void bad_scoring(bad_ctx *x)
{
    edit_config(x, (set_arg){NULL, "scoring_func", "softmax", 0, 0});
    want(x, 1, "scoring_func");
}

static void bad_hidden_not_integer(bad_ctx *x)
{
    edit_config(x, (set_arg){NULL, "hidden_size", NULL, 64.5, 1});
    want(x, 1, "hidden_size");
}

static void bad_no_config(bad_ctx *x)
{
    char p[4096];
    path_of(x, "config.json", p, sizeof p);
    unlink(p);
    want(x, 0, "config.json");
    want(x, 1, "cannot open");
}

/* A checkpoint consistent in every other way (72 experts in one group, every tensor present) whose
 * num_experts_per_tok exceeds what the MoE layer's per-row route holds: refused at config.json,
 * not left to overflow in the forward pass. */
static void bad_experts_per_tok(bad_ctx *x)
{
    model_config c = synth_small_config();
    c.n_routed_experts = 72;
    c.n_group = c.topk_group = 1;
    c.num_experts_per_tok = MODEL_MAX_EXPERTS_PER_TOK + 1;
    tu_remove_tree(x->dir);
    if (mkdir(x->dir, 0700) || synth_write_checkpoint(x->dir, &c, 1 << 20)) perror("synthetic checkpoint");
    char key[64], limit[32];
    snprintf(key, sizeof key, "'num_experts_per_tok' = %d", c.num_experts_per_tok);
    snprintf(limit, sizeof limit, "[1, %d]", MODEL_MAX_EXPERTS_PER_TOK);
    want(x, 0, "config.json");
    want(x, 1, key);
    want(x, 2, limit);
}

typedef struct {
    const char *name;
    void (*corrupt)(bad_ctx *);
    int via_cli; /* also run `dsspec inspect` */
} bad_case;

static const bad_case cases[] = {
    {"truncated shard", bad_truncated_shard, 1},
    {"header length past EOF", bad_header_len_past_eof, 0},
    {"overlapping data_offsets", bad_overlap, 0},
    {"data_offsets out of range", bad_out_of_range, 0},
    {"data_offsets span != numel*dtype", bad_span, 0},
    {"dtype disagrees with config", bad_dtype, 0},
    {"unknown dtype", bad_unknown_dtype, 0},
    {"shape disagrees with config", bad_shape, 0},
    {"tensor missing from index", bad_not_in_index, 0},
    {"index names a missing shard", bad_missing_shard, 1},
    {"index maps a tensor to the wrong shard", bad_wrong_shard_in_index, 0},
    {"needed tensor absent", bad_tensor_absent, 0},
    {"malformed config.json", bad_config_json, 0},
    {"malformed index", bad_index_json, 0},
    {"malformed generation_config.json", bad_generation_json, 0},
    {"malformed shard header", bad_header_json, 0},
    {"quantization fmt e5m2", bad_quant_fmt, 1},
    {"quantization method int4", bad_quant_method, 0},
    {"weight_block_size [64,1]", bad_block_size, 0},
    {"rope type linear", bad_rope_type, 0},
    {"model_type deepseek_v2", bad_model_type, 0},
    {"q_lora_rank null", bad_q_lora_null, 0},
    {"scoring_func softmax", bad_scoring, 0},
    {"hidden_size 64.5", bad_hidden_not_integer, 0},
    {"config.json absent", bad_no_config, 0},
    {"num_experts_per_tok beyond the route arrays", bad_experts_per_tok, 1},
};

static int error_matches(const bad_ctx *x, const char *err)
{
    if (!err[0] || strchr(err, '\n')) return 0;
    for (int i = 0; i < 3; i++)
        if (x->want[i][0] && !strstr(err, x->want[i])) return 0;
    return 1;
}

/* dsspec inspect -m dir: exit 1, stdout empty, stderr exactly one line that matches. */
static int cli_matches(const bad_ctx *x, const char *dsspec_bin, const char *tmp)
{
    char cmd[8192], errpath[4096];
    snprintf(errpath, sizeof errpath, "%s.stderr", tmp);
    snprintf(cmd, sizeof cmd, "'%s' inspect -m '%s' >/dev/null 2>'%s'", dsspec_bin, x->dir, errpath);
    int st = system(cmd);
    size_t len = 0;
    char *text = tu_read_file(errpath, &len);
    unlink(errpath);
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 1 && text && len > 0 && text[len - 1] == '\n';
    if (ok) {
        text[len - 1] = 0;
        ok = error_matches(x, text);
    }
    if (!ok) fprintf(stderr, "  dsspec inspect: status %d, stderr '%s'\n", st, text ? text : "");
    free(text);
    return ok;
}

int test_bad_inputs(const char *src, const char *label, const char *dsspec_bin)
{
    tu_layout lay;
    if (tu_layout_load(src, &lay)) return test_failures_add(1, "reference layout for bad-input cases");
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char tmp[64];
        tu_make_tmpdir(tmp, sizeof tmp);
        tu_copy_dir(src, tmp);
        bad_ctx x = {.dir = tmp, .lay = &lay};
        cases[i].corrupt(&x);
        char err[1024] = "";
        checkpoint *ck = checkpoint_open(tmp, err, sizeof err);
        int ok = ck == NULL && error_matches(&x, err);
        if (!ok)
            fprintf(stderr, "FAIL %s: %s: open %s, error '%s' (wanted '%s' '%s' '%s')\n", label, cases[i].name,
                    ck ? "succeeded" : "failed", err, x.want[0], x.want[1], x.want[2]);
        if (ok && cases[i].via_cli) {
            ok = dsspec_bin && cli_matches(&x, dsspec_bin, tmp);
            if (!ok) fprintf(stderr, "FAIL %s: %s: dsspec inspect (%s)\n", label, cases[i].name, dsspec_bin ? dsspec_bin : "no binary given");
        }
        bad += !ok;
        checkpoint_close(ck);
        tu_remove_tree(tmp);
    }
    printf("%s: %zu bad-input cases, %d wrong\n", label, sizeof cases / sizeof cases[0], bad);
    tu_layout_free(&lay);
    return test_failures_add(bad, "bad-input cases");
}
