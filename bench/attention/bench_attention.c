/* Absorbed-MLA attention (core/attention.c) per token per layer, at R1's widths (128 heads,
 * kv_lora 512, rope 64) and the embedded model's (4 heads, 128, 32), beside two roofs measured in
 * the same run on the same threads:
 *   compute roof = the attention's FLOPs (2 (R + rope) for a score, 2 R for the weighted latent,
 *                  per head and position) / this machine's FMA peak (independent FMA chains on the
 *                  kernel path's vectors);
 *   memory roof  = the cache bytes read (T (R + rope) x 4 or 2) / the read bandwidth (a sum over a
 *                  buffer far larger than the LLC).
 * The binding roof is the larger of the two times; the bench reports what share of it the kernel
 * reaches. Each call reads a different copy of the layer's cache, laid across a buffer far larger
 * than the LLC, so the cache comes from DRAM as in decode (61 layers of R1 at 32k are 2.2 GB).
 * On a shared machine a core is not always the bench's: so every attention call is followed by a
 * probe of each roof doing exactly that call's FLOPs (FMA chains) and reading exactly its bytes
 * (another part of the buffer), on the same pool, and the share of the roof is the median of the
 * per-call ratios: call and probes see the same contention. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include "core/attention_internal.h"
#include "core/kernels.h"
#include "bench/attention/attention_bench.h"

typedef struct { const char *name; int heads, R, rope; } widths;
static const widths shapes[] = {{"R1", 128, 512, 64}, {"embedded", 4, 128, 32}};

typedef struct {
    int threads, shape_only, dtype_only, n_T, T[16], trace, machine_cpus;
    double seconds;
    size_t buffer_bytes;
    cpu_path path;
} bench_options;

/* ---------- FMA peak ---------- */

enum { PROBE_ITERS = 1000 };

/* 12 independent chains: enough to cover the FMA latency times the FMA ports of current cores. */
__attribute__((target("avx512f,fma"))) static float fma_chains_512(int iters)
{
    __m512 a[12], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
    for (int it = 0; it < iters; it++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
    __m512 s = a[0];
    for (int i = 1; i < 12; i++) s = _mm512_add_ps(s, a[i]);
    return _mm512_reduce_add_ps(s);
}

static float fma_chains_256(int iters)
{
    float out[8], s = 0;
    bench_fma_probe_avx2(iters, out);
    for (int i = 0; i < 8; i++) s += out[i];
    return s;
}

typedef struct { cpu_path path; float sink[64]; } peak_job;

static void peak_item(void *arg, int i)
{
    peak_job *j = arg;
    j->sink[i % 64] = j->path == CPU_PATH_AVX512 ? fma_chains_512(PROBE_ITERS) : fma_chains_256(PROBE_ITERS);
}

static double probe_item_flops(cpu_path path) { return (double)PROBE_ITERS * 12 * (path == CPU_PATH_AVX512 ? 16 : 8) * 2; }

/* Seconds the pool takes for `flops` FLOPs of independent FMA chains. */
static double compute_probe(thread_pool *pool, cpu_path path, double flops)
{
    int items = (int)(flops / probe_item_flops(path) + 0.5);
    peak_job j = {.path = path};
    double t0 = bench_now_s();
    thread_pool_for(pool, items > 0 ? items : 1, peak_item, &j);
    return bench_now_s() - t0;
}

/* ---------- read bandwidth ---------- */

enum { READ_ITEM_BYTES = 64 << 10 };
typedef struct { const char *buf; uint64_t sink[64]; } read_job;

/* Sums one 64 KiB item with 4 independent 64-bit sums per line: bound by loads, not adds. */
static void read_item(void *arg, int i)
{
    read_job *j = arg;
    const uint64_t *q = (const uint64_t *)(j->buf + (size_t)i * READ_ITEM_BYTES);
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t k = 0; k < READ_ITEM_BYTES / 8; k += 8) {
        __builtin_prefetch((const char *)(q + k) + 4096);
        s0 += q[k] + q[k + 4];
        s1 += q[k + 1] + q[k + 5];
        s2 += q[k + 2] + q[k + 6];
        s3 += q[k + 3] + q[k + 7];
    }
    j->sink[i % 64] = s0 + s1 + s2 + s3;
}

/* Seconds the pool takes to read `bytes` (whole 64 KiB items) from buf. */
static double memory_probe(thread_pool *pool, const char *buf, double bytes)
{
    int items = (int)(bytes / READ_ITEM_BYTES + 0.5);
    read_job j = {.buf = buf};
    double t0 = bench_now_s();
    thread_pool_for(pool, items > 0 ? items : 1, read_item, &j);
    return bench_now_s() - t0;
}

