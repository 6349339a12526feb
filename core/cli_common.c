#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/cli_common.h"

int engine_open(engine *e, const char *dir, int threads, const char *cpu, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    cpu_path max = CPU_PATH_AVX512;
    if (cpu && cpu_path_parse(cpu, &max) != 0) {
        snprintf(err, errlen, "--cpu-features: expected scalar, avx2 or avx512, got '%s'", cpu);
        return -1;
    }
    if (cpu && !cpu_path_available(max)) {
        snprintf(err, errlen, "--cpu-features %s: this CPU does not support it", cpu);
        return -1;
    }
    kernels_init(max);
    if (!(e->ck = checkpoint_open(dir, err, errlen))) return -1;
    if (!(e->pool = thread_pool_create(threads))) { snprintf(err, errlen, "cannot start %d threads", threads); goto fail; }
    if (!(e->m = model_load(e->ck, e->pool, err, errlen))) goto fail;
    return 0;
fail:
    engine_close(e);
    return -1;
}

void engine_close(engine *e)
{
    model_free(e->m);
    thread_pool_free(e->pool);
    checkpoint_close(e->ck);
    memset(e, 0, sizeof *e);
}

int parse_id_list(const char *flag, const char *s, int **ids, char *err, size_t errlen)
{
    int n = 0, cap = 16;
    int *v = malloc(cap * sizeof *v);
    const char *p = s;
    while (v) {
        while (isspace((unsigned char)*p)) p++;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > 0x7fffffff) {
            snprintf(err, errlen, "%s: expected a comma-separated list of token ids, got '%s'", flag, s);
            free(v);
            return -1;
        }
        if (n == cap) {
            int *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) break;
            v = nv;
        }
        v[n++] = (int)x;
        p = end;
        while (isspace((unsigned char)*p)) p++;
        if (*p == 0) { *ids = v; return n; }
        if (*p != ',') {
            snprintf(err, errlen, "%s: expected a comma-separated list of token ids, got '%s'", flag, s);
            free(v);
            return -1;
        }
        p++;
    }
    free(v);
    snprintf(err, errlen, "out of memory");
    return -1;
}

int64_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || errno || x < 0) return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: return -1;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I')) end++;
    if (mul > 1 && (*end == 'b' || *end == 'B')) end++;
    if (*end) return -1;
    return (int64_t)(x * mul);
}

int parse_int_flag(const char *flag, const char *s, long lo, long hi, long *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long x = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || *end || errno || x < lo || x > hi) {
        snprintf(err, errlen, "%s: expected an integer in [%ld, %ld], got '%s'", flag, lo, hi, s ? s : "(nothing)");
        return -1;
    }
    *out = x;
    return 0;
}

int parse_double_flag(const char *flag, const char *s, double lo, double hi, double *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double x = s ? strtod(s, &end) : 0;
    if (!s || end == s || *end || errno || !(x >= lo && x <= hi)) {
        snprintf(err, errlen, "%s: expected a number in [%g, %g], got '%s'", flag, lo, hi, s ? s : "(nothing)");
        return -1;
    }
    *out = x;
    return 0;
}

uint64_t process_peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}
