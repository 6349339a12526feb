/* Splitting before BPE: first the added tokens (longest match, with their lstrip/rstrip/
 * single_word flags), then the pre-tokenizer's regex Splits, as the reference does them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/text_file.h"
#include "tokenizer/tokenizer_internal.h"

/* ---------------- added-token trie ---------------- */

static int32_t trie_new_node(added_trie *t, uint8_t byte)
{
    if (buf_grow((void **)&t->nodes, &t->cap, t->n + 1, sizeof *t->nodes)) return -1;
    t->nodes[t->n] = (trie_node){-1, -1, -1, byte};
    return (int32_t)t->n++;
}

static int32_t trie_child(const added_trie *t, int32_t node, uint8_t byte)
{
    for (int32_t c = t->nodes[node].child; c >= 0; c = t->nodes[c].sibling)
        if (t->nodes[c].byte == byte) return c;
    return -1;
}

int trie_build(tokenizer *tok, added_trie *t, int normalized)
{
    memset(t, 0, sizeof *t);
    if (trie_new_node(t, 0) < 0) return -1;
    for (size_t i = 0; i < tok->n_added; i++) {
        const added_token *a = &tok->added[i];
        if (!!a->normalized != !!normalized || !a->len) continue;
        const uint8_t *s = (const uint8_t *)tok->strings.data + a->off;
        int32_t node = 0;
        t->starts[s[0]] = 1;
        for (uint32_t k = 0; k < a->len; k++) {
            int32_t c = trie_child(t, node, s[k]);
            if (c < 0) {
                if ((c = trie_new_node(t, s[k])) < 0) return -1;
                t->nodes[c].sibling = t->nodes[node].child;
                t->nodes[node].child = c;
            }
            node = c;
        }
        if (t->nodes[node].token < 0) t->nodes[node].token = (int32_t)i; /* first of duplicates wins */
    }
    return 0;
}

void trie_free(added_trie *t)
{
    free(t->nodes);
    memset(t, 0, sizeof *t);
}

/* Longest added token starting at s[0]: its index, length in *len; -1 if none. */
static int32_t trie_longest(const added_trie *t, const uint8_t *s, size_t n, uint32_t *len)
{
    int32_t node = 0, best = -1;
    for (size_t k = 0; k < n; k++) {
        node = trie_child(t, node, s[k]);
        if (node < 0) break;
        if (t->nodes[node].token >= 0) { best = t->nodes[node].token; *len = (uint32_t)k + 1; }
    }
    return best;
}

/* ---------------- flags: whitespace and word characters ---------------- */

/* Unicode White_Space, which Rust's char::is_whitespace tests. */
static int is_white_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

/* Start of the run of whitespace that ends at text[end] (not before lo). */
static uint32_t whitespace_run_start(const char *text, uint32_t lo, uint32_t end)
{
    while (end > lo) {
        uint32_t k = end - 1;
        while (k > lo && ((uint8_t)text[k] & 0xC0) == 0x80) k--;
        uint32_t cp;
        if (!utf8_decode((const uint8_t *)text + k, end - k, &cp) || !is_white_space(cp)) break;
        end = k;
    }
    return end;
}

static uint32_t whitespace_run_end(const char *text, uint32_t start, uint32_t hi)
{
    while (start < hi) {
        uint32_t cp;
        int n = utf8_decode((const uint8_t *)text + start, hi - start, &cp);
        if (!n || !is_white_space(cp)) break;
        start += (uint32_t)n;
    }
    return start;
}

static int is_word_char_at(const tokenizer *tok, const char *text, uint32_t at, uint32_t hi)
{
    int rc = pcre2_match(tok->word_re, (PCRE2_SPTR)text, hi, at, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK,
                         tok->word_md, NULL);
    return rc > 0;
}

static uint32_t prev_char_start(const char *text, uint32_t lo, uint32_t at)
{
    uint32_t k = at - 1;
    while (k > lo && ((uint8_t)text[k] & 0xC0) == 0x80) k--;
    return k;
}

