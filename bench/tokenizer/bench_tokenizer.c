/* Tokenizer throughput: load time of tokenizer.json, encode MB/s over the corpus (first pass on a
 * fresh tokenizer, i.e. cold word cache, and the best of the later passes), decode MB/s. run.sh
 * runs this next to the reference (Hugging Face tokenizers via node) and prints the ratios.
 * usage: bench_tokenizer MODEL_DIR CORPUS_DIR [PASSES] */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tokenizer/tokenizer.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct { char *text; size_t len; } doc;

static size_t load_corpus(const char *dir, doc *docs, size_t max)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        size_t nl = strlen(e->d_name);
        if (nl < 5 || strcmp(e->d_name + nl - 4, ".txt")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        docs[n].text = malloc((size_t)len + 1);
        docs[n].len = fread(docs[n].text, 1, (size_t)len, f);
        fclose(f);
        n++;
    }
    closedir(d);
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: bench_tokenizer MODEL_DIR CORPUS_DIR [PASSES]\n"); return 2; }
    int passes = argc > 3 ? atoi(argv[3]) : 5;
    char err[512];
    double loads[5];
    for (int i = 0; i < 5; i++) {
        double t0 = now();
        tokenizer *tok = tokenizer_load(argv[1], err, sizeof err);
        loads[i] = now() - t0;
        if (!tok) { fprintf(stderr, "bench_tokenizer: %s\n", err); return 1; }
        tokenizer_free(tok);
    }
    qsort(loads, 5, sizeof loads[0], cmp_double);
    doc docs[256];
    size_t n_docs = load_corpus(argv[2], docs, 256), bytes = 0, tokens = 0;
    if (!n_docs) { fprintf(stderr, "bench_tokenizer: no .txt files in %s\n", argv[2]); return 1; }
    for (size_t i = 0; i < n_docs; i++) bytes += docs[i].len;
    tokenizer *tok = tokenizer_load(argv[1], err, sizeof err);
    double first = 0, best = 1e30, decode_best = 1e30;
    for (int p = 0; p < passes; p++) {
        double t0 = now(), dec = 0;
        tokens = 0;
        for (size_t i = 0; i < n_docs; i++) {
            int32_t *ids; size_t n;
            if (tokenizer_encode(tok, docs[i].text, docs[i].len, 0, &ids, &n)) return 1;
            tokens += n;
            double d0 = now();
            char *text = tokenizer_decode(tok, ids, n, 0, NULL);
            dec += now() - d0;
            free(text);
            free(ids);
        }
        double t = now() - t0 - dec;
        if (p == 0) first = t;
        if (t < best) best = t;
        if (dec < decode_best) decode_best = dec;
    }
    double mb = (double)bytes / 1e6;
    printf("dsspec load_ms_median %.1f\n", loads[2] * 1e3);
    printf("dsspec corpus_bytes %zu tokens %zu\n", bytes, tokens);
    printf("dsspec encode_first_MBps %.2f\n", mb / first);
    printf("dsspec encode_best_MBps %.2f\n", mb / best);
    printf("dsspec decode_best_MBps %.2f\n", mb / decode_best);
    tokenizer_free(tok);
    for (size_t i = 0; i < n_docs; i++) free(docs[i].text);
    return 0;
}
