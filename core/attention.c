/* attention_row: chunks of positions x groups of heads on the pool, then the chunks merged in
 * order; the portable scalar path's primitives; dispatch to the SIMD paths by kernels_path(). */
#include <cpuid.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "core/attention_internal.h"
#include "core/kernels.h"

/* The scratch, carved in this order, each piece 64-byte aligned. */
typedef struct {
    atomic_int *claimed;  /* [n_threads] a conversion buffer in use */
    atomic_int *done;     /* [groups] chunks of a group of heads whose partial sums are written */
    float *acc;           /* [ATTN_MAX_CHUNKS][heads rounded up to 32][R]: [heads][R], or the lane layout */
    float *m, *l;         /* [ATTN_MAX_CHUNKS][heads] */
    float *conv;          /* [n_threads][conv_floats] */
    size_t conv_floats;   /* ATTN_CONV_FLOATS_GROUPS(R, rope, item_groups_most(heads)) */
    attention_help *help; /* [help_items_most] (rows of more than 16 heads on 2+ threads, else NULL) */
    float *help_scores;   /* [n_threads][ATTN_HELP_POSITIONS][ATTN_GROUP_HEADS]: a helped item's scores, by its conv buffer */
    float *help_rows;     /* [n_threads][ATTN_BLOCK][R + rope]: a helped item's second widened block, by its conv buffer */
} attention_scratch;

static size_t round64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* The next piece; with base NULL only the size is counted (no pointer arithmetic on NULL). */
static void *piece(char *base, size_t *off, size_t bytes)
{
    void *p = base ? base + *off : NULL;
    *off += round64(bytes);
    return p;
}

/* Items of a row that idle threads help at most: one or two per thread (see help_items). */
static int help_items_most(int n_threads) { return 2 * n_threads < ATTN_HELP_ITEMS ? 2 * n_threads : ATTN_HELP_ITEMS; }

/* Groups of ATTN_GROUP_HEADS heads an item of a row of `heads` may run (attention_row_on_machine). */
static int item_groups_most(int heads)
{
    int groups = heads % ATTN_GROUP_HEADS ? 1 : heads / ATTN_GROUP_HEADS;
    return groups < ATTN_ITEM_GROUPS ? groups : ATTN_ITEM_GROUPS;
}

static size_t carve(int heads, int R, int rope, int n_threads, char *base, attention_scratch *s)
{
    size_t off = 0, parts = (size_t)ATTN_MAX_CHUNKS * heads;
    size_t lane_parts = (size_t)ATTN_MAX_CHUNKS * (((size_t)heads + ATTN_GROUP_HEADS - 1) / ATTN_GROUP_HEADS * ATTN_GROUP_HEADS);
    s->claimed = piece(base, &off, (size_t)n_threads * sizeof(atomic_int));
    size_t most_groups = (size_t)(heads + ATTN_GROUP_HEADS / 2 - 1) / (ATTN_GROUP_HEADS / 2);
    s->done = piece(base, &off, most_groups * sizeof(atomic_int));
    s->acc = piece(base, &off, lane_parts * R * sizeof(float));
    s->m = piece(base, &off, parts * sizeof(float));
    s->l = piece(base, &off, parts * sizeof(float));
    s->conv_floats = ATTN_CONV_FLOATS_GROUPS(R, rope, item_groups_most(heads));
    s->conv = piece(base, &off, (size_t)n_threads * s->conv_floats * sizeof(float));
    s->help = NULL, s->help_scores = NULL, s->help_rows = NULL;
    if (heads > ATTN_GROUP_HEADS / 2 && n_threads > 1) {
        size_t items = (size_t)help_items_most(n_threads);
        s->help = piece(base, &off, items * sizeof(attention_help));
        s->help_scores = piece(base, &off, (size_t)n_threads * ATTN_HELP_POSITIONS * ATTN_GROUP_HEADS * sizeof(float));
        s->help_rows = piece(base, &off, (size_t)n_threads * ATTN_BLOCK * ((size_t)R + (size_t)rope) * sizeof(float));
    }
    return off;
}

size_t attention_scratch_bytes(int heads, int R, int rope, int n_threads)
{
    attention_scratch s;
    return carve(heads, R, rope, n_threads, NULL, &s);
}

static int l1d_from_cpuid(void)
{
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000005 && __get_cpuid(0x80000005, &a, &b, &c, &d) &&
        (c >> 24))
        return (int)(c >> 24) << 10;
    for (unsigned i = 0; __get_cpuid_max(0, NULL) >= 4 && i < 8; i++) {
        __cpuid_count(4, i, a, b, c, d);
        if ((a & 31) == 0) break;
        if ((a & 31) == 1 && ((a >> 5) & 7) == 1)
            return (int)((((b >> 22) & 0x3FF) + 1) * (((b >> 12) & 0x3FF) + 1) * ((b & 0xFFF) + 1) * (c + 1));
    }
    return 32 << 10;
}

/* Into L1 only on AMD: there (Zen 5) prefetching the next block into L1 read faster than into L2;
 * on an Intel Xeon (KVM, family 6 model 167, the same 48 KiB L1d) it read 4-17% slower at the
 * embedded width with 1 and 2 threads (bench_attention, 4 interleaved runs), likely because a
 * prefetch into L1 holds one of the core's few fill buffers for the whole trip to DRAM. CPUID
 * traps to the hypervisor in a VM (microseconds): read once. */