/* single_word: the token must not touch a word character on either side (within the piece). */
static int single_word_ok(const tokenizer *tok, const char *text, uint32_t lo, uint32_t hi,
                          uint32_t start, uint32_t stop)
{
    if (start > lo && is_word_char_at(tok, text, prev_char_start(text, lo, start), start)) return 0;
    if (stop < hi && is_word_char_at(tok, text, stop, hi)) return 0;
    return 1;
}

/* Splits text[lo..hi) by the tokens of one trie, appending segments to out. A match that its
 * single_word flag rejects still consumes its bytes, as in the reference's non-overlapping scan. */
static int split_by_trie(tokenizer *tok, const added_trie *t, const char *text, uint32_t lo, uint32_t hi,
                         seg_buf *out)
{
    uint32_t pos = lo, emitted = lo;
    while (pos < hi) {
        if (!t->starts[(uint8_t)text[pos]]) { pos++; continue; }
        uint32_t len = 0;
        int32_t which = trie_longest(t, (const uint8_t *)text + pos, hi - pos, &len);
        if (which < 0) { pos++; continue; }
        const added_token *a = &tok->added[which];
        uint32_t start = pos, stop = pos + len;
        pos = stop;
        if (a->single_word && !single_word_ok(tok, text, lo, hi, start, stop)) continue;
        if (a->lstrip) {
            uint32_t s2 = whitespace_run_start(text, lo, start);
            start = s2 > emitted ? s2 : emitted; /* a previous match may own those spaces */
        }
        if (a->rstrip) stop = whitespace_run_end(text, stop, hi);
        if (emitted < start && seg_buf_push(out, -1, emitted, start)) return -1;
        if (seg_buf_push(out, a->id, start, stop)) return -1;
        emitted = pos = stop;
    }
    if (emitted < hi && seg_buf_push(out, -1, emitted, hi)) return -1;
    return 0;
}

int added_split(tokenizer *tok, const char *text, uint32_t len)
{
    tok->segs_next.len = 0;
    if (split_by_trie(tok, &tok->trie_raw, text, 0, len, &tok->segs_next)) return -1;
    /* the normalizer is the identity (others are rejected at load), so the normalized-token pass
     * runs on the same bytes, piece by piece */
    tok->segs.len = 0;
    for (size_t i = 0; i < tok->segs_next.len; i++) {
        segment s = tok->segs_next.data[i];
        int rc = s.id >= 0 ? seg_buf_push(&tok->segs, s.id, s.start, s.end)
                           : split_by_trie(tok, &tok->trie_norm, text, s.start, s.end, &tok->segs);
        if (rc) return -1;
    }
    return 0;
}

/* ---------------- regex splits ---------------- */

struct split_match { uint32_t start, end; int is_match; };

/* Appends the extra ranges of category cat as class items: \x{A}-\x{B}... */
static int append_extra_ranges(byte_buf *out, char cat)
{
    for (size_t i = 0; i < unicode_extra_count; i++) {
        if (unicode_extra_ranges[i].cat != cat) continue;
        char item[40];
        int n = snprintf(item, sizeof item, "\\x{%X}-\\x{%X}", unicode_extra_ranges[i].lo, unicode_extra_ranges[i].hi);
        if (byte_buf_append(out, item, (size_t)n)) return -1;
    }
    return 0;
}

/* PCRE2 10.42 knows Unicode 14; the reference knows Unicode 16. Each \p{X} for X in L M N P S
 * gets the code points the newer tables add: inside a class the ranges are appended, outside it
 * becomes [\p{X}ranges]. Other escapes are copied as they are. */
