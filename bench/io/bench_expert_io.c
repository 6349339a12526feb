/* bench_expert_io: reads routed experts of an R1-shaped checkpoint the way decoding asks for them
 * (per token, per MoE layer, 8 distinct random experts; real 44 MB extents, straddlers included)
 * through io/ with each backend, queue depth, chunk size and buffer registration, and prints GB/s
 * and the ratio to the best configuration of the run. bench/io/io_vs_fio.sh puts these next to
 * fio on the same files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "io/expert_io.h"

typedef struct {
    int layer, expert;
} expert_id;

typedef struct {
    const char *model;
    int reads;
    int qd[16], n_qd;
    long chunk_kib[8];
    int n_chunk;
    int fixed_modes[2], n_fixed;
    int run_uring, run_pread;
    int drop_caches;
    uint64_t seed;
    const char *iolog;
} options;

typedef struct {
    char label[96];
    double gbps, widened_gbps, seconds, cpu_ms_per_gb;
} result;

/* CPU time of the whole process (caller + pread workers + io_uring's kernel work on our behalf). */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

static uint64_t rng_state;
static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Routing-shaped request stream: token after token, every MoE layer, top-k distinct experts. */
static expert_id *routing_stream(const checkpoint *ck, int n, int *straddlers)
{
    const model_config *c = &ck->cfg;
    int layers = c->num_hidden_layers + c->num_nextn_predict_layers, k = c->num_experts_per_tok;
    expert_id *out = malloc((size_t)n * sizeof *out);
    int got = 0;
    *straddlers = 0;
    while (got < n) {
        for (int l = 0; l < layers && got < n; l++) {
            const expert_extent *first = checkpoint_expert(ck, l, 0);
            if (!first || first->npieces == 0) continue; /* a dense layer */
            int chosen[64], n_chosen = 0;
            while (n_chosen < k && n_chosen < 64 && got < n) {
                int e = (int)(rng_next() % (uint64_t)c->n_routed_experts), dup = 0;
                for (int i = 0; i < n_chosen; i++) dup |= chosen[i] == e;
                if (dup) continue;
                chosen[n_chosen++] = e;
                out[got++] = (expert_id){l, e};
                *straddlers += checkpoint_expert(ck, l, e)->npieces == 2;
            }
        }
    }
    return out;
}

/* The same request stream as a fio v2 iolog (one read per 4 KiB-widened piece, as the reader
 * issues them), so fio can replay exactly these offsets and lengths as the peer. */
static int write_iolog(const checkpoint *ck, const expert_id *ids, int n, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_expert_io: cannot write %s\n", path);
        return -1;
    }
    fprintf(f, "fio version 2 iolog\n");
    for (int s = 0; s < ck->n_shards; s++) fprintf(f, "%s add\n", ck->shards[s].path);
    for (int s = 0; s < ck->n_shards; s++) fprintf(f, "%s open\n", ck->shards[s].path);
    for (int i = 0; i < n; i++) {
        const expert_extent *x = checkpoint_expert(ck, ids[i].layer, ids[i].expert);
        for (int p = 0; p < x->npieces; p++) {
            uint64_t lo = x->piece[p].offset / 4096 * 4096;
            uint64_t hi = (x->piece[p].offset + x->piece[p].length + 4095) / 4096 * 4096;
            fprintf(f, "%s read %llu %llu\n", ck->shards[x->piece[p].shard].path, (unsigned long long)lo,
                    (unsigned long long)(hi - lo));
        }
    }
    for (int s = 0; s < ck->n_shards; s++) fprintf(f, "%s close\n", ck->shards[s].path);
    return fclose(f) == 0 ? 0 : -1;
}

static void drop_page_cache(int enabled)
{
    if (!enabled) return;
    sync();
    FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
    if (!f || fputs("3\n", f) < 0 || fclose(f) != 0) {
        static int warned;
        if (!warned) fprintf(stderr, "bench_expert_io: cannot drop the page cache (not root?): reads still use O_DIRECT\n");
        warned = 1;
    }
}

