/* checkpoint_open: config, index, every shard header, the cross-checks between them, the tensors
 * the forward pass needs, and the routed-expert extents. Lookup by name and pread-based reads. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/checkpoint_internal.h"
#include "core/tensor_table.h"

#define INDEX_FILE "model.safetensors.index.json"

const expert_extent *checkpoint_expert(const checkpoint *ck, int layer, int expert)
{
    if (!ck->experts || layer < 0 || layer >= config_total_layers(&ck->cfg) || expert < 0 || expert >= ck->cfg.n_routed_experts)
        return NULL;
    const expert_extent *x = &ck->experts[(size_t)layer * (size_t)ck->cfg.n_routed_experts + (size_t)expert];
    return x->npieces ? x : NULL;
}

/* ---- index file and shards ---- */

static char *path_join(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int shard_of_file(const checkpoint *ck, const char *file)
{
    int lo = 0, hi = ck->n_shards - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(file, ck->shards[mid].file);
        if (!c) return mid;
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return -1;
}

/* weight_map values must be plain file names inside the snapshot directory. */
static int check_weight_map(const char *ipath, const cJSON *wm, char *err, size_t errlen)
{
    if (!cJSON_IsObject(wm) || !wm->child) {
        error_set(err, errlen, "%s: key 'weight_map' missing or empty (expected tensor name -> shard file)", ipath);
        return -1;
    }
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !e->valuestring[0] || strchr(e->valuestring, '/') || !strcmp(e->valuestring, "..")) {
            error_set(err, errlen, "%s: tensor '%s': weight_map value must be a shard file name in the same directory", ipath, e->string);
            return -1;
        }
    }
    return 0;
}

/* The distinct shard files of weight_map, sorted (model-00001-of-... order). */
static int collect_shards(checkpoint *ck, const char *ipath, const cJSON *wm, char *err, size_t errlen)
{
    int n = cJSON_GetArraySize(wm), k = 0;
    char **names = malloc((size_t)n * sizeof *names);
    if (!names) { error_set(err, errlen, "%s: out of memory", ipath); return -1; }
    for (const cJSON *e = wm->child; e; e = e->next) names[k++] = e->valuestring;
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    int u = 0;
    for (int i = 0; i < n; i++)
        if (!u || strcmp(names[i], names[u - 1])) names[u++] = names[i];
    ck->shards = calloc((size_t)u, sizeof *ck->shards);
    if (!ck->shards) { free(names); error_set(err, errlen, "%s: out of memory", ipath); return -1; }
    ck->n_shards = u;
    for (int i = 0; i < u; i++) {
        ck->shards[i].fd = -1;
        ck->shards[i].file = strdup(names[i]);
        ck->shards[i].path = path_join(ck->dir, names[i]);
        if (!ck->shards[i].file || !ck->shards[i].path) { free(names); error_set(err, errlen, "%s: out of memory", ipath); return -1; }
    }
    free(names);
    return 0;
}

static const char *first_tensor_in(const cJSON *wm, const char *file)
{
    for (const cJSON *e = wm->child; e; e = e->next)
        if (!strcmp(e->valuestring, file)) return e->string;
    return "?";
}

/* Opens one shard and appends its header's tensors to ck->tensors (capacity grows as needed). */
static int load_shard(checkpoint *ck, int s, const cJSON *wm, int *cap, char *err, size_t errlen)
{
    shard_info *sh = &ck->shards[s];
    sh->fd = open(sh->path, O_RDONLY | O_CLOEXEC);
    if (sh->fd < 0) {
        error_set(err, errlen, "%s: cannot open shard named by %s for tensor '%s': %s", sh->path, INDEX_FILE,
                  first_tensor_in(wm, sh->file), strerror(errno));
        return -1;
    }
    /* This descriptor reads headers, resident tensors in large chunks and single embedding rows:
     * none gains from readahead, and a row read would otherwise pull in read_ahead_kb (often MBs)
     * of neighbours into the page cache. Advice only. */
    (void)posix_fadvise(sh->fd, 0, 0, POSIX_FADV_RANDOM);
    safetensors_header h;
    if (safetensors_read_header(sh->fd, sh->path, &h, err, errlen)) return -1;
    sh->size = h.file_size;
    sh->header_len = h.header_len;
    if (ck->n_tensors + h.n > *cap) {
        int ncap = (*cap ? *cap * 2 : 1024);
        while (ncap < ck->n_tensors + h.n) ncap *= 2;
        tensor_info *nt = realloc(ck->tensors, (size_t)ncap * sizeof *nt);
        if (!nt) { safetensors_header_free(&h); error_set(err, errlen, "%s: out of memory", sh->path); return -1; }
        ck->tensors = nt;
        *cap = ncap;
    }
    for (int i = 0; i < h.n; i++) {
        safetensors_entry *e = &h.entries[i];
        tensor_info *t = &ck->tensors[ck->n_tensors++];
        memset(t, 0, sizeof *t);
        t->name = e->name; /* ownership moves to the checkpoint */
        e->name = NULL;
        t->shard = s;
        t->offset = 8 + h.header_len + e->begin;
        t->nbytes = e->end - e->begin;
        t->dtype = e->dtype;
        t->ndim = e->ndim;
        memcpy(t->shape, e->shape, sizeof t->shape);
    }
    safetensors_header_free(&h);
    return 0;
}

