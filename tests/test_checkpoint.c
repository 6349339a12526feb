/* Checkpoint reader tests. References are independent of core/: config dimensions are read here with
 * cJSON, the on-disk layout is read straight from the index and shard headers (ckpt_test_util.c),
 * tensor counts and expert sizes are derived from the config by the formulas of the R1 layout, and
 * synthetic tensor bytes are a known function of the name. Every corruption is done in C on a copy. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>
#include "core/checkpoint.h"
#include "tests/checkpoint/ckpt_test_util.h"
#include "tests/checkpoint/synth_checkpoint.h"

static int failures, checks;
#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        checks++;                                                                         \
        if (!(cond)) {                                                                    \
            failures++;                                                                   \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                          \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
        }                                                                                 \
    } while (0)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---------- what the config implies, computed here from config.json ---------- */

typedef struct {
    long vocab, hidden, inter, moe_inter, layers, mtp, heads, q_lora, kv_lora, nope, rope, v, experts, shared, first_dense, freq;
} ref_config;

static long json_long(cJSON *root, const char *key)
{
    cJSON *v = cJSON_GetObjectItem(root, key);
    return cJSON_IsNumber(v) ? (long)v->valuedouble : -1;
}

static int ref_config_load(const char *dir, ref_config *r)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = tu_read_file(path, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!root) return -1;
    *r = (ref_config){json_long(root, "vocab_size"), json_long(root, "hidden_size"), json_long(root, "intermediate_size"),
                      json_long(root, "moe_intermediate_size"), json_long(root, "num_hidden_layers"),
                      json_long(root, "num_nextn_predict_layers"), json_long(root, "num_attention_heads"),
                      json_long(root, "q_lora_rank"), json_long(root, "kv_lora_rank"), json_long(root, "qk_nope_head_dim"),
                      json_long(root, "qk_rope_head_dim"), json_long(root, "v_head_dim"), json_long(root, "n_routed_experts"),
                      json_long(root, "n_shared_experts"), json_long(root, "first_k_dense_replace"), json_long(root, "moe_layer_freq")};
    cJSON_Delete(root);
    return 0;
}

static int ref_is_moe(const ref_config *r, long l) { return l >= r->layers || (l >= r->first_dense && l % r->freq == 0); }
static long cdiv(long a, long b) { return (a + b - 1) / b; }
/* FP8 weight + F32 scale grid */
static long fp8_bytes(long rows, long cols) { return rows * cols + 4 * cdiv(rows, 128) * cdiv(cols, 128); }
static long ref_expert_bytes(const ref_config *r) { return 3 * fp8_bytes(r->moe_inter, r->hidden); }

static long ref_tensor_count(const ref_config *r)
{
    long n = 3; /* embed, norm, lm_head */
    for (long l = 0; l < r->layers + r->mtp; l++) {
        n += 2 + 2 + 5 * 2; /* input/post norms, q_a/kv_a norms, 5 FP8 projections with scales */
        if (ref_is_moe(r, l)) n += 2 + (r->shared > 0 ? 6 : 0) + 6 * r->experts;
        else n += 6;
        if (l >= r->layers) n += 6;
    }
    return n;
}

/* ---------- census, read back from its "key value" lines ---------- */

static char *census_text(const checkpoint *ck)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    checkpoint_print_census(ck, f);
    fclose(f);
    return buf;
}

/* Value of "key=" on the line starting with prefix; -1 when absent. */
static long long census_value(const char *text, const char *prefix, const char *key)
{
    size_t pl = strlen(prefix);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, prefix, pl)) continue;
        const char *eol = strchr(line, '\n');
        char k[64];
        snprintf(k, sizeof k, " %s=", key);
        const char *p = strstr(line, k);
        if (p && (!eol || p < eol)) return atoll(p + strlen(k));
    }
    return -1;
}

/* ---------- positive checks against the independent layout ---------- */

