/* Decoding arbitrary ids (any int32, out-of-range and negative included) with the embedded
 * model's tokenizer: whole-sequence decode and the streaming decoder must agree byte for byte (the
 * stream's contract), with and without special tokens. */
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

/* Mostly ids near the vocabulary (2 bytes each), with a marker byte for raw 32-bit ids. */
static size_t ids_from_bytes(const uint8_t *d, size_t n, int32_t *ids, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i + 1 < n && k < cap;) {
        if (d[i] == 0xFF && i + 4 < n) {
            uint32_t v = (uint32_t)d[i + 1] | (uint32_t)d[i + 2] << 8 | (uint32_t)d[i + 3] << 16 | (uint32_t)d[i + 4] << 24;
            ids[k++] = (int32_t)v;
            i += 5;
        } else {
            ids[k++] = (int32_t)(d[i] | d[i + 1] << 8) - 256;
            i += 2;
        }
    }
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int32_t ids[4096];
    size_t n = ids_from_bytes(data, size, ids, sizeof ids / sizeof ids[0]);
    for (int skip = 0; skip <= 1; skip++) {
        size_t len = 0;
        char *whole = tokenizer_decode(tok, ids, n, skip, &len);
        if (!whole) fuzz_fail("decode failed");
        tokenizer_stream *st = tokenizer_stream_create(tok, skip);
        char *cat = malloc(len + 1);
        size_t at = 0, piece = 0;
        for (size_t i = 0; i <= n; i++) {
            const char *p = i < n ? tokenizer_stream_push(st, ids[i], &piece) : tokenizer_stream_flush(st, &piece);
            if (!p && piece) fuzz_fail("stream returned no text but length %zu", piece);
            if (at + piece > len) fuzz_fail("the stream produced more bytes than decode (%zu > %zu)", at + piece, len);
            if (piece) memcpy(cat + at, p, piece);
            at += piece;
        }
        if (at != len || memcmp(cat, whole, len)) fuzz_fail("stream and decode differ (%zu vs %zu bytes, skip_special %d)", at, len, skip);
        free(cat);
        tokenizer_stream_free(st);
        free(whole);
    }
    return 0;
}
