/* attention_row against a float64 softmax attention written out in full, on random queries and
 * caches: R1's widths (128 heads, kv_lora 512, rope 64), 40 and 20 heads with tails (the loops for
 * rows of many heads, in groups of 32, or 16 on more threads) and odd small ones (5 heads, 72, 24:
 * every vector tail), F32 and BF16 caches (the reference reads the same BF16 values), every kernel
 * path, lengths on both sides of the block, chunk and chunk-growth boundaries, keys whose scores
 * jump or creep along the positions (running maxima that rise mid-item). And the invariance that
 * speculation and reproducibility rest on: the result is bit-identical for 1, 2, 3, 4 and 8
 * threads, as on a machine of 2 CPUs and of 16 (where a short row is cut into more, shorter chunks:
 * few heads from 384 positions, 16 chunks of 128 at 2048, 40 heads on AVX2 and R1's on AVX-512 at
 * 1100; and where a row with few items per CPU has each chunk's last quarter dealt out as short
 * chunks after the long ones, 40 heads and R1's at 4100 positions, 4 heads at 8300, a ragged short
 * chunk last; the pool's size must not change them). A row of many heads is cut into groups of 16
 * instead of 32 when the pool has at least twice as many threads as items: as on 2 CPUs, at R1's
 * widths from 8 threads at 300 positions, 16 at 1100; at 40 heads from 4 threads at 300, 8 at 1100.
 * A row with four or more chunks per thread runs all of a chunk's groups of 32 in one item, block by
 * block (AVX-512, R1's widths at 4100 on 1 thread): bit-identical to the items of one group that 2-8
 * threads run, and the item counts show that each ran (check_shared_groups). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/attention_internal.h"
#include "core/kernels.h"
#include "tests/test_check.h"

typedef struct { int heads, R, rope; } widths;

static uint64_t rng_state = 88172645463325252ull;
static double uniform(void)  /* xorshift64*, [-1, 1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* Random values in [-amp, amp) as floats. */
static void fill_floats(float *dst, size_t n, double amp)
{
    for (size_t i = 0; i < n; i++) dst[i] = (float)(amp * uniform());
}

/* The floats as the cache stores them (F32, or BF16 with src rewritten to the rounded values the
 * reference uses). */
static void to_cache(float *src, void *cache, size_t n, dtype_t dt)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == DTYPE_BF16) {
            ((uint16_t *)cache)[i] = float_to_bf16(src[i]);
            src[i] = bf16_to_float(((uint16_t *)cache)[i]);
        } else {
            ((float *)cache)[i] = src[i];
        }
    }
}

/* Optional rewrite of a case's keys (before they go into the cache) given its queries. */
typedef void (*key_shape)(const widths *w, int n, const float *qr, float *kr);

/* The rope keys of head 0's query direction at a few positions, ever stronger: each raises head 0's
 * scaled score by ~30 over the one before, far more than the few-heads loops' lazy margin (8), and
 * past the third exp(score - first maximum) would overflow F32 had the maximum not moved. */
static void spikes(const widths *w, int n, const float *qr, float *kr)
{
    double norm = 0;
    for (int k = 0; k < w->rope; k++) norm += (double)qr[k] * qr[k];
    norm = sqrt(norm);
    for (int i = 1; i <= 6; i++) {
        int t = (int)((long)n * (2 * i - 1) / 12);
        for (int k = 0; k < w->rope; k++) kr[(size_t)t * w->rope + k] = (float)(qr[k] / norm * 200.0 / norm * i);
    }
}

/* Keys growing along the positions: every head's maximum rises block after block by less than the
 * lazy margin (weights up to e^8 against a stale maximum) and now and then by more. */
static void rising(const widths *w, int n, const float *qr, float *kr)
{
    (void)qr;
    for (int t = 0; t < n; t++)
        for (int k = 0; k < w->rope; k++) kr[(size_t)t * w->rope + k] *= (float)(1.0 + 6.0 * t / n);
}

/* out[h] in float64: the textbook two-pass softmax over all n positions. */
static void reference(const widths *w, int n, const float *ql, const float *qr, const float *lat, const float *kr,
                      double scale, double *out)
{
    double *s = malloc((size_t)n * sizeof *s);
    for (int h = 0; h < w->heads; h++) {
        double mx = -INFINITY, sum = 0;
        for (int t = 0; t < n; t++) {
            double d = 0;
            for (int k = 0; k < w->R; k++) d += (double)ql[(size_t)h * w->R + k] * lat[(size_t)t * w->R + k];
            for (int k = 0; k < w->rope; k++) d += (double)qr[(size_t)h * w->rope + k] * kr[(size_t)t * w->rope + k];
            s[t] = d * scale;
            if (s[t] > mx) mx = s[t];
        }
        for (int t = 0; t < n; t++) sum += (s[t] = exp(s[t] - mx));
        for (int k = 0; k < w->R; k++) {
            double o = 0;
            for (int t = 0; t < n; t++) o += s[t] * lat[(size_t)t * w->R + k];
            out[(size_t)h * w->R + k] = o / sum;
        }
    }
    free(s);
}

