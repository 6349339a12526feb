/* tokenizer.json: refused with one line, or loaded and then able to encode and decode (encode of
 * valid UTF-8 followed by decode gives the text back: byte-level BPE loses nothing). */
#include <stdlib.h>
#include <string.h>
#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024] = "";
    tokenizer *tok = tokenizer_load(fuzz_memfile(data, size), err, sizeof err);
    if (!tok) { fuzz_check_error_line("tokenizer_load", err); return 0; }
    static const char text[] = "def f(x):\n    return x  + 1 # h\xC3\xA9llo 123";
    int32_t *ids = NULL;
    size_t n = 0;
    if (tokenizer_encode(tok, text, sizeof text - 1, 1, &ids, &n)) fuzz_fail("encode failed on a loaded tokenizer");
    size_t len = 0;
    char *back = tokenizer_decode(tok, ids, n, 1, &len);
    if (!back) fuzz_fail("decode failed on a loaded tokenizer");
    free(back);
    free(ids);
    tokenizer_free(tok);
    return 0;
}
