/* GEMV throughput on DeepSeek-R1's real weight shapes, as a ratio to this machine's memory read
 * bandwidth measured in the same run (a STREAM-like sum over a buffer much larger than the LLC).
 * The weights of each shape are laid out as many copies across that same big buffer and visited
 * in turn, so every matvec reads its weights from DRAM, as decode does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>
#include "core/kernels.h"

typedef struct {
    const char *name;
    dtype_t dtype;
    int rows, cols;
    /* > 0: not y = W x but absorbed MLA's per-head transposed products over kv_b, rows
     * [h * t_stride, h * t_stride + t_rows) for every head h (matvec_t_range, heads across the pool) */
    int t_rows, t_stride;
} bench_shape;

static const bench_shape r1_shapes[] = {
    { "expert gate/up (2048x7168)", DTYPE_F8_E4M3, 2048, 7168, 0, 0 },
    { "expert down (7168x2048)", DTYPE_F8_E4M3, 7168, 2048, 0, 0 },
    { "q_a_proj (1536x7168)", DTYPE_F8_E4M3, 1536, 7168, 0, 0 },
    { "q_b_proj (24576x1536)", DTYPE_F8_E4M3, 24576, 1536, 0, 0 },
    { "kv_a_proj (576x7168)", DTYPE_F8_E4M3, 576, 7168, 0, 0 },
    { "kv_b_proj (32768x512)", DTYPE_F8_E4M3, 32768, 512, 0, 0 },
    { "o_proj (7168x16384)", DTYPE_F8_E4M3, 7168, 16384, 0, 0 },
    { "lm_head bf16 (129280x7168)", DTYPE_BF16, 129280, 7168, 0, 0 },
    { "kv_b absorb T (128x 128x512)", DTYPE_F8_E4M3, 32768, 512, 128, 256 },
};
#define N_SHAPES (int)(sizeof r1_shapes / sizeof r1_shapes[0])

/* The embedded test model's shapes (hidden 256): its prefill is these at nb = prompt rows. */
static const bench_shape tiny_shapes[] = {
    { "tiny expert gate/up (96x256)", DTYPE_F8_E4M3, 96, 256, 0, 0 },
    { "tiny expert down (256x96)", DTYPE_F8_E4M3, 256, 96, 0, 0 },
    { "tiny dense gate/up (768x256)", DTYPE_F8_E4M3, 768, 256, 0, 0 },
};
#define N_TINY (int)(sizeof tiny_shapes / sizeof tiny_shapes[0])

typedef struct {
    int threads, nb, include_scalar, shape_only, skip_lm_head, tiny;
    double seconds;
    size_t read_bytes, weights_bytes;
    int path_only;  /* -1: every available path */
} bench_options;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_gemv [options]\n"
            "  --path NAME     scalar, avx2 or avx512 (default: every available SIMD path)\n"
            "  --scalar        also run the scalar path when no --path is given (slow)\n"
            "  --threads N     thread count of the multi-thread runs (default 2)\n"
            "  --nb N          x rows per matvec, 1..256 (default 1; 2 is a speculative-decoding verify,\n"
            "                  16 and 64 prefill: compare GFLOP/s with the FMA peak printed first)\n"
            "  --tiny          the embedded model's shapes (hidden 256) instead of R1's\n"
            "  --seconds S     time per line and thread count (default 1.0; at least 45 slices)\n"
            "  --read-mib M    buffer of the read-bandwidth test (default 512; keep it above the LLC)\n"
            "  --weights-mib M buffer filled with copies of each matrix (default 1024, grown to fit\n"
            "                  the largest one; keep it above the LLC so weights come from DRAM)\n"
            "  --shape I       only shape I (0..%d), in the order printed\n"
            "  --no-lm-head    skip the 1.8 GB BF16 lm_head shape\n"
            "  --help          this text\n",
            N_SHAPES - 1);
}

static int parse_int(const char *flag, const char *v, int lo, int hi, int *out)
{
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || n < lo || n > hi) {
        fprintf(stderr, "bench_gemv: %s expects an integer in [%d, %d], got '%s'\n", flag, lo, hi, v ? v : "");
        return -1;
    }
    *out = (int)n;
    return 0;
}

