/* Growable arrays shared by every tokenizer file. They sit below everything else in tokenizer/
 * and call nothing in it, so any file may use them without tying files into a circle. */
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tokenizer_internal.h"

int buf_grow_slow(void **data, size_t *cap, size_t need, size_t elem)
{
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*data, cap2 * elem);
    if (!p) return -1;
    *data = p; *cap = cap2;
    return 0;
}

/* Keeps a NUL after the bytes so that the buffer can be handed out as a C string. */
int byte_buf_append(byte_buf *b, const void *src, size_t n)
{
    if (buf_grow((void **)&b->data, &b->cap, b->len + n + 1, 1)) return -1;
    if (n) memcpy(b->data + b->len, src, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

int id_buf_push(id_buf *b, int32_t id)
{
    if (buf_grow((void **)&b->data, &b->cap, b->len + 1, sizeof *b->data)) return -1;
    b->data[b->len++] = id;
    return 0;
}

int id_buf_append(id_buf *b, const int32_t *src, size_t n)
{
    if (buf_grow((void **)&b->data, &b->cap, b->len + n, sizeof *b->data)) return -1;
    if (n) memcpy(b->data + b->len, src, n * sizeof *src);
    b->len += n;
    return 0;
}

int span_buf_push(span_buf *b, uint32_t start, uint32_t end)
{
    if (buf_grow((void **)&b->data, &b->cap, b->len + 1, sizeof *b->data)) return -1;
    b->data[b->len++] = (span){start, end};
    return 0;
}

int seg_buf_push(seg_buf *b, int32_t id, uint32_t start, uint32_t end)
{
    if (buf_grow((void **)&b->data, &b->cap, b->len + 1, sizeof *b->data)) return -1;
    b->data[b->len++] = (segment){id, start, end};
    return 0;
}
