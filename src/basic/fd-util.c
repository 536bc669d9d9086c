/* Plain fd helpers; no allocation, no logging. */
#include "basic/fd-util.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "basic/macro.h"

int close_safe(int fd)
{
    if (fd >= 0) {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    return -EBADF;
}

int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int read_exact(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (n == 0) {
            return -EPIPE;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int fd_set_nonblock(int fd, int nonblock)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) {
        return -errno;
    }
    flags = nonblock ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
    return NERRNO(fcntl(fd, F_SETFL, flags));
}
