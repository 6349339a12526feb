/* Loading tokenizer.json (+ tokenizer_config.json) with cJSON. Only what this module implements
 * is accepted: a BPE model, an empty normalizer, a pre-tokenizer Sequence of Split steps ending in
 * ByteLevel, a ByteLevel decoder. Anything else is refused with one line naming the field. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/text_file.h"
#include "tokenizer/tokenizer_internal.h"

/* GPT-2's pre-tokenizer regex, used when a ByteLevel step has use_regex = true. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static cJSON *parse_json_file(const char *path, char *err, size_t errlen)
{
    size_t len;
    char *text = text_file_read(path, &len, err, errlen);
    if (!text) return NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        error_set(err, errlen, "%s: malformed JSON near byte %zu", path, at);
    }
    free(text);
    return root;
}

static const char *type_of(const cJSON *obj)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

static int json_flag(const cJSON *obj, const char *key)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, key));
}

/* ---------------- model ---------------- */

/* Ids index the per-id tables (18 bytes an id), so the file's largest id sizes them: vocabularies
 * stay in the hundreds of thousands, and an id in the billions (a corrupt file: the fuzzer found
 * one) must be refused, not allocated. */
#define TOKENIZER_MAX_ID 2097151

/* The id v holds: -1 when it is not an integer >= 0, -2 when it passes TOKENIZER_MAX_ID. */
static int32_t json_id(const cJSON *v)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 0x7FFFFFF0 ||
        v->valuedouble != (double)(int32_t)v->valuedouble)
        return -1;
    return v->valuedouble > TOKENIZER_MAX_ID ? -2 : (int32_t)v->valuedouble;
}

static int note_id(tokenizer *tok, int32_t id)
{
    if ((size_t)id + 1 > tok->n_ids) tok->n_ids = (size_t)id + 1;
    return 0;
}

static int load_vocab(tokenizer *tok, const cJSON *vocab, const char *path, char *err, size_t errlen)
{
    if (!cJSON_IsObject(vocab)) { error_set(err, errlen, "%s: model.vocab: expected an object token -> id", path); return -1; }
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int32_t id = json_id(e);
        if (id == -2) { error_set(err, errlen, "%s: model.vocab[\"%.80s\"]: id %.0f is past the largest supported id (%d)", path, e->string, e->valuedouble, TOKENIZER_MAX_ID); return -1; }
        if (id < 0) { error_set(err, errlen, "%s: model.vocab[\"%.80s\"]: expected a non-negative integer id", path, e->string); return -1; }
        if (str_map_put(&tok->vocab, e->string, strlen(e->string), id) < 0) goto oom;
        note_id(tok, id);
    }
    return 0;
oom:
    error_set(err, errlen, "%s: out of memory", path);
    return -1;
}

static int32_t vocab_id(const tokenizer *tok, const char *s, size_t len)
{
    return str_map_get(&tok->vocab, s, len);
}

/* One merge, "a b" or ["a", "b"]: both parts and their concatenation must be vocab entries. */
static int load_merge(tokenizer *tok, const cJSON *m, int32_t rank, const char *path, char *err, size_t errlen)
{
    const char *a, *b; size_t alen, blen;
    if (cJSON_IsString(m)) {
        const char *sp = strchr(m->valuestring, ' ');
        if (!sp || strchr(sp + 1, ' ')) {
            error_set(err, errlen, "%s: model.merges[%d]: \"%.80s\" is not two tokens separated by one space", path, rank, m->valuestring);
            return -1;
        }
        a = m->valuestring; alen = (size_t)(sp - a); b = sp + 1; blen = strlen(b);
    } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
        a = m->child->valuestring; alen = strlen(a); b = m->child->next->valuestring; blen = strlen(b);
    } else {
        error_set(err, errlen, "%s: model.merges[%d]: expected \"a b\" or [\"a\", \"b\"]", path, rank);
        return -1;
    }
    int32_t left = vocab_id(tok, a, alen), right = vocab_id(tok, b, blen);
    if (left < 0 || right < 0) {
        error_set(err, errlen, "%s: model.merges[%d]: token \"%.*s\" is not in the vocab", path, rank,
                (int)(left < 0 ? alen : blen), left < 0 ? a : b);
        return -1;
    }
    char stack[256], *joined = alen + blen <= sizeof stack ? stack : malloc(alen + blen);
    if (!joined) { error_set(err, errlen, "%s: out of memory", path); return -1; }
    memcpy(joined, a, alen); memcpy(joined + alen, b, blen);
    int32_t merged = vocab_id(tok, joined, alen + blen);
    if (merged < 0)
        error_set(err, errlen, "%s: model.merges[%d]: merged token \"%.*s\" is not in the vocab", path, rank,
                (int)(alen + blen > 120 ? 120 : alen + blen), joined);
    if (joined != stack) free(joined);
    if (merged < 0) return -1;
    if (bpe_add_merge(&tok->bpe, left, right, rank, merged) < 0) { error_set(err, errlen, "%s: out of memory", path); return -1; }
    return 0;
}

