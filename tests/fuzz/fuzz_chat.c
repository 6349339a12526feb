/* Chat messages JSON through R1's chat template: refused with one line naming what is wrong, or
 * rendered into text that starts with BOS and encodes. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json = fuzz_cstring(data, size), err[1024] = "";
    static const char bos[] = "<｜begin▁of▁sentence｜>";
    for (int gen = 0; gen <= 1; gen++) {
        char *text = tokenizer_render_chat(tok, json, gen, err, sizeof err);
        if (!text) { fuzz_check_error_line("tokenizer_render_chat", err); continue; }
        if (strncmp(text, bos, sizeof bos - 1)) fuzz_fail("rendered chat does not start with BOS");
        int32_t *ids = NULL;
        size_t n = 0;
        if (tokenizer_encode(tok, text, strlen(text), 0, &ids, &n)) fuzz_fail("encode of the rendering failed");
        free(ids);
        free(text);
    }
    free(json);
    return 0;
}
