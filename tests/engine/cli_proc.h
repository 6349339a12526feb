/* Driving the real dsspec binary from a test: run it to the end with stdout/stderr captured, or
 * start it in the background and SIGKILL it at a chosen moment. Header-only, for the CLI tests. */
#ifndef DSSPEC_TEST_CLI_PROC_H
#define DSSPEC_TEST_CLI_PROC_H

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { PROC_MAX_ARGS = 64 };

typedef struct {
    int status;                   /* exit code, or 128 + signal */
    char out[1 << 16], err[1 << 16];
} proc_result;

static void proc_read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t r;
    lseek(fd, 0, SEEK_SET);
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0) n += (size_t)r;
    buf[n] = 0;
}

/* Starts argv (NULL-terminated) with stdout and stderr into the files given (NULL: /dev/null). */
static pid_t proc_start(char *const *argv, int out_fd, int err_fd)
{
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(out_fd >= 0 ? out_fd : null, 1);
        dup2(err_fd >= 0 ? err_fd : null, 2);
        dup2(null, 0);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static int proc_wait(pid_t pid)
{
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs argv to the end; its output lands in r. Returns the status. */
static int proc_run(proc_result *r, char *const *argv)
{
    char op[] = "/tmp/dsspec_proc_out_XXXXXX", ep[] = "/tmp/dsspec_proc_err_XXXXXX";
    int fo = mkstemp(op), fe = mkstemp(ep);
    r->status = proc_wait(proc_start(argv, fo, fe));
    proc_read_all(fo, r->out, sizeof r->out);
    proc_read_all(fe, r->err, sizeof r->err);
    close(fo);
    close(fe);
    unlink(op);
    unlink(ep);
    return r->status;
}

static long proc_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Starts argv and SIGKILLs it as soon as path has grown to at least bytes (polled every 0.2 ms),
 * or when it ends on its own. Returns the file's size at the kill, or -1 when the run ended first. */
static long proc_kill_at_size(char *const *argv, const char *path, long bytes)
{
    pid_t pid = proc_start(argv, -1, -1);
    long size = -1;
    int st;
    struct timespec nap = {0, 200000};
    while (waitpid(pid, &st, WNOHANG) == 0) {
        long s = proc_file_size(path);
        if (s >= bytes) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return s;
        }
        nanosleep(&nap, NULL);
    }
    return size;
}

/* argv built from a base list plus extra arguments, into a caller's array of PROC_MAX_ARGS. */
static void proc_args(const char **dst, const char *const *base, const char *const *extra)
{
    int n = 0;
    for (; base && *base && n < PROC_MAX_ARGS - 1; base++) dst[n++] = *base;
    for (; extra && *extra && n < PROC_MAX_ARGS - 1; extra++) dst[n++] = *extra;
    dst[n] = NULL;
}

#endif