static int load_model(tokenizer *tok, const cJSON *model, const char *path, char *err, size_t errlen)
{
    if (!cJSON_IsObject(model)) { error_set(err, errlen, "%s: \"model\": expected an object", path); return -1; }
    const char *type = type_of(model);
    if (type && strcmp(type, "BPE")) { error_set(err, errlen, "%s: model.type \"%.40s\" is not supported (expected BPE)", path, type); return -1; }
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout)) { error_set(err, errlen, "%s: model.dropout must be null (BPE dropout is random)", path); return -1; }
    if (json_flag(model, "byte_fallback")) { error_set(err, errlen, "%s: model.byte_fallback = true is not supported", path); return -1; }
    static const char *const unsupported[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, unsupported[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !*v->valuestring)) {
            error_set(err, errlen, "%s: model.%s is not supported (expected null)", path, unsupported[i]);
            return -1;
        }
    }
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsArray(merges)) { error_set(err, errlen, "%s: model.merges: expected an array", path); return -1; }
    int n_vocab = cJSON_GetArraySize(vocab), n_merges = cJSON_GetArraySize(merges);
    if (str_map_init(&tok->vocab, (size_t)n_vocab + 1024) || bpe_init(&tok->bpe, (size_t)n_merges)) {
        error_set(err, errlen, "%s: out of memory", path);
        return -1;
    }
    if (load_vocab(tok, vocab, path, err, errlen)) return -1;
    int32_t rank = 0;
    for (const cJSON *m = merges->child; m; m = m->next, rank++)
        if (load_merge(tok, m, rank, path, err, errlen)) return -1;
    tok->bpe.ignore_merges = json_flag(model, "ignore_merges");
    tok->bpe.fuse_unk = json_flag(model, "fuse_unk");
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(unk)) {
        tok->bpe.unk_id = vocab_id(tok, unk->valuestring, strlen(unk->valuestring));
        if (tok->bpe.unk_id < 0) { error_set(err, errlen, "%s: model.unk_token \"%.80s\" is not in the vocab", path, unk->valuestring); return -1; }
    }
    for (int b = 0; b < 256; b++) {
        char c[4];
        tok->bpe.byte_id[b] = vocab_id(tok, c, utf8_encode(byte_level_char((uint8_t)b), c));
    }
    return 0;
}

/* ---------------- added tokens ---------------- */

static int load_added(tokenizer *tok, const cJSON *list, const char *path, char *err, size_t errlen)
{
    if (!list || cJSON_IsNull(list)) return 0;
    if (!cJSON_IsArray(list)) { error_set(err, errlen, "%s: added_tokens: expected an array", path); return -1; }
    size_t n = (size_t)cJSON_GetArraySize(list), i = 0;
    tok->added = calloc(n ? n : 1, sizeof *tok->added);
    if (!tok->added) { error_set(err, errlen, "%s: out of memory", path); return -1; }
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        const cJSON *idv = cJSON_GetObjectItemCaseSensitive(e, "id");
        int32_t id = json_id(idv);
        if (id == -2) {
            error_set(err, errlen, "%s: added_tokens[%zu]: id %.0f is past the largest supported id (%d)", path, i, idv->valuedouble, TOKENIZER_MAX_ID);
            return -1;
        }
        if (!cJSON_IsString(content) || id < 0) {
            error_set(err, errlen, "%s: added_tokens[%zu]: expected {\"id\": integer >= 0, \"content\": string, ...}", path, i);
            return -1;
        }
        added_token *a = &tok->added[tok->n_added++];
        a->id = id;
        a->off = (uint32_t)tok->strings.len;
        a->len = (uint32_t)strlen(content->valuestring);
        if (byte_buf_append(&tok->strings, content->valuestring, a->len + 1)) { error_set(err, errlen, "%s: out of memory", path); return -1; }
        a->special = (uint8_t)json_flag(e, "special");
        a->normalized = (uint8_t)json_flag(e, "normalized");
        a->lstrip = (uint8_t)json_flag(e, "lstrip");
        a->rstrip = (uint8_t)json_flag(e, "rstrip");
        a->single_word = (uint8_t)json_flag(e, "single_word");
        note_id(tok, id);
    }
    return 0;
}

