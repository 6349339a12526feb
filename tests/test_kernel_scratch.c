/* thread_pool_each runs once on every thread of a pool; kernels_scratch_reserve allocates a
 * thread's scratch up front and reports (rather than aborts on) memory that is not there. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/test_check.h"
#include "core/kernels.h"
#include "core/threadpool.h"

typedef struct {
    pthread_t seen[8];
    atomic_int calls, bad_index;
    atomic_int reserved_ok;
    int cols;
} each_job;

static void record(void *arg, int t)
{
    each_job *j = arg;
    if (t < 0 || t >= 8) { atomic_fetch_add(&j->bad_index, 1); return; }
    j->seen[t] = pthread_self();
    atomic_fetch_add(&j->calls, 1);
    if (j->cols && kernels_scratch_reserve(j->cols) == 0) atomic_fetch_add(&j->reserved_ok, 1);
}

static void check_each(int threads)
{
    thread_pool *p = thread_pool_create(threads);
    for (int rep = 0; rep < 200; rep++) {
        each_job j = {.cols = rep == 0 ? 7168 : 0};
        atomic_init(&j.calls, 0);
        atomic_init(&j.bad_index, 0);
        atomic_init(&j.reserved_ok, 0);
        thread_pool_each(p, record, &j);
        CHECK(atomic_load(&j.calls) == threads && atomic_load(&j.bad_index) == 0, "pool %d: %d calls, %d bad indices",
              threads, atomic_load(&j.calls), atomic_load(&j.bad_index));
        int distinct = 1;
        for (int a = 0; a < threads; a++)
            for (int b = a + 1; b < threads; b++)
                if (pthread_equal(j.seen[a], j.seen[b])) distinct = 0;
        CHECK(distinct, "pool %d, call %d: a thread ran two of the per-thread calls", threads, rep);
        if (rep == 0) CHECK(atomic_load(&j.reserved_ok) == threads, "pool %d: R1-wide scratch reserved on every thread", threads);
    }
    thread_pool_free(p);
}

/* In a child whose address space is capped just above what it maps now: a reservation past the
 * cap returns -1 (no abort), and a small one afterwards still succeeds. */
static void check_reserve_failure(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit r;
        FILE *f = fopen("/proc/self/statm", "r");
        unsigned long pages = 0;
        if (!f || fscanf(f, "%lu", &pages) != 1) _exit(3);
        fclose(f);
        r.rlim_cur = r.rlim_max = pages * (unsigned long)sysconf(_SC_PAGESIZE) + (64ul << 20);
        if (setrlimit(RLIMIT_AS, &r)) _exit(4);
        /* 2^22 columns x 32 rows x 1.5 x 4 bytes: 768 MiB, far past the 64 MiB of room */
        if (kernels_scratch_reserve(1 << 22) != -1) _exit(5);
        if (kernels_scratch_reserve(7168) != 0) _exit(6);
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "capped reservation: child %s %d (3-4 set-up, 5 the big reservation did not fail, 6 the small one did)",
          WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

int main(void)
{
    for (int threads = 1; threads <= 5; threads++) check_each(threads);
    check_reserve_failure();
    if (test_failures) return 1;
    printf("all kernel scratch tests passed\n");
    return 0;
}
