/* Two builds of core/attention*.c in one process (bench/attention/attention_ab.sh links them with
 * their symbols renamed: a_ the old one, b_ the new), attention_row of each called alternately on
 * the same cache copies, so that both see the same phases of a shared machine: on the VMs these
 * benches run on, a core's speed moves by a third over seconds, and whole runs of two binaries one
 * after the other differ by more than the change being measured. Prints the per-call time of each
 * build, the median of the per-call ratios old/new with its quartiles, and whether the two builds'
 * outputs are bit-identical (on the first calls, both on the same copy). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/attention_internal.h"
#include "core/kernels.h"
#include "bench/attention/attention_bench.h"

void a_attention_row(thread_pool *pool, const attention_kv *kv, int n, const float *q_lat, const float *q_rope,
                     float *out, void *scratch);
void b_attention_row(thread_pool *pool, const attention_kv *kv, int n, const float *q_lat, const float *q_rope,
                     float *out, void *scratch);
void a_attention_row_on_machine(thread_pool *pool, const attention_kv *kv, int n, const float *q_lat,
                                const float *q_rope, float *out, void *scratch, int machine_cpus, attention_trace *trace);
void b_attention_row_on_machine(thread_pool *pool, const attention_kv *kv, int n, const float *q_lat,
                                const float *q_rope, float *out, void *scratch, int machine_cpus, attention_trace *trace);
size_t a_attention_scratch_bytes(int heads, int R, int rope, int n_threads);
size_t b_attention_scratch_bytes(int heads, int R, int rope, int n_threads);

typedef struct {
    int heads, R, rope, T, threads, machine_cpus;
    dtype_t dtype;
    double seconds;
    size_t buffer_bytes;
    cpu_path path;
} ab_options;

static void usage(FILE *f)
{
    fprintf(f, "usage: attention_ab [options]   (built and run by bench/attention/attention_ab.sh)\n"
               "  --shape NAME    R1 (128 heads, R 512, rope 64) or embedded (4, 128, 32); default embedded\n"
               "  --heads N --R N --rope N   other widths\n"
               "  --T N           positions (default 4096)\n"
               "  --dtype NAME    f32 or bf16 (default f32)\n"
               "  --threads N     pool size (default 1)\n"
               "  --path NAME     avx2 or avx512 (default: the best this CPU has)\n"
               "  --seconds S     time to alternate for (default 3; at least 5 pairs of calls)\n"
               "  --buffer-mib M  cache copies span this much memory (default 1024: the cache comes from DRAM)\n"
               "  --machine-cpus N  both builds cut rows as on a machine of N online CPUs (default: this one's)\n");
}

static int parse_one(ab_options *o, const char *a, const char *v)
{
    if (!v) return -1;
    if (!strcmp(a, "--shape")) {
        if (!strcmp(v, "R1")) o->heads = 128, o->R = 512, o->rope = 64;
        else if (!strcmp(v, "embedded")) o->heads = 4, o->R = 128, o->rope = 32;
        else return -1;
        return 0;
    }
    if (!strcmp(a, "--heads")) return (o->heads = atoi(v)) >= 1 ? 0 : -1;
    if (!strcmp(a, "--R")) return (o->R = atoi(v)) >= 1 ? 0 : -1;
    if (!strcmp(a, "--rope")) return (o->rope = atoi(v)) >= 1 ? 0 : -1;
    if (!strcmp(a, "--T")) return (o->T = atoi(v)) >= 1 && o->T <= (1 << 22) ? 0 : -1;
    if (!strcmp(a, "--dtype"))
        return !strcmp(v, "f32") ? (o->dtype = DTYPE_F32, 0) : !strcmp(v, "bf16") ? (o->dtype = DTYPE_BF16, 0) : -1;
    if (!strcmp(a, "--threads")) return (o->threads = atoi(v)) >= 1 ? 0 : -1;
    if (!strcmp(a, "--machine-cpus")) return (o->machine_cpus = atoi(v)) >= 1 && o->machine_cpus <= ATTN_MAX_CHUNKS ? 0 : -1;
    if (!strcmp(a, "--seconds")) return (o->seconds = atof(v)) > 0 ? 0 : -1;
    if (!strcmp(a, "--buffer-mib")) return atoi(v) >= 1 ? (o->buffer_bytes = (size_t)atoi(v) << 20, 0) : -1;
    if (!strcmp(a, "--path"))
        return cpu_path_parse(v, &o->path) == 0 && o->path != CPU_PATH_SCALAR && cpu_path_available(o->path) ? 0 : -1;
    return -1;
}

static int parse_options(int argc, char **argv, ab_options *o)
{
    *o = (ab_options){.heads = 4, .R = 128, .rope = 32, .T = 4096, .threads = 1, .dtype = DTYPE_F32, .seconds = 3.0,
                      .buffer_bytes = (size_t)1024 << 20,
                      .path = cpu_path_available(CPU_PATH_AVX512) ? CPU_PATH_AVX512 : CPU_PATH_AVX2};
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--help")) { usage(stdout); exit(0); }
        if (parse_one(o, argv[i], i + 1 < argc ? argv[i + 1] : NULL)) {
            fprintf(stderr, "attention_ab: bad option '%s %s' (see --help)\n", argv[i], i + 1 < argc ? argv[i + 1] : "");
            return -1;
        }
    }
    if (!cpu_path_available(o->path)) { fprintf(stderr, "attention_ab: this CPU has neither AVX2 nor AVX-512\n"); return -1; }
    size_t kv = (size_t)o->T * (o->R + o->rope) * dtype_size(o->dtype);
    if (2 * kv > o->buffer_bytes) {
        fprintf(stderr, "attention_ab: --buffer-mib %zu holds fewer than two copies of the cache (%zu KiB each)\n",
                o->buffer_bytes >> 20, kv >> 10);
        return -1;
    }
    return 0;
}

typedef struct {
    double *old_s, *new_s, *ratio;  /* per pair of calls */
    int n, max;
    int differ;                     /* the builds' outputs on the same copy were not bit-identical */
    float max_diff;                 /* the largest |old - new| among them */
} ab_samples;

