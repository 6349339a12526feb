#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tests/checkpoint/synth_checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

void fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FUZZ CONTRACT BROKEN: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void fuzz_check_error_line(const char *what, const char *err)
{
    if (!err[0]) fuzz_fail("%s failed without an error message", what);
    if (strpbrk(err, "\n\r")) fuzz_fail("%s: error is more than one line: %s", what, err);
}

const char *fuzz_memfile(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("dsspec_fuzz", MFD_CLOEXEC);
        if (fd < 0) { perror("memfd_create"); exit(1); }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) { perror("memfd write"); exit(1); }
    return path;
}

char *fuzz_cstring(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) exit(1);
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

static char tmpdir[256];

static void remove_tmpdir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (tmpdir[0] && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
}

const char *fuzz_tmpdir(void)
{
    if (tmpdir[0]) return tmpdir;
    struct stat st;
    snprintf(tmpdir, sizeof tmpdir, "%s/dsspec_fuzz_XXXXXX", stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); exit(1); }
    atexit(remove_tmpdir);
    return tmpdir;
}

void fuzz_write_file(const char *dir, const char *name, const void *data, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) { fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno)); exit(1); }
}

void fuzz_copy_file(const char *from, const char *dir, const char *name)
{
    FILE *f = fopen(from, "rb");
    if (!f) { fprintf(stderr, "cannot read %s\n", from); exit(1); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "cannot read %s\n", from); exit(1); }
    fclose(f);
    fuzz_write_file(dir, name, buf, (size_t)n);
    free(buf);
}

void fuzz_write_synth_checkpoint(const char *dir)
{
    model_config c = synth_small_config();
    c.num_hidden_layers = 3;
    c.first_k_dense_replace = 1;
    c.n_routed_experts = 72;
    c.n_group = 8;
    c.topk_group = 4;
    c.num_experts_per_tok = 8;
    if (synth_write_checkpoint(dir, &c, 256 << 10)) fuzz_fail("cannot write the synthetic checkpoint in %s", dir);
}
