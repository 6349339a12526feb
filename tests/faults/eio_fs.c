/* A FUSE file system that shows a directory read-only and makes reads of one of its files fail
 * with a real EIO on demand: the kernel returns the error to whatever read the process issued
 * (pread, io_uring, O_DIRECT or not), as a failing disk would. The fault test
 * (tests/faults/eio_shard.sh) runs it where the kernel has no device-mapper.
 *
 * usage: eio_fs SOURCE_DIR MOUNTPOINT FILE FROM_OFFSET
 *   SIGUSR1: from now on, reads of FILE that touch bytes at or beyond FROM_OFFSET fail with EIO;
 *   SIGUSR2: they succeed again (the disk "comes back").
 * Runs in the foreground until unmounted; at exit prints "eio_fs: N reads failed with EIO" on
 * stdout so the test knows the fault was really hit. Every file is opened with direct_io: no page
 * cache between the process and this server, so no read can be served from memory. */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

static char source[PATH_MAX];
static const char *faulty_name;
static off_t fault_from;
static volatile sig_atomic_t failing;
static volatile long failed_reads;

static void set_failing(int sig) { failing = sig == SIGUSR1; }

static void real_path(char *out, size_t n, const char *path) { snprintf(out, n, "%s%s", source, path); }

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    (void)fi;
    char p[PATH_MAX];
    real_path(p, sizeof p, path);
    return lstat(p, st) ? -errno : 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags)
{
    (void)off; (void)fi; (void)flags;
    char p[PATH_MAX];
    real_path(p, sizeof p, path);
    DIR *d = opendir(p);
    if (!d) return -errno;
    for (struct dirent *e; (e = readdir(d));) fill(buf, e->d_name, NULL, 0, 0);
    closedir(d);
    return 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
    if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
    char p[PATH_MAX];
    real_path(p, sizeof p, path);
    int fd = open(p, O_RDONLY);
    if (fd < 0) return -errno;
    fi->fh = (uint64_t)fd;
    fi->direct_io = 1;
    return 0;
}

static int fs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    const char *base = strrchr(path, '/');
    if (failing && !strcmp(base ? base + 1 : path, faulty_name) && off + (off_t)size > fault_from) {
        failed_reads++;
        return -EIO;
    }
    ssize_t n = pread((int)fi->fh, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

static int fs_release(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    close((int)fi->fh);
    return 0;
}

static const struct fuse_operations ops = {
    .getattr = fs_getattr, .readdir = fs_readdir, .open = fs_open, .read = fs_read, .release = fs_release,
};

int main(int argc, char **argv)
{
    if (argc != 5) { fprintf(stderr, "usage: eio_fs SOURCE_DIR MOUNTPOINT FILE FROM_OFFSET\n"); return 2; }
    if (!realpath(argv[1], source)) { fprintf(stderr, "eio_fs: %s: %s\n", argv[1], strerror(errno)); return 2; }
    faulty_name = argv[3];
    fault_from = (off_t)strtoll(argv[4], NULL, 10);
    struct sigaction sa = {.sa_handler = set_failing};
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    /* Single-threaded, foreground, read-only; allow_other is not needed as the test runs as root. */
    char *fargv[] = {argv[0], "-f", "-s", "-o", "ro,fsname=eio_fs", argv[2], NULL};
    int rc = fuse_main(6, fargv, &ops, NULL);
    printf("eio_fs: %ld reads failed with EIO\n", (long)failed_reads);
    return rc;
}