/* ---------- the attention ---------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

enum { MAX_CALLS = 4096 };

/* --trace, per call (us): when the last item started, the items' median and longest time, the merge
 * (what of it ran after the last item ended), the whole call. */
enum { TRACE_LAST_START, TRACE_ITEM_MEDIAN, TRACE_ITEM_MAX, TRACE_MERGE, TRACE_CALL, TRACE_HELPED,
       TRACE_FIRST_DONE, TRACE_LAST_DONE, TRACE_LAST_HELPED, TRACE_LAST_WAITED, TRACE_FIELDS };
enum { TRACE_CPUS = 1024, TRACE_SHOWN_ITEMS = 64 };

typedef struct {
    double t[MAX_CALLS], tc[MAX_CALLS], tm[MAX_CALLS], ratio[MAX_CALLS]; /* per call: kernel, roofs, roof/kernel */
    double trace[TRACE_FIELDS][MAX_CALLS];
    int n, items, tiles;
    /* --trace: items' time over their call's median item, summed by CPU and by item number; items
     * that changed CPU, and that started on a CPU another item of the call was running on */
    double cpu_slow[TRACE_CPUS], item_slow[ATTN_TRACE_ITEMS];
    int cpu_items[TRACE_CPUS], migrated, shared, traced;
} samples;

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

static void keep_trace(const attention_trace *tr, samples *sm, int i)
{
    int n = tr->items < ATTN_TRACE_ITEMS ? tr->items : ATTN_TRACE_ITEMS;
    double d[ATTN_TRACE_ITEMS];
    long long last = tr->start;
    for (int k = 0; k < n; k++) {
        last = tr->item_start[k] > last ? tr->item_start[k] : last;
        d[k] = (double)(tr->item_end[k] - tr->item_start[k]) * 1e-3;
    }
    double sorted[ATTN_TRACE_ITEMS];
    memcpy(sorted, d, (size_t)n * sizeof *d);
    qsort(sorted, n, sizeof *sorted, bench_cmp_double);
    double med = sorted[n / 2];
    for (int k = 0; k < n; k++) {
        int c = tr->item_cpu[k];
        if (c >= 0 && c < TRACE_CPUS) sm->cpu_slow[c] += d[k] / med, sm->cpu_items[c]++;
        sm->item_slow[k] += d[k] / med;
        sm->migrated += tr->item_cpu[k] != tr->item_cpu_end[k];
        for (int o = 0; o < n; o++)
            if (o != k && tr->item_cpu[o] == tr->item_cpu[k] && tr->item_start[o] < tr->item_start[k] &&
                tr->item_end[o] > tr->item_start[k]) { sm->shared++; break; }
    }
    sm->traced += n;
    sm->items = tr->items;
    sm->trace[TRACE_LAST_START][i] = (double)(last - tr->start) * 1e-3;
    sm->trace[TRACE_ITEM_MEDIAN][i] = med;
    sm->trace[TRACE_ITEM_MAX][i] = sorted[n - 1];
    sm->trace[TRACE_MERGE][i] = (double)(tr->merged - tr->items_done) * 1e-3;
    sm->trace[TRACE_CALL][i] = (double)(tr->merged - tr->start) * 1e-3;
    sm->trace[TRACE_HELPED][i] = tr->tiles ? (double)tr->helped : -1.0;
    /* the item that ended last (the call waited for it): when it ended, when a helper first
     * finished a piece of it (-1: none did), how long its owner waited for helpers; and when the
     * first item ended (threads free to help from then on) */
    int lk = 0;
    long long first_done = tr->item_end[0];
    for (int k = 1; k < n; k++) {
        if (tr->item_end[k] > tr->item_end[lk]) lk = k;
        if (tr->item_end[k] < first_done) first_done = tr->item_end[k];
    }
    sm->trace[TRACE_FIRST_DONE][i] = (double)(first_done - tr->start) * 1e-3;
    sm->trace[TRACE_LAST_DONE][i] = (double)(tr->item_end[lk] - tr->start) * 1e-3;
    sm->trace[TRACE_LAST_HELPED][i] = tr->item_first_help[lk] ? (double)(tr->item_first_help[lk] - tr->start) * 1e-3 : -1.0;
    sm->trace[TRACE_LAST_WAITED][i] = (double)tr->item_owner_wait[lk] * 1e-3;
    sm->tiles = tr->tiles;
}

static double attention_flops(const widths *w, int T) { return (double)w->heads * T * (2.0 * (w->R + w->rope) + 2.0 * w->R); }

