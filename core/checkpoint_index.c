/* Tensor lookup by name: an open-addressing hash (power-of-two table, at least twice the tensors)
 * over ck->tensors. It sits below the rest of the reader and calls none of it, so the tensor table
 * (validation) and checkpoint.c both look names up here and calls between files point one way. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/checkpoint_internal.h"

struct checkpoint_index {
    uint32_t mask;
    int32_t *slot; /* tensor index + 1; 0 = empty */
};

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ^ (h >> 29);
}

int32_t checkpoint_index_find(const checkpoint *ck, const char *name)
{
    const checkpoint_index *ix = ck->index;
    if (!ix) return -1;
    for (uint32_t i = (uint32_t)name_hash(name) & ix->mask;; i = (i + 1) & ix->mask) {
        int32_t s = ix->slot[i];
        if (!s) return -1;
        if (!strcmp(ck->tensors[s - 1].name, name)) return s - 1;
    }
}

int checkpoint_index_build(checkpoint *ck, char *err, size_t errlen)
{
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)ck->n_tensors) cap <<= 1;
    checkpoint_index *ix = calloc(1, sizeof *ix);
    if (ix) ix->slot = calloc(cap, sizeof *ix->slot);
    if (!ix || !ix->slot) { free(ix); error_set(err, errlen, "%s: out of memory for the tensor index", ck->dir); return -1; }
    ix->mask = cap - 1;
    ck->index = ix;
    for (int t = 0; t < ck->n_tensors; t++) {
        const char *name = ck->tensors[t].name;
        uint32_t i = (uint32_t)name_hash(name) & ix->mask;
        for (; ix->slot[i]; i = (i + 1) & ix->mask) {
            const tensor_info *o = &ck->tensors[ix->slot[i] - 1];
            if (!strcmp(o->name, name)) {
                error_set(err, errlen, "%s: tensor '%s' appears in two shard headers (also in %s)", ck->shards[ck->tensors[t].shard].path,
                          name, ck->shards[o->shard].file);
                return -1;
            }
        }
        ix->slot[i] = t + 1;
    }
    return 0;
}

const tensor_info *checkpoint_tensor(const checkpoint *ck, const char *name)
{
    int32_t t = checkpoint_index_find(ck, name);
    return t < 0 ? NULL : &ck->tensors[t];
}

const tensor_info *checkpoint_tensorf(const checkpoint *ck, const char *fmt, ...)
{
    char name[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof name) return NULL;
    return checkpoint_tensor(ck, name);
}

void checkpoint_index_free(checkpoint_index *ix)
{
    if (ix) free(ix->slot);
    free(ix);
}