static int l1_prefetch_from_cpuid(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u /* "Auth"enticAMD */) return 0;
    return l1d_from_cpuid();
}

/* *slot (-1: not read yet), read once by read(). */
static int read_once(atomic_int *slot, int (*read)(void))
{
    int v = atomic_load_explicit(slot, memory_order_relaxed);
    if (v < 0) {
        v = read();
        atomic_store_explicit(slot, v, memory_order_relaxed);
    }
    return v;
}

int attention_l1_prefetch_bytes(void)
{
    static atomic_int bytes = -1;
    return read_once(&bytes, l1_prefetch_from_cpuid);
}

int attention_l1d_bytes(void)
{
    static atomic_int bytes = -1;
    return read_once(&bytes, l1d_from_cpuid);
}

/* o[k] = inv * sum_c w[c] acc[c * stride + k] for the columns of whole vectors (merge_columns_*). */
typedef int (*merge_columns_fn)(const float *acc, size_t stride, const float *w, int nc, float inv, int R, float *o);

typedef struct {
    const attention_kv *kv;
    const float *q_lat, *q_rope;
    float *out;
    int n_chunks, n_long, long_len, short_len;  /* n_long chunks of long_len positions, then short_len */
    int group_heads, n_groups, n, n_threads, l1_prefetch_bytes, l1d_bytes;
    int item_groups;           /* groups per item: 1, or several run block by block (item_groups_for) */
    int n_items, merge_items;  /* chunks x groups / item_groups; merges on the pool after them (0: the caller's) */
    int help;                  /* idle threads take pieces of running items (the items' boards in s.help) */
    int lanes;                 /* the partial sums in the lane layout: chunk c's group g at (c n_groups + g)
                                * group_heads R floats, [R][16 V] (AVX-512's loop for many heads) */
    attention_scratch s;
    void (*item)(const attention_item *it);
    merge_columns_fn merge_columns; /* the path's merge_columns_* */
    attention_trace *trace; /* NULL but for bench_attention --trace */
    unsigned call;          /* this call's number in the process (rows_prefetched) */
} row_job;

/* A free conversion buffer, the one this thread had last when it is free: at most n_threads items
 * run at once, so one is always free, and which one an item gets changes no number (it is written
 * before it is read). But an item writes its buffer all over (the group's queries laid out, its
 * weighted latents, a BF16 block widened: 137-284 KB at R1's widths, and a helped item's scores
 * beside it), and in a buffer another core wrote last each of those lines is first fetched from that
 * core. The pool hands a thread a different item each call; the buffer follows the thread. */
static _Thread_local int last_buffer = -1;
static int claim_buffer(const row_job *j)
{
    static atomic_int threads_seen;
    if (last_buffer < 0) last_buffer = atomic_fetch_add_explicit(&threads_seen, 1, memory_order_relaxed) & 0xFFFF;
    for (int w = last_buffer % j->n_threads;; w = (w + 1) % j->n_threads) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&j->s.claimed[w], &expected, 1)) return last_buffer = w;
    }
}

/* The chunk of the k-th item of a row of one group (few heads). Such a row may have more chunks
 * than the pool has threads, and each thread takes about every n_threads-th item: so the chunks are
 * dealt out as s runs of consecutive chunks (the first C % s runs one longer), item k taking the
 * next chunk of run k % s. A thread's chunks then run back to back and each one's first block was
 * prefetched by the block before it (prefetches run on to the row's end) instead of starting cold
 * on another core: embedded width on 2 threads, 4k-32k positions, 3-20% faster. Which thread runs a
 * chunk changes no number. Rows of many heads keep the order: their groups already give each
 * thread its own items; and so do rows cut into long and short chunks, whose long ones must go
 * out first (cut_row). */
static int chunk_of_item(const row_job *j, int k)
{
    if (j->n_groups > j->item_groups || j->n_long > 0) return k;
    int C = j->n_chunks, s = j->n_threads < C ? j->n_threads : C, q = C / s, rem = C % s;
    int run = k < q * s ? k % s : k - q * s, step = k < q * s ? k / s : q;
    return run * q + (run < rem ? run : rem) + step;
}

static int chunk_start(const row_job *j, int c)
{
    return c <= j->n_long ? c * j->long_len : j->n_long * j->long_len + (c - j->n_long) * j->short_len;
}

/* The lane layout's partial sums: a chunk's groups one after another, group_heads x R floats each. */
static size_t lane_chunk_floats(const row_job *j) { return (size_t)j->n_groups * j->group_heads * j->kv->R; }
static float *lane_partials(const row_job *j, int c, int g)
{
    return j->s.acc + (size_t)c * lane_chunk_floats(j) + (size_t)g * j->group_heads * j->kv->R;
}

/* Items per chunk, and the first group of item i. */
static int items_per_chunk(const row_job *j) { return j->n_groups / j->item_groups; }
static int first_group(const row_job *j, int i) { return i % items_per_chunk(j) * j->item_groups; }