/* Calls attention_row over successive copies of the cache until `seconds` pass (at least 5), each
 * followed by its two roof probes (the read probe on the copy half the buffer away). */
static void time_attention(thread_pool *pool, cpu_path path, const widths *w, dtype_t dt, int T, const char *buf,
                           size_t buf_bytes, double seconds, int machine_cpus, attention_trace *tr, samples *sm)
{
    size_t es = dtype_size(dt), kv_bytes = (size_t)T * (w->R + w->rope) * es;
    size_t copies = buf_bytes / kv_bytes < 2 ? 2 : buf_bytes / kv_bytes;
    size_t nq = (size_t)w->heads * (w->R + w->rope), sbytes = attention_scratch_bytes(w->heads, w->R, w->rope, thread_pool_size(pool));
    float *q = malloc(nq * sizeof(float)), *out = malloc((size_t)w->heads * w->R * sizeof(float));
    void *scratch = aligned_alloc(64, (sbytes + 63) & ~(size_t)63);
    memset(scratch, 0, sbytes);
    for (size_t i = 0; i < nq; i++) q[i] = (float)((double)(bench_rng_next(&rng_state) >> 11) / 9007199254740992.0 - 0.5);
    double t_end = bench_now_s() + seconds;
    memset(sm, 0, sizeof *sm);
    for (size_t c = 0; sm->n < MAX_CALLS && (sm->n < 5 || bench_now_s() < t_end); c = (c + 1) % copies) {
        const char *base = buf + (c * kv_bytes) % (buf_bytes - kv_bytes + 1);
        attention_kv kv = {w->heads, w->R, w->rope, dt, base, base + (size_t)T * w->R * es, 0.07f};
        double t0 = bench_now_s();
        if (machine_cpus)
            attention_row_on_machine(pool, &kv, T, q, q + (size_t)w->heads * w->R, out, scratch, machine_cpus, tr);
        else if (tr)
            attention_row_traced(pool, &kv, T, q, q + (size_t)w->heads * w->R, out, scratch, tr);
        else
            attention_row(pool, &kv, T, q, q + (size_t)w->heads * w->R, out, scratch);
        int i = sm->n++;
        sm->t[i] = bench_now_s() - t0;
        if (tr) keep_trace(tr, sm, i);
        sm->tc[i] = compute_probe(pool, path, attention_flops(w, T));
        sm->tm[i] = memory_probe(pool, buf + ((c + copies / 2) % copies * kv_bytes) % (buf_bytes - kv_bytes + 1), (double)kv_bytes);
        sm->ratio[i] = (sm->tc[i] > sm->tm[i] ? sm->tc[i] : sm->tm[i]) / sm->t[i];
    }
    free(q); free(out); free(scratch);
}

static void report(const widths *w, dtype_t dt, int T, int threads, samples *sm)
{
    double bytes = (double)T * (w->R + w->rope) * dtype_size(dt), flops = attention_flops(w, T);
    double tc = median(sm->tc, sm->n), tm = median(sm->tm, sm->n), ratio = median(sm->ratio, sm->n);
    double rlo = sm->ratio[0], rhi = sm->ratio[sm->n - 1], t = median(sm->t, sm->n), lo = sm->t[0], hi = sm->t[sm->n - 1];
    printf("%-8s %5d %-4s %2d | %9.1f [%8.1f - %9.1f] %4d | %9.1f %9.1f %-7s | %5.1f%% [%5.1f - %5.1f] | %6.1f GFLOP/s %5.1f GB/s\n",
           w->name, T, dt == DTYPE_BF16 ? "bf16" : "f32", threads, t * 1e6, lo * 1e6, hi * 1e6, sm->n, tc * 1e6, tm * 1e6,
           tc > tm ? "compute" : "memory", 100.0 * ratio, 100.0 * rlo, 100.0 * rhi, flops / t / 1e9, bytes / t / 1e9);
}

