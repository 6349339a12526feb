/* What the engine learns about where it runs: the embedded model's directory (relative to the
 * executable, so an installed or copied tree finds it), the machine's physical cores, and the
 * build (version, commit, kernel path, the I/O backend auto picks). */
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine/engine_internal.h"

#ifndef DSSPEC_SOURCE_DIR
#define DSSPEC_SOURCE_DIR "."
#endif
#ifndef DSSPEC_VERSION
#define DSSPEC_VERSION "0.0.0"
#endif
#ifndef DSSPEC_GIT_COMMIT
#define DSSPEC_GIT_COMMIT "unknown"
#endif
#define DEFAULT_MODEL_NAME "dsspec-tiny"

enum { N_MODEL_CANDIDATES = 3 };

/* Where the embedded model may be, in order: an installed tree (<prefix>/bin/dsspec beside
 * <prefix>/share/dsspec/models), a build directory inside the source tree (<src>/build/dsspec beside
 * <src>/models), and last the source tree the binary was configured from. */
static void model_candidates(char out[N_MODEL_CANDIDATES][PATH_MAX])
{
    char exe[PATH_MAX - 64] = ".";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
    }
    snprintf(out[0], PATH_MAX, "%s/../share/dsspec/models/%s", exe, DEFAULT_MODEL_NAME);
    snprintf(out[1], PATH_MAX, "%s/../models/%s", exe, DEFAULT_MODEL_NAME);
    snprintf(out[2], PATH_MAX, "%s/models/%s", DSSPEC_SOURCE_DIR, DEFAULT_MODEL_NAME);
    for (int i = 0; i < N_MODEL_CANDIDATES; i++) {
        char real[PATH_MAX];
        if (realpath(out[i], real)) snprintf(out[i], PATH_MAX, "%s", real);
    }
}

static int is_model_dir(const char *dir)
{
    char cfg[PATH_MAX + 16];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    return access(cfg, R_OK) == 0;
}

const char *dsspec_default_model_dir(void)
{
    static char found[PATH_MAX];
    char cand[N_MODEL_CANDIDATES][PATH_MAX];
    model_candidates(cand);
    for (int i = 0; i < N_MODEL_CANDIDATES; i++)
        if (is_model_dir(cand[i])) {
            snprintf(found, sizeof found, "%s", cand[i]);
            return found;
        }
    return NULL;
}

int dsspec_resolve_model_dir(const char *model_dir, const char **out, char *err, size_t errlen)
{
    if (model_dir) { *out = model_dir; return 0; }
    if ((*out = dsspec_default_model_dir())) return 0;
    char cand[N_MODEL_CANDIDATES][PATH_MAX];
    model_candidates(cand);
    error_set(err, errlen, "no -m DIR given and the embedded model %s is in none of %s, %s, %s", DEFAULT_MODEL_NAME,
              cand[0], cand[1], cand[2]);
    return -1;
}

/* Distinct (package, core) pairs among the CPUs this process may run on: hyperthreads share a
 * core's FMA units and memory port, so they add little to a memory-bound decode. */
int dsspec_physical_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set)) return 1;
    int cpus = CPU_COUNT(&set), n = 0;
    static long seen[CPU_SETSIZE];
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set)) continue;
        char path[128];
        long core = -1, pkg = -1;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", c);
        FILE *f = fopen(path, "r");
        if (f) { if (fscanf(f, "%ld", &core) != 1) core = -1; fclose(f); }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", c);
        if ((f = fopen(path, "r"))) { if (fscanf(f, "%ld", &pkg) != 1) pkg = -1; fclose(f); }
        if (core < 0 || pkg < 0) return cpus > 0 ? cpus : 1; /* no topology: every CPU counts */
        long key = pkg * 65536 + core;
        int dup = 0;
        for (int i = 0; i < n && !dup; i++) dup = seen[i] == key;
        if (!dup) seen[n++] = key;
    }
    return n > 0 ? n : 1;
}

const char *dsspec_version(void) { return DSSPEC_VERSION; }
const char *dsspec_git_commit(void) { return DSSPEC_GIT_COMMIT; }

/* What --io auto picks: probed on the embedded model's shards (O_DIRECT depends on the filesystem). */
static void print_io_backend(FILE *out)
{
    char err[512];
    const char *dir = dsspec_default_model_dir();
    checkpoint *ck = dir ? checkpoint_open(dir, err, sizeof err) : NULL;
    expert_reader *r = ck ? expert_reader_create(ck, IO_BACKEND_AUTO, 1, err, sizeof err) : NULL;
    if (r)
        fprintf(out, "io backend: %s (--io auto, probed on %s: %s)\n", io_backend_name(expert_reader_backend(r)), dir,
                expert_reader_backend_note(r));
    else
        fprintf(out, "io backend: not probed (%s)\n", dir ? err : "no embedded model found");
    expert_reader_free(r);
    checkpoint_close(ck);
}

void dsspec_version_print(FILE *out)
{
    fprintf(out, "dsspec %s (git commit %s)\n", DSSPEC_VERSION, DSSPEC_GIT_COMMIT);
    fprintf(out, "kernel path: %s (the best this CPU runs; --cpu-features lowers it)\n", cpu_path_name(kernels_init(CPU_PATH_AVX512)));
    print_io_backend(out);
    const char *dir = dsspec_default_model_dir();
    fprintf(out, "embedded model: %s\n", dir ? dir : "not found");
    fprintf(out, "physical cores: %d (the default --threads)\n", dsspec_physical_cores());
}
