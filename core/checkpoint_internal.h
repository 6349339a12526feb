/* Private to core/checkpoint*.c, core/config.c, core/safetensors.c, core/tensor_table.c: the
 * pieces checkpoint_open is assembled from. Nothing outside core/ includes this (the header unit
 * test excepted). */
#ifndef DSSPEC_CHECKPOINT_INTERNAL_H
#define DSSPEC_CHECKPOINT_INTERNAL_H

#include "core/checkpoint.h"
#include "core/text_file.h"

/* config.json -> cfg, every field validated; 0 or -1 with err naming the file and key. */
int config_load(const char *path, model_config *cfg, char *err, size_t errlen);
/* generation_config.json when it exists: 1 loaded, 0 absent, -1 malformed (err filled).
 * bos/eos found there override the config.json ones. */
int generation_config_load(const char *path, checkpoint *ck, char *err, size_t errlen);

dtype_t dtype_from_name(const char *s); /* safetensors spelling ("F8_E4M3", "BF16", ...) */

/* One tensor entry of a shard header, offsets relative to the data section. */
typedef struct {
    char *name;
    dtype_t dtype;
    int ndim;
    int64_t shape[4];
    uint64_t begin, end;
} safetensors_entry;

typedef struct {
    uint64_t file_size, header_len;
    int n;
    safetensors_entry *entries;
} safetensors_header;

/* Reads and checks one shard header from fd: header length inside the file, JSON well formed,
 * known dtypes, shapes, data_offsets in range, non-overlapping, end-begin == numel*dtype size,
 * 8 + N + max(end) == file size. 0 or -1 with err naming path (and the tensor). */
int safetensors_read_header(int fd, const char *path, safetensors_header *h, char *err, size_t errlen);
/* Same checks on a header already in memory (json of json_len bytes, not NUL-terminated). */
int safetensors_parse_header(const char *json, size_t json_len, const char *path, safetensors_header *h,
                             char *err, size_t errlen);
void safetensors_header_free(safetensors_header *h);

/* The name -> tensor index over ck->tensors (core/checkpoint_index.c). build: 0, or -1 with err
 * when a name appears in two shard headers. find: the tensor's index in ck->tensors, or -1. */
int checkpoint_index_build(checkpoint *ck, char *err, size_t errlen);
int32_t checkpoint_index_find(const checkpoint *ck, const char *name);
void checkpoint_index_free(checkpoint_index *ix);

#endif