/* ---------------- normalizer, pre-tokenizer, decoder ---------------- */

static int check_normalizer(const cJSON *n, const char *path, char *err, size_t errlen)
{
    if (!n || cJSON_IsNull(n)) return 0;
    const char *type = type_of(n);
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
        if (cJSON_IsArray(list) && cJSON_GetArraySize(list) == 0) return 0;
        const char *inner = cJSON_IsArray(list) && list->child ? type_of(list->child) : NULL;
        error_set(err, errlen, "%s: normalizer \"%s\" inside Sequence is not supported (only an empty Sequence or null)",
                path, inner ? inner : "?");
        return -1;
    }
    error_set(err, errlen, "%s: normalizer \"%s\" is not supported (only an empty Sequence or null)", path, type ? type : "?");
    return -1;
}

static int add_split(tokenizer *tok, const cJSON *step, size_t idx, const char *path, char *err, size_t errlen)
{
    split_rule *r = &tok->splits[tok->n_splits];
    memset(r, 0, sizeof *r);
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(step, "pattern");
    const cJSON *regex = cJSON_GetObjectItemCaseSensitive(pattern, "Regex");
    const cJSON *literal = cJSON_GetObjectItemCaseSensitive(pattern, "String");
    const cJSON *src = cJSON_IsString(regex) ? regex : literal;
    if (!cJSON_IsString(src)) { error_set(err, errlen, "%s: pre_tokenizer[%zu].pattern: expected {\"Regex\": ...} or {\"String\": ...}", path, idx); return -1; }
    const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(step, "behavior");
    static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    size_t b = 0;
    while (b < 5 && !(cJSON_IsString(behavior) && !strcmp(behavior->valuestring, names[b]))) b++;
    if (b == 5) { error_set(err, errlen, "%s: pre_tokenizer[%zu].behavior: expected Isolated, Removed, MergedWithPrevious, MergedWithNext or Contiguous", path, idx); return -1; }
    char msg[400];
    if (compile_split(r, src->valuestring, strlen(src->valuestring), src == literal, msg, sizeof msg)) {
        error_set(err, errlen, "%s: pre_tokenizer[%zu]: %s", path, idx, msg);
        return -1;
    }
    r->behavior = (enum split_behavior)b;
    r->invert = json_flag(step, "invert");
    tok->n_splits++;
    return 0;
}

static int add_byte_level(tokenizer *tok, const cJSON *step, size_t idx, const char *path, char *err, size_t errlen)
{
    if (json_flag(step, "add_prefix_space")) {
        error_set(err, errlen, "%s: pre_tokenizer[%zu]: ByteLevel add_prefix_space = true is not supported", path, idx);
        return -1;
    }
    const cJSON *use_regex = cJSON_GetObjectItemCaseSensitive(step, "use_regex");
    if (use_regex && !cJSON_IsTrue(use_regex)) return 0;
    split_rule *r = &tok->splits[tok->n_splits];
    memset(r, 0, sizeof *r);
    if (compile_split(r, GPT2_PATTERN, sizeof GPT2_PATTERN - 1, 0, err, errlen)) return -1;
    r->behavior = SPLIT_ISOLATED;
    tok->n_splits++;
    return 0;
}

