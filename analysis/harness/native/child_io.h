/* What the trial launcher (launcher.c) and the lockstep driver (lockstep.c) both need around a child: the
 * monotonic clock and a standard stream redirected to a file. */
#ifndef HEAPCOST_CHILD_IO_H
#define HEAPCOST_CHILD_IO_H
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int redirect(const char *path, int fd, int flags)
{
    int f = open(path, flags, 0644);
    if (f < 0)
        return -1;
    if (f != fd) {
        dup2(f, fd);
        close(f);
    }
    return 0;
}

#endif