static void check_extents(const checkpoint *ck, const ref_config *r, const tu_layout *lay, long *straddle_out, long *contig_out)
{
    static const char *suffix[6] = {"gate_proj.weight", "gate_proj.weight_scale_inv", "up_proj.weight",
                                    "up_proj.weight_scale_inv", "down_proj.weight", "down_proj.weight_scale_inv"};
    long straddle = 0, contig = 0, bad = 0;
    for (long l = 0; l < r->layers + r->mtp; l++) {
        for (long e = 0; e < r->experts; e++) {
            const expert_extent *x = checkpoint_expert(ck, (int)l, (int)e);
            if (!ref_is_moe(r, l)) { if (x) bad++; continue; }
            const tu_tensor *t[6];
            for (int k = 0; k < 6; k++) {
                char name[160];
                snprintf(name, sizeof name, "model.layers.%ld.mlp.experts.%ld.%s", l, e, suffix[k]);
                t[k] = tu_layout_find(lay, name);
            }
            /* Reference pieces: files in order of first appearance, span min..max within each file. */
            const char *files[6];
            uint64_t lo[6], hi[6], sum[6];
            int nf = 0, tiled = 1;
            for (int k = 0; k < 6; k++) {
                int f = 0;
                while (f < nf && strcmp(files[f], t[k]->file)) f++;
                if (f == nf) { files[nf] = t[k]->file; lo[nf] = t[k]->begin; hi[nf] = t[k]->end; sum[nf] = 0; nf++; }
                if (t[k]->begin < lo[f]) lo[f] = t[k]->begin;
                if (t[k]->end > hi[f]) hi[f] = t[k]->end;
                sum[f] += t[k]->end - t[k]->begin;
            }
            for (int f = 0; f < nf; f++) tiled &= sum[f] == hi[f] - lo[f];
            straddle += nf == 2;
            contig += tiled;
            int ok = x && x->npieces == nf && x->contiguous == tiled;
            for (int f = 0; ok && f < nf; f++)
                ok = !strcmp(ck->shards[x->piece[f].shard].file, files[f]) && x->piece[f].offset == lo[f] && x->piece[f].length == hi[f] - lo[f];
            for (int k = 0; ok && k < 6; k++) ok = x->t[k] && !strcmp(x->t[k]->name, t[k]->name) && x->t[k]->offset == t[k]->begin;
            if (!ok && bad++ < 3) fprintf(stderr, "  extent mismatch layer %ld expert %ld\n", l, e);
        }
    }
    CHECK(bad == 0, "%ld expert extents differ from the layout read from the shard headers", bad);
    CHECK(checkpoint_expert(ck, (int)(r->layers + r->mtp), 0) == NULL && checkpoint_expert(ck, 0, (int)r->experts) == NULL &&
              checkpoint_expert(ck, -1, 0) == NULL,
          "checkpoint_expert out of range must be NULL");
    *straddle_out = straddle;
    *contig_out = contig;
}

/* Every tensor's offset/size matches the header read independently; a sample of reads matches
 * the bytes read here with fread at the reference offset. */
static void check_tensors_and_reads(const checkpoint *ck, const char *dir, const tu_layout *lay)
{
    long mism = 0;
    CHECK(ck->n_tensors == lay->n, "tensor count %d, shard headers hold %d", ck->n_tensors, lay->n);
    for (int i = 0; i < lay->n; i++) {
        const tensor_info *t = checkpoint_tensor(ck, lay->t[i].name);
        if (!t || t->offset != lay->t[i].begin || t->nbytes != lay->t[i].end - lay->t[i].begin ||
            strcmp(ck->shards[t->shard].file, lay->t[i].file) || strcmp(dtype_name(t->dtype), lay->t[i].dtype))
            mism++;
    }
    CHECK(mism == 0, "%ld tensors differ from the shard headers (offset/size/shard/dtype)", mism);
    CHECK(checkpoint_tensor(ck, "model.layers.0.no_such.weight") == NULL, "lookup of an absent name must be NULL");
    CHECK(checkpoint_tensorf(ck, "model.layers.%d.input_layernorm.weight", 0) == checkpoint_tensor(ck, "model.layers.0.input_layernorm.weight"),
          "checkpoint_tensorf must find the same tensor as checkpoint_tensor");
    char err[512];
    long bad = 0;
    int step = lay->n > 400 ? lay->n / 400 : 1;
    for (int i = 0; i < lay->n; i += step) {
        const tu_tensor *r = &lay->t[i];
        uint64_t n = r->end - r->begin, off = n > 2 ? 1 : 0, len = n - off;
        if (!len) continue;
        unsigned char *a = malloc(len), *b = malloc(len);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, r->file);
        FILE *f = fopen(path, "rb");
        int ok = f && fseek(f, (long)(r->begin + off), SEEK_SET) == 0 && fread(b, 1, len, f) == len;
        if (f) fclose(f);
        ok = ok && checkpoint_read(ck, checkpoint_tensor(ck, r->name), off, a, len, err, sizeof err) == 0 && !memcmp(a, b, len);
        bad += !ok;
        free(a);
        free(b);
    }
    CHECK(bad == 0, "%ld sampled checkpoint_read results differ from fread at the header's offset", bad);
    const tensor_info *t = checkpoint_tensor(ck, "lm_head.weight");
    unsigned char one;
    err[0] = 0;
    CHECK(t && checkpoint_read(ck, t, t->nbytes, &one, 1, err, sizeof err) == -1 && strstr(err, "lm_head.weight") &&
              strstr(err, ck->shards[t->shard].file),
          "read past a tensor's end must fail naming the file and tensor (got '%s')", err);
}

