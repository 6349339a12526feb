/* decode and streaming decode. Each id's bytes were precomputed at load (ByteLevel decoder);
 * the byte stream is turned into text with the same lossy UTF-8 rule as the reference. */
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tokenizer_internal.h"

static int token_visible(const tokenizer *tok, int32_t id, int skip_special)
{
    if (id < 0 || (size_t)id >= tok->n_ids || !tok->is_known[id]) return 0; /* unknown ids vanish */
    return !(skip_special && tok->is_special[id]);
}

char *tokenizer_decode(const tokenizer *tok, const int32_t *ids, size_t n_ids, int skip_special, size_t *len)
{
    byte_buf raw = {0}, text = {0};
    int fail = byte_buf_append(&raw, "", 0);
    for (size_t i = 0; !fail && i < n_ids; i++)
        if (token_visible(tok, ids[i], skip_special))
            fail = byte_buf_append(&raw, tok->strings.data + tok->bytes_off[ids[i]], tok->bytes_len[ids[i]]);
    if (!fail) fail = byte_buf_append(&text, "", 0) || utf8_lossy_append(&text, (const uint8_t *)raw.data, raw.len, NULL, 1);
    free(raw.data);
    if (fail) { free(text.data); return NULL; }
    if (len) *len = text.len;
    return text.data;
}

struct tokenizer_stream {
    const tokenizer *tok;
    int skip_special;
    byte_buf pending; /* bytes of an incomplete UTF-8 character */
    byte_buf ready;   /* text handed out by the last call */
};

tokenizer_stream *tokenizer_stream_create(const tokenizer *tok, int skip_special)
{
    tokenizer_stream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->tok = tok;
    st->skip_special = skip_special;
    return st;
}

static const char *stream_emit(tokenizer_stream *st, int final, size_t *len)
{
    size_t consumed = 0;
    st->ready.len = 0;
    if (byte_buf_append(&st->ready, "", 0) ||
        utf8_lossy_append(&st->ready, (const uint8_t *)st->pending.data, st->pending.len, &consumed, final))
        return NULL;
    memmove(st->pending.data, st->pending.data + consumed, st->pending.len - consumed);
    st->pending.len -= consumed;
    if (len) *len = st->ready.len;
    return st->ready.data;
}

const char *tokenizer_stream_push(tokenizer_stream *st, int32_t id, size_t *len)
{
    const tokenizer *tok = st->tok;
    if (token_visible(tok, id, st->skip_special) &&
        byte_buf_append(&st->pending, tok->strings.data + tok->bytes_off[id], tok->bytes_len[id]))
        return NULL;
    if (!st->pending.data && byte_buf_append(&st->pending, "", 0)) return NULL;
    return stream_emit(st, 0, len);
}

const char *tokenizer_stream_flush(tokenizer_stream *st, size_t *len)
{
    if (!st->pending.data && byte_buf_append(&st->pending, "", 0)) return NULL;
    return stream_emit(st, 1, len);
}

void tokenizer_stream_free(tokenizer_stream *st)
{
    if (!st) return;
    free(st->pending.data);
    free(st->ready.data);
    free(st);
}