/* Every index name is in the header of the shard the index names, and every header tensor is in
 * the index: the index decides which file the io reader opens, the header where it reads. */
static int cross_check_index(checkpoint *ck, const char *ipath, const cJSON *wm, char *err, size_t errlen)
{
    unsigned char *seen = calloc((size_t)ck->n_tensors + 1, 1);
    if (!seen) { error_set(err, errlen, "%s: out of memory", ipath); return -1; }
    int rc = 0;
    for (const cJSON *e = wm->child; e && !rc; e = e->next) {
        int s = shard_of_file(ck, e->valuestring);
        int32_t t = checkpoint_index_find(ck, e->string);
        if (t < 0) {
            error_set(err, errlen, "%s: tensor '%s' is named by %s but absent from this shard's header", ck->shards[s].path, e->string, INDEX_FILE);
            rc = -1;
        } else if (ck->tensors[t].shard != s) {
            error_set(err, errlen, "%s: tensor '%s' mapped to %s by the index, but its header entry is in %s", ipath, e->string,
                      e->valuestring, ck->shards[ck->tensors[t].shard].file);
            rc = -1;
        } else if (seen[t]++) {
            error_set(err, errlen, "%s: tensor '%s' appears twice in weight_map", ipath, e->string);
            rc = -1;
        }
    }
    for (int t = 0; t < ck->n_tensors && !rc; t++)
        if (!seen[t]) {
            error_set(err, errlen, "%s: tensor '%s' is in this shard's header but missing from %s", ck->shards[ck->tensors[t].shard].path,
                      ck->tensors[t].name, INDEX_FILE);
            rc = -1;
        }
    free(seen);
    return rc;
}

