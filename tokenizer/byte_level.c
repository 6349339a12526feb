/* The ByteLevel mapping: every byte has a printable stand-in character (GPT-2's table), so that
 * vocab entries are valid UTF-8 text. Encoding maps raw bytes to those characters; decoding maps
 * them back. */
#include "tokenizer/tokenizer_internal.h"

/* Bytes that are printable stay themselves; the other 68 are moved to U+0100.. in byte order. */
uint32_t byte_level_char(uint8_t b)
{
    if (b <= 32) return 256u + b;
    if (b >= 127 && b <= 160) return 256u + 33 + (b - 127u);
    if (b == 173) return 256u + 33 + 34;
    return b;
}

static int byte_of_level_char(uint32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int)cp;
    if (cp >= 256 && cp <= 288) return (int)(cp - 256);
    if (cp >= 289 && cp <= 322) return (int)(cp - 289 + 127);
    if (cp == 323) return 173;
    return -1;
}

int byte_level_encode(byte_buf *out, const uint8_t *bytes, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c[4];
        if (byte_buf_append(out, c, utf8_encode(byte_level_char(bytes[i]), c))) return -1;
    }
    return 0;
}

/* The reference's ByteLevel decoder maps a token's characters back to bytes when every character
 * has a byte; otherwise (e.g. "<｜User｜>") the token's own UTF-8 is used. */
int byte_level_decode(byte_buf *out, const char *s, size_t len)
{
    size_t start = out->len;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int n = utf8_decode((const uint8_t *)s + i, len - i, &cp);
        int b = n ? byte_of_level_char(cp) : -1;
        if (b < 0) { out->len = start; return byte_buf_append(out, s, len); }
        uint8_t byte = (uint8_t)b;
        if (byte_buf_append(out, &byte, 1)) return -1;
        i += (size_t)n;
    }
    return 0;
}