char *widen_unicode_classes(const char *pat, size_t len, size_t *out_len)
{
    byte_buf out = {0};
    int in_class = 0, fail = byte_buf_append(&out, "", 0);
    for (size_t i = 0; i < len && !fail;) {
        char c = pat[i];
        if (c == '\\' && i + 4 < len && pat[i + 1] == 'p' && pat[i + 2] == '{' && pat[i + 4] == '}' &&
            strchr("LMNPS", pat[i + 3])) {
            if (!in_class) fail |= byte_buf_append(&out, "[", 1);
            fail |= byte_buf_append(&out, pat + i, 5) || append_extra_ranges(&out, pat[i + 3]);
            if (!in_class) fail |= byte_buf_append(&out, "]", 1);
            i += 5;
        } else if (c == '\\') {
            size_t n = i + 1 < len ? 2 : 1;
            fail = byte_buf_append(&out, pat + i, n);
            i += n;
        } else if (!in_class && c == '[') {
            /* a ']' right after '[' or '[^' is a literal member */
            size_t n = 1 + (i + 1 < len && pat[i + 1] == '^');
            if (i + n < len && pat[i + n] == ']') n++;
            fail = byte_buf_append(&out, pat + i, n);
            in_class = 1;
            i += n;
        } else if (in_class && c == '[' && i + 1 < len && pat[i + 1] == ':') {
            const char *end = strstr(pat + i, ":]"); /* POSIX class [:name:] */
            size_t n = end ? (size_t)(end - (pat + i)) + 2 : len - i;
            fail = byte_buf_append(&out, pat + i, n);
            i += n;
        } else {
            if (in_class && c == ']') in_class = 0;
            fail = byte_buf_append(&out, pat + i, 1);
            i++;
        }
    }
    if (fail) { free(out.data); return NULL; }
    *out_len = out.len;
    return out.data;
}

int compile_split(split_rule *r, const char *pattern, size_t plen, int literal, char *err, size_t errlen)
{
    int code; PCRE2_SIZE at;
    uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP); /* LITERAL refuses UCP */
    size_t wlen = plen;
    char *widened = literal || memmem(pattern, plen, "\\Q", 2) ? NULL : widen_unicode_classes(pattern, plen, &wlen);
    r->re = pcre2_compile((PCRE2_SPTR)(widened ? widened : pattern), wlen, opts, &code, &at, NULL);
    free(widened);
    if (!r->re && widened) { /* report the error against the pattern as written in the file */
        pcre2_code *plain = pcre2_compile((PCRE2_SPTR)pattern, plen, opts, &code, &at, NULL);
        pcre2_code_free(plain);
    }
    if (!r->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        error_set(err, errlen, "regex /%.*s/ rejected by PCRE2 at offset %zu: %s", (int)(plen > 200 ? 200 : plen),
                pattern, (size_t)at, (const char *)msg);
        return -1;
    }
    r->jit = pcre2_jit_compile(r->re, PCRE2_JIT_COMPLETE) == 0;
    r->md = pcre2_match_data_create_from_pattern(r->re, NULL);
    if (!r->md) { error_set(err, errlen, "out of memory compiling a regex"); return -1; }
    return 0;
}

void split_rule_free(split_rule *r)
{
    pcre2_match_data_free(r->md);
    pcre2_code_free(r->re);
    r->md = NULL; r->re = NULL;
}

static int push_match(tokenizer *tok, size_t *n, uint32_t start, uint32_t end, int is_match)
{
    if (buf_grow((void **)&tok->matches, &tok->matches_cap, *n + 1, sizeof *tok->matches)) return -1;
    tok->matches[(*n)++] = (struct split_match){start, end, is_match};
    return 0;
}

/* Alternating gaps and matches covering text[start..end), as the reference lists them: an empty
 * match steps one character on, so every split sees the same pieces as the reference. */
