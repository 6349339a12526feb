#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/text_file.h"

void error_set(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

/* Reads in growing chunks rather than trusting st_size, so pipes, stdin and files that change
 * while being read all work the same way. */
char *text_file_read(const char *path, size_t *len, char *err, size_t errlen)
{
    int is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) { error_set(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if (n < cap) continue;
        char *grown = cap > ((size_t)1 << 40) ? NULL : realloc(buf, 2 * cap + 1);
        if (!grown) { free(buf); buf = NULL; break; }
        buf = grown;
        cap *= 2;
    }
    int bad = ferror(f);
    int saved = errno;
    if (!is_stdin) fclose(f);
    if (!buf) { error_set(err, errlen, "%s: out of memory reading it", path); return NULL; }
    if (bad) {
        error_set(err, errlen, "%s: cannot read: %s", path, strerror(saved ? saved : EIO));
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}