static attention_kv cache_copy(const ab_options *o, const char *buf, size_t copies, size_t c)
{
    size_t es = dtype_size(o->dtype), kv_bytes = (size_t)o->T * (o->R + o->rope) * es;
    const char *base = buf + (c % copies) * kv_bytes;
    return (attention_kv){o->heads, o->R, o->rope, o->dtype, base, base + (size_t)o->T * o->R * es, 0.07f};
}

/* The old build's attention_row (new_build 0) or the new one's, as on a machine of o->machine_cpus
 * CPUs when that is set. */
static void row(const ab_options *o, int new_build, thread_pool *pool, const attention_kv *kv, const float *q,
                const float *qr, float *out, void *scratch)
{
    if (o->machine_cpus)
        (new_build ? b_attention_row_on_machine : a_attention_row_on_machine)(pool, kv, o->T, q, qr, out, scratch,
                                                                             o->machine_cpus, NULL);
    else
        (new_build ? b_attention_row : a_attention_row)(pool, kv, o->T, q, qr, out, scratch);
}

/* Pairs of calls, the order swapped every pair; each build reads its own copy (half the buffer
 * apart), so neither finds the other's reads in cache. */
static void alternate(const ab_options *o, thread_pool *pool, const char *buf, size_t copies, const float *q,
                      void *sa, void *sb, ab_samples *sm)
{
    size_t hr = (size_t)o->heads * o->R;
    float *oa = malloc(hr * sizeof(float)), *ob = malloc(hr * sizeof(float));
    const float *qr = q + hr;
    double t_end = bench_now_s() + o->seconds;
    for (size_t c = 0; sm->n < sm->max && (sm->n < 5 || bench_now_s() < t_end); c++) {
        attention_kv ka = cache_copy(o, buf, copies, c), kb = cache_copy(o, buf, copies, c + copies / 2);
        double t0, t1, t2;
        if (c & 1) {
            t0 = bench_now_s(); row(o, 1, pool, &kb, q, qr, ob, sb);
            t1 = bench_now_s(); row(o, 0, pool, &ka, q, qr, oa, sa);
            t2 = bench_now_s();
            sm->new_s[sm->n] = t1 - t0, sm->old_s[sm->n] = t2 - t1;
        } else {
            t0 = bench_now_s(); row(o, 0, pool, &ka, q, qr, oa, sa);
            t1 = bench_now_s(); row(o, 1, pool, &kb, q, qr, ob, sb);
            t2 = bench_now_s();
            sm->old_s[sm->n] = t1 - t0, sm->new_s[sm->n] = t2 - t1;
        }
        sm->ratio[sm->n] = sm->old_s[sm->n] / sm->new_s[sm->n];
        sm->n++;
        if (c < 3) {  /* the new build on the copy the old one just read */
            row(o, 1, pool, &ka, q, qr, ob, sb);
            if (memcmp(oa, ob, hr * sizeof(float))) sm->differ = 1;
            for (size_t i = 0; i < hr; i++) sm->max_diff = fmaxf(sm->max_diff, fabsf(oa[i] - ob[i]));
        }
    }
    free(oa);
    free(ob);
}

