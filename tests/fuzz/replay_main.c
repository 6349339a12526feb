/* The fuzz harness as a normal test: every file named on the command line, or inside a directory
 * named there, goes through LLVMFuzzerTestOneInput once. Seeds and the inputs of every crash the
 * fuzzer found (tests/fuzz/regressions/NAME) replay in the release and ASan builds this way. An
 * empty or missing input set fails: a replay that replays nothing proves nothing. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "tests/fuzz/fuzz_util.h"

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "FAIL: cannot read %s\n", path); return -1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!buf || got != (size_t)n) { fprintf(stderr, "FAIL: cannot read %s\n", path); free(buf); return -1; }
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Files of a directory in name order (README.md excluded); count replayed, or -1. */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "FAIL: cannot open %s\n", dir); return -1; }
    char **names = NULL;
    int n = 0, cap = 0, done = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "README.md")) continue;
        if (n == cap && !(names = realloc(names, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *names))) exit(1);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, name_cmp);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (done >= 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) done = replay_file(path) == 0 ? done + 1 : -1;
        free(names[i]);
    }
    free(names);
    return done;
}

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) { fprintf(stderr, "FAIL: %s does not exist\n", argv[i]); return 1; }
        int n = S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]) == 0 ? 1 : -1;
        if (n < 0) return 1;
        total += n;
    }
    if (total == 0) { fprintf(stderr, "FAIL: no inputs replayed\n"); return 1; }
    printf("%s: %d inputs replayed, every contract held\n", argv[0], total);
    return 0;
}