static void check_census(const checkpoint *ck, const ref_config *r, const tu_layout *lay, long straddle, long contig)
{
    char *text = census_text(ck);
    long moe_layers = 0;
    for (long l = 0; l < r->layers + r->mtp; l++) moe_layers += ref_is_moe(r, l);
    long n_experts = moe_layers * r->experts, eb = ref_expert_bytes(r);
    CHECK(census_value(text, "total ", "tensors") == ref_tensor_count(r), "census tensors %lld, config implies %ld",
          census_value(text, "total ", "tensors"), ref_tensor_count(r));
    CHECK(census_value(text, "total ", "bytes") == (long long)lay->data_bytes, "census bytes %lld, shard files hold %llu",
          census_value(text, "total ", "bytes"), (unsigned long long)lay->data_bytes);
    CHECK(census_value(text, "total ", "shards") == lay->n_shards, "census shards");
    CHECK(census_value(text, "experts ", "count") == n_experts, "census experts %lld, config implies %ld", census_value(text, "experts ", "count"), n_experts);
    CHECK(census_value(text, "experts ", "bytes_per_expert_min") == eb && census_value(text, "experts ", "bytes_per_expert_max") == eb,
          "bytes per expert %lld..%lld, config implies %ld", census_value(text, "experts ", "bytes_per_expert_min"),
          census_value(text, "experts ", "bytes_per_expert_max"), eb);
    CHECK(census_value(text, "routed ", "bytes") == n_experts * eb, "routed bytes");
    CHECK(census_value(text, "family routed_experts", "tensors") == 6 * n_experts, "routed expert tensors");
    CHECK(census_value(text, "resident ", "bytes") == (long long)lay->data_bytes - n_experts * eb, "resident bytes");
    CHECK(census_value(text, "experts ", "straddling") == straddle, "census straddling %lld, shard files say %ld",
          census_value(text, "experts ", "straddling"), straddle);
    CHECK(census_value(text, "experts ", "contiguous") == contig, "census contiguous %lld, shard files say %ld",
          census_value(text, "experts ", "contiguous"), contig);
    CHECK(census_value(text, "family other", "tensors") == 0, "no tensor should be unclassified");
    long long fam = 0;
    const char *fams[] = {"attention", "dense_mlp", "shared_experts", "routed_experts", "router", "norms", "embed_heads", "mtp_extras", "other"};
    for (int i = 0; i < 9; i++) {
        char p[64];
        snprintf(p, sizeof p, "family %s", fams[i]);
        fam += census_value(text, p, "bytes");
    }
    CHECK(fam == (long long)lay->data_bytes, "family bytes sum %lld != total %llu", fam, (unsigned long long)lay->data_bytes);
    CHECK(census_value(text, "family mtp_extras", "tensors") == 6 * r->mtp, "mtp extras");
    CHECK(census_value(text, "family router", "tensors") == 2 * moe_layers, "router tensors");
    free(text);
}

/* Opens dir and checks it against the independent references; returns 0 when it opened. */
static int check_valid_checkpoint(const char *dir, const char *label)
{
    ref_config r;
    tu_layout lay;
    CHECK(ref_config_load(dir, &r) == 0 && tu_layout_load(dir, &lay) == 0, "%s: reference could not read %s", label, dir);
    char err[1024] = "";
    double t0 = now_s();
    checkpoint *ck = checkpoint_open(dir, err, sizeof err);
    double dt = now_s() - t0;
    CHECK(ck != NULL, "%s: checkpoint_open failed: %s", label, err);
    if (!ck) { tu_layout_free(&lay); return -1; }
    printf("%s: %d tensors in %d shards opened in %.3f s\n", label, ck->n_tensors, ck->n_shards, dt);
    long straddle, contig;
    check_tensors_and_reads(ck, dir, &lay);
    check_extents(ck, &r, &lay, &straddle, &contig);
    check_census(ck, &r, &lay, straddle, contig);
    printf("%s: %ld experts straddle two shards, %ld contiguous\n", label, straddle, contig);
    checkpoint_close(ck);
    tu_layout_free(&lay);
    return 0;
}

