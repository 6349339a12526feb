/* Encoding arbitrary bytes with the embedded model's tokenizer (R1's pre-tokenizer and added
 * tokens). Every id is inside the vocabulary; with BOS the first id is BOS; and for valid UTF-8
 * decode(encode(text)) == text (byte-level BPE, no normalizer: nothing may be lost or added). */
#include <stdlib.h>
#include <string.h>
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/fuzz_tokenizer.h"

static tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    tok = fuzz_embedded_tokenizer();
    return 0;
}

/* Well-formed UTF-8 as RFC 3629 defines it (no overlongs, surrogates or code points > U+10FFFF). */
static int valid_utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n || (k == 2 && c < 0xC2)) return 0;
        uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1F : k == 3 ? c & 0x0F : c & 0x07;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
        i += k;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int bos = 0; bos <= 1; bos++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tokenizer_encode(tok, (const char *)data, size, bos, &ids, &n)) fuzz_fail("encode failed");
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || (size_t)ids[i] >= tokenizer_vocab_size(tok)) fuzz_fail("id %d outside the vocabulary", ids[i]);
        if (bos && (n == 0 || ids[0] != tokenizer_bos_id(tok))) fuzz_fail("encoding with BOS does not start with it");
        size_t len = 0;
        char *back = tokenizer_decode(tok, ids + bos, n - (size_t)bos, 0, &len);
        if (!back) fuzz_fail("decode failed");
        if (valid_utf8(data, size) && (len != size || memcmp(back, data, size)))
            fuzz_fail("decode(encode(text)) differs from the text (%zu bytes vs %zu)", len, size);
        free(back);
        free(ids);
    }
    return 0;
}
