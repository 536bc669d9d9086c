/*
 * setns() helpers for worker threads (see netns.h). Writing net sysctls this
 * way, rather than through `ip netns exec sysctl`, costs no spawn, and the
 * value is checked by reading it back in the same namespace.
 */
#include "node/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/macro.h"

int netns_enter(const char *path, int *ret_saved)
{
    int self = -EBADF, target = -EBADF;
    int r;

    self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0) {
        return -errno;
    }
    target = open(path, O_RDONLY | O_CLOEXEC);
    if (target < 0) {
        r = -errno;
        close_safe(self);
        return r;
    }
    r = NERRNO(setns(target, CLONE_NEWNET));
    close_safe(target);
    if (r < 0) {
        close_safe(self);
        return r;
    }
    *ret_saved = self;
    return 0;
}

void netns_leave(int saved)
{
    if (setns(saved, CLONE_NEWNET) < 0) {
        abort();
    }
    close_safe(saved);
}

static int sysctl_path(const char *key, char *buf, size_t n)
{
    if (strstr(key, "..") || key[0] == '/') {
        return -EINVAL;
    }
    return snprintf(buf, n, "/proc/sys/%s", key) >= (int)n ? -ENAMETOOLONG : 0;
}

int netns_sysctl_read(const char *key, char *buf, size_t n)
{
    char path[PATH_MAX];
    ssize_t k;
    int fd, r;

    r = sysctl_path(key, path, sizeof(path));
    if (r < 0) {
        return r;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    k = read(fd, buf, n - 1);
    r = k < 0 ? -errno : 0;
    close_safe(fd);
    if (r < 0) {
        return r;
    }
    buf[k] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

int netns_sysctl_write(const char *key, const char *value)
{
    char path[PATH_MAX], back[64];
    int fd, r;

    r = sysctl_path(key, path, sizeof(path));
    if (r < 0) {
        return r;
    }
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    r = write_all(fd, value, strlen(value));
    close_safe(fd);
    if (r < 0) {
        return r;
    }
    r = netns_sysctl_read(key, back, sizeof(back));
    if (r < 0) {
        return r;
    }
    return strcmp(back, value) == 0 ? 0 : -EIO;
}
