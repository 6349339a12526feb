/* Hand-worked shard headers through safetensors_parse_header (in memory, no file-size check unless
 * file_size is set): what must parse, and what must be refused with the tensor named. */
#include <stdio.h>
#include <string.h>
#include "core/checkpoint_internal.h"

extern int test_failures_add(int n, const char *what);

typedef struct {
    const char *json;
    uint64_t file_size; /* 0: skip the end-of-file check */
    int ok;
    const char *want; /* substring of the error, or of nothing when ok */
} header_case;

static int parse(const header_case *c, safetensors_header *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    h->file_size = c->file_size;
    h->header_len = strlen(c->json);
    return safetensors_parse_header(c->json, strlen(c->json), "shard.safetensors", h, err, errlen);
}

int test_header_unit(void)
{
    static const header_case cases[] = {
        /* two tensors tiling 24+4 bytes, metadata ignored; file = 8 + N + 28 */
        {"{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[24,28]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 0, 1, ""},
        {"{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 0, 1, ""}, /* scalar: numel 1 */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 0, 0, "'a': data_offsets [0, 20] span 20 bytes, expected numel*4 = 24"},
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,1]}}", 0, 0, "'a': 'shape' must be a list of at most 4 dims"},
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[-4],\"data_offsets\":[0,4]}}", 0, 0, "'a': shape dim 0"},
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0.5,4]}}", 0, 0, "'a': 'data_offsets' must be"},
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[4,0]}}", 0, 0, "'a': 'data_offsets' must be"},
        {"{\"a\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[0,4]}}", 0, 0, "'a': dtype BOOL not supported"},
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[2,6]}}",
         0, 0, "'b': data_offsets [2, 6] overlap tensor 'a' [0, 4]"},
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[8,12]}}",
         0, 0, "'b': data_offsets begin 8 leaves a hole after a"},
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}}", 8 + 58 + 4, 1, ""},
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}}", 8 + 58 + 3, 0, "'a': data_offsets [0, 4] run past end of file"},
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}}", 8 + 58 + 5, 0, "bytes no tensor owns"},
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}", 0, 0, "malformed JSON"},
        {"[1,2]", 0, 0, "malformed JSON"},
        {"{\"a\":[1]}", 0, 0, "'a': header entry is not an object"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        safetensors_header h;
        char err[512] = "";
        int rc = parse(&cases[i], &h, err, sizeof err);
        int ok = cases[i].ok ? rc == 0 : (rc == -1 && strstr(err, cases[i].want) && strstr(err, "shard.safetensors"));
        if (ok && i == 0) /* hand-worked: a is F32 [2,3] at 0..24, b BF16 [2] at 24..28 */
            ok = h.n == 2 && !strcmp(h.entries[1].name, "a") && h.entries[1].dtype == DTYPE_F32 && h.entries[1].ndim == 2 &&
                 h.entries[1].shape[0] == 2 && h.entries[1].shape[1] == 3 && h.entries[1].end == 24 && h.entries[0].begin == 24 &&
                 h.entries[0].dtype == DTYPE_BF16;
        if (ok && i == 1) ok = h.n == 1 && h.entries[0].ndim == 0;
        if (!ok) fprintf(stderr, "FAIL header case %zu: rc %d err '%s' (wanted %s '%s')\n", i, rc, err, cases[i].ok ? "ok" : "error", cases[i].want);
        bad += !ok;
        if (rc == 0) safetensors_header_free(&h);
    }
    int dt_ok = dtype_size(DTYPE_F8_E4M3) == 1 && dtype_size(DTYPE_BF16) == 2 && dtype_size(DTYPE_F32) == 4 && dtype_size(DTYPE_OTHER) == 0 &&
                dtype_from_name("F8_E4M3") == DTYPE_F8_E4M3 && dtype_from_name("F8_E5M2") == DTYPE_OTHER && !strcmp(dtype_name(DTYPE_BF16), "BF16");
    bad += !dt_ok;
    printf("safetensors header: %zu hand-worked cases + dtype table, %d wrong\n", sizeof cases / sizeof cases[0], bad);
    return test_failures_add(bad, "safetensors header cases");
}
