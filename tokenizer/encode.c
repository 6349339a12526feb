/* encode: repair UTF-8, split out added tokens, pre-tokenize each text run, BPE each piece. */
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tokenizer_internal.h"

static int encode_text_run(tokenizer *tok, const char *text, uint32_t start, uint32_t end, id_buf *out)
{
    if (pretokenize(tok, text, start, end)) return -1;
    for (size_t i = 0; i < tok->pieces.len; i++) {
        span p = tok->pieces.data[i];
        if (bpe_encode_word(&tok->bpe, &tok->vocab, (const uint8_t *)text + p.start, p.end - p.start, out))
            return -1;
    }
    return 0;
}

int tokenizer_encode(tokenizer *tok, const char *text, size_t len, int add_bos, int32_t **ids, size_t *n_ids)
{
    *ids = NULL; *n_ids = 0;
    if (len >= UINT32_MAX) return -1; /* offsets are 32-bit */
    char *repaired = NULL;
    size_t repaired_len = 0;
    int rc = utf8_lossy(text ? text : "", len, &repaired, &repaired_len);
    if (rc < 0) return -1;
    if (rc == 1) { text = repaired; len = repaired_len; }
    id_buf out = {0};
    int fail = add_bos && tokenizer_adds_bos(tok) && id_buf_push(&out, tok->bos_id);
    if (!fail && len) fail = added_split(tok, text, (uint32_t)len);
    for (size_t i = 0; !fail && len && i < tok->segs.len; i++) {
        segment s = tok->segs.data[i];
        fail = s.id >= 0 ? id_buf_push(&out, s.id) : encode_text_run(tok, text, s.start, s.end, &out);
    }
    free(repaired);
    if (fail) { free(out.data); return -1; }
    if (!out.data && !(out.data = malloc(sizeof(int32_t)))) return -1; /* non-NULL even when empty */
    *ids = out.data;
    *n_ids = out.len;
    return 0;
}