/* A case's cache and queries: random latents and keys in [-1, 1), queries in [-qamp, qamp), the keys
 * rewritten by shape (if any) given the queries, then stored as the cache's dtype (lat and kr keep
 * the values the cache holds, for the reference). */
typedef struct {
    float *lat, *kr, *q;
    void *clat, *ckr;
    attention_kv kv;
    const float *ql, *qr;
} test_row;

static test_row row_create(const widths *w, int n, dtype_t dt, double qamp, key_shape shape, float scale)
{
    size_t es = dtype_size(dt), nq = (size_t)w->heads * (w->R + w->rope);
    test_row r = {.lat = malloc((size_t)n * w->R * sizeof(float)), .kr = malloc((size_t)n * w->rope * sizeof(float)),
                  .q = malloc(nq * sizeof(float)), .clat = malloc((size_t)n * w->R * es),
                  .ckr = malloc((size_t)n * w->rope * es)};
    fill_floats(r.lat, (size_t)n * w->R, 1.0);
    fill_floats(r.kr, (size_t)n * w->rope, 1.0);
    fill_floats(r.q, nq, qamp);
    r.ql = r.q;
    r.qr = r.q + (size_t)w->heads * w->R;
    if (shape) shape(w, n, r.qr, r.kr);
    to_cache(r.lat, r.clat, (size_t)n * w->R, dt);
    to_cache(r.kr, r.ckr, (size_t)n * w->rope, dt);
    r.kv = (attention_kv){w->heads, w->R, w->rope, dt, r.clat, r.ckr, scale};
    return r;
}

static void row_free(test_row *r)
{
    free(r->lat); free(r->kr); free(r->q); free(r->clat); free(r->ckr);
}

/* The largest |out - want| over n values (NaN if any is: fmax would pass over a NaN). */
static double max_error(const float *out, const double *want, size_t n)
{
    double err = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(out[i] - want[i]);
        err = isnan(d) || isnan(err) ? NAN : fmax(err, d);
    }
    return err;
}

/* attention_row as on a machine of `machine` CPUs (they set how many chunks a short row is cut
 * into; the pool's size must not), traced into tr if it is not NULL. */
static void run(const test_row *r, int n, int machine, int threads, float *out, attention_trace *tr)
{
    thread_pool *pool = thread_pool_create(threads);
    size_t bytes = attention_scratch_bytes(r->kv.heads, r->kv.R, r->kv.rope, threads);
    void *scratch = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    memset(scratch, 0, bytes);
    attention_row_on_machine(pool, &r->kv, n, r->ql, r->qr, out, scratch, machine, tr);
    free(scratch);
    thread_pool_free(pool);
}

/* One case, as on a machine of 2 CPUs and of 16: error against float64 relative to the largest
 * latent value (the output is a convex combination of latents), and 2, 3, 4 and 8 threads
 * bit-identical to 1. */
static void check_shaped(const widths *w, int n, dtype_t dt, double qamp, key_shape shape)
{
    size_t no = (size_t)w->heads * w->R;
    double scale = 1.0 / sqrt((double)(w->R + w->rope) / 4.0);
    test_row r = row_create(w, n, dt, qamp, shape, (float)scale);
    float *out1 = malloc(no * sizeof(float)), *outk = malloc(no * sizeof(float));
    double *want = malloc(no * sizeof(double));
    reference(w, n, r.ql, r.qr, r.lat, r.kr, (double)(float)scale, want);
    /* a machine of 2 CPUs (long chunks) and one of 16 (a row of few heads from 384 positions cut
     * into up to 16 chunks of 128 or more; of many heads, into chunks enough for 16 items) */
    static const int machines[] = {2, 16}, threads[] = {2, 3, 4, 8};
    for (size_t m = 0; m < sizeof machines / sizeof *machines; m++) {
        run(&r, n, machines[m], 1, out1, NULL);
        double err = max_error(out1, want, no);
        CHECK(err <= 2e-5, "%s %d heads R %d rope %d n %d %s%s, %d CPUs: max error %.3g against float64",
              cpu_path_name(kernels_path()), w->heads, w->R, w->rope, n, dt == DTYPE_BF16 ? "bf16" : "f32",
              shape ? " (shaped keys)" : "", machines[m], err);
        for (size_t i = 0; i < sizeof threads / sizeof *threads; i++) {
            run(&r, n, machines[m], threads[i], outk, NULL);
            CHECK(!memcmp(out1, outk, no * sizeof(float)), "%s %d heads n %d, %d CPUs: %d threads differ from 1",
                  cpu_path_name(kernels_path()), w->heads, n, machines[m], threads[i]);
        }
    }
    row_free(&r);
    free(out1); free(outk); free(want);
}