static int parse_options(int argc, char **argv, bench_options *o)
{
    *o = (bench_options){ .threads = 2, .nb = 1, .seconds = 1.0, .read_bytes = (size_t)512 << 20,
                          .weights_bytes = (size_t)1024 << 20,
                          .path_only = -1, .shape_only = -1 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int n;
        if (!strcmp(a, "--help")) { usage(stdout); exit(0); }
        else if (!strcmp(a, "--scalar")) o->include_scalar = 1;
        else if (!strcmp(a, "--no-lm-head")) o->skip_lm_head = 1;
        else if (!strcmp(a, "--tiny")) o->tiny = 1;
        else if (!strcmp(a, "--path")) {
            cpu_path p;
            if (!v || cpu_path_parse(v, &p)) {
                fprintf(stderr, "bench_gemv: --path expects scalar, avx2 or avx512, got '%s'\n", v ? v : "");
                return -1;
            }
            if (!cpu_path_available(p)) {
                fprintf(stderr, "bench_gemv: --path %s is not supported by this CPU\n", v);
                return -1;
            }
            o->path_only = (int)p;
            i++;
        } else if (!strcmp(a, "--threads")) { if (parse_int(a, v, 1, 1024, &o->threads)) return -1; i++; }
        else if (!strcmp(a, "--nb")) { if (parse_int(a, v, 1, 256, &o->nb)) return -1; i++; }
        else if (!strcmp(a, "--shape")) { if (parse_int(a, v, 0, N_SHAPES - 1, &o->shape_only)) return -1; i++; }
        else if (!strcmp(a, "--read-mib")) { if (parse_int(a, v, 32, 1 << 20, &n)) return -1; o->read_bytes = (size_t)n << 20; i++; }
        else if (!strcmp(a, "--weights-mib")) { if (parse_int(a, v, 1, 1 << 20, &n)) return -1; o->weights_bytes = (size_t)n << 20; i++; }
        else if (!strcmp(a, "--seconds")) {
            char *end;
            o->seconds = v ? strtod(v, &end) : 0;
            if (!v || *end || !(o->seconds > 0 && o->seconds <= 600)) {
                fprintf(stderr, "bench_gemv: --seconds expects a number in (0, 600], got '%s'\n", v ? v : "");
                return -1;
            }
            i++;
        } else {
            fprintf(stderr, "bench_gemv: unknown option '%s' (see --help)\n", a);
            return -1;
        }
    }
    return 0;
}

/* ---- read bandwidth ---- */

#define READ_WINDOW_ITEMS 32
#define READ_ITEM_BYTES ((size_t)1 << 20)

/* The read test's variants: a single thread's demand loads plus the hardware prefetcher do not
 * saturate DRAM, so the limit is the best of 1, 2 or 4 interleaved streams with software prefetch
 * 0, 2 or 4 KiB ahead (the kernels read two rows side by side and prefetch too). */
static const int read_streams[] = { 1, 2, 4 };
static const size_t read_prefetch_bytes[] = { 0, 2048, 4096 };
#define N_READ_VARIANTS 9

typedef struct {
    const uint64_t *words;
    int streams;
    size_t prefetch_words;
    uint64_t sums[READ_WINDOW_ITEMS];
} read_job;

/* Sums one item as `streams` equal parts read side by side, four independent sums per 64-byte
 * line: bound by loads, not by an add chain. */
static void read_item(void *arg, int i)
{
    read_job *job = arg;
    size_t per = READ_ITEM_BYTES / 8 / (size_t)job->streams;
    const uint64_t *base = job->words + (size_t)i * (READ_ITEM_BYTES / 8);
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t k = 0; k < per; k += 8) {
        for (int j = 0; j < job->streams; j++) {
            const uint64_t *q = base + (size_t)j * per + k;
            if (job->prefetch_words) __builtin_prefetch(q + job->prefetch_words);
            s0 += q[0] + q[4];
            s1 += q[1] + q[5];
            s2 += q[2] + q[6];
            s3 += q[3] + q[7];
        }
    }
    job->sums[i] = s0 + s1 + s2 + s3;
}

/* One timed slice: the next 32 MiB window of the read buffer, cycling through it. */
static double read_slice(thread_pool *pool, const unsigned char *buf, size_t bytes, size_t *offset, int variant)
{
    size_t window = READ_WINDOW_ITEMS * READ_ITEM_BYTES;
    if (*offset + window > bytes) *offset = 0;
    read_job job = { (const uint64_t *)(buf + *offset), read_streams[variant / 3], read_prefetch_bytes[variant % 3] / 8, { 0 } };
    double t0 = now_s();
    thread_pool_for(pool, READ_WINDOW_ITEMS, read_item, &job);
    double t = now_s() - t0;
    *offset += window;
    volatile uint64_t sink = job.sums[0];
    (void)sink;
    return (double)window / t / 1e9;
}

/* ---- FMA peak ---- */

