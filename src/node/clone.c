/*
 * Disk cloning. The reflink path is one ioctl; the fallback copies with
 * copy_file_range, which keeps holes sparse on most filesystems only if the
 * kernel does so — that is why it is a logged fallback, not a peer.
 */
#include "node/clone.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/macro.h"

int clone_file(const char *src, const char *dst, bool *ret_reflinked)
{
    int in = -EBADF, out = -EBADF;
    struct stat st;
    int r;

    in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        return -errno;
    }
    if (fstat(in, &st) < 0) {
        r = -errno;
        goto out;
    }
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        r = -errno;
        goto out;
    }
    if (ioctl(out, FICLONE, in) == 0) {
        *ret_reflinked = true;
        r = 0;
        goto out;
    }
    *ret_reflinked = false;
    if (ftruncate(out, st.st_size) < 0) {
        r = -errno;
        goto fail;
    }
    for (off_t off = 0; off < st.st_size;) {
        /* Copy data extents only, so the clone stays as sparse as the template. */
        off_t data = lseek(in, off, SEEK_DATA);
        if (data < 0) {
            break; /* ENXIO: only a hole remains */
        }
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0) {
            r = -errno;
            goto fail;
        }
        off_t ioff = data, ooff = data;
        while (ioff < hole) {
            ssize_t n = copy_file_range(in, &ioff, out, &ooff, (size_t)(hole - ioff), 0);
            if (n <= 0) {
                r = n < 0 ? -errno : -EIO;
                goto fail;
            }
        }
        off = hole;
    }
    r = 0;
    goto out;
fail:
    unlink(dst);
out:
    close_safe(in);
    close_safe(out);
    return r;
}

bool clone_supported(const char *dir)
{
    char a[PATH_MAX], b[PATH_MAX];
    bool reflinked = false;
    int fd;

    snprintf(a, sizeof(a), "%s/.clone-probe-a", dir);
    snprintf(b, sizeof(b), "%s/.clone-probe-b", dir);
    unlink(a);
    unlink(b);
    fd = open(a, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        return false;
    }
    (void)!write(fd, "probe", 5);
    close(fd);
    if (clone_file(a, b, &reflinked) < 0) {
        reflinked = false;
    }
    unlink(a);
    unlink(b);
    return reflinked;
}