/* Item i of the row (a chunk x item_groups groups of heads), its rows converted in conv. */
static attention_item item_of(const row_job *j, int i, float *conv)
{
    const attention_kv *kv = j->kv;
    int c = chunk_of_item(j, i / items_per_chunk(j)), g = first_group(j, i), h0 = g * j->group_heads;
    size_t part = (size_t)c * kv->heads + h0;
    float *acc = j->lanes ? lane_partials(j, c, g) : j->s.acc + part * kv->R;
    return (attention_item){
        .kv = kv, .q_lat = j->q_lat + (size_t)h0 * kv->R, .q_rope = j->q_rope + (size_t)h0 * kv->rope,
        .t0 = chunk_start(j, c), .t1 = chunk_start(j, c + 1) < j->n ? chunk_start(j, c + 1) : j->n,
        .n = j->n, .nh = kv->heads - h0 < j->group_heads ? kv->heads - h0 : j->group_heads, .groups = j->item_groups,
        .acc = acc, .m = j->s.m + part, .l = j->s.l + part, .conv = conv,
        .l1_prefetch_bytes = j->l1_prefetch_bytes, .l1d_bytes = j->l1d_bytes,
        .help = j->help ? &j->s.help[i] : NULL,
    };
}

static float *conv_buffer(const row_job *j, int w) { return j->s.conv + (size_t)w * j->s.conv_floats; }

/* The call and the position where this thread's last item ended. */
static _Thread_local struct { unsigned call; int t1, group; } last_item;

static void run_item(void *arg, int i)
{
    const row_job *j = arg;
    long long started = j->trace ? attention_clock_ns() : 0;
    int cpu = j->trace ? sched_getcpu() : -1;
    int w = claim_buffer(j);
    attention_item it = item_of(j, i, conv_buffer(j, w));
    int group = first_group(j, i);
    it.rows_prefetched = last_item.call == j->call && last_item.t1 == it.t0 && last_item.group == group;
    last_item.call = j->call, last_item.t1 = it.t1, last_item.group = group;
    if (it.help) {
        it.help->scores = j->s.help_scores + (size_t)w * ATTN_HELP_POSITIONS * ATTN_GROUP_HEADS;
        it.help->rows = j->s.help_rows + (size_t)w * ATTN_BLOCK * ((size_t)j->kv->R + (size_t)j->kv->rope);
    }
    j->item(&it);
    atomic_store(&j->s.claimed[w], 0);
    if (j->trace && i < ATTN_TRACE_ITEMS) {
        j->trace->item_start[i] = started, j->trace->item_end[i] = attention_clock_ns();
        j->trace->item_cpu[i] = (short)cpu, j->trace->item_cpu_end[i] = (short)sched_getcpu();
    }
    for (int g = group; g < group + j->item_groups; g++)
        atomic_fetch_add_explicit(&j->s.done[g], 1, memory_order_release);
}

/* Help for a short row of many heads: a row cut into about one item per CPU finishes when the
 * slowest core's item does, and a shared host's cores are not equal (16-core Xeon, R1's widths at
 * 1k positions on 16 threads: two CPUs ran their items at 1.7x the call's median, call after call).
 * Cutting finer costs every item (partial sums, queries laid out again, the merge) more than the
 * balance gives (waves 17-24 in docs/BENCHMARKS.md). So the cut stays, and a thread whose items
 * are done takes pieces of the running items from their ends while it waits to merge: score tiles
 * of blocks the owner has not reached, and column slices of the weighted latents of the block
 * whose softmax it has just taken; the owner keeps the softmax. Returns whether it did any. */
static int help_items(const row_job *j)
{
    /* The running item likely to end last is helped first: the most pieces left per score tile its
     * owner has taken (an owner on a slow core, or one that started late, has taken fewer). The
     * call waits for that item alone. Helping by pieces left, in the helper's own group first, the
     * item that ended last got its first help 40-80 us after the first helpers were free (16-core
     * Xeon, R1 1k on 16 threads: help at 220-261 us, the first items done at 178-205 us, the last
     * at 265-302 us). */
    int best = -1;
    unsigned best_left = 0, best_front = 0;
    for (int i = 0; i < j->n_items; i++) {
        attention_help *hp = &j->s.help[i];
        if (atomic_load_explicit(&hp->stage, memory_order_relaxed) != 1) continue;
        unsigned left = attention_help_left(hp);
        unsigned front = (unsigned)atomic_load_explicit(&hp->claim, memory_order_relaxed);
        if (left && (best < 0 || (unsigned long long)left * best_front > (unsigned long long)best_left * front))
            best = i, best_left = left, best_front = front;
    }
    if (best < 0) return 0;
    int w = claim_buffer(j);
    attention_item it = item_of(j, best, conv_buffer(j, w));
    int pieces = attention_help_avx512(&it, it.help, it.conv);
    atomic_store(&j->s.claimed[w], 0);
    return pieces > 0;
}

/* The boards of a helped row's items: no tile claimed, the owners not started. */
static void reset_help(const row_job *j)
{
    for (int i = 0; i < j->n_items; i++) {
        attention_help *hp = &j->s.help[i];
        attention_item it = item_of(j, i, NULL);
        int nb = (it.t1 - it.t0 + ATTN_BLOCK - 1) / ATTN_BLOCK, last = it.t1 - it.t0 - (nb - 1) * ATTN_BLOCK;
        unsigned tiles = (unsigned)((nb - 1) * ATTN_HELP_TILES_PER_BLOCK + (last + ATTN_HELP_TILE - 1) / ATTN_HELP_TILE);
        atomic_store_explicit(&hp->claim, (unsigned long long)tiles << 32, memory_order_relaxed);
        hp->tiles = (int)tiles;
        atomic_store_explicit(&hp->helped, 0, memory_order_relaxed);
        hp->timed = j->trace != NULL;
        atomic_store_explicit(&hp->first_help_ns, 0, memory_order_relaxed);
        atomic_store_explicit(&hp->owner_wait_ns, 0, memory_order_relaxed);
        atomic_store_explicit(&hp->slices, 0, memory_order_relaxed);
        atomic_store_explicit(&hp->stage, 0, memory_order_relaxed);
        hp->qt = NULL;
        hp->scores = hp->rows = NULL; /* the owner's: run_item */
        for (unsigned k = 0; k < tiles; k++) atomic_store_explicit(&hp->done[k], 0, memory_order_relaxed);
    }
}