/* One configuration: keep the queue full until every request of the stream is read. */
static int run_config(const checkpoint *ck, const options *o, io_backend b, int qd, long chunk_kib, int fixed,
                      const expert_id *ids, uint64_t expert_bytes, result *res)
{
    char err[512] = "";
    expert_reader *r = expert_reader_create(ck, b, qd, err, sizeof err);
    if (!r) {
        fprintf(stderr, "bench_expert_io: %s\n", err);
        return -1;
    }
    int rc = 0;
    size_t sb = expert_reader_slot_bytes(r);
    uint8_t *slots = aligned_alloc(4096, sb * (size_t)qd);
    memset(slots, 0, sb * (size_t)qd); /* fault the pages in before timing */
    if (expert_reader_set_chunk_bytes(r, (size_t)chunk_kib * 1024) != 0 ||
        (fixed && expert_reader_register_slots(r, slots, qd) != 0)) {
        fprintf(stderr, "bench_expert_io: %s\n", expert_reader_error(r));
        rc = -1;
        goto out;
    }
    int *free_slot = malloc((size_t)qd * sizeof *free_slot), n_free = qd;
    for (int i = 0; i < qd; i++) free_slot[i] = i;
    drop_page_cache(o->drop_caches);
    double t0 = now_s(), c0 = cpu_s();
    int next = 0, done = 0;
    while (done < o->reads && rc == 0) {
        while (next < o->reads && n_free > 0 &&
               expert_reader_submit(r, ids[next].layer, ids[next].expert, slots + (size_t)free_slot[n_free - 1] * sb,
                                    (uint64_t)free_slot[n_free - 1]) == 0) {
            n_free--;
            next++;
        }
        uint64_t tags[64];
        int status[64];
        int n = expert_reader_reap(r, 1, tags, status, 64);
        for (int i = 0; i < n; i++) {
            if (status[i] != 0) {
                fprintf(stderr, "bench_expert_io: %s\n", expert_reader_error(r));
                rc = -1;
            }
            free_slot[n_free++] = (int)tags[i];
            done++;
        }
        if (n < 0) rc = -1;
    }
    double dt = now_s() - t0, cpu = cpu_s() - c0;
    free(free_slot);
    expert_reader_stats st = expert_reader_get_stats(r);
    snprintf(res->label, sizeof res->label, "%-5s qd %2d chunk %5ld KiB%s", io_backend_name(b), qd, chunk_kib,
             fixed ? " fixed-buffers" : "");
    res->seconds = dt;
    res->gbps = (double)expert_bytes * o->reads / dt / 1e9;
    res->widened_gbps = (double)st.bytes_read / dt / 1e9;
    res->cpu_ms_per_gb = 1e3 * cpu / ((double)st.bytes_read / 1e9);
    printf("%-40s %6.3f GB/s experts (%6.3f GB/s on the wire)  %d reads in %.2f s, CPU %.1f ms/GB\n", res->label,
           res->gbps, res->widened_gbps, o->reads, dt, res->cpu_ms_per_gb);
    printf("RESULT backend=%s qd=%d chunk_kib=%ld fixed=%d gbps=%.4f wire_gbps=%.4f cpu_ms_per_gb=%.2f\n",
           io_backend_name(b), qd, chunk_kib, fixed, res->gbps, res->widened_gbps, res->cpu_ms_per_gb);
    fflush(stdout);
out:
    free(slots);
    expert_reader_free(r);
    return rc;
}

