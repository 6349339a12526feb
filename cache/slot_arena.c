/* The expert slot arena: allocated once, its size is exactly what --cache-gib buys. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "cache/cache_internal.h"

int slot_arena_init(slot_arena *a, int n_slots, size_t slot_bytes, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (n_slots < 1 || slot_bytes == 0 || slot_bytes % 4096) {
        snprintf(err, errlen, "expert cache: need >= 1 slot of a positive multiple of 4096 bytes (got %d x %zu)", n_slots, slot_bytes);
        return -1;
    }
    if ((size_t)n_slots > SIZE_MAX / slot_bytes) {
        snprintf(err, errlen, "expert cache: %d slots x %zu bytes overflows", n_slots, slot_bytes);
        return -1;
    }
    /* mmap: page-aligned, and untouched slots cost no RSS until a read fills them. */
    size_t bytes = (size_t)n_slots * slot_bytes;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "expert cache: cannot map %d slots x %zu bytes: %s", n_slots, slot_bytes, strerror(errno));
        return -1;
    }
    a->base = p;
    a->bytes = bytes;
    a->slot_bytes = slot_bytes;
    a->n_slots = n_slots;
    return 0;
}

void slot_arena_release(slot_arena *a)
{
    if (a->base) munmap(a->base, a->bytes);
    memset(a, 0, sizeof *a);
}