/* Partial sums (heads x chunks x R floats) from which the merge runs on the pool, one merge item per
 * head (or run of heads) after the chunks, rather than by the caller after the parallel-for. The
 * caller fetches every partial sum from the cores that wrote it, one head after another, with the
 * misses of one core; 4 merge items fetch them on 4 cores at once, each as soon as the chunks are
 * done (16-core Xeon, the embedded width on 16 threads: 8-32 chunks of 4 heads, `--trace` showed the
 * caller's merge at 9 us of a 70 us call at 16k; per call 1.02-1.11x at 1k-32k with merge items
 * from 4096 floats, bit-identical). */
#define ATTN_MERGE_ON_POOL 4096

/* o[k] = inv * sum_c w[c] acc[c * stride + k], the chunks in order, for whole vectors of `bytes`
 * from k = 0; returns where they end. Each column's sum is the same chain of multiplies and adds at
 * any vector width (ISO C contracts no FMA), so every path's merge gives the same bits. */
#define MERGE_COLUMNS(name, bytes, target)                                                                     \
    target static int name(const float *acc, size_t stride, const float *w, int nc, float inv, int R, float *o) \
    {                                                                                                          \
        typedef float vec __attribute__((vector_size(bytes)));                                                 \
        int k = 0;                                                                                             \
        for (; k + (int)(bytes / sizeof(float)) <= R; k += (int)(bytes / sizeof(float))) {                     \
            vec v = {0.0f}, a;                                                                                 \
            for (int c = 0; c < nc; c++) {                                                                     \
                memcpy(&a, acc + (size_t)c * stride + k, sizeof a);                                            \
                v += w[c] * a;                                                                                 \
            }                                                                                                  \
            v *= inv;                                                                                          \
            memcpy(o + k, &v, sizeof v);                                                                       \
        }                                                                                                      \
        return k;                                                                                              \
    }

MERGE_COLUMNS(merge_columns_128, 16, )
MERGE_COLUMNS(merge_columns_256, 32, __attribute__((target("avx2"))))
MERGE_COLUMNS(merge_columns_512, 64, __attribute__((target("avx512f"))))

/* The partial sums of head h into the cache: they were written on other cores, so each line is a
 * cross-core transfer, asked for a head ahead of the sums that need them (16-core Xeon, embedded
 * width, 4k on 16 threads: all of a head's lines asked for before its sums took the caller's merge
 * of 16 chunks from 6.5 to 5 us). */
static void prefetch_head(const row_job *j, int h)
{
    int heads = j->kv->heads, R = j->kv->R;
    for (int c = 0; c < j->n_chunks; c++) {
        const float *a = j->s.acc + ((size_t)c * heads + h) * R;
        for (int k = 0; k < R; k += 16) __builtin_prefetch(a + k, 0, 3);
    }
}

/* Head h's chunk weights exp(m_c - M) into w[c ws]; returns 1 / sum_c w_c l_c. */
static float merge_weights(const row_job *j, int h, float *w, int ws)
{
    int heads = j->kv->heads, nc = j->n_chunks;
    float mx = -INFINITY, sum = 0.0f;
    for (int c = 0; c < nc; c++) mx = fmaxf(mx, j->s.m[(size_t)c * heads + h]);
    for (int c = 0; c < nc; c++) {
        size_t part = (size_t)c * heads + h;
        w[c * ws] = expf(j->s.m[part] - mx);
        sum += w[c * ws] * j->s.l[part];
    }
    return 1.0f / sum;
}

/* out[h] = sum_c exp(m_c - M) acc_c / sum_c exp(m_c - M) l_c, chunks in order: the columns in the
 * widest vectors the machine has, the last R % width one at a time, each the same chain (R1's 1k
 * merged by one Zen 5 core: 30.6 us in 128-bit vectors, 15.4 us in AVX-512's; one Xeon core took
 * 118 us, 4% of the row, in 128-bit ones). */
static void merge_head(const row_job *j, int h)
{
    int heads = j->kv->heads, R = j->kv->R, nc = j->n_chunks;
    float w[ATTN_MAX_CHUNKS], *o = j->out + (size_t)h * R, inv = merge_weights(j, h, w, 1);
    const float *acc = j->s.acc + (size_t)h * R;
    for (int k = j->merge_columns(acc, (size_t)heads * R, w, nc, inv, R, o); k < R; k++) {
        float v = 0.0f;
        for (int c = 0; c < nc; c++) v += w[c] * acc[(size_t)c * heads * R + k];
        o[k] = v * inv;
    }
}

