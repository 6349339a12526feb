/* Stop strings: the generated text with them cut out, delivered to on_text. pending holds text
 * not yet delivered: it may begin a stop string. Delivered text never contains the start of a
 * match (the longest suffix that is a prefix of a stop string is always held back), so a match
 * is searched for only in pending. */
#include <stdlib.h>
#include <string.h>
#include "engine/engine_internal.h"

static void deliver(text_relay *t, size_t n)
{
    if (n && t->p->on_text) t->p->on_text(t->p->ctx, t->pending, n);
    memmove(t->pending, t->pending + n, t->len - n);
    t->len -= n;
}

/* Bytes at the end of pending that could still grow into a stop string. */
static size_t held_back(const text_relay *t)
{
    size_t hold = 0;
    for (int i = 0; i < t->p->n_stop; i++) {
        const char *s = t->p->stop[i];
        size_t sl = strlen(s), l = sl - 1 < t->len ? sl - 1 : t->len;
        for (; l > hold; l--)
            if (!memcmp(t->pending + t->len - l, s, l)) { hold = l; break; }
    }
    return hold;
}

static int text_append(text_relay *t, const char *text, size_t n)
{
    if (t->len + n > t->cap) {
        size_t cap = (t->len + n) * 2 + 64;
        char *grown = realloc(t->pending, cap);
        if (!grown) return -1;
        t->pending = grown;
        t->cap = cap;
    }
    memcpy(t->pending + t->len, text, n);
    t->len += n;
    return 0;
}

/* New text: deliver up to the earliest stop string (and stop), else all but what may begin one. */
static void text_push(text_relay *t, const char *text, size_t n)
{
    if (t->hit || !n || text_append(t, text, n)) return;
    size_t first = t->len;
    for (int i = 0; i < t->p->n_stop; i++) {
        const char *at = memmem(t->pending, t->len, t->p->stop[i], strlen(t->p->stop[i]));
        if (at && (size_t)(at - t->pending) < first) first = (size_t)(at - t->pending);
    }
    if (first < t->len) { t->hit = 1; deliver(t, first); return; }
    deliver(t, t->len - held_back(t));
}

void text_relay_push_token(text_relay *t, int token)
{
    if (!t->stream || t->hit) return;
    size_t n;
    const char *s = tokenizer_stream_push(t->stream, token, &n);
    if (s) text_push(t, s, n);
}

/* What is left in the stream and held back is delivered when no stop string came. */
void text_relay_finish(text_relay *t)
{
    if (!t->stream) return;
    size_t n;
    const char *s = t->hit ? NULL : tokenizer_stream_flush(t->stream, &n);
    if (s) text_push(t, s, n);
    if (!t->hit) deliver(t, t->len);
    tokenizer_stream_free(t->stream);
    free(t->pending);
}

int text_relay_start(text_relay *t, dsspec *e, const dsspec_generate_params *p, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->p = p;
    for (int i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !p->stop[i][0]) { error_set(err, errlen, "stop string %d is empty", i + 1); return -1; }
    if (!p->on_text && p->n_stop == 0) return 0;
    if (!e->tok) { error_set(err, errlen, "stop strings and text output need the tokenizer (load_tokenizer)"); return -1; }
    if (!(t->stream = tokenizer_stream_create(e->tok, 1))) { error_set(err, errlen, "out of memory"); return -1; }
    return 0;
}

