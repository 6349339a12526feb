/* Belady's MIN, the offline optimum every online policy is measured against: with the whole trace
 * known, evict the resident key whose next request is farthest in the future (never requested
 * again counts as infinitely far). Admission is mandatory, as in the live cache. */
#include <stdlib.h>
#include "cache/expert_cache.h"

typedef struct { size_t next; int key; } heap_item; /* max-heap on next use */

static void heap_push(heap_item *h, size_t *n, heap_item it)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h[parent].next >= it.next) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = it;
}

static heap_item heap_pop(heap_item *h, size_t *n)
{
    heap_item top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= *n) break;
        if (child + 1 < *n && h[child + 1].next > h[child].next) child++;
        if (h[child].next <= last.next) break;
        h[i] = h[child];
        i = child;
    }
    if (*n > 0) h[i] = last;
    return top;
}

int belady_run(const int *keys, size_t n, int n_keys, int slots, cache_sim_result *out,
               uint8_t *hit, int *victim)
{
    if (n_keys < 1 || slots < 1 || !out) return -1;
    size_t never = (size_t)-1;
    size_t *next_use = malloc(sizeof(size_t) * (n ? n : 1));
    size_t *seen = malloc(sizeof(size_t) * (size_t)n_keys);     /* scanning back: next index of key */
    size_t *cur_next = malloc(sizeof(size_t) * (size_t)n_keys); /* resident key's next use, or never */
    uint8_t *resident = calloc((size_t)n_keys, 1);
    heap_item *heap = malloc(sizeof(heap_item) * (n ? n : 1));
    if (!next_use || !seen || !cur_next || !resident || !heap) {
        free(next_use); free(seen); free(cur_next); free(resident); free(heap);
        return -1;
    }
    for (int k = 0; k < n_keys; k++) seen[k] = never;
    for (size_t i = n; i-- > 0;) {
        if (keys[i] < 0 || keys[i] >= n_keys) { free(next_use); free(seen); free(cur_next); free(resident); free(heap); return -1; }
        next_use[i] = seen[keys[i]];
        seen[keys[i]] = i;
    }
    size_t heap_n = 0;
    int count = 0;
    *out = (cache_sim_result){0, 0};
    for (size_t i = 0; i < n; i++) {
        int k = keys[i], v = -1, was_hit = resident[k];
        if (was_hit) {
            out->hits++;
        } else {
            out->misses++;
            if (count == slots) {
                /* stale heap entries (key evicted, or its next use moved on) are skipped */
                for (;;) {
                    heap_item top = heap_pop(heap, &heap_n);
                    if (resident[top.key] && cur_next[top.key] == top.next) { v = top.key; break; }
                }
                resident[v] = 0;
                count--;
            }
            resident[k] = 1;
            count++;
        }
        cur_next[k] = next_use[i];
        heap_push(heap, &heap_n, (heap_item){next_use[i], k});
        if (hit) hit[i] = (uint8_t)was_hit;
        if (victim) victim[i] = v;
    }
    free(next_use); free(seen); free(cur_next); free(resident); free(heap);
    return 0;
}
