/* The BPE model: vocab hash, (left, right) -> (rank, merged id) hash, the merge loop and a word
 * cache. Merge order follows the reference exactly: lowest rank first, leftmost on ties. */
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tokenizer_internal.h"

/* ---------------- string -> id map ---------------- */

uint32_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w; memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8; n -= 8;
    }
    uint64_t w = 0; memcpy(&w, p, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return (uint32_t)h;
}

int str_map_init(str_map *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2) cap *= 2;
    memset(m, 0, sizeof *m);
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots) return -1;
    for (size_t i = 0; i < cap; i++) m->slots[i].id = -1;
    m->mask = cap - 1;
    return 0;
}

void str_map_free(str_map *m)
{
    free(m->slots);
    free(m->pool.data);
    memset(m, 0, sizeof *m);
}

static int str_map_rehash(str_map *m)
{
    size_t cap = (m->mask + 1) * 2;
    str_slot *slots = malloc(cap * sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < cap; i++) slots[i].id = -1;
    for (size_t i = 0; i <= m->mask; i++) {
        if (m->slots[i].id < 0) continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (slots[j].id >= 0) j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots; m->mask = cap - 1;
    return 0;
}

static str_slot *str_map_find(const str_map *m, const char *key, size_t len, uint32_t h)
{
    size_t i = h & m->mask;
    for (;;) {
        str_slot *s = &m->slots[i];
        if (s->id < 0) return s;
        if (s->hash == h && s->len == len && !memcmp(m->pool.data + s->off, key, len)) return s;
        i = (i + 1) & m->mask;
    }
}

int str_map_put(str_map *m, const char *key, size_t len, int32_t id)
{
    if ((m->count + 1) * 2 > m->mask + 1 && str_map_rehash(m)) return -1;
    uint32_t h = hash_bytes(key, len);
    str_slot *s = str_map_find(m, key, len, h);
    if (s->id >= 0) return 0;
    uint32_t off = (uint32_t)m->pool.len;
    if (byte_buf_append(&m->pool, key, len)) return -1;
    *s = (str_slot){h, id, off, (uint32_t)len};
    m->count++;
    return 1;
}

int str_map_set(str_map *m, const char *key, size_t len, int32_t id)
{
    int rc = str_map_put(m, key, len, id);
    if (rc == 0) str_map_find(m, key, len, hash_bytes(key, len))->id = id;
    return rc < 0 ? -1 : 0;
}

int32_t str_map_get(const str_map *m, const char *key, size_t len)
{
    return str_map_find(m, key, len, hash_bytes(key, len))->id;
}

/* ---------------- merges ---------------- */

struct bpe_symbol { int32_t id, prev, next; };
struct bpe_merge_cand { int32_t rank, pos, merged; };

static uint64_t merge_key(int32_t left, int32_t right)
{
    return ((uint64_t)(uint32_t)(left + 1) << 32) | (uint32_t)right; /* never 0: 0 marks empty */
}

static size_t merge_slot_of(const bpe_model *m, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & m->merge_mask;
}

int bpe_init(bpe_model *m, size_t n_merges)
{
    memset(m, 0, sizeof *m);
    size_t cap = 16;
    while (cap < n_merges * 2) cap *= 2;
    m->merges = calloc(cap, sizeof *m->merges);
    m->merge_mask = cap - 1;
    size_t cache_cap = 1u << 16;
    m->cache = calloc(cache_cap, sizeof *m->cache);
    m->cache_mask = cache_cap - 1;
    m->unk_id = -1;
    for (int i = 0; i < 256; i++) m->byte_id[i] = -1;
    return m->merges && m->cache ? 0 : -1;
}

void bpe_free(bpe_model *m)
{
    free(m->merges); free(m->cache);
    free(m->cache_keys.data); free(m->cache_ids.data);
    free(m->sym); free(m->heap);
    memset(m, 0, sizeof *m);
}

/* Returns 0 added, 1 duplicate pair (the first, lowest rank wins, as in the reference), -1 oom. */
int bpe_add_merge(bpe_model *m, int32_t left, int32_t right, int32_t rank, int32_t merged)
{
    uint64_t key = merge_key(left, right);
    size_t i = merge_slot_of(m, key);
    while (m->merges[i].key) {
        if (m->merges[i].key == key) return 1;
        i = (i + 1) & m->merge_mask;
    }
    m->merges[i] = (merge_slot){key, rank, merged};
    m->n_merges++;
    return 0;
}

static const merge_slot *bpe_find_merge(const bpe_model *m, int32_t left, int32_t right)
{
    uint64_t key = merge_key(left, right);
    size_t i = merge_slot_of(m, key);
    while (m->merges[i].key) {
        if (m->merges[i].key == key) return &m->merges[i];
        i = (i + 1) & m->merge_mask;
    }
    return NULL;
}

/* ---- binary min-heap on (rank, pos) ---- */

static int cand_less(const struct bpe_merge_cand *a, const struct bpe_merge_cand *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(struct bpe_merge_cand *h, size_t *n, struct bpe_merge_cand c)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p]; i = p;
    }
    h[i] = c;
}