static int parse_int_list(const char *s, int *out, int max)
{
    int n = 0;
    for (const char *p = s; *p && n < max;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0) return -1;
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_expert_io -m DIR [--reads N] [--qd LIST] [--chunk-kib LIST] [--fixed off|on|both]\n"
            "                       [--backend uring|pread|all] [--drop-caches] [--seed S]\n"
            "Reads routed experts of the checkpoint in DIR (e.g. from make_r1_slice) as decoding asks for\n"
            "them (per token, per MoE layer, top-k distinct random experts) and prints GB/s per configuration\n"
            "and the ratio to the best one.\n"
            "  -m DIR            checkpoint directory\n"
            "  --reads N         expert reads per configuration (default 96, ~4.2 GB at R1 size)\n"
            "  --qd LIST         queue depths, comma-separated (default 1,2,4,8,16)\n"
            "  --chunk-kib LIST  split each piece into reads of this many KiB; 0 = one read per piece\n"
            "                    (default 0,1024,4096)\n"
            "  --fixed MODE      io_uring registered buffers: off, on or both (default both)\n"
            "  --backend B       uring, pread, all or none (default all; pread runs with chunk 0 and no fixed\n"
            "                    buffers; none only writes the --write-iolog file)\n"
            "  --drop-caches     echo 3 > /proc/sys/vm/drop_caches before each configuration (root)\n"
            "  --seed S          request stream seed (default 1)\n"
            "  --write-iolog F   also write the request stream as a fio v2 iolog (for fio --read_iolog)\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.reads = 96, .qd = {1, 2, 4, 8, 16}, .n_qd = 5, .chunk_kib = {0, 1024, 4096}, .n_chunk = 3,
                   .fixed_modes = {0, 1}, .n_fixed = 2, .run_uring = 1, .run_pread = 1, .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--drop-caches")) {
            o->drop_caches = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "bench_expert_io: %s needs a value (see --help)\n", a);
            return -1;
        }
        i++;
        int ok = 1;
        if (!strcmp(a, "-m")) o->model = v;
        else if (!strcmp(a, "--reads")) ok = (o->reads = atoi(v)) > 0;
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--write-iolog")) o->iolog = v;
        else if (!strcmp(a, "--qd")) ok = (o->n_qd = parse_int_list(v, o->qd, 16)) > 0;
        else if (!strcmp(a, "--chunk-kib")) {
            int tmp[8];
            ok = (o->n_chunk = parse_int_list(v, tmp, 8)) > 0;
            for (int k = 0; ok && k < o->n_chunk; k++) o->chunk_kib[k] = tmp[k];
        } else if (!strcmp(a, "--fixed")) {
            if (!strcmp(v, "off")) o->fixed_modes[0] = 0, o->n_fixed = 1;
            else if (!strcmp(v, "on")) o->fixed_modes[0] = 1, o->n_fixed = 1;
            else ok = !strcmp(v, "both");
        } else if (!strcmp(a, "--backend")) {
            o->run_uring = !strcmp(v, "uring") || !strcmp(v, "all");
            o->run_pread = !strcmp(v, "pread") || !strcmp(v, "all");
            ok = o->run_uring || o->run_pread || !strcmp(v, "none");
        } else {
            fprintf(stderr, "bench_expert_io: unknown flag %s (see --help)\n", a);
            return -1;
        }
        if (!ok) {
            fprintf(stderr, "bench_expert_io: bad value '%s' for %s (see --help)\n", v, a);
            return -1;
        }
    }
    if (!o->model) {
        fprintf(stderr, "bench_expert_io: -m DIR is required (see --help)\n");
        return -1;
    }
    for (int i = 0; i < o->n_qd; i++)
        if (o->qd[i] < 1) {
            fprintf(stderr, "bench_expert_io: queue depth %d must be >= 1\n", o->qd[i]);
            return -1;
        }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o) != 0) return 2;
    char err[512] = "";
    checkpoint *ck = checkpoint_open(o.model, err, sizeof err);
    if (!ck) {
        fprintf(stderr, "bench_expert_io: %s\n", err);
        return 1;
    }
    rng_state = o.seed * 0x9E3779B97F4A7C15ull + 1;
    int straddlers;
    expert_id *ids = routing_stream(ck, o.reads, &straddlers);
    const expert_extent *x0 = checkpoint_expert(ck, ids[0].layer, ids[0].expert);
    uint64_t expert_bytes = 0;
    for (int p = 0; p < x0->npieces; p++) expert_bytes += x0->piece[p].length;
    printf("%s: %d expert reads of %llu bytes (%d straddle two shards), %.2f GB per configuration\n", o.model, o.reads,
           (unsigned long long)expert_bytes, straddlers, (double)expert_bytes * o.reads / 1e9);
    if (o.iolog && write_iolog(ck, ids, o.reads, o.iolog) != 0) {
        free(ids);
        checkpoint_close(ck);
        return 1;
    }
    result res[128];
    int n = 0, rc = 0;
    for (int q = 0; q < o.n_qd && o.run_uring; q++)
        for (int c = 0; c < o.n_chunk; c++)
            for (int f = 0; f < o.n_fixed && n < 128; f++)
                if (run_config(ck, &o, IO_BACKEND_URING, o.qd[q], o.chunk_kib[c], o.fixed_modes[f], ids, expert_bytes,
                               &res[n]) == 0)
                    n++;
                else
                    rc = 1;
    for (int q = 0; q < o.n_qd && o.run_pread && n < 128; q++)
        if (run_config(ck, &o, IO_BACKEND_PREAD, o.qd[q], 0, 0, ids, expert_bytes, &res[n]) == 0) n++;
        else rc = 1;
    int best = 0;
    for (int i = 1; i < n; i++)
        if (res[i].gbps > res[best].gbps) best = i;
    if (n > 0) {
        printf("\nratio to the best configuration of this run (%s, %.3f GB/s):\n", res[best].label, res[best].gbps);
        for (int i = 0; i < n; i++) printf("  %-40s %5.1f%%\n", res[i].label, 100.0 * res[i].gbps / res[best].gbps);
    }
    free(ids);
    checkpoint_close(ck);
    return rc;
}