/* The --trace line under a line of the table: medians over its calls. */
static void report_trace(samples *sm)
{
    double v[TRACE_FIELDS];
    for (int f = 0; f < TRACE_FIELDS; f++) v[f] = median(sm->trace[f], sm->n);
    printf("  trace: %d items | last item started %.1f us | item median %.1f max %.1f us | merge %.1f us | call %.1f us",
           sm->items, v[TRACE_LAST_START], v[TRACE_ITEM_MEDIAN], v[TRACE_ITEM_MAX], v[TRACE_MERGE], v[TRACE_CALL]);
    if (sm->tiles) {
        double sum = 0.0;
        for (int i = 0; i < sm->n; i++) sum += sm->trace[TRACE_HELPED][i];
        printf(" | helped: median %.0f, mean %.1f pieces (score tiles of %d, slices)", v[TRACE_HELPED], sum / sm->n, sm->tiles);
        printf("\n  help: the first item done at %.1f us; the item ending last ended at %.1f us, ", v[TRACE_FIRST_DONE],
               v[TRACE_LAST_DONE]);
        if (v[TRACE_LAST_HELPED] < 0) printf("most often not helped");
        else printf("first helped at %.1f us", v[TRACE_LAST_HELPED]);
        printf(", its owner waited %.1f us for helpers' pieces", v[TRACE_LAST_WAITED]);
    }
    printf("\n");
    printf("  items: %d traced, %.1f%% changed CPU, %.1f%% started on a busy CPU | time / call's median by CPU:",
           sm->traced, 100.0 * sm->migrated / sm->traced, 100.0 * sm->shared / sm->traced);
    for (int c = 0; c < TRACE_CPUS; c++)
        if (sm->cpu_items[c]) printf(" %d:%.2f(%d)", c, sm->cpu_slow[c] / sm->cpu_items[c], sm->cpu_items[c]);
    printf("\n  time / call's median by item (the first %d):", TRACE_SHOWN_ITEMS);
    for (int k = 0; k < sm->items && k < ATTN_TRACE_ITEMS && k < TRACE_SHOWN_ITEMS; k++) printf(" %.2f", sm->item_slow[k] / sm->n);
    printf("\n");
}

/* ---------- options, main ---------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_attention [options]\n"
               "  --threads N     the multi-thread runs' pool size (default: online CPUs); 1 is always run too\n"
               "  --T LIST        context lengths, comma-separated (default 1024,4096,16384,32768)\n"
               "  --shape NAME    R1 or embedded (default both)\n"
               "  --dtype NAME    f32 or bf16 (default both)\n"
               "  --path NAME     avx2 or avx512 (default: the best this CPU has)\n"
               "  --seconds S     time per line (default 1.0; at least 5 calls)\n"
               "  --buffer-mib M  cache copies span this much memory (default 1024: far above the LLC, the\n"
               "                  cache comes from DRAM; 1: the copies stay in L2 at the embedded width, BF16,\n"
               "                  1k positions: the kernel's time without DRAM)\n"
               "  --machine-cpus N  cut the rows into chunks as on a machine of N online CPUs (1-32; default:\n"
               "                  this one's): a row's chunks follow the machine, never the pool, so this shows\n"
               "                  here what one thread pays for another machine's chunks\n"
               "  --trace         under each line, where its calls' time went (medians over the calls): how\n"
               "                  long after the call the last work item started, the items' median and\n"
               "                  longest time, the merge of the chunks (what of it ran after the last\n"
               "                  item), the whole call; then each item's time over its call's median\n"
               "                  item, averaged by the CPU it ran on (with its count of items) and by item\n"
               "                  number, and the items that changed CPU or started on a CPU another item\n"
               "                  of the call was still running on; where idle threads help running items,\n"
               "                  the pieces they did, when the first item ended, and when the item that\n"
               "                  ended last ended, was first helped and how long it waited for helpers\n");
}

static int parse_T(const char *v, bench_options *o)
{
    o->n_T = 0;
    for (const char *p = v; p && *p && o->n_T < 16;) {
        char *end;
        long t = strtol(p, &end, 10);
        if (end == p || t < 1 || t > (1 << 22) || (*end && *end != ',')) return -1;
        o->T[o->n_T++] = (int)t;
        p = *end ? end + 1 : end;
    }
    return o->n_T ? 0 : -1;
}

static int parse_one(bench_options *o, const char *a, const char *v)
{
    if (!v) return -1;
    if (!strcmp(a, "--threads")) return (o->threads = atoi(v)) >= 1 ? 0 : -1;
    if (!strcmp(a, "--T")) return parse_T(v, o);
    if (!strcmp(a, "--machine-cpus")) return (o->machine_cpus = atoi(v)) >= 1 && o->machine_cpus <= ATTN_MAX_CHUNKS ? 0 : -1;
    if (!strcmp(a, "--seconds")) return (o->seconds = atof(v)) > 0 ? 0 : -1;
    if (!strcmp(a, "--buffer-mib")) return atoi(v) >= 1 ? (o->buffer_bytes = (size_t)atoi(v) << 20, 0) : -1;
    if (!strcmp(a, "--shape")) return !strcmp(v, "R1") ? (o->shape_only = 0, 0) : !strcmp(v, "embedded") ? (o->shape_only = 1, 0) : -1;
    if (!strcmp(a, "--dtype")) return !strcmp(v, "f32") ? (o->dtype_only = 0, 0) : !strcmp(v, "bf16") ? (o->dtype_only = 1, 0) : -1;
    if (!strcmp(a, "--path"))
        return cpu_path_parse(v, &o->path) == 0 && o->path != CPU_PATH_SCALAR && cpu_path_available(o->path) ? 0 : -1;
    return -1;
}

static int parse_options(int argc, char **argv, bench_options *o)
{
    *o = (bench_options){.threads = (int)sysconf(_SC_NPROCESSORS_ONLN), .shape_only = -1, .dtype_only = -1, .n_T = 4,
                         .T = {1024, 4096, 16384, 32768}, .seconds = 1.0, .buffer_bytes = (size_t)1024 << 20,
                         .path = cpu_path_available(CPU_PATH_AVX512) ? CPU_PATH_AVX512 : CPU_PATH_AVX2};
    for (int i = 1; i < argc;) {
        if (!strcmp(argv[i], "--help")) { usage(stdout); exit(0); }
        if (!strcmp(argv[i], "--trace")) { o->trace = 1; i++; continue; } /* the one option without a value */
        if (parse_one(o, argv[i], i + 1 < argc ? argv[i + 1] : NULL)) {
            fprintf(stderr, "bench_attention: bad option '%s %s' (see --help)\n", argv[i], i + 1 < argc ? argv[i + 1] : "");
            return -1;
        }
        i += 2;
    }
    if (!cpu_path_available(o->path)) { fprintf(stderr, "bench_attention: this CPU has neither AVX2 nor AVX-512\n"); return -1; }
    for (int sh = 0; sh < 2; sh++)
        for (int i = 0; i < o->n_T && (o->shape_only < 0 || o->shape_only == sh); i++) {
            size_t kv = (size_t)o->T[i] * (shapes[sh].R + shapes[sh].rope) * (o->dtype_only == 1 ? 2 : 4);
            if (2 * kv > o->buffer_bytes) {
                fprintf(stderr, "bench_attention: --buffer-mib %zu holds fewer than two copies of the %s cache at T %d "
                                "(%zu KiB each)\n", o->buffer_bytes >> 20, shapes[sh].name, o->T[i], kv >> 10);
                return -1;
            }
        }
    return 0;
}

