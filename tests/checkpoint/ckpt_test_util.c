#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "tests/test_check.h"
#include "tests/checkpoint/ckpt_test_util.h"

int tu_make_tmpdir(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/dsspec-ckpt-XXXXXX");
    return mkdtemp(buf) ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

int tu_remove_tree(const char *dir) { return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

char *tu_read_file(const char *path, size_t *len) { return test_read_file(path, len); }

int tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) || w != len) ? -1 : 0;
}

int tu_copy_dir(const char *src, const char *dst)
{
    DIR *d = opendir(src);
    if (!d) return -1;
    struct dirent *e;
    int rc = 0;
    char a[4096], b[4096];
    while (!rc && (e = readdir(d))) {
        snprintf(a, sizeof a, "%s/%s", src, e->d_name);
        struct stat st;
        if (stat(a, &st) || !S_ISREG(st.st_mode)) continue;
        snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
        size_t n;
        char *buf = tu_read_file(a, &n);
        rc = buf ? tu_write_file(b, buf, n) : -1;
        free(buf);
    }
    closedir(d);
    return rc;
}

int tu_edit_json_file(const char *path, tu_json_edit fn, void *arg)
{
    char *text = tu_read_file(path, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!root) return -1;
    fn(root, arg);
    char *out = cJSON_Print(root);
    cJSON_Delete(root);
    int rc = out ? tu_write_file(path, out, strlen(out)) : -1;
    free(out);
    return rc;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

int tu_edit_shard_header(const char *path, tu_json_edit fn, void *arg)
{
    size_t len;
    char *buf = tu_read_file(path, &len);
    if (!buf || len < 8) { free(buf); return -1; }
    uint64_t n = le64((unsigned char *)buf);
    cJSON *root = n <= len - 8 ? cJSON_ParseWithLength(buf + 8, n) : NULL;
    if (!root) { free(buf); return -1; }
    fn(root, arg);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    size_t hl = strlen(json), padded = (hl + 7) / 8 * 8, data = len - 8 - n;
    char *out = malloc(8 + padded + data);
    for (int i = 0; i < 8; i++) out[i] = (char)((uint64_t)padded >> (8 * i));
    memcpy(out + 8, json, hl);
    memset(out + 8 + hl, ' ', padded - hl);
    memcpy(out + 8 + padded, buf + 8 + n, data);
    int rc = tu_write_file(path, out, 8 + padded + data);
    free(json);
    free(out);
    free(buf);
    return rc;
}

static int by_name(const void *a, const void *b) { return strcmp(((const tu_tensor *)a)->name, ((const tu_tensor *)b)->name); }

static int load_shard(const char *dir, const char *file, tu_layout *l, int *cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t len;
    char *buf = tu_read_file(path, &len);
    if (!buf || len < 8) { free(buf); return -1; }
    uint64_t n = le64((unsigned char *)buf);
    cJSON *root = n <= len - 8 ? cJSON_ParseWithLength(buf + 8, n) : NULL;
    free(buf);
    if (!root) return -1;
    l->data_bytes += len - 8 - n;
    for (cJSON *e = root->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) continue;
        if (l->n == *cap) { *cap = *cap ? 2 * *cap : 1024; l->t = realloc(l->t, (size_t)*cap * sizeof *l->t); }
        tu_tensor *t = &l->t[l->n++];
        t->name = strdup(e->string);
        t->file = strdup(file);
        snprintf(t->dtype, sizeof t->dtype, "%s", cJSON_GetObjectItem(e, "dtype")->valuestring);
        cJSON *o = cJSON_GetObjectItem(e, "data_offsets");
        t->begin = 8 + n + (uint64_t)cJSON_GetArrayItem(o, 0)->valuedouble;
        t->end = 8 + n + (uint64_t)cJSON_GetArrayItem(o, 1)->valuedouble;
    }
    cJSON_Delete(root);
    return 0;
}

int tu_layout_load(const char *dir, tu_layout *l)
{
    memset(l, 0, sizeof *l);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    char *text = tu_read_file(path, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!root) return -1;
    cJSON *wm = cJSON_GetObjectItem(root, "weight_map");
    /* distinct shard files, each loaded once */
    int nf = 0, cap = 0, rc = 0;
    const char **files = calloc((size_t)cJSON_GetArraySize(wm) + 1, sizeof *files);
    for (cJSON *e = wm ? wm->child : NULL; e && !rc; e = e->next) {
        int seen = 0;
        for (int i = 0; i < nf && !seen; i++) seen = !strcmp(files[i], e->valuestring);
        if (seen) continue;
        files[nf++] = e->valuestring;
        rc = load_shard(dir, e->valuestring, l, &cap);
    }
    l->n_shards = nf;
    free(files);
    cJSON_Delete(root);
    if (!rc) qsort(l->t, (size_t)l->n, sizeof *l->t, by_name);
    return rc;
}

void tu_layout_free(tu_layout *l)
{
    for (int i = 0; i < l->n; i++) { free(l->t[i].name); free(l->t[i].file); }
    free(l->t);
    memset(l, 0, sizeof *l);
}

const tu_tensor *tu_layout_find(const tu_layout *l, const char *name)
{
    tu_tensor key = {.name = (char *)name};
    return bsearch(&key, l->t, (size_t)l->n, sizeof *l->t, by_name);
}
