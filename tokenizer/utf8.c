/* UTF-8 validation and lossy repair. Repair follows the "maximal subpart" rule, because that is
 * what the reference (Rust's String::from_utf8_lossy) does before it tokenizes: a broken sequence
 * becomes one U+FFFD per longest prefix of a well-formed sequence, or per single invalid byte. */
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tokenizer_internal.h"

static const char REPLACEMENT[] = "\xEF\xBF\xBD";

/* Allowed range of the second byte for a lead byte (later bytes are always 80..BF). */
static int second_range(uint8_t lead, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80; *hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead == 0xE0) { *lo = 0xA0; return 3; }
    if (lead == 0xED) { *hi = 0x9F; return 3; }
    if (lead >= 0xE1 && lead <= 0xEF) return 3;
    if (lead == 0xF0) { *lo = 0x90; return 4; }
    if (lead == 0xF4) { *hi = 0x8F; return 4; }
    if (lead >= 0xF1 && lead <= 0xF3) return 4;
    return 0;
}

/* Examines the sequence at s: returns its length if complete and valid; otherwise 0 with *prefix
 * set to the length of the maximal valid prefix (>= 1) and *truncated when the buffer ended
 * inside that prefix. */
static size_t sequence_at(const uint8_t *s, size_t n, size_t *prefix, int *truncated)
{
    *truncated = 0;
    if (s[0] < 0x80) return 1;
    uint8_t lo, hi;
    int need = second_range(s[0], &lo, &hi);
    *prefix = 1;
    if (!need) return 0;
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= n) { *truncated = 1; return 0; }
        uint8_t b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
        *prefix = (size_t)i + 1;
    }
    return (size_t)need;
}

size_t utf8_valid_prefix(const uint8_t *s, size_t n, int *truncated, size_t *bad_len)
{
    size_t i = 0;
    *truncated = 0; *bad_len = 0;
    while (i < n) {
        /* ASCII runs dominate real text: skip 8 bytes at a time */
        while (i + 8 <= n) {
            uint64_t w; memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        size_t prefix, len = sequence_at(s + i, n - i, &prefix, truncated);
        if (!len) { *bad_len = prefix; return i; }
        i += len;
    }
    return i;
}

int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
    size_t prefix; int truncated;
    size_t len = sequence_at(s, n, &prefix, &truncated);
    if (!len) return 0;
    static const uint8_t lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t c = s[0] & lead_mask[len];
    for (size_t i = 1; i < len; i++) c = (c << 6) | (s[i] & 0x3F);
    *cp = c;
    return (int)len;
}

size_t utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int utf8_lossy_append(byte_buf *out, const uint8_t *s, size_t n, size_t *consumed, int final)
{
    size_t i = 0;
    while (i < n) {
        int truncated; size_t bad;
        size_t ok = utf8_valid_prefix(s + i, n - i, &truncated, &bad);
        if (ok && byte_buf_append(out, s + i, ok)) return -1;
        i += ok;
        if (i >= n) break;
        if (truncated && !final) break; /* may still complete with the next bytes */
        if (byte_buf_append(out, REPLACEMENT, 3)) return -1;
        i += truncated ? n - i : bad;
    }
    if (consumed) *consumed = i;
    return 0;
}

int utf8_lossy(const char *s, size_t n, char **out, size_t *out_len)
{
    int truncated; size_t bad;
    *out = NULL;
    if (utf8_valid_prefix((const uint8_t *)s, n, &truncated, &bad) == n) return 0;
    byte_buf buf = {0};
    if (utf8_lossy_append(&buf, (const uint8_t *)s, n, NULL, 1) || byte_buf_append(&buf, "", 1)) {
        free(buf.data);
        return -1;
    }
    *out = buf.data;
    *out_len = buf.len - 1;
    return 1;
}