/* Heads [h0, h1) merged, each one's partial sums asked for while the one before it is summed. */
static void merge_heads(const row_job *j, int h0, int h1)
{
    if (h0 < h1) prefetch_head(j, h0);
    for (int h = h0; h < h1; h++) {
        if (h + 1 < h1) prefetch_head(j, h + 1);
        merge_head(j, h);
    }
}

/* Waits until every chunk of the group of heads g has written its partial sums. The chunks were
 * all claimed before the merge item that waits (the pool hands out items in order and the merges
 * come last), so each is running on some thread and the wait ends; on a machine busier than the
 * pool, the thread running one may need this core, hence the yield. */
static void wait_for_group(const row_job *j, int g)
{
    for (int spins = 0; atomic_load_explicit(&j->s.done[g], memory_order_acquire) < j->n_chunks; spins++) {
        if (j->help && help_items(j)) spins = 0;
        else if (spins >= 4096) sched_yield();
        else __builtin_ia32_pause();
    }
}

/* The lane layout's heads in vectors of 16 (group g's vectors g VG .. g VG + VG - 1, VG =
 * group_heads / 16), merged 16 columns at a time: units of a vector x 16 columns. */
static int lane_vectors(const row_job *j) { return j->n_groups * (j->group_heads / 16); }
static int lane_column_blocks(const row_job *j) { return (j->kv->R + 15) / 16; }

/* Columns [k0, k1) of lane vector x. */
static void merge_lane_columns(const row_job *j, int x, int k0, int k1)
{
    int heads = j->kv->heads, R = j->kv->R, GH = j->group_heads, g = x / (GH / 16), h0 = g * GH + 16 * (x % (GH / 16));
    int nh = heads - h0 < 16 ? heads - h0 : 16, group = heads - g * GH < GH ? heads - g * GH : GH;
    if (nh <= 0) return;
    float w[ATTN_MAX_CHUNKS * 16] __attribute__((aligned(64))), inv[16] = {0.0f};
    memset(w, 0, (size_t)j->n_chunks * 16 * sizeof(float));
    for (int i = 0; i < nh; i++) inv[i] = merge_weights(j, h0 + i, w + i, 16);
    /* rows of 16 V floats, V as the group's item had it */
    attention_merge_lanes_avx512(lane_partials(j, 0, g) + (h0 - g * GH), lane_chunk_floats(j), j->n_chunks,
                                 group > 16 ? 32 : 16, w, inv, nh, R, k0, k1, j->out + (size_t)h0 * R);
}

/* Units [u0, u1) of the lane layout, a vector's run of them at a time (wait: for its group's chunks,
 * on the pool). Units, not heads, are what merge items divide: R1's 8 vectors could not go to 16
 * threads. */
static void merge_lane_units(const row_job *j, int u0, int u1, int wait)
{
    int cb = lane_column_blocks(j), R = j->kv->R;
    while (u0 < u1) {
        int x = u0 / cb, end = (x + 1) * cb < u1 ? (x + 1) * cb : u1;
        if (wait) wait_for_group(j, x / (j->group_heads / 16));
        int k1 = (end - x * cb) * 16;
        merge_lane_columns(j, x, (u0 - x * cb) * 16, k1 < R ? k1 : R);
        u0 = end;
    }
}

/* Merge item k of merge_items: a run of consecutive heads, merged as soon as their groups' chunks
 * are done. It runs in the same parallel-for as the chunks, after them: a thread whose chunks are
 * done merges while the slowest chunk of another group still runs, and the merge costs no second
 * hand-off to the pool. One item per thread, not per head: each item's claim and completion are
 * atomic operations on lines every thread contends for, and on the 16-core Xeon R1's 128 one-head
 * items took 44-58 us to merge 1 MB at 1k positions on 16 threads (8-16% of the call), 16 runs of
 * 8 heads in a second parallel-for 19-29 us. */
static void merge_run(const row_job *j, int k)
{
    int heads = j->kv->heads;
    if (j->lanes) {
        int units = lane_vectors(j) * lane_column_blocks(j);
        merge_lane_units(j, (int)((long)k * units / j->merge_items), (int)((long)(k + 1) * units / j->merge_items), 1);
        return;
    }
    int h0 = (int)((long)k * heads / j->merge_items), h1 = (int)((long)(k + 1) * heads / j->merge_items);
    int g1 = (h1 - 1) / j->group_heads;
    for (int g = h0 / j->group_heads; g <= g1; g++) wait_for_group(j, g);
    merge_heads(j, h0, h1);
}

/* Item i of the row: a chunk x group of heads, then (i >= n_items) a merge. */
static void row_item(void *arg, int i)
{
    const row_job *j = arg;
    if (i < j->n_items) run_item(arg, i);
    else merge_run(j, i - j->n_items);
}

static void (*item_path(void))(const attention_item *)
{
    switch (kernels_path()) {
    case CPU_PATH_AVX512: return attention_item_avx512;
    case CPU_PATH_AVX2: return attention_item_avx2;
    default: return attention_item_scalar;
    }
}

static merge_columns_fn merge_path(void)
{
    switch (kernels_path()) {
    case CPU_PATH_AVX512: return merge_columns_512;
    case CPU_PATH_AVX2: return merge_columns_256;
    default: return merge_columns_128;
    }
}