static void report(const ab_options *o, ab_samples *sm)
{
    int n = sm->n;
    qsort(sm->old_s, n, sizeof(double), bench_cmp_double);
    qsort(sm->new_s, n, sizeof(double), bench_cmp_double);
    qsort(sm->ratio, n, sizeof(double), bench_cmp_double);
    printf("heads %d R %d rope %d T %d %s %d thread%s %s | old %.1f us [p10 %.1f] | new %.1f us [p10 %.1f] | old/new %.3f "
           "[%.3f-%.3f] | %d pairs | outputs %s",
           o->heads, o->R, o->rope, o->T, o->dtype == DTYPE_BF16 ? "bf16" : "f32", o->threads, o->threads > 1 ? "s" : "",
           cpu_path_name(o->path), sm->old_s[n / 2] * 1e6, sm->old_s[n / 10] * 1e6, sm->new_s[n / 2] * 1e6,
           sm->new_s[n / 10] * 1e6, sm->ratio[n / 2], sm->ratio[n / 4], sm->ratio[3 * n / 4], n,
           sm->differ ? "DIFFER" : "bit-identical");
    if (sm->differ) printf(" (max |diff| %.3g)", (double)sm->max_diff);
    printf("\n");
}

int main(int argc, char **argv)
{
    ab_options o;
    if (parse_options(argc, argv, &o)) return 2;
    kernels_init(o.path);
    size_t kv_bytes = (size_t)o.T * (o.R + o.rope) * dtype_size(o.dtype), copies = o.buffer_bytes / kv_bytes;
    char *buf = NULL;
    if (posix_memalign((void **)&buf, 64, copies * kv_bytes)) {
        fprintf(stderr, "attention_ab: cannot allocate the %zu MiB buffer\n", o.buffer_bytes >> 20);
        return 1;
    }
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    bench_fill_cache_values(buf, copies * kv_bytes, &rng);
    size_t nq = (size_t)o.heads * (o.R + o.rope);
    float *q = malloc(nq * sizeof(float));
    for (size_t i = 0; i < nq; i++) q[i] = 0.01f * (float)((i * 7) % 23) - 0.1f;
    size_t sa_bytes = a_attention_scratch_bytes(o.heads, o.R, o.rope, o.threads);
    size_t sb_bytes = b_attention_scratch_bytes(o.heads, o.R, o.rope, o.threads);
    void *sa = aligned_alloc(64, (sa_bytes + 63) & ~(size_t)63), *sb = aligned_alloc(64, (sb_bytes + 63) & ~(size_t)63);
    ab_samples sm = {.max = 1 << 20};
    sm.old_s = malloc(sm.max * sizeof(double));
    sm.new_s = malloc(sm.max * sizeof(double));
    sm.ratio = malloc(sm.max * sizeof(double));
    thread_pool *pool = thread_pool_create(o.threads);
    if (!q || !sa || !sb || !sm.old_s || !sm.new_s || !sm.ratio || !pool) {
        fprintf(stderr, "attention_ab: out of memory\n");
        return 1;
    }
    memset(sa, 0, sa_bytes);
    memset(sb, 0, sb_bytes);
    alternate(&o, pool, buf, copies, q, sa, sb, &sm);
    report(&o, &sm);
    thread_pool_free(pool);
    free(sm.old_s), free(sm.new_s), free(sm.ratio), free(sa), free(sb), free(q), free(buf);
    return 0;
}