/* Twelve independent fma chains per thread, the most this core's FMA units can retire: the roof
 * for the compute-bound (large nb) lines, in the vector width of the path it is the roof of. An
 * AVX2 path's roof is the ymm rate and an AVX-512 path's the zmm rate: on Zen 4 the two are the
 * same, on Zen 5 and on Intel parts with two 512-bit units zmm retires twice the flops, which an
 * AVX2 kernel cannot use. */
#define FMA_ITERS 200000
typedef struct { double gflops[64]; int zmm; } fma_job;

__attribute__((target("avx2,fma"))) static double fma_loop_ymm(void)
{
    __m256 a[12], m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    double t0 = now_s();
    for (int k = 0; k < FMA_ITERS; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    }
    double t = now_s() - t0;
    float s = 0;
    for (int i = 0; i < 12; i++) s += _mm256_cvtss_f32(a[i]);
    volatile float sink = s;
    (void)sink;
    return 12.0 * 16 * FMA_ITERS / t / 1e9;
}

__attribute__((target("avx512f"))) static double fma_loop_zmm(void)
{
    __m512 a[24], m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
    for (int i = 0; i < 24; i++) a[i] = _mm512_set1_ps((float)i);
    double t0 = now_s();
    for (int k = 0; k < FMA_ITERS / 2; k++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
    }
    double t = now_s() - t0;
    float s = 0;
    for (int i = 0; i < 24; i++) s += _mm512_cvtss_f32(a[i]);
    volatile float sink = s;
    (void)sink;
    return 24.0 * 32 * (FMA_ITERS / 2) / t / 1e9;
}

static void fma_item(void *arg, int i)
{
    fma_job *j = arg;
    j->gflops[i] = j->zmm ? fma_loop_zmm() : fma_loop_ymm();
}

/* Best over a few rounds of the summed per-thread rates (one item per thread of the pool), in
 * the vector width of path p (ymm for the scalar and AVX2 paths). */
static double fma_peak(thread_pool *pool, int threads, cpu_path p)
{
    double best = 0;
    int zmm = p == CPU_PATH_AVX512;
    if (!zmm && !cpu_path_available(CPU_PATH_AVX2)) return 0;
    for (int round = 0; round < 40; round++) {
        fma_job j = { { 0 }, zmm };
        int n = threads < 64 ? threads : 64;
        thread_pool_for(pool, n, fma_item, &j);
        double sum = 0;
        for (int i = 0; i < n; i++) sum += j.gflops[i];
        if (sum > best) best = sum;
    }
    return best;
}

/* ---- gemv ---- */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random but harmless weights: FP8 bytes without NaN, BF16 values in +-[2^-7, 2) (no denormals). */
static void fill_weights(void *buf, size_t bytes, dtype_t dt)
{
    if (dt == DTYPE_F8_E4M3) {
        uint8_t *q = buf;
        for (size_t i = 0; i < bytes; i += 8) {
            uint64_t r = rng_next();
            for (int k = 0; k < 8 && i + k < bytes; k++) {
                uint8_t b = (uint8_t)(r >> (8 * k));
                q[i + k] = (b & 0x7F) == 0x7F ? 0x3F : b;
            }
        }
    } else {
        uint16_t *h = buf;
        for (size_t i = 0; i < bytes / 2; i++) {
            uint64_t r = rng_next();
            h[i] = (uint16_t)((r & 0x8000) | (uint16_t)(120 + (r >> 16) % 8) << 7 | (r >> 32 & 0x7F));
        }
    }
}

static size_t matrix_bytes(const bench_shape *s)
{
    return (size_t)s->rows * s->cols * (s->dtype == DTYPE_F8_E4M3 ? 1 : 2);
}

/* Other processes share this machine's cores and memory bus: the read test and the GEMV alternate
 * in short slices (one 32 MiB read window, one matvec) and each keeps its best slice, so both see
 * the same conditions and interference, which only ever slows a slice down, drops out of the ratio.
 * Reads and weights live in separate buffers, each larger than the LLC, and cycle through them. */
typedef struct { double gemv, read; } paired_rate;

typedef struct {
    const matrix *w;
    const bench_shape *shape;
    const float *x;
    int nb;
    float *y;
} head_job;

static void absorb_head(void *arg, int h)
{
    const head_job *j = arg;
    int r0 = h * j->shape->t_stride;
    matvec_t_range(j->w, r0, r0 + j->shape->t_rows, j->x, j->shape->t_rows, j->nb,
                   j->y + (size_t)h * j->nb * j->shape->cols, j->shape->cols);
}

