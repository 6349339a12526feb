/* One safetensors shard header: u64 LE N | N bytes of JSON | data. The header is the authority for
 * dtype, shape and offsets (the index only maps names to files), so every entry is checked here
 * against the file it came from. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/checkpoint_internal.h"

/* A header this large would be >1M tensors in one shard: refuse before allocating. */
#define SAFETENSORS_MAX_HEADER (1ull << 30)

static const char *const dtype_names[] = {"F8_E4M3", "BF16", "F32", "F16", "I64", "OTHER"};

const char *dtype_name(dtype_t t) { return (unsigned)t <= DTYPE_OTHER ? dtype_names[t] : "OTHER"; }

size_t dtype_size(dtype_t t)
{
    switch (t) {
    case DTYPE_F8_E4M3: return 1;
    case DTYPE_BF16: case DTYPE_F16: return 2;
    case DTYPE_F32: return 4;
    case DTYPE_I64: return 8;
    default: return 0;
    }
}

dtype_t dtype_from_name(const char *s)
{
    for (int t = 0; t < DTYPE_OTHER; t++)
        if (!strcmp(s, dtype_names[t])) return (dtype_t)t;
    return DTYPE_OTHER;
}

void safetensors_header_free(safetensors_header *h)
{
    for (int i = 0; i < h->n; i++) free(h->entries[i].name);
    free(h->entries);
    h->entries = NULL;
    h->n = 0;
}

/* A JSON number that is an exact non-negative integer below 2^53 (cJSON holds doubles). */
static int json_u64(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0) || d != floor(d) || d >= 9007199254740992.0) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int parse_entry(const cJSON *item, const char *path, safetensors_entry *e, char *err, size_t errlen)
{
    const char *name = item->string;
    if (!cJSON_IsObject(item)) { error_set(err, errlen, "%s: tensor '%s': header entry is not an object", path, name); return -1; }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dt)) { error_set(err, errlen, "%s: tensor '%s': missing string 'dtype'", path, name); return -1; }
    e->dtype = dtype_from_name(dt->valuestring);
    if (e->dtype == DTYPE_OTHER) {
        error_set(err, errlen, "%s: tensor '%s': dtype %s not supported (expected F8_E4M3, BF16, F32, F16 or I64)", path, name, dt->valuestring);
        return -1;
    }
    int nd = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    if (nd < 0 || nd > 4) { error_set(err, errlen, "%s: tensor '%s': 'shape' must be a list of at most 4 dims", path, name); return -1; }
    e->ndim = nd;
    uint64_t numel = 1;
    for (int d = 0; d < nd; d++) {
        uint64_t dim;
        if (json_u64(cJSON_GetArrayItem(shape, d), &dim) || __builtin_mul_overflow(numel, dim, &numel)) {
            error_set(err, errlen, "%s: tensor '%s': shape dim %d is not a valid size", path, name, d);
            return -1;
        }
        e->shape[d] = (int64_t)dim;
    }
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || json_u64(cJSON_GetArrayItem(offs, 0), &e->begin) ||
        json_u64(cJSON_GetArrayItem(offs, 1), &e->end) || e->end < e->begin) {
        error_set(err, errlen, "%s: tensor '%s': 'data_offsets' must be [begin, end] with 0 <= begin <= end", path, name);
        return -1;
    }
    uint64_t want;
    if (__builtin_mul_overflow(numel, (uint64_t)dtype_size(e->dtype), &want) || e->end - e->begin != want) {
        error_set(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] span %llu bytes, expected numel*%zu = %llu", path, name,
                  (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)(e->end - e->begin),
                  dtype_size(e->dtype), (unsigned long long)want);
        return -1;
    }
    e->name = strdup(name);
    return e->name ? 0 : -1;
}