static int load_index_and_shards(checkpoint *ck, char *err, size_t errlen)
{
    char *ipath = path_join(ck->dir, INDEX_FILE);
    char *text = ipath ? text_file_read(ipath, NULL, err, errlen) : NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    int rc = -1;
    const cJSON *wm = NULL;
    if (!ipath) error_set(err, errlen, "%s: out of memory", ck->dir);
    else if (!text) { /* err already names the file */ }
    else if (!cJSON_IsObject(root)) error_set(err, errlen, "%s: malformed JSON", ipath);
    else if (!check_weight_map(ipath, wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map"), err, errlen) &&
             !collect_shards(ck, ipath, wm, err, errlen)) {
        int cap = 0;
        rc = 0;
        for (int s = 0; s < ck->n_shards && !rc; s++) rc = load_shard(ck, s, wm, &cap, err, errlen);
        if (!rc) rc = checkpoint_index_build(ck, err, errlen);
        if (!rc) rc = cross_check_index(ck, ipath, wm, err, errlen);
    }
    cJSON_Delete(root);
    free(ipath);
    return rc;
}

/* ---- routed expert extents ---- */

static int by_offset(const void *a, const void *b)
{
    const tensor_info *x = *(const tensor_info *const *)a, *y = *(const tensor_info *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Groups the six tensors by shard, in the order their shards first appear in R1 order; within a
 * piece the span covers every tensor, and contiguous says nothing else sits between them. */
static int build_one_extent(checkpoint *ck, int layer, int e, expert_extent *x, char *err, size_t errlen)
{
    if (!(x->t[EXPERT_GATE_W] = tensor_table_find(ck, TT_EXPERT_GATE, layer, e, &x->t[EXPERT_GATE_S], err, errlen)) ||
        !(x->t[EXPERT_UP_W] = tensor_table_find(ck, TT_EXPERT_UP, layer, e, &x->t[EXPERT_UP_S], err, errlen)) ||
        !(x->t[EXPERT_DOWN_W] = tensor_table_find(ck, TT_EXPERT_DOWN, layer, e, &x->t[EXPERT_DOWN_S], err, errlen)))
        return -1;
    x->contiguous = 1;
    x->npieces = 0;
    for (int k = 0; k < EXPERT_NTENSORS; k++) {
        int shard = x->t[k]->shard, p = 0;
        while (p < x->npieces && x->piece[p].shard != shard) p++;
        if (p == x->npieces) {
            if (x->npieces == 2) {
                error_set(err, errlen, "%s: tensor '%s': routed expert (layer %d, expert %d) spans more than two shards (expected 1 or 2 pieces)",
                          ck->shards[shard].path, x->t[k]->name, layer, e);
                return -1;
            }
            x->npieces++;
            x->piece[p].shard = shard;
        }
        const tensor_info *group[EXPERT_NTENSORS];
        int n = 0;
        for (int j = 0; j < EXPERT_NTENSORS; j++)
            if (x->t[j]->shard == shard) group[n++] = x->t[j];
        qsort(group, (size_t)n, sizeof *group, by_offset);
        x->piece[p].offset = group[0]->offset;
        x->piece[p].length = group[n - 1]->offset + group[n - 1]->nbytes - group[0]->offset;
        for (int j = 1; j < n; j++)
            if (group[j - 1]->offset + group[j - 1]->nbytes != group[j]->offset) x->contiguous = 0;
    }
    return 0;
}

static int build_expert_extents(checkpoint *ck, char *err, size_t errlen)
{
    const model_config *c = &ck->cfg;
    size_t n = (size_t)config_total_layers(c) * (size_t)c->n_routed_experts;
    ck->experts = calloc(n ? n : 1, sizeof *ck->experts);
    if (!ck->experts) { error_set(err, errlen, "%s: out of memory for expert extents", ck->dir); return -1; }
    for (int l = 0; l < config_total_layers(c); l++) {
        if (!config_layer_is_moe(c, l)) continue;
        for (int e = 0; e < c->n_routed_experts; e++)
            if (build_one_extent(ck, l, e, &ck->experts[(size_t)l * (size_t)c->n_routed_experts + (size_t)e], err, errlen)) return -1;
    }
    return 0;
}

/* ---- open / close / read ---- */

checkpoint *checkpoint_open(const char *dir, char *err, size_t errlen)
{
    if (err && errlen) err[0] = 0;
    checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck || !(ck->dir = strdup(dir))) {
        free(ck);
        error_set(err, errlen, "%s: out of memory", dir);
        return NULL;
    }
    char *cpath = path_join(dir, "config.json"), *gpath = path_join(dir, "generation_config.json");
    int rc = (!cpath || !gpath) ? -1 : config_load(cpath, &ck->cfg, err, errlen);
    if (!rc && generation_config_load(gpath, ck, err, errlen) < 0) rc = -1;
    free(cpath);
    free(gpath);
    if (!rc) rc = load_index_and_shards(ck, err, errlen);
    if (!rc) rc = tensor_table_validate(ck, err, errlen);
    if (!rc) rc = build_expert_extents(ck, err, errlen);
    if (rc) {
        if (err && errlen && !err[0]) error_set(err, errlen, "%s: out of memory", dir);
        checkpoint_close(ck);
        return NULL;
    }
    return ck;
}

void checkpoint_close(checkpoint *ck)
{
    if (!ck) return;
    for (int s = 0; s < ck->n_shards; s++) {
        if (ck->shards[s].fd >= 0) close(ck->shards[s].fd);
        free(ck->shards[s].path);
        free(ck->shards[s].file);
    }
    for (int t = 0; t < ck->n_tensors; t++) free(ck->tensors[t].name);
    checkpoint_index_free(ck->index);
    free(ck->shards);
    free(ck->tensors);
    free(ck->experts);
    free(ck->dir);
    free(ck);
}

/* Pages are dropped chunk by chunk so that at most one chunk (plus readahead) is cached at a time. */
#define READ_ONCE_CHUNK (32ull << 20)

int checkpoint_read_once(const checkpoint *ck, const tensor_info *t, uint64_t off, void *dst, uint64_t n, char *err, size_t errlen)
{
    const shard_info *sh = &ck->shards[t->shard];
    for (uint64_t done = 0; done < n;) {
        uint64_t want = n - done < READ_ONCE_CHUNK ? n - done : READ_ONCE_CHUNK;
        if (checkpoint_read(ck, t, off + done, (char *)dst + done, want, err, errlen)) return -1;
        done += want;
        /* Advice only: a kernel that ignores it leaves clean pages it can reclaim anyway. After the
         * last chunk the advice runs to the end of the file, taking the readahead past it too. */
        off_t from = (off_t)(t->offset + off + done - want);
        (void)posix_fadvise(sh->fd, from, done < n ? (off_t)want : 0, POSIX_FADV_DONTNEED);
    }
    return 0;
}

int checkpoint_read(const checkpoint *ck, const tensor_info *t, uint64_t off, void *dst, uint64_t n, char *err, size_t errlen)
{
    const shard_info *sh = &ck->shards[t->shard];
    if (off > t->nbytes || n > t->nbytes - off) {
        error_set(err, errlen, "%s: tensor '%s': read of %llu bytes at offset %llu is outside its %llu bytes", sh->path, t->name,
                  (unsigned long long)n, (unsigned long long)off, (unsigned long long)t->nbytes);
        return -1;
    }
    char *p = dst;
    uint64_t done = 0;
    while (done < n) {
        uint64_t want = n - done;
        if (want > (1ull << 30)) want = 1ull << 30; /* pread caps one call near 2 GiB anyway */
        ssize_t r = pread(sh->fd, p + done, (size_t)want, (off_t)(t->offset + off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            error_set(err, errlen, "%s: tensor '%s': read at tensor offset %llu (file offset %llu) failed: %s", sh->path, t->name,
                      (unsigned long long)(off + done), (unsigned long long)(t->offset + off + done),
                      r < 0 ? strerror(errno) : "unexpected end of file");
            return -1;
        }
        done += (uint64_t)r;
    }
    return 0;
}
