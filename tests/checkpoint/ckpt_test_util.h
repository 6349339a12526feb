/* Test helpers for the checkpoint tests: temp dirs, file edits in C (JSON files and shard headers
 * are re-serialized with cJSON, data sections kept byte for byte), and an independent reference
 * layout read straight from the index and shard headers with cJSON (not through core/). */
#ifndef DSSPEC_CKPT_TEST_UTIL_H
#define DSSPEC_CKPT_TEST_UTIL_H

#include <cjson/cJSON.h>
#include <stdint.h>

int tu_make_tmpdir(char *buf, size_t n);          /* /tmp/dsspec-ckpt-XXXXXX */
int tu_remove_tree(const char *dir);
int tu_copy_dir(const char *src, const char *dst); /* regular files only, one level */
char *tu_read_file(const char *path, size_t *len);
int tu_write_file(const char *path, const void *data, size_t len);

typedef void (*tu_json_edit)(cJSON *root, void *arg);
int tu_edit_json_file(const char *path, tu_json_edit fn, void *arg);
/* Re-writes a shard's header after fn edits it (length prefix fixed up, padded to 8). */
int tu_edit_shard_header(const char *path, tu_json_edit fn, void *arg);

typedef struct {
    char *name, *file;
    char dtype[16];
    uint64_t begin, end; /* absolute file offsets */
} tu_tensor;

typedef struct {
    int n;
    tu_tensor *t;        /* sorted by name */
    uint64_t data_bytes; /* sum over shards of file size - 8 - header length */
    int n_shards;
} tu_layout;

int tu_layout_load(const char *dir, tu_layout *out);
void tu_layout_free(tu_layout *l);
const tu_tensor *tu_layout_find(const tu_layout *l, const char *name);

#endif