/* One operation on matrix m; returns the weight and scale bytes it consumed. */
static size_t run_op(thread_pool *pool, const bench_shape *s, const matrix *m, const float *x, int nb, float *y)
{
    size_t scale_bytes = m->scale ? sizeof(float) * (size_t)((m->rows + 127) / 128) * ((m->cols + 127) / 128) : 0;
    if (s->t_rows == 0) {
        matvec(pool, m, x, nb, y);
        return (size_t)m->rows * m->cols * (m->dtype == DTYPE_F8_E4M3 ? 1 : 2) + scale_bytes;
    }
    head_job j = { m, s, x, nb, y };
    int heads = m->rows / s->t_stride;
    thread_pool_for(pool, heads, absorb_head, &j);
    return (size_t)heads * s->t_rows * m->cols + scale_bytes * s->t_rows / s->t_stride;
}

typedef struct {
    thread_pool *pool;
    const unsigned char *read_buf;
    size_t read_bytes;
    unsigned char *weights;  /* copies of the matrix, back to back */
    int copies, nb;
    const float *x;
    float *y;
} bench_run;

static paired_rate measure_paired(const bench_run *run, const bench_shape *s, const matrix *proto, double seconds)
{
    size_t wbytes = (size_t)proto->rows * proto->cols * (proto->dtype == DTYPE_F8_E4M3 ? 1 : 2);
    matrix m = *proto;
    for (int c = 0; c < run->copies; c++) {  /* warm-up: page tables, pool threads */
        m.data = run->weights + (size_t)c * wbytes;
        run_op(run->pool, s, &m, run->x, run->nb, run->y);
    }
    paired_rate best = { 0, 0 };
    size_t read_offset = 0;
    double start = now_s();
    for (long round = 0; round < 45 || now_s() - start < seconds; round++) {
        double rd = read_slice(run->pool, run->read_buf, run->read_bytes, &read_offset, (int)(round % N_READ_VARIANTS));
        m.data = run->weights + (size_t)(round % run->copies) * wbytes;
        double t0 = now_s();
        size_t bytes = run_op(run->pool, s, &m, run->x, run->nb, run->y);
        double g = (double)bytes / (now_s() - t0) / 1e9;
        if (rd > best.read) best.read = rd;
        if (g > best.gemv) best.gemv = g;
    }
    return best;
}

/* FMA GFLOP/s of 1 and --threads threads per path, measured before the shapes */
static double peak1[CPU_PATH_AVX512 + 1], peakn[CPU_PATH_AVX512 + 1];

static int path_selected(const bench_options *o, int p)
{
    if (o->path_only >= 0) return p == o->path_only;
    return cpu_path_available((cpu_path)p) && (p != CPU_PATH_SCALAR || o->include_scalar);
}

static void bench_shape_on_paths(const bench_options *o, const bench_shape *s, unsigned char *weights,
                                 const unsigned char *read_buf, thread_pool *pool1, thread_pool *pooln)
{
    size_t wbytes = matrix_bytes(s);
    int copies = (int)(o->weights_bytes / wbytes);
    if (copies < 1) copies = 1;
    fill_weights(weights, wbytes * copies, s->dtype);
    int gr = (s->rows + 127) / 128, gc = (s->cols + 127) / 128;
    float *scale = malloc(sizeof(float) * (size_t)gr * gc);
    size_t xy = (size_t)(s->rows > s->cols ? s->rows : s->cols) * o->nb;  /* either orientation */
    float *x = malloc(sizeof(float) * xy);
    float *y = malloc(sizeof(float) * (s->t_rows ? (size_t)s->rows / s->t_stride * s->cols * o->nb : xy));
    for (int i = 0; i < gr * gc; i++) scale[i] = 1.0f / (1 + i % 7);
    for (size_t i = 0; i < xy; i++) x[i] = (float)((int)(rng_next() % 2001) - 1000) / 1000.0f;
    matrix proto = { s->dtype, s->rows, s->cols, weights, s->dtype == DTYPE_F8_E4M3 ? scale : NULL };
    bench_run run1 = { pool1, read_buf, o->read_bytes, weights, copies, o->nb, x, y };
    bench_run runn = run1;
    runn.pool = pooln;
    for (int p = CPU_PATH_SCALAR; p <= CPU_PATH_AVX512; p++) {
        if (!path_selected(o, p)) continue;
        kernels_init((cpu_path)p);
        paired_rate one = measure_paired(&run1, s, &proto, o->seconds);
        paired_rate all = measure_paired(&runn, s, &proto, o->seconds);
        /* GFLOP/s of the same best slices: 2 flops per weight per x row */
        double fl = 2.0 * o->nb / (s->dtype == DTYPE_F8_E4M3 ? 1 : 2);
        printf("%-28s %-7s 1T %6.2f GB/s (read %6.2f) %5.1f%% %7.1f GF/s %5.1f%% | %dT %6.2f GB/s (read %6.2f) %5.1f%% %7.1f GF/s %5.1f%%\n",
               s->name, cpu_path_name((cpu_path)p), one.gemv, one.read, 100 * one.gemv / one.read, one.gemv * fl,
               100 * one.gemv * fl / peak1[p], o->threads, all.gemv, all.read, 100 * all.gemv / all.read, all.gemv * fl,
               100 * all.gemv * fl / peakn[p]);
        fflush(stdout);
    }
    free(scale);
    free(x);
    free(y);
}