static void check_case(const widths *w, int n, dtype_t dt, double qamp) { check_shaped(w, n, dt, qamp, NULL); }

/* A short row of many heads with about one item per thread, where threads whose items are done
 * score tiles and weigh column slices of the running items (AVX-512): on more threads than this
 * machine has CPUs the items' owners lose their cores now and then, so helpers do part of their
 * work. 1 thread's result within 2e-5 of float64, then calls until helpers did some (failing if in
 * 400 calls they never did), every result bit-identical to 1 thread's: who did which piece must
 * not change a bit. */
static void check_helped(const widths *w, int n, dtype_t dt)
{
    size_t no = (size_t)w->heads * w->R;
    test_row r = row_create(w, n, dt, 2.0, NULL, 0.07f);
    float *out1 = malloc(no * sizeof(float)), *outk = malloc(no * sizeof(float));
    attention_trace *tr = malloc(sizeof *tr);
    run(&r, n, 16, 1, out1, NULL);
    double *want = malloc(no * sizeof(double));
    reference(w, n, r.ql, r.qr, r.lat, r.kr, (double)0.07f, want);
    double err = max_error(out1, want, no);
    CHECK(err <= 2e-5, "%d heads n %d %s, 16 CPUs: max error %.3g against float64", w->heads, n,
          dt == DTYPE_BF16 ? "bf16" : "f32", err);
    free(want);
    /* one pool for every call: a pool per call would start its threads afresh and rarely lose a core */
    int threads = 16, helped = 0, calls = 0, same = 1;
    thread_pool *pool = thread_pool_create(threads);
    size_t bytes = attention_scratch_bytes(r.kv.heads, r.kv.R, r.kv.rope, threads);
    void *scratch = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    memset(scratch, 0, bytes);
    for (; calls < 400 && (helped == 0 || calls < 20); calls++) {
        attention_row_on_machine(pool, &r.kv, n, r.ql, r.qr, outk, scratch, 16, tr);
        helped += tr->helped;
        same &= !memcmp(out1, outk, no * sizeof(float));
    }
    CHECK(helped > 0, "%d heads n %d %s on %d threads: no piece of a running item was helped in %d calls", w->heads,
          n, dt == DTYPE_BF16 ? "bf16" : "f32", threads, calls);
    CHECK(same, "%d heads n %d %s: a call that helpers took part in differs from 1 thread's", w->heads, n,
          dt == DTYPE_BF16 ? "bf16" : "f32");
    printf("help: %d heads n %d %s, %d pieces helped in %d calls, all bit-identical to 1 thread\n", w->heads, n,
           dt == DTYPE_BF16 ? "bf16" : "f32", helped, calls);
    free(scratch);
    thread_pool_free(pool);
    row_free(&r);
    free(out1); free(outk); free(tr);
}

/* R1's row of 4100 positions as on 2 CPUs (4 chunks): on 1 thread, 4 chunks per thread, one item
 * per chunk runs its four groups of 32 block by block; on 2 threads an item per chunk and group.
 * The traced item counts show which ran, and the two must agree to the bit. */
static void check_shared_groups(const widths *w, int n, dtype_t dt)
{
    size_t no = (size_t)w->heads * w->R;
    test_row r = row_create(w, n, dt, 0.5, NULL, 0.07f);
    float *out[2] = {malloc(no * sizeof(float)), malloc(no * sizeof(float))};
    attention_trace *tr = malloc(sizeof *tr);
    int items[2];
    for (int k = 0; k < 2; k++) {
        run(&r, n, 2, k + 1, out[k], tr);
        items[k] = tr->items;
    }
    CHECK(items[1] == 4 * items[0], "%d heads n %d %s: 1 thread ran %d items, 2 threads %d (expected 4 groups per item "
          "on 1 thread)", w->heads, n, dt == DTYPE_BF16 ? "bf16" : "f32", items[0], items[1]);
    CHECK(!memcmp(out[0], out[1], no * sizeof(float)), "%d heads n %d %s: items of four groups differ from items of one",
          w->heads, n, dt == DTYPE_BF16 ? "bf16" : "f32");
    row_free(&r);
    free(out[0]); free(out[1]); free(tr);
}