int test_bad_inputs(const char *src, const char *label, const char *dsspec_bin);
int test_header_unit(void);

/* bad_inputs.c counts its cases through this */
int test_failures_add(int n, const char *what)
{
    checks++;
    if (n) {
        failures += n;
        fprintf(stderr, "FAIL: %d %s\n", n, what);
    }
    return n;
}

/* The parsed config equals the one the synthetic writer was given, field by field. */
static void check_config_roundtrip(void)
{
    char dir[64];
    tu_make_tmpdir(dir, sizeof dir);
    model_config c = synth_small_config();
    CHECK(synth_write_checkpoint(dir, &c, 20000) == 0, "synthetic write");
    char err[512];
    checkpoint *ck = checkpoint_open(dir, err, sizeof err);
    CHECK(ck != NULL, "open synthetic small: %s", err);
    if (ck) {
        const model_config *g = &ck->cfg;
        CHECK(!memcmp(&c.yarn, &g->yarn, sizeof c.yarn), "yarn fields");
        int ints_equal = c.vocab_size == g->vocab_size && c.hidden_size == g->hidden_size && c.intermediate_size == g->intermediate_size &&
                         c.moe_intermediate_size == g->moe_intermediate_size && c.num_hidden_layers == g->num_hidden_layers &&
                         c.num_nextn_predict_layers == g->num_nextn_predict_layers && c.num_attention_heads == g->num_attention_heads &&
                         c.q_lora_rank == g->q_lora_rank && c.kv_lora_rank == g->kv_lora_rank && c.qk_nope_head_dim == g->qk_nope_head_dim &&
                         c.qk_rope_head_dim == g->qk_rope_head_dim && c.v_head_dim == g->v_head_dim && c.n_routed_experts == g->n_routed_experts &&
                         c.n_shared_experts == g->n_shared_experts && c.num_experts_per_tok == g->num_experts_per_tok && c.n_group == g->n_group &&
                         c.topk_group == g->topk_group && c.first_k_dense_replace == g->first_k_dense_replace &&
                         c.moe_layer_freq == g->moe_layer_freq && c.norm_topk_prob == g->norm_topk_prob &&
                         c.max_position_embeddings == g->max_position_embeddings && c.bos_token_id == g->bos_token_id &&
                         c.eos_token_id == g->eos_token_id && g->fp8_block_rows == 128 && g->fp8_block_cols == 128;
        CHECK(ints_equal, "integer config fields differ from what was written");
        CHECK(c.routed_scaling_factor == g->routed_scaling_factor && c.rms_norm_eps == g->rms_norm_eps && c.rope_theta == g->rope_theta,
              "float config fields");
        CHECK(ck->has_generation_config && ck->gen_temperature == 0.6 && ck->gen_top_p == 0.95, "generation_config.json values");
        CHECK(config_total_layers(g) == 6 && !config_layer_is_moe(g, 0) && !config_layer_is_moe(g, 1) && config_layer_is_moe(g, 2) &&
                  config_layer_is_moe(g, 5) && !config_layer_is_moe(g, 6),
              "layer kinds: 0,1 dense, 2..4 MoE, 5 MTP (MoE), 6 out of range");
        /* synthetic tensor bytes are a known function of the name */
        const tensor_info *t = checkpoint_tensor(ck, "model.layers.3.mlp.experts.5.down_proj.weight");
        unsigned char buf[64];
        int same = t && checkpoint_read(ck, t, 100, buf, sizeof buf, err, sizeof err) == 0;
        for (int i = 0; same && i < 64; i++) same = buf[i] == synth_byte(t->name, 100 + (uint64_t)i);
        CHECK(same, "bytes read differ from the synthetic pattern");
        checkpoint_close(ck);
    }
    tu_remove_tree(dir);
}

/* moe_layer_freq 2 and no rope_scaling (enabled 0) */
static void edit_freq_no_rope(cJSON *root, void *arg)
{
    (void)arg;
    cJSON_DeleteItemFromObject(root, "rope_scaling");
}

