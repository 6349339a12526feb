/* checkpoint_open at R1's tensor count (91,991 tensors, tiny matrices, written here) against the
 * least work any reader must do: read the index and every shard header and cJSON-parse them.
 * Also name lookups through the hash vs bsearch over the sorted names. Usage:
 * bench_checkpoint [shard_kib]  (default 256: ~8 shards; R1 has 163) */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/checkpoint.h"
#include "tests/checkpoint/ckpt_test_util.h"
#include "tests/checkpoint/synth_checkpoint.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The floor: index + every header read and parsed, nothing checked. */
static double parse_only(const checkpoint *ck)
{
    double t0 = now_s();
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", ck->dir);
    char *text = tu_read_file(path, NULL);
    cJSON_Delete(cJSON_Parse(text));
    free(text);
    for (int s = 0; s < ck->n_shards; s++) {
        int fd = open(ck->shards[s].path, O_RDONLY);
        uint64_t n = ck->shards[s].header_len;
        char *h = malloc(n);
        if (pread(fd, h, n, 8) != (ssize_t)n) fprintf(stderr, "short read\n");
        cJSON_Delete(cJSON_ParseWithLength(h, n));
        free(h);
        close(fd);
    }
    return now_s() - t0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
    uint64_t shard_kib = argc > 1 ? strtoull(argv[1], NULL, 10) : 256;
    char dir[64], err[1024];
    tu_make_tmpdir(dir, sizeof dir);
    model_config c = synth_r1_layout_config();
    if (synth_write_checkpoint(dir, &c, shard_kib << 10)) { fprintf(stderr, "cannot write %s\n", dir); return 1; }
    double best_open = 1e9, best_parse = 1e9;
    checkpoint *ck = NULL;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        checkpoint *k = checkpoint_open(dir, err, sizeof err);
        double dt = now_s() - t0;
        if (!k) { fprintf(stderr, "open: %s\n", err); return 1; }
        if (dt < best_open) best_open = dt;
        double p = parse_only(k);
        if (p < best_parse) best_parse = p;
        if (ck) checkpoint_close(ck);
        ck = k;
    }
    printf("checkpoint_open: %d tensors, %d shards: %.3f s (best of 5); read+parse JSON only: %.3f s; ratio %.2fx\n",
           ck->n_tensors, ck->n_shards, best_open, best_parse, best_open / best_parse);

    int n = ck->n_tensors;
    char **names = malloc((size_t)n * sizeof *names);
    for (int i = 0; i < n; i++) names[i] = ck->tensors[i].name;
    char **sorted = malloc((size_t)n * sizeof *sorted);
    memcpy(sorted, names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_name);
    size_t found = 0;
    double t0 = now_s();
    for (int r = 0; r < 10; r++)
        for (int i = 0; i < n; i++) found += checkpoint_tensor(ck, names[(i * 7919L) % n]) != NULL;
    double th = (now_s() - t0) / (10.0 * n);
    t0 = now_s();
    for (int r = 0; r < 10; r++)
        for (int i = 0; i < n; i++) found += bsearch(&names[(i * 7919L) % n], sorted, (size_t)n, sizeof *sorted, cmp_name) != NULL;
    double tb = (now_s() - t0) / (10.0 * n);
    printf("lookup: hash %.0f ns, bsearch %.0f ns per name; ratio %.2fx (found %zu of %d)\n", th * 1e9, tb * 1e9, tb / th, found, 20 * n);
    free(names);
    free(sorted);
    checkpoint_close(ck);
    tu_remove_tree(dir);
    return 0;
}