/* Chunk length: n / ATTN_CHUNK_TARGET chunks, at least 2 (two threads share even a short row) and
 * at most ATTN_MAX_CHUNKS, each a whole number of blocks and no shorter than ATTN_MIN_CHUNK. A short
 * row on a machine of many CPUs would leave most of them idle: a row of few heads is one group, so
 * its chunks are its only items, and it is memory-bound (a chunk runs at one core's bandwidth, ~10
 * GB/s on the Xeon); R1's 128 heads on AVX-512 are 4 groups, so a 1k row is 8 items. Such a row is
 * cut into enough chunks that chunks x groups of group_unit heads cover the machine's CPUs, down to
 * ATTN_SHORT_CHUNK positions (many heads) or ATTN_SHORT_CHUNK_FEW (one group). The count follows the
 * machine, never the pool, so the result stays bit-identical for any thread count; not the pool's
 * either because short chunks cost a thread that runs several (their partial sums, the first
 * block's second pass of the maximum): embedded width, 1k-8k positions, 1 thread 2-7% slower with
 * 16 chunks than with 2-8; R1's widths on one AVX-512 core, 1k, 3-4 points lower with 4 chunks than
 * with 2 (in two runs of four). Chunks of 128 for one group: 16-core Xeon, embedded width, 1k, 16
 * threads 8-16 points nearer the roof than 256 (4 items of 25 us, each at one core's bandwidth),
 * 1 thread ~5% slower; 64 gained less and cost 1 thread 17%. A 2-CPU machine keeps its chunks.
 * A long row on a machine of few CPUs gets at most ATTN_CHUNKS_PER_CPU chunks per CPU, longer ones:
 * more only add partial sums to merge and items to start (Intel Xeon, 2 CPUs, 16k-32k, 8 chunks
 * against 16-32: R1's widths 1.8-3.7% faster on 1-2 threads, AVX-512 and AVX2; the embedded width
 * 1.00-1.04x). From 8 CPUs ATTN_MAX_CHUNKS binds first: nothing changes there. */
static int chunk_length(int n, int heads, int machine_cpus, int group_unit)
{
    int chunks = n / ATTN_CHUNK_TARGET, shortest = ATTN_MIN_CHUNK;
    chunks = chunks > ATTN_CHUNKS_PER_CPU * machine_cpus ? ATTN_CHUNKS_PER_CPU * machine_cpus : chunks;
    chunks = chunks < 2 ? 2 : chunks;
    int groups = (heads + group_unit - 1) / group_unit;
    int cover = (machine_cpus + groups - 1) / groups;
    int least = heads > ATTN_GROUP_HEADS ? ATTN_SHORT_CHUNK : ATTN_SHORT_CHUNK_FEW;
    int spread = n / least < cover ? n / least : cover;
    if (spread > chunks) chunks = spread, shortest = least;
    chunks = chunks > ATTN_MAX_CHUNKS ? ATTN_MAX_CHUNKS : chunks;
    int per = (n + chunks - 1) / chunks;
    per = (per + ATTN_BLOCK - 1) / ATTN_BLOCK * ATTN_BLOCK;
    return per < shortest ? shortest : per;
}

/* CPUs from which a row of few heads is cut into long and short chunks (cut_row) */
#define ATTN_CUT_FEW_CPUS 8

/* The row's chunks: chunk_length's, except that a row with one or two items per CPU has each
 * chunk's last quarter cut off and dealt out again as short chunks after the long ones. Equal
 * items, one per CPU, finish when the slowest core does, and cores are not equal: a hybrid CPU's,
 * or a shared host's (16-core Xeon, R1's widths at 4k positions: the same item took 0.80x to 1.35x
 * its call's median on different CPUs). The long items go first and whichever threads finish them
 * first take the short ones: R1's widths, 16 threads, 4k, 1.16-1.29x faster, 8k 1.16-1.20x; 1
 * thread, with twice the chunks, 1.5-3.5% slower. Rows of one group of heads (the embedded
 * width) too, on a machine of ATTN_CUT_FEW_CPUS or more, from chunks of 512 positions: 16 CPUs,
 * 8k-16k, 16 threads 0.99-1.20x faster, 1 thread 1-6.5% slower. Not on 2 CPUs, where such a row's
 * chunks are dealt out in runs of consecutive ones (chunk_of_item), which the cut breaks (2
 * threads, 4k: 0.80-0.86x); not R1's below 1k-position chunks (1k on AVX2, 16 threads: 0.70x, its
 * groups of 16 going back to 32). Like the chunk length, the cut follows the machine, never the
 * pool. */
static void cut_row(row_job *j, int n, int heads, int machine_cpus, int group_unit)
{
    int len = chunk_length(n, heads, machine_cpus, group_unit), chunks = (n + len - 1) / len;
    int groups = (heads + group_unit - 1) / group_unit;
    int lng = len * 3 / 4 / ATTN_BLOCK * ATTN_BLOCK, shrt = len - lng, rest = n - chunks * lng;
    int shorts = rest > 0 ? (rest + shrt - 1) / shrt : 0;
    int many = heads > ATTN_GROUP_HEADS, shortest = many ? ATTN_CHUNK_TARGET : ATTN_MIN_CHUNK;
    if ((many || machine_cpus >= ATTN_CUT_FEW_CPUS) && len >= shortest && chunks * groups <= 2 * machine_cpus &&
        shorts > 0 && chunks + shorts <= ATTN_MAX_CHUNKS)
        j->n_chunks = chunks + shorts, j->n_long = chunks, j->long_len = lng, j->short_len = shrt;
    else
        j->n_chunks = chunks, j->n_long = 0, j->long_len = len, j->short_len = len;
}