static struct bpe_merge_cand heap_pop(struct bpe_merge_cand *h, size_t *n)
{
    struct bpe_merge_cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_less(&h[c + 1], &h[c])) c++;
        if (!cand_less(&h[c], &last)) break;
        h[i] = h[c]; i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static void push_pair(bpe_model *m, size_t *n_heap, int32_t pos)
{
    int32_t next = m->sym[pos].next;
    if (next < 0) return;
    const merge_slot *ms = bpe_find_merge(m, m->sym[pos].id, m->sym[next].id);
    if (ms) heap_push(m->heap, n_heap, (struct bpe_merge_cand){ms->rank, pos, ms->merged});
}

/* Initial symbols: one per byte (its byte-level character); unknown bytes become unk or vanish. */
static int32_t init_symbols(bpe_model *m, const uint8_t *word, size_t len)
{
    int32_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t id = m->byte_id[word[i]];
        if (id < 0) {
            if (m->unk_id < 0) continue;
            if (m->fuse_unk && n > 0 && m->sym[n - 1].id == m->unk_id) continue;
            id = m->unk_id;
        }
        m->sym[n] = (struct bpe_symbol){id, n - 1, -1};
        if (n > 0) m->sym[n - 1].next = n;
        n++;
    }
    return n;
}

static int merge_word(bpe_model *m, const uint8_t *word, size_t len, id_buf *out)
{
    if (len > m->sym_cap) {
        free(m->sym); free(m->heap);
        m->sym = malloc(len * sizeof *m->sym);
        m->heap = malloc(len * 2 * sizeof *m->heap); /* each merge adds <= 2, pops >= 1 */
        m->sym_cap = m->sym && m->heap ? len : 0;
        if (!m->sym_cap) return -1;
    }
    int32_t n = init_symbols(m, word, len);
    size_t n_heap = 0;
    for (int32_t i = 0; i + 1 < n; i++) push_pair(m, &n_heap, i);
    while (n_heap) {
        struct bpe_merge_cand c = heap_pop(m->heap, &n_heap);
        struct bpe_symbol *s = &m->sym[c.pos];
        if (s->id < 0 || s->next < 0) continue;
        const merge_slot *ms = bpe_find_merge(m, s->id, m->sym[s->next].id);
        if (!ms || ms->merged != c.merged) continue; /* stale: a neighbour changed */
        struct bpe_symbol *right = &m->sym[s->next];
        s->id = c.merged;
        s->next = right->next;
        if (right->next >= 0) m->sym[right->next].prev = c.pos;
        right->id = -1;
        if (s->prev >= 0) push_pair(m, &n_heap, s->prev);
        push_pair(m, &n_heap, c.pos);
    }
    for (int32_t i = n ? 0 : -1; i >= 0; i = m->sym[i].next)
        if (id_buf_push(out, m->sym[i].id)) return -1;
    return 0;
}

/* ---- word cache ---- */

static void cache_clear(bpe_model *m)
{
    memset(m->cache, 0, (m->cache_mask + 1) * sizeof *m->cache);
    m->cache_count = 0;
    m->cache_keys.len = 0;
    m->cache_ids.len = 0;
}

static word_slot *cache_find(bpe_model *m, const uint8_t *word, size_t len, uint32_t h)
{
    size_t i = h & m->cache_mask;
    for (;;) {
        word_slot *s = &m->cache[i];
        if (!s->len) return s;
        if (s->hash == h && s->len == len && !memcmp(m->cache_keys.data + s->off, word, len)) return s;
        i = (i + 1) & m->cache_mask;
    }
}

int bpe_encode_word(bpe_model *m, const str_map *vocab, const uint8_t *word, size_t len, id_buf *out)
{
    if (len == 1 && m->byte_id[word[0]] >= 0) return id_buf_push(out, m->byte_id[word[0]]);
    uint32_t h = hash_bytes((const char *)word, len);
    word_slot *s = cache_find(m, word, len, h);
    if (s->len) return id_buf_append(out, s->n_ids ? m->cache_ids.data + s->ids_off : NULL, s->n_ids); /* see below: 0 ids */
    size_t before = out->len;
    int done = 0;
    if (m->ignore_merges && vocab) {
        /* ignore_merges: a word that is itself a vocab entry is one token */
        byte_buf mapped = {0};
        if (byte_level_encode(&mapped, word, len)) { free(mapped.data); return -1; }
        int32_t id = str_map_get(vocab, mapped.data, mapped.len);
        free(mapped.data);
        if (id >= 0) { if (id_buf_push(out, id)) return -1; done = 1; }
    }
    if (!done && merge_word(m, word, len, out)) return -1;
    if (len > 256) return 0;
    if (m->cache_count * 4 >= (m->cache_mask + 1) * 3) { cache_clear(m); s = cache_find(m, word, len, h); }
    size_t n_ids = out->len - before; /* 0 when no byte of the word is in the vocabulary: out->data may be NULL */
    uint32_t off = (uint32_t)m->cache_keys.len, ids_off = (uint32_t)m->cache_ids.len;
    if (byte_buf_append(&m->cache_keys, word, len) || id_buf_append(&m->cache_ids, n_ids ? out->data + before : NULL, n_ids))
        return -1;
    *s = (word_slot){h, off, (uint32_t)len, ids_off, (uint32_t)n_ids};
    m->cache_count++;
    return 0;
}