static const bench_shape *shape_list(const bench_options *o, int *n)
{
    *n = o->tiny ? N_TINY : N_SHAPES;
    return o->tiny ? tiny_shapes : r1_shapes;
}

static int shape_selected(const bench_options *o, int i)
{
    int n;
    const bench_shape *sh = shape_list(o, &n);
    return (o->shape_only < 0 || i == o->shape_only) && !(o->skip_lm_head && sh[i].dtype == DTYPE_BF16);
}

static unsigned char *alloc_touched(size_t bytes, const char *what)
{
    unsigned char *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!p) {
        fprintf(stderr, "bench_gemv: cannot allocate %zu MiB for the %s\n", bytes >> 20, what);
        return NULL;
    }
    memset(p, 1, bytes);  /* fault every page in before timing */
    return p;
}

int main(int argc, char **argv)
{
    bench_options o;
    if (parse_options(argc, argv, &o)) return 2;
    size_t need = o.weights_bytes;
    int nshapes;
    const bench_shape *shapes = shape_list(&o, &nshapes);
    if (o.shape_only >= nshapes) {
        fprintf(stderr, "bench_gemv: --shape %d: there are %d shapes\n", o.shape_only, nshapes);
        return 2;
    }
    for (int i = 0; i < nshapes; i++)
        if (shape_selected(&o, i) && matrix_bytes(&shapes[i]) > need) need = matrix_bytes(&shapes[i]);
    unsigned char *read_buf = alloc_touched(o.read_bytes, "read buffer (--read-mib)");
    unsigned char *weights = read_buf ? alloc_touched(need, "weight copies (--weights-mib, --no-lm-head)") : NULL;
    if (!weights) {
        free(read_buf);
        return 1;
    }
    thread_pool *pool1 = thread_pool_create(1), *pooln = thread_pool_create(o.threads);
    printf("GB/s of weight bytes per matvec (nb = %d), and of a sequential sum over a %zu MiB buffer on the same\n"
           "threads (best of 1/2/4 streams x prefetch 0/2/4 KiB); best slice of each, alternated for %.1f s per line.\n"
           "GF/s: the same slices' GFLOP/s (2 per weight per x row) and %% of the path's FMA peak (independent fma\n"
           "chains in the path's vector width, best of 40 rounds):",
           o.nb, o.read_bytes >> 20, o.seconds);
    for (int p = CPU_PATH_SCALAR; p <= CPU_PATH_AVX512; p++) {
        if (!path_selected(&o, p)) continue;
        peak1[p] = fma_peak(pool1, 1, (cpu_path)p);
        peakn[p] = fma_peak(pooln, o.threads, (cpu_path)p);
        printf(" %s %.1f GFLOP/s on 1 thread, %.1f on %d;", cpu_path_name((cpu_path)p), peak1[p], peakn[p], o.threads);
    }
    printf("\n");
    for (int i = 0; i < nshapes; i++)
        if (shape_selected(&o, i)) bench_shape_on_paths(&o, &shapes[i], weights, read_buf, pool1, pooln);
    printf("FMA peak again after the shapes:");
    for (int p = CPU_PATH_SCALAR; p <= CPU_PATH_AVX512; p++)
        if (path_selected(&o, p))
            printf(" %s %.1f GFLOP/s on 1 thread, %.1f on %d;", cpu_path_name((cpu_path)p), fma_peak(pool1, 1, (cpu_path)p),
                   fma_peak(pooln, o.threads, (cpu_path)p), o.threads);
    printf("\n");
    thread_pool_free(pool1);
    thread_pool_free(pooln);
    free(weights);
    free(read_buf);
    return 0;
}