static int load_pre_tokenizer(tokenizer *tok, const cJSON *pt, const char *path, char *err, size_t errlen)
{
    const cJSON *steps = pt;
    int single = 0;
    const char *type = pt ? type_of(pt) : NULL;
    if (type && !strcmp(type, "Sequence")) steps = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
    else single = 1;
    size_t n = single ? 1 : (size_t)cJSON_GetArraySize(steps);
    if (!pt || (!single && !cJSON_IsArray(steps))) { error_set(err, errlen, "%s: pre_tokenizer: expected a ByteLevel step (alone or in a Sequence)", path); return -1; }
    tok->splits = calloc(n + 1, sizeof *tok->splits);
    if (!tok->splits) { error_set(err, errlen, "%s: out of memory", path); return -1; }
    int seen_byte_level = 0;
    size_t idx = 0;
    for (const cJSON *s = single ? pt : steps->child; s; s = single ? NULL : s->next, idx++) {
        const char *t = type_of(s);
        if (seen_byte_level) { error_set(err, errlen, "%s: pre_tokenizer[%zu]: steps after ByteLevel are not supported", path, idx); return -1; }
        if (t && !strcmp(t, "Split")) { if (add_split(tok, s, idx, path, err, errlen)) return -1; }
        else if (t && !strcmp(t, "ByteLevel")) { if (add_byte_level(tok, s, idx, path, err, errlen)) return -1; seen_byte_level = 1; }
        else { error_set(err, errlen, "%s: pre_tokenizer[%zu]: type \"%s\" is not supported (expected Split or ByteLevel)", path, idx, t ? t : "?"); return -1; }
    }
    if (!seen_byte_level) { error_set(err, errlen, "%s: pre_tokenizer: expected a ByteLevel step (this is not a byte-level BPE)", path); return -1; }
    return 0;
}

static int check_decoder(const cJSON *d, const char *path, char *err, size_t errlen)
{
    const char *type = d ? type_of(d) : NULL;
    if (type && !strcmp(type, "ByteLevel")) return 0;
    error_set(err, errlen, "%s: decoder \"%s\" is not supported (expected ByteLevel)", path, type ? type : "null");
    return -1;
}

/* ---------------- per-id tables ---------------- */

static int set_token(tokenizer *tok, int32_t id, const char *s, size_t len)
{
    tok->is_known[id] = 1;
    tok->text_off[id] = (uint32_t)tok->strings.len;
    tok->text_len[id] = (uint32_t)len;
    if (byte_buf_append(&tok->strings, s, len) || byte_buf_append(&tok->strings, "", 1)) return -1;
    tok->bytes_off[id] = (uint32_t)tok->strings.len;
    if (byte_level_decode(&tok->strings, s, len)) return -1;
    tok->bytes_len[id] = (uint32_t)(tok->strings.len - tok->bytes_off[id]);
    return 0;
}

static int build_id_tables(tokenizer *tok, const char *path, char *err, size_t errlen)
{
    size_t n = tok->n_ids ? tok->n_ids : 1;
    tok->text_off = calloc(n, sizeof *tok->text_off); tok->text_len = calloc(n, sizeof *tok->text_len);
    tok->bytes_off = calloc(n, sizeof *tok->bytes_off); tok->bytes_len = calloc(n, sizeof *tok->bytes_len);
    tok->is_special = calloc(n, 1); tok->is_known = calloc(n, 1);
    if (!tok->text_off || !tok->text_len || !tok->bytes_off || !tok->bytes_len || !tok->is_special || !tok->is_known)
        goto oom;
    for (size_t i = 0; i <= tok->vocab.mask; i++) {
        const str_slot *s = &tok->vocab.slots[i];
        if (s->id >= 0 && set_token(tok, s->id, tok->vocab.pool.data + s->off, s->len)) goto oom;
    }
    for (size_t i = 0; i < tok->n_added; i++) { /* added tokens win for their ids, as in the reference */
        added_token *a = &tok->added[i];
        char *copy = strndup(tok->strings.data + a->off, a->len);
        if (!copy) goto oom;
        int rc = set_token(tok, a->id, copy, a->len);
        free(copy);
        if (rc) goto oom;
        tok->is_special[a->id] = a->special;
    }
    for (size_t i = 0; i < tok->n_added; i++) { /* content lookups: an added token's own id wins */
        added_token *a = &tok->added[i];
        if (str_map_set(&tok->vocab, tok->strings.data + a->off, a->len, a->id)) goto oom;
    }
    return 0;
oom:
    error_set(err, errlen, "%s: out of memory", path);
    return -1;
}

