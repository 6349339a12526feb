/* Private to tokenizer/: the loaded tokenizer and the helpers its .c files share. */
#ifndef DSSPEC_TOKENIZER_INTERNAL_H
#define DSSPEC_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>
#include "tokenizer/tokenizer.h"

/* ---- buffers.c: growable arrays (0 ok, -1 out of memory; the array is unchanged then) ---- */
typedef struct { char *data; size_t len, cap; } byte_buf; /* data[len] is always a NUL */
typedef struct { int32_t *data; size_t len, cap; } id_buf;
typedef struct { uint32_t start, end; } span;
typedef struct { span *data; size_t len, cap; } span_buf;
typedef struct { int32_t id; uint32_t start, end; } segment; /* id >= 0: added token, -1: text */
typedef struct { segment *data; size_t len, cap; } seg_buf;
/* Makes room for need elements of elem bytes in *data (capacity *cap), doubling from 64. The
 * check is inline because encoding grows arrays once per piece and per token; the rare
 * reallocation is buf_grow_slow. */
int buf_grow_slow(void **data, size_t *cap, size_t need, size_t elem);
static inline int buf_grow(void **data, size_t *cap, size_t need, size_t elem)
{
    return need <= *cap ? 0 : buf_grow_slow(data, cap, need, elem);
}
int byte_buf_append(byte_buf *b, const void *src, size_t n);
int id_buf_push(id_buf *b, int32_t id);
int id_buf_append(id_buf *b, const int32_t *src, size_t n);
int span_buf_push(span_buf *b, uint32_t start, uint32_t end);
int seg_buf_push(seg_buf *b, int32_t id, uint32_t start, uint32_t end);

/* ---- utf8.c ---- */
size_t utf8_valid_prefix(const uint8_t *s, size_t n, int *truncated, size_t *bad_len);
int utf8_lossy(const char *s, size_t n, char **out, size_t *out_len); /* 0 valid (no copy), 1 repaired, -1 oom */
int utf8_lossy_append(byte_buf *out, const uint8_t *s, size_t n, size_t *consumed, int final);
size_t utf8_encode(uint32_t cp, char *out);
int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp); /* length of a valid sequence, 0 if none */

/* ---- byte_level.c: GPT-2's printable stand-in character for each byte ---- */
uint32_t byte_level_char(uint8_t b);
/* Appends the stand-in characters of bytes[0..len) as UTF-8. */
int byte_level_encode(byte_buf *out, const uint8_t *bytes, size_t len);
/* Appends the bytes a token's text stands for (its own UTF-8 when a character has no byte). */
int byte_level_decode(byte_buf *out, const char *s, size_t len);

/* ---- string -> id hash (vocab and added tokens) ---- */
typedef struct { uint32_t hash; int32_t id; uint32_t off, len; } str_slot;
typedef struct {
    str_slot *slots; size_t mask, count;
    byte_buf pool; /* key bytes */
} str_map;
int str_map_init(str_map *m, size_t expected);
void str_map_free(str_map *m);
int str_map_put(str_map *m, const char *key, size_t len, int32_t id); /* 1 new, 0 existed, -1 oom */
int str_map_set(str_map *m, const char *key, size_t len, int32_t id); /* put or overwrite */
int32_t str_map_get(const str_map *m, const char *key, size_t len);
uint32_t hash_bytes(const char *p, size_t n);

/* ---- BPE model ---- */
typedef struct { uint64_t key; int32_t rank, merged; } merge_slot; /* key = left<<32 | right, 0 = empty */
typedef struct { uint32_t hash, off, len, ids_off, n_ids; } word_slot;
typedef struct {
    merge_slot *merges; size_t merge_mask, n_merges;
    int32_t byte_id[256]; /* id of the byte-level symbol of each byte, -1 if not in the vocab */
    int32_t unk_id;       /* -1: bytes without a symbol are dropped, as the reference does */
    int fuse_unk, ignore_merges;
    /* word cache: pre-token bytes -> ids; cleared when full (results never depend on it) */
    word_slot *cache; size_t cache_mask, cache_count;
    byte_buf cache_keys; id_buf cache_ids;
    /* scratch for merge_word */
    struct bpe_symbol *sym; size_t sym_cap;
    struct bpe_merge_cand *heap; size_t heap_cap;
} bpe_model;
int bpe_add_merge(bpe_model *m, int32_t left, int32_t right, int32_t rank, int32_t merged);
int bpe_init(bpe_model *m, size_t n_merges);
void bpe_free(bpe_model *m);
/* Appends the ids of one pre-token (raw bytes; byte-level mapping is implicit in byte_id). */
int bpe_encode_word(bpe_model *m, const str_map *vocab, const uint8_t *word, size_t len, id_buf *out);

/* ---- pre-tokenizer: a sequence of regex splits (then byte-level, implicit) ---- */
enum split_behavior { SPLIT_ISOLATED, SPLIT_REMOVED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };
typedef struct {
    pcre2_code *re; pcre2_match_data *md;
    enum split_behavior behavior; int invert, jit;
} split_rule;

/* ---- added tokens ---- */
typedef struct {
    int32_t id; uint32_t off, len; /* content in tokenizer.strings */
    uint8_t special, normalized, lstrip, rstrip, single_word;
} added_token;
/* byte trie of added-token contents; node 0 is the root */
typedef struct { int32_t token, child, sibling; uint8_t byte; } trie_node;
typedef struct { trie_node *nodes; size_t n, cap; uint8_t starts[256]; /* first bytes of tokens */ } added_trie;

struct tokenizer {
    str_map vocab;          /* model vocab + added tokens, content -> id */
    bpe_model bpe;
    split_rule *splits; size_t n_splits;
    added_token *added; size_t n_added;
    added_trie trie_raw, trie_norm; /* added tokens matched before / after normalization */
    pcre2_code *word_re; pcre2_match_data *word_md; /* word characters, only for single_word tokens */
    /* per id: text as written (for lookups) and the bytes it decodes to */
    uint32_t *text_off, *text_len, *bytes_off, *bytes_len;
    uint8_t *is_special, *is_known;
    byte_buf strings;
    size_t n_ids; /* highest id + 1 */
    int32_t bos_id, eos_id; int add_bos;
    char *bos_text, *eos_text;
    span_buf pieces, pieces_next; /* encode scratch */
    seg_buf segs, segs_next;
    struct split_match *matches; size_t matches_cap;
};

/* pretokenize.c */
/* Splits text[start..end) into tok->pieces by the pre-tokenizer rules. */
int pretokenize(tokenizer *tok, const char *text, uint32_t start, uint32_t end);
/* Splits text[0..len) into added tokens and text runs (tok->segs). */
int added_split(tokenizer *tok, const char *text, uint32_t len);
int trie_build(tokenizer *tok, added_trie *t, int normalized);
void trie_free(added_trie *t);
int compile_split(split_rule *r, const char *pattern, size_t plen, int literal, char *err, size_t errlen);
void split_rule_free(split_rule *r);

/* unicode_delta.c (generated): categories newer than PCRE2's Unicode tables */
typedef struct { char cat; uint32_t lo, hi; } unicode_range;
extern const unicode_range unicode_extra_ranges[];
extern const size_t unicode_extra_count;
/* pattern with each \p{L|M|N|P|S} widened by those ranges (malloc'd), NULL on oom */
char *widen_unicode_classes(const char *pat, size_t len, size_t *out_len);

#endif