/* Heads per group when chunk_length counts a short row's items. AVX-512 runs a group of 16 heads
 * load-bound (group_heads), so there a short row of many heads gets more chunks of its groups of 32:
 * 16-core Xeon, R1's widths, 16 threads, 1k, 4 chunks x 4 groups 58-68% of the roof against 50-57%
 * for 2 chunks x 8 groups of 16. The AVX2 and scalar paths compute a head the same way in a group
 * of 16 and lose nothing by it, while shorter chunks cost them: there the same spread read 5-8
 * points lower at 1k-2k, so they count groups of 16 and a 16-CPU machine keeps their chunks. */
static int spread_group_heads(void)
{
    return kernels_path() == CPU_PATH_AVX512 ? ATTN_GROUP_HEADS : ATTN_GROUP_HEADS / 2;
}

/* Online CPUs, read once: the machine's, not this process's affinity mask, which may change. */
static int machine_cpus(void)
{
    static atomic_int cpus = 0;
    int v = atomic_load_explicit(&cpus, memory_order_relaxed);
    if (v == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        v = c < 1 ? 1 : c > ATTN_MAX_CHUNKS ? ATTN_MAX_CHUNKS : (int)c;
        atomic_store_explicit(&cpus, v, memory_order_relaxed);
    }
    return v;
}

/* Heads per item: ATTN_GROUP_HEADS, or half that when a row of many heads would leave at least half
 * the pool's threads without an item, so that every half-group item gets a thread of its own (a
 * short row on many cores: on AVX2, at R1's 128 heads, a 1k row is 2 chunks x 4 groups, 8 items
 * for 16 threads). Unlike the chunks this may follow the thread count: every path computes a head of a
 * row of more than 16 heads the same way whatever group holds it (they choose their loop by the
 * row's heads, and a head's lanes never meet another's). Not sooner: on AVX-512 a group of 16 is
 * one vector whose every broadcast feeds one FMA instead of two, and the loads bind (16-core Xeon,
 * R1's widths, F32, 8 threads at 1k: 57% of the roof with groups of 32, 42% with 16). */
static int group_heads(int heads, int n_chunks, int n_threads)
{
    /* a row of 16 heads or fewer is one group either way */
    int full = (heads + ATTN_GROUP_HEADS - 1) / ATTN_GROUP_HEADS;
    return 2 * n_chunks * full <= n_threads ? ATTN_GROUP_HEADS / 2 : ATTN_GROUP_HEADS;
}

/* Groups per item. One, but for AVX-512's loop for many heads on a row with ITEMS_PER_THREAD or more
 * chunks per thread: there an item runs all its chunk's groups (up to ATTN_ITEM_GROUPS) block by
 * block, so a block comes from DRAM once, not once per group, and the other groups read it from
 * L2. Run one after another, the first group of a chunk read its rows from DRAM at 1.19-1.38x the
 * pace of the three after it, which read them from L3 (Intel Xeon, 2 MiB L2, R1 F32 16k, 1
 * thread; a chunk of 1k positions is 2.4 MB). Not on fewer chunks: their items are what spreads a
 * row over the threads. The groups of an item are the same FMAs in the same order as one group
 * per item: the bits do not change. */
#define ITEMS_PER_THREAD 4
static int item_groups_for(const row_job *j)
{
    int most = item_groups_most(j->kv->heads);
    if (!j->lanes || j->group_heads != ATTN_GROUP_HEADS || most < 2 || j->n_chunks < ITEMS_PER_THREAD * j->n_threads)
        return 1;
    while (j->n_groups % most) most--;
    return most;
}