/* ---------------- tokenizer_config.json ---------------- */

static const char *token_content(const cJSON *v)
{
    if (cJSON_IsString(v)) return v->valuestring;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

static int config_token(tokenizer *tok, const cJSON *cfg, const char *key, int32_t *id, char **text,
                        const char *path, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v || cJSON_IsNull(v)) return 0;
    const char *content = token_content(v);
    if (!content) { error_set(err, errlen, "%s: %s: expected a string or {\"content\": string}", path, key); return -1; }
    *id = tokenizer_token_id(tok, content);
    if (*id < 0) { error_set(err, errlen, "%s: %s \"%.80s\" is not a token of tokenizer.json", path, key, content); return -1; }
    *text = strdup(content);
    if (!*text) { error_set(err, errlen, "%s: out of memory", path); return -1; }
    return 0;
}

static int load_config(tokenizer *tok, const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) return 0; /* optional */
    cJSON *cfg = parse_json_file(path, err, errlen);
    if (!cfg) return -1;
    int rc = -1;
    if (!cJSON_IsObject(cfg)) { error_set(err, errlen, "%s: expected a JSON object", path); goto done; }
    const cJSON *add_bos = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
    if (add_bos && !cJSON_IsBool(add_bos)) { error_set(err, errlen, "%s: add_bos_token: expected true or false", path); goto done; }
    tok->add_bos = cJSON_IsTrue(add_bos);
    if (config_token(tok, cfg, "bos_token", &tok->bos_id, &tok->bos_text, path, err, errlen) ||
        config_token(tok, cfg, "eos_token", &tok->eos_id, &tok->eos_text, path, err, errlen))
        goto done;
    rc = 0;
done:
    cJSON_Delete(cfg);
    return rc;
}

/* ---------------- entry points ---------------- */

static int load_tokenizer_json(tokenizer *tok, const char *path, char *err, size_t errlen)
{
    cJSON *root = parse_json_file(path, err, errlen);
    if (!root) return -1;
    int rc = -1;
    if (!cJSON_IsObject(root)) { error_set(err, errlen, "%s: expected a JSON object", path); goto done; }
    if (load_model(tok, cJSON_GetObjectItemCaseSensitive(root, "model"), path, err, errlen) ||
        load_added(tok, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), path, err, errlen) ||
        check_normalizer(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), path, err, errlen) ||
        load_pre_tokenizer(tok, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), path, err, errlen) ||
        check_decoder(cJSON_GetObjectItemCaseSensitive(root, "decoder"), path, err, errlen) ||
        build_id_tables(tok, path, err, errlen))
        goto done;
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

static int build_tries(tokenizer *tok, char *err, size_t errlen)
{
    if (trie_build(tok, &tok->trie_raw, 0) || trie_build(tok, &tok->trie_norm, 1)) {
        error_set(err, errlen, "out of memory building the added-token trie");
        return -1;
    }
    int need_word = 0;
    for (size_t i = 0; i < tok->n_added; i++) need_word |= tok->added[i].single_word;
    if (!need_word) return 0;
    int code; PCRE2_SIZE at;
    /* the reference tests Rust regex's Unicode \w, which is wider than PCRE2's (letters, digits, _):
     * Alphabetic + marks + decimal digits + connector punctuation + Join_Control */
    static const char WORD_CHAR[] = "[\\p{Alphabetic}\\p{L}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";
    size_t len = 0;
    char *widened = widen_unicode_classes(WORD_CHAR, sizeof WORD_CHAR - 1, &len); /* newer letters, marks */
    tok->word_re = widened ? pcre2_compile((PCRE2_SPTR)widened, len, PCRE2_UTF | PCRE2_UCP, &code, &at, NULL) : NULL;
    free(widened);
    tok->word_md = tok->word_re ? pcre2_match_data_create_from_pattern(tok->word_re, NULL) : NULL;
    if (!tok->word_md) { error_set(err, errlen, "cannot compile the word-character regex"); return -1; }
    return 0;
}