static void check_layer_freq_and_no_rope(void)
{
    char dir[64];
    tu_make_tmpdir(dir, sizeof dir);
    model_config c = synth_small_config();
    c.moe_layer_freq = 2;
    c.num_hidden_layers = 6;
    synth_write_checkpoint(dir, &c, 1 << 20);
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    tu_edit_json_file(path, edit_freq_no_rope, NULL);
    checkpoint *ck = checkpoint_open(dir, err, sizeof err);
    CHECK(ck != NULL, "moe_layer_freq 2, no rope_scaling: %s", err);
    if (ck) {
        CHECK(ck->cfg.yarn.enabled == 0, "absent rope_scaling must give yarn.enabled 0");
        CHECK(!config_layer_is_moe(&ck->cfg, 3) && config_layer_is_moe(&ck->cfg, 4) && config_layer_is_moe(&ck->cfg, 6),
              "freq 2: layer 3 dense, 4 MoE, MTP 6 MoE");
        checkpoint_close(ck);
    }
    check_valid_checkpoint(dir, "synthetic moe_layer_freq=2");
    tu_remove_tree(dir);
}

/* Newer spellings: rope_scaling.rope_type, eos_token_id as a list in generation_config.json. */
static void edit_rope_type_key(cJSON *root, void *arg)
{
    (void)arg;
    cJSON *rs = cJSON_GetObjectItem(root, "rope_scaling");
    cJSON_DeleteItemFromObject(rs, "type");
    cJSON_AddStringToObject(rs, "rope_type", "yarn");
}

static void edit_eos_list(cJSON *root, void *arg)
{
    (void)arg;
    int ids[2] = {7, 1};
    cJSON_ReplaceItemInObject(root, "eos_token_id", cJSON_CreateIntArray(ids, 2));
    cJSON_ReplaceItemInObject(root, "top_p", cJSON_CreateNumber(0.5));
}

static void check_alternate_spellings(void)
{
    char dir[64], path[128], err[512];
    tu_make_tmpdir(dir, sizeof dir);
    model_config c = synth_small_config();
    synth_write_checkpoint(dir, &c, 1 << 20);
    snprintf(path, sizeof path, "%s/config.json", dir);
    tu_edit_json_file(path, edit_rope_type_key, NULL);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    tu_edit_json_file(path, edit_eos_list, NULL);
    checkpoint *ck = checkpoint_open(dir, err, sizeof err);
    CHECK(ck && ck->cfg.yarn.enabled && ck->cfg.yarn.factor == 40 && ck->cfg.eos_token_id == 7 && ck->gen_top_p == 0.5,
          "rope_type spelling / eos list: %s", ck ? "wrong values" : err);
    checkpoint_close(ck);
    tu_remove_tree(dir);
}

/* Fixture checkpoints (tests/fixtures/<name>/ with config.json + index); returns how many. */
static int for_each_fixture(const char *dsspec_bin)
{
    DIR *d = opendir(DSSPEC_FIXTURES_DIR);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char dir[4096], probe[4200];
        snprintf(dir, sizeof dir, "%s/%s", DSSPEC_FIXTURES_DIR, e->d_name);
        snprintf(probe, sizeof probe, "%s/model.safetensors.index.json", dir);
        if (e->d_name[0] == '.' || access(probe, R_OK)) continue;
        n++;
        check_valid_checkpoint(dir, e->d_name);
        test_bad_inputs(dir, e->d_name, dsspec_bin);
    }
    if (d) closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    const char *dsspec_bin = argc > 1 ? argv[1] : NULL;
    test_header_unit();
    check_config_roundtrip();
    check_layer_freq_and_no_rope();
    check_alternate_spellings();

    char dir[64];
    tu_make_tmpdir(dir, sizeof dir);
    model_config small = synth_small_config();
    synth_write_checkpoint(dir, &small, 20000); /* small shards (an expert is 6 KB): several experts straddle */
    check_valid_checkpoint(dir, "synthetic small");
    test_bad_inputs(dir, "synthetic small", dsspec_bin);
    tu_remove_tree(dir);

    /* R1's tensor structure at tiny size: 91,991 tensors, one header per ~8 shards. */
    tu_make_tmpdir(dir, sizeof dir);
    model_config r1 = synth_r1_layout_config();
    synth_write_checkpoint(dir, &r1, 256 << 10);
    CHECK(ref_tensor_count(&(ref_config){8, 8, 8, 4, 61, 1, 1, 4, 4, 2, 2, 2, 256, 1, 3, 1}) == 91991,
          "R1 structure must have 91,991 tensors (what R1's index lists)");
    check_valid_checkpoint(dir, "synthetic R1 layout");
    tu_remove_tree(dir);

    int nfix = for_each_fixture(dsspec_bin);
    printf("fixtures checked: %d (under %s)\n", nfix, DSSPEC_FIXTURES_DIR);
    CHECK(nfix >= 1, "no fixture checkpoint found under %s (tests/fixtures/make_fixtures.py --write)", DSSPEC_FIXTURES_DIR);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