static int find_matches(tokenizer *tok, const split_rule *r, const char *text, uint32_t start, uint32_t end,
                        size_t *n)
{
    const PCRE2_SPTR subject = (PCRE2_SPTR)text + start;
    const PCRE2_SIZE len = end - start;
    PCRE2_SIZE prev = 0, off = 0;
    *n = 0;
    while (off <= len) {
        int rc = r->jit ? pcre2_jit_match(r->re, subject, len, off, 0, r->md, NULL)
                        : pcre2_match(r->re, subject, len, off, PCRE2_NO_UTF_CHECK, r->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return -1;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(r->md);
        if (ov[0] != prev && push_match(tok, n, start + (uint32_t)prev, start + (uint32_t)ov[0], 0)) return -1;
        if (push_match(tok, n, start + (uint32_t)ov[0], start + (uint32_t)ov[1], 1)) return -1;
        prev = ov[1];
        if (ov[1] > ov[0]) { off = ov[1]; continue; }
        /* empty match: step over one character */
        off = ov[1] + 1;
        while (off < len && (subject[off] & 0xC0) == 0x80) off++;
    }
    if (prev != len && push_match(tok, n, start + (uint32_t)prev, end, 0)) return -1;
    return 0;
}

static int emit(span_buf *out, uint32_t start, uint32_t end)
{
    return start == end ? 0 : span_buf_push(out, start, end); /* empty pieces vanish */
}

/* Applies the split behavior to the matches of one piece, appending the resulting pieces:
 * Isolated keeps matches as pieces of their own, Removed drops them, MergedWithPrevious/Next glue
 * each match to the gap before/after it, Contiguous joins runs of matches (and runs of gaps). */
static int apply_behavior(tokenizer *tok, const split_rule *r, size_t n, span_buf *out)
{
    struct split_match *m = tok->matches;
    if (r->invert)
        for (size_t i = 0; i < n; i++) m[i].is_match = !m[i].is_match;
    size_t first = out->len;
    int prev_match = 0;
    switch (r->behavior) {
    case SPLIT_ISOLATED:
        for (size_t i = 0; i < n; i++) if (emit(out, m[i].start, m[i].end)) return -1;
        return 0;
    case SPLIT_REMOVED:
        for (size_t i = 0; i < n; i++) if (!m[i].is_match && emit(out, m[i].start, m[i].end)) return -1;
        return 0;
    case SPLIT_MERGED_PREV:
        for (size_t i = 0; i < n; i++) {
            if (m[i].is_match && !prev_match && out->len > first) out->data[out->len - 1].end = m[i].end;
            else if (span_buf_push(out, m[i].start, m[i].end)) return -1;
            prev_match = m[i].is_match;
        }
        break;
    case SPLIT_MERGED_NEXT:
        for (size_t i = n; i-- > 0;) {
            if (m[i].is_match && !prev_match && out->len > first) out->data[out->len - 1].start = m[i].start;
            else if (span_buf_push(out, m[i].start, m[i].end)) return -1;
            prev_match = m[i].is_match;
        }
        for (size_t a = first, b = out->len; a + 1 < b; a++, b--) {
            span t = out->data[a]; out->data[a] = out->data[b - 1]; out->data[b - 1] = t;
        }
        break;
    case SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < n; i++) {
            if (m[i].is_match == prev_match && out->len > first) out->data[out->len - 1].end = m[i].end;
            else if (span_buf_push(out, m[i].start, m[i].end)) return -1;
            prev_match = m[i].is_match;
        }
        break;
    }
    /* drop empty pieces */
    size_t w = first;
    for (size_t i = first; i < out->len; i++)
        if (out->data[i].end > out->data[i].start) out->data[w++] = out->data[i];
    out->len = w;
    return 0;
}

int pretokenize(tokenizer *tok, const char *text, uint32_t start, uint32_t end)
{
    tok->pieces.len = 0;
    if (span_buf_push(&tok->pieces, start, end)) return -1;
    for (size_t r = 0; r < tok->n_splits; r++) {
        const split_rule *rule = &tok->splits[r];
        tok->pieces_next.len = 0;
        for (size_t i = 0; i < tok->pieces.len; i++) {
            size_t n;
            span p = tok->pieces.data[i];
            if (find_matches(tok, rule, text, p.start, p.end, &n) || apply_behavior(tok, rule, n, &tok->pieces_next))
                return -1;
        }
        span_buf t = tok->pieces; tok->pieces = tok->pieces_next; tok->pieces_next = t;
    }
    return 0;
}