static void run_pool(const bench_options *o, int threads, const char *buf)
{
    thread_pool *pool = thread_pool_create(threads);
    samples *sm = malloc(sizeof *sm);
    attention_trace *tr = o->trace ? malloc(sizeof *tr) : NULL;
    printf("\n%d thread%s, %s path; roofs: FMA chains doing each call's FLOPs, a read of each call's bytes, after each call\n",
           threads, threads > 1 ? "s" : "", cpu_path_name(o->path));
    printf("shape        T dtype th | us/token/layer: median [min - max] calls | roof (us): compute memory binds | "
           "share of binding roof: median [range] | achieved\n");
    for (int s = 0; s < 2; s++)
        for (int d = 0; d < 2; d++)
            for (int i = 0; i < o->n_T; i++) {
                if ((o->shape_only >= 0 && o->shape_only != s) || (o->dtype_only >= 0 && o->dtype_only != d)) continue;
                dtype_t dt = d ? DTYPE_BF16 : DTYPE_F32;
                time_attention(pool, o->path, &shapes[s], dt, o->T[i], buf, o->buffer_bytes, o->seconds, o->machine_cpus, tr, sm);
                report(&shapes[s], dt, o->T[i], threads, sm);
                if (tr) report_trace(sm);
                fflush(stdout);
            }
    free(sm);
    free(tr);
    thread_pool_free(pool);
}

int main(int argc, char **argv)
{
    bench_options o;
    if (parse_options(argc, argv, &o)) return 2;
    kernels_init(o.path);
    /* huge pages where the kernel gives them, as the engine's KV cache asks (core/kv_cache.c) */
    char *buf = NULL;
    if (posix_memalign((void **)&buf, (size_t)2 << 20, o.buffer_bytes)) buf = NULL;
    if (buf) madvise(buf, o.buffer_bytes, MADV_HUGEPAGE);
    if (!buf) { fprintf(stderr, "bench_attention: cannot allocate the %zu MiB buffer\n", o.buffer_bytes >> 20); return 1; }
    bench_fill_cache_values(buf, o.buffer_bytes, &rng_state);
    run_pool(&o, 1, buf);
    if (o.threads > 1) run_pool(&o, o.threads, buf);
    free(buf);
    return 0;
}