static int entry_begin_cmp(const void *a, const void *b)
{
    const safetensors_entry *x = *(const safetensors_entry *const *)a, *y = *(const safetensors_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* Data ranges must not overlap, and the data section must end exactly at end of file:
 * a shorter file is truncated, a longer one has bytes no tensor owns. */
static int check_layout(const char *path, safetensors_header *h, char *err, size_t errlen)
{
    const safetensors_entry **by = malloc((size_t)(h->n ? h->n : 1) * sizeof *by);
    if (!by) { error_set(err, errlen, "%s: out of memory", path); return -1; }
    for (int i = 0; i < h->n; i++) by[i] = &h->entries[i];
    qsort(by, (size_t)h->n, sizeof *by, entry_begin_cmp);
    uint64_t max_end = 0;
    int rc = 0;
    /* Past-end first: a wild offset would otherwise be reported as the hole it leaves. */
    uint64_t data_bytes = h->file_size >= 8 + h->header_len ? h->file_size - 8 - h->header_len : 0;
    for (int i = h->n - 1; i >= 0 && h->file_size && !rc; i--)
        if (by[i]->end > data_bytes) {
            error_set(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] run past end of file (data section has %llu bytes; truncated shard?)",
                      path, by[i]->name, (unsigned long long)by[i]->begin, (unsigned long long)by[i]->end,
                      (unsigned long long)data_bytes);
            rc = -1;
        }
    for (int i = 0; i < h->n && !rc; i++) {
        if (i > 0 && by[i]->begin < by[i - 1]->end) {
            error_set(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]", path, by[i]->name,
                      (unsigned long long)by[i]->begin, (unsigned long long)by[i]->end, by[i - 1]->name,
                      (unsigned long long)by[i - 1]->begin, (unsigned long long)by[i - 1]->end);
            rc = -1;
        }
        /* The format has no holes: a gap means a lost tensor or a corrupted offset. */
        if (!rc && by[i]->begin != (i ? by[i - 1]->end : 0)) {
            error_set(err, errlen, "%s: tensor '%s': data_offsets begin %llu leaves a hole after %s (ends at %llu); safetensors data must be contiguous",
                      path, by[i]->name, (unsigned long long)by[i]->begin, i ? by[i - 1]->name : "the header",
                      (unsigned long long)(i ? by[i - 1]->end : 0));
            rc = -1;
        }
        if (by[i]->end > max_end) max_end = by[i]->end;
    }
    if (!rc && h->file_size != 0 && 8 + h->header_len + max_end != h->file_size) {
        const safetensors_entry *last = h->n ? by[h->n - 1] : NULL;
        for (int i = 0; i < h->n; i++)
            if (by[i]->end == max_end) last = by[i];
        error_set(err, errlen, "%s: tensor '%s': 8 + header %llu + data end %llu = %llu, but the file has %llu bytes (%s)", path,
                  last ? last->name : "(none)", (unsigned long long)h->header_len, (unsigned long long)max_end,
                  (unsigned long long)(8 + h->header_len + max_end), (unsigned long long)h->file_size,
                  8 + h->header_len + max_end > h->file_size ? "truncated shard or data_offsets past end of file" : "bytes no tensor owns");
        rc = -1;
    }
    free(by);
    return rc;
}

int safetensors_parse_header(const char *json, size_t json_len, const char *path, safetensors_header *h, char *err, size_t errlen)
{
    h->n = 0;
    h->entries = NULL;
    cJSON *root = cJSON_ParseWithLength(json, json_len);
    if (!cJSON_IsObject(root)) {
        error_set(err, errlen, "%s: malformed JSON in the safetensors header (%llu bytes at offset 8)", path, (unsigned long long)json_len);
        cJSON_Delete(root);
        return -1;
    }
    int cap = cJSON_GetArraySize(root);
    h->entries = calloc((size_t)(cap ? cap : 1), sizeof *h->entries);
    if (!h->entries) { cJSON_Delete(root); error_set(err, errlen, "%s: out of memory", path); return -1; }
    int rc = 0;
    for (const cJSON *it = root->child; it && !rc; it = it->next) {
        if (!strcmp(it->string, "__metadata__")) continue; /* free-form strings, not a tensor */
        rc = parse_entry(it, path, &h->entries[h->n], err, errlen);
        if (!rc) h->n++;
    }
    cJSON_Delete(root);
    if (!rc) rc = check_layout(path, h, err, errlen);
    if (rc) safetensors_header_free(h);
    return rc;
}

static int pread_full(int fd, void *dst, size_t n, uint64_t off)
{
    char *p = dst;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

int safetensors_read_header(int fd, const char *path, safetensors_header *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    struct stat st;
    if (fstat(fd, &st) != 0) { error_set(err, errlen, "%s: stat failed: %s", path, strerror(errno)); return -1; }
    h->file_size = (uint64_t)st.st_size;
    unsigned char lenbuf[8];
    if (h->file_size < 8 || pread_full(fd, lenbuf, 8, 0)) {
        error_set(err, errlen, "%s: file has %llu bytes, too short for the 8-byte header length", path, (unsigned long long)h->file_size);
        return -1;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | lenbuf[i]; /* little-endian whatever the host */
    h->header_len = n;
    if (n > h->file_size - 8 || n > SAFETENSORS_MAX_HEADER) {
        error_set(err, errlen, "%s: header length %llu runs past end of file (%llu bytes)", path, (unsigned long long)n,
                  (unsigned long long)h->file_size);
        return -1;
    }
    char *json = malloc(n ? n : 1);
    if (!json) { error_set(err, errlen, "%s: out of memory for a %llu-byte header", path, (unsigned long long)n); return -1; }
    if (pread_full(fd, json, n, 8)) {
        error_set(err, errlen, "%s: read of the %llu-byte header failed", path, (unsigned long long)n);
        free(json);
        return -1;
    }
    uint64_t size = h->file_size, hl = h->header_len;
    int rc = safetensors_parse_header(json, n, path, h, err, errlen);
    h->file_size = size;
    h->header_len = hl;
    free(json);
    return rc;
}
