/* What the fuzz harnesses share. Each harness (tests/fuzz/fuzz_NAME.c) defines
 * LLVMFuzzerTestOneInput and, when it needs files or a model, LLVMFuzzerInitialize. It is linked
 * twice: with libFuzzer (DSSPEC_FUZZ=ON, clang) to search, and with replay_main.c in every build
 * to replay the seeds and the regression inputs of tests/fuzz/regressions/NAME as a normal test.
 *
 * A harness checks contracts, not just "no crash": an input is refused with exactly one non-empty
 * error line, or accepted and then usable. A broken contract calls fuzz_fail, which aborts, so
 * the fuzzer keeps the input as a crash. */
#ifndef DSSPEC_FUZZ_UTIL_H
#define DSSPEC_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#ifndef DSSPEC_SOURCE_DIR
#define DSSPEC_SOURCE_DIR "."
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The bytes as a file: a memfd rewritten on each call, named "/proc/self/fd/N" (valid until the
 * next call), so parsers that take a path read them without touching a disk. */
const char *fuzz_memfile(const uint8_t *data, size_t size);
/* The bytes NUL-terminated in a malloc'd copy. */
char *fuzz_cstring(const uint8_t *data, size_t size);
/* A private directory (under /dev/shm when it exists), made on first use, removed at exit. */
const char *fuzz_tmpdir(void);
/* dir/name := data[0..size); exits on failure (the harness cannot run without it). */
void fuzz_write_file(const char *dir, const char *name, const void *data, size_t size);
void fuzz_copy_file(const char *from, const char *dir, const char *name);

/* Writes the harnesses' synthetic checkpoint into dir: R1's routing topology in small (72 experts
 * in 8 groups, top-4 groups, top-8, so the fuzzer can reach every top-k the reader could accept up
 * to 72), 1 dense + 2 MoE layers + MTP, hidden 64, several shards. Exits on failure. */
void fuzz_write_synth_checkpoint(const char *dir);

/* A failed call's err must be one line: non-empty, no newline. */
void fuzz_check_error_line(const char *what, const char *err);
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
