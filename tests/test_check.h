/* What every test binary shares: CHECK counts a failure, says where and why, and lets the test go
 * on so one run reports every broken case (main returns test_failures != 0); and reading a whole
 * file. Header-only so each test binary has its own counter. */
#ifndef DSSPEC_TEST_CHECK_H
#define DSSPEC_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int test_failures __attribute__((unused));

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            test_failures++;                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

/* The whole file, NUL-terminated (length in *len if len != NULL); NULL when unreadable. */
static inline char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = 0; if (len) *len = (size_t)n; }
    return buf;
}

#endif
