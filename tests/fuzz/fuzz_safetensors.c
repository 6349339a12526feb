/* The safetensors shard header. The input is the header's JSON; it is parsed alone (no file size
 * known) and then as a whole shard: [u64 LE length][JSON][data], the data as long as the parsed
 * offsets ask (capped), and once one byte short (a truncated shard must be refused). Accepted
 * headers must describe tensors that fit their file exactly. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/checkpoint_internal.h"
#include "tests/fuzz/fuzz_util.h"

enum { MAX_DATA = 1 << 20 };

int LLVMFuzzerInitialize(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }

static void check_header(const safetensors_header *h)
{
    for (int i = 0; i < h->n; i++) {
        const safetensors_entry *e = &h->entries[i];
        uint64_t numel = 1;
        for (int d = 0; d < e->ndim; d++) numel *= (uint64_t)e->shape[d];
        if (e->end < e->begin || e->end - e->begin != numel * dtype_size(e->dtype))
            fuzz_fail("tensor '%s' accepted with %llu bytes for %llu elements", e->name, (unsigned long long)(e->end - e->begin),
                      (unsigned long long)numel);
        if (h->file_size && 8 + h->header_len + e->end > h->file_size) fuzz_fail("tensor '%s' accepted past end of file", e->name);
    }
}

/* Parses the bytes as a shard file; 0 accepted, -1 refused (error line checked). */
static int parse_shard(const uint8_t *file, size_t n, safetensors_header *h)
{
    const char *path = fuzz_memfile(file, n);
    char err[1024] = "";
    FILE *f = fopen(path, "rb");
    if (!f) fuzz_fail("cannot reopen the memfd");
    int rc = safetensors_read_header(fileno(f), path, h, err, sizeof err);
    fclose(f);
    if (rc) fuzz_check_error_line("safetensors_read_header", err);
    else check_header(h);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    safetensors_header h;
    char err[1024] = "";
    uint64_t data_bytes = 0;
    if (safetensors_parse_header((const char *)data, size, "fuzz", &h, err, sizeof err) == 0) {
        check_header(&h);
        for (int i = 0; i < h.n; i++)
            if (h.entries[i].end > data_bytes) data_bytes = h.entries[i].end;
        safetensors_header_free(&h);
    } else {
        fuzz_check_error_line("safetensors_parse_header", err);
    }
    if (data_bytes > MAX_DATA) return 0;
    size_t n = 8 + size + (size_t)data_bytes;
    uint8_t *file = calloc(1, n);
    if (!file) return 0;
    for (int i = 0; i < 8; i++) file[i] = (uint8_t)((uint64_t)size >> (8 * i));
    memcpy(file + 8, data, size);
    if (parse_shard(file, n, &h) == 0) safetensors_header_free(&h);
    if (data_bytes > 0 && parse_shard(file, n - 1, &h) == 0) fuzz_fail("a shard one byte short of its data was accepted");
    free(file);
    return 0;
}