tokenizer *tokenizer_load(const char *path, char *err, size_t errlen)
{
    if (err && errlen) err[0] = 0;
    if (!path) { error_set(err, errlen, "tokenizer_load: no path"); return NULL; }
    struct stat st;
    if (stat(path, &st) != 0) { error_set(err, errlen, "%s: %s", path, strerror(errno)); return NULL; }
    size_t plen = strlen(path);
    char *json_path = malloc(plen + 32), *config_path = malloc(plen + 40);
    tokenizer *tok = calloc(1, sizeof *tok);
    if (!json_path || !config_path || !tok) {
        free(json_path); free(config_path); free(tok);
        error_set(err, errlen, "out of memory");
        return NULL;
    }
    tok->bos_id = tok->eos_id = -1;
    if (S_ISDIR(st.st_mode)) {
        snprintf(json_path, plen + 32, "%s/tokenizer.json", path);
        snprintf(config_path, plen + 40, "%s/tokenizer_config.json", path);
    } else {
        snprintf(json_path, plen + 32, "%s%s", strcmp(path, "-") ? "" : "./", path); /* "-" is a file here, not stdin */
        const char *slash = strrchr(path, '/');
        if (slash) snprintf(config_path, plen + 40, "%.*s/tokenizer_config.json", (int)(slash - path), path);
        else snprintf(config_path, plen + 40, "tokenizer_config.json");
    }
    int rc = load_tokenizer_json(tok, json_path, err, errlen);
    if (!rc) rc = build_tries(tok, err, errlen);
    if (!rc) rc = load_config(tok, config_path, err, errlen);
    free(json_path); free(config_path);
    if (rc) { tokenizer_free(tok); return NULL; }
    return tok;
}

void tokenizer_free(tokenizer *tok)
{
    if (!tok) return;
    str_map_free(&tok->vocab);
    bpe_free(&tok->bpe);
    for (size_t i = 0; i < tok->n_splits; i++) split_rule_free(&tok->splits[i]);
    free(tok->splits);
    free(tok->added);
    trie_free(&tok->trie_raw); trie_free(&tok->trie_norm);
    pcre2_match_data_free(tok->word_md); pcre2_code_free(tok->word_re);
    free(tok->text_off); free(tok->text_len); free(tok->bytes_off); free(tok->bytes_len);
    free(tok->is_special); free(tok->is_known);
    free(tok->strings.data);
    free(tok->bos_text); free(tok->eos_text);
    free(tok->pieces.data); free(tok->pieces_next.data);
    free(tok->segs.data); free(tok->segs_next.data);
    free(tok->matches);
    free(tok);
}

/* ---------------- lookups ---------------- */

int32_t tokenizer_token_id(const tokenizer *tok, const char *content)
{
    return content ? str_map_get(&tok->vocab, content, strlen(content)) : -1;
}

const char *tokenizer_token_text(const tokenizer *tok, int32_t id)
{
    if (id < 0 || (size_t)id >= tok->n_ids || !tok->is_known[id]) return NULL;
    return tok->strings.data + tok->text_off[id];
}

const char *tokenizer_token_bytes(const tokenizer *tok, int32_t id, size_t *len)
{
    if (id < 0 || (size_t)id >= tok->n_ids || !tok->is_known[id]) { if (len) *len = 0; return NULL; }
    if (len) *len = tok->bytes_len[id];
    return tok->strings.data + tok->bytes_off[id];
}

int tokenizer_is_special(const tokenizer *tok, int32_t id)
{
    return id >= 0 && (size_t)id < tok->n_ids && tok->is_special[id];
}

int32_t tokenizer_bos_id(const tokenizer *tok) { return tok->bos_id; }
int32_t tokenizer_eos_id(const tokenizer *tok) { return tok->eos_id; }
int tokenizer_adds_bos(const tokenizer *tok) { return tok->add_bos && tok->bos_id >= 0; }
size_t tokenizer_vocab_size(const tokenizer *tok) { return tok->n_ids; }