void attention_row_on_machine(thread_pool *pool, const attention_kv *kv, int n, const float *q_lat,
                              const float *q_rope, float *out, void *scratch, int machine_cpus,
                              attention_trace *trace)
{
    if (trace) trace->start = attention_clock_ns();
    static atomic_uint calls;
    row_job j = {.kv = kv, .q_lat = q_lat, .q_rope = q_rope, .out = out, .n = n, .n_threads = thread_pool_size(pool),
                 .l1_prefetch_bytes = attention_l1_prefetch_bytes(), .l1d_bytes = attention_l1d_bytes(),
                 .item = item_path(), .merge_columns = merge_path(), .trace = trace,
                 .call = atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed) + 1};
    carve(kv->heads, kv->R, kv->rope, j.n_threads, scratch, &j.s);
    cut_row(&j, n, kv->heads, machine_cpus, spread_group_heads());
    j.group_heads = group_heads(kv->heads, j.n_chunks, j.n_threads);
    j.n_groups = (kv->heads + j.group_heads - 1) / j.group_heads;
    j.lanes = j.item == attention_item_avx512 && kv->heads > ATTN_GROUP_HEADS / 2;
    j.item_groups = item_groups_for(&j);
    j.n_items = j.n_chunks * items_per_chunk(&j);
    /* a small merge (the embedded width's 4 heads in 2-4 chunks) costs less on the caller than on
     * the pool's threads: 7 us on the pool against 2.5 us by the caller (16-core Xeon, 16 threads,
     * 1k positions in 4 chunks, merged in a second parallel-for) */
    int on_pool = (size_t)kv->heads * j.n_chunks * kv->R >= ATTN_MERGE_ON_POOL && j.n_threads > 1;
    j.merge_items = on_pool ? (j.n_threads < kv->heads ? j.n_threads : kv->heads) : 0;
    for (int g = 0; g < j.n_groups; g++) atomic_store_explicit(&j.s.done[g], 0, memory_order_relaxed);
    /* help where a row is one or two items per thread (with more, the pool's own hand-out evens the
     * threads out, and the help's traffic cost a 2-CPU Zen 5 2.5% at R1's 1k, 8 items on 2 threads),
     * on AVX-512's loop for many heads */
    j.help = on_pool && j.s.help && j.item == attention_item_avx512 && kv->heads > ATTN_GROUP_HEADS / 2 &&
             j.item_groups == 1 && j.n_items <= help_items_most(j.n_threads) &&
             j.long_len <= ATTN_HELP_POSITIONS && j.short_len <= ATTN_HELP_POSITIONS &&
             kv->R <= ATTN_HELP_SLICES * ATTN_HELP_SLICE;
    if (j.help) reset_help(&j);
    thread_pool_for(pool, j.n_items + j.merge_items, row_item, &j);
    if (trace) {
        /* with the merge on the pool, the items are done when the last one ended */
        trace->items = j.n_items, trace->items_done = on_pool ? trace->start : attention_clock_ns();
        for (int i = 0; on_pool && i < j.n_items && i < ATTN_TRACE_ITEMS; i++)
            if (trace->item_end[i] > trace->items_done) trace->items_done = trace->item_end[i];
        trace->tiles = trace->helped = 0;
        for (int i = 0; j.help && i < j.n_items; i++)
            trace->tiles += j.s.help[i].tiles, trace->helped += atomic_load_explicit(&j.s.help[i].helped, memory_order_relaxed);
        for (int i = 0; i < j.n_items && i < ATTN_TRACE_ITEMS; i++) {
            trace->item_first_help[i] = j.help ? atomic_load_explicit(&j.s.help[i].first_help_ns, memory_order_relaxed) : 0;
            trace->item_owner_wait[i] = j.help ? atomic_load_explicit(&j.s.help[i].owner_wait_ns, memory_order_relaxed) : 0;
        }
    }
    if (!on_pool) {
        if (j.lanes) merge_lane_units(&j, 0, lane_vectors(&j) * lane_column_blocks(&j), 0);
        else merge_heads(&j, 0, kv->heads);
    }
    if (trace) trace->merged = attention_clock_ns();
}

void attention_row_traced(thread_pool *pool, const attention_kv *kv, int n, const float *q_lat, const float *q_rope,
                          float *out, void *scratch, attention_trace *trace)
{
    attention_row_on_machine(pool, kv, n, q_lat, q_rope, out, scratch, machine_cpus(), trace);
}

void attention_row(thread_pool *pool, const attention_kv *kv, int n, const float *q_lat, const float *q_rope, float *out,
                   void *scratch)
{
    attention_row_traced(pool, kv, n, q_lat, q_rope, out, scratch, NULL);
}

/* ---------- the scalar path ---------- */

/* Four interleaved partial sums: independent add chains (the reference tests run this path too). */
static float dot(const float *a, const float *b, int n)
{
    float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int k = 0;
    for (; k + 4 <= n; k += 4)
        for (int i = 0; i < 4; i++) p[i] += a[k + i] * b[k + i];
    for (; k < n; k++) p[0] += a[k] * b[k];
    return (p[0] + p[1]) + (p[2] + p[3]);
}

static void attn_scores(const float *ql, const float *qr, int nh, const float *lat, const float *kr, int nt, int R,
                        int rope, float scale, float *s, const attention_ahead *ahead)
{
    attention_prefetch(ahead, 0, nt);
    for (int h = 0; h < nh; h++)
        for (int t = 0; t < nt; t++)
            s[h * ATTN_BLOCK + t] = (dot(ql + (size_t)h * R, lat + (size_t)t * R, R) +
                                     dot(qr + (size_t)h * rope, kr + (size_t)t * rope, rope)) * scale;
}

static void attn_softmax_block(float *s, int nh, int nt, float *m, float *l, float *alpha)
{
    for (int h = 0; h < nh; h++) {
        float *sh = s + h * ATTN_BLOCK, mx = m[h], sum = 0.0f;
        for (int t = 0; t < nt; t++) mx = fmaxf(mx, sh[t]);
        for (int t = 0; t < nt; t++) {
            sh[t] = expf(sh[t] - mx);
            sum += sh[t];
        }
        alpha[h] = expf(m[h] - mx);
        l[h] = l[h] * alpha[h] + sum;
        m[h] = mx;
    }
}

static void attn_weighted(float *acc, int nh, int R, const float *alpha, const float *s, const float *lat, int nt)
{
    for (int h = 0; h < nh; h++) {
        float *a = acc + (size_t)h * R;
        for (int k = 0; k < R; k++) a[k] *= alpha[h];
        for (int t = 0; t < nt; t++) {
            float p = s[h * ATTN_BLOCK + t];
            for (int k = 0; k < R; k++) a[k] += p * lat[(size_t)t * R + k];
        }
    }
}

static void attn_widen_bf16(const uint16_t *src, int n, float *dst)
{
    for (int i = 0; i < n; i++) dst[i] = bf16_to_float(src[i]);
}

#define ATTN_ISA scalar
#include "core/attention_driver.h"