int main(void)
{
    /* tiny and pairs: four heads or fewer with R and rope multiples of 32, which AVX-512 runs with
     * BF16 widened in registers (pairs also ends on a half tile of 32 columns) */
    static const widths small = {5, 72, 24}, r1 = {128, 512, 64}, tiny = {4, 128, 32}, pairs = {3, 96, 32};
    /* few_tails: four heads or fewer whose widths end in tails of every vector length (the few-heads
     * loops' masks, tails shorter than 8) */
    static const widths few_tails[] = {{4, 136, 20}, {1, 40, 8}, {2, 200, 40}, {3, 72, 24}};
    static const int pairs_n[] = {1, 5, 33, 300, 1100};
    static const int small_n[] = {1, 3, 31, 32, 33, 255, 257, 1000, 8192, 8300};
    static const int r1_n[] = {1, 37, 300, 1100, 4100};
    /* the loops for rows of many heads: 40 heads, groups of 32 and 8 (16, 16 and 8 on more threads),
     * R ending on a tile of 4 columns and a transpose of 4; 20 heads, padded to 32 */
    static const widths wide[] = {{40, 100, 24}, {20, 72, 40}};
    static const int wide_n[] = {1, 37, 300, 1100, 4100};
    int cases = 0;
    for (int p = CPU_PATH_SCALAR; p <= CPU_PATH_AVX512; p++) {
        if (!cpu_path_available((cpu_path)p)) { printf("kernel path %s: not on this CPU\n", cpu_path_name((cpu_path)p)); continue; }
        kernels_init((cpu_path)p);
        for (int dt = 0; dt < 2; dt++) {
            dtype_t d = dt ? DTYPE_BF16 : DTYPE_F32;
            for (size_t i = 0; i < sizeof small_n / sizeof *small_n; i++, cases++) check_case(&small, small_n[i], d, 1.0);
            /* Peaked softmax (scores spread over tens): the running max changes block to block. */
            check_case(&tiny, 3000, d, 8.0);
            /* as on 16 CPUs, 15 chunks of 576 positions, each one's last quarter dealt out again
             * after the long ones, a ragged short chunk last */
            check_case(&tiny, 8300, d, 1.0);
            /* as on 16 CPUs, 16 chunks of ATTN_SHORT_CHUNK_FEW positions */
            check_case(&tiny, 2048, d, 1.0);
            /* past ATTN_MAX_CHUNKS chunks of ATTN_CHUNK_TARGET positions, where chunks grow longer */
            check_case(&tiny, 33000, d, 1.0);
            /* running maxima that jump (spikes) and creep (rising) inside items and blocks: the
             * few-heads loops' lazy maximum and its second pass */
            check_shaped(&tiny, 3000, d, 2.0, spikes);
            check_shaped(&tiny, 3000, d, 2.0, rising);
            check_shaped(&pairs, 1100, d, 2.0, spikes);
            check_shaped(&few_tails[0], 1100, d, 2.0, rising);
            cases += 8;
            for (size_t i = 0; i < sizeof pairs_n / sizeof *pairs_n; i++, cases++) check_case(&pairs, pairs_n[i], d, 2.0);
            for (size_t w = 0; w < sizeof few_tails / sizeof *few_tails; w++)
                for (size_t i = 0; i < sizeof pairs_n / sizeof *pairs_n; i++, cases++) check_case(&few_tails[w], pairs_n[i], d, 2.0);
            for (size_t w = 0; w < sizeof wide / sizeof *wide; w++)
                for (size_t i = 0; i < sizeof wide_n / sizeof *wide_n; i++, cases++) check_case(&wide[w], wide_n[i], d, 1.0);
            check_shaped(&wide[0], 1100, d, 2.0, spikes);
            cases++;
            for (size_t i = 0; i < sizeof r1_n / sizeof *r1_n; i++, cases++)
                if (p != CPU_PATH_SCALAR || r1_n[i] <= 300) check_case(&r1, r1_n[i], d, 0.5);
            cases++;
            if (p == CPU_PATH_AVX512) { /* help runs on AVX-512's loop for many heads only */
                check_helped(&r1, 1024, d);
                check_helped(&wide[0], 1024, d); /* groups of 16, 16 and 8; slices of 48, 48 and 4 columns */
                check_shared_groups(&r1, 4100, d);
                cases += 3;
            }
        }
    }
    printf("%d attention cases checked\n", cases);
    printf("%s\n", test_failures ? "FAILED" : "all attention checks passed");
    return test_failures ? 1 : 0;
}
