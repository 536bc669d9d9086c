/*
 * File helpers. write_file_atomic() is how every piece of durable state is
 * written: a crash leaves either the old or the new content, never a mix.
 * write_file_atomic_nosync() is the same replace without the two fsyncs, for
 * files whose durability something else provides (see fileio.h).
 */
#include "basic/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/macro.h"
#include "basic/strbuf.h"

int read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
    struct strbuf sb = STRBUF_INIT;
    char buf[16384];
    int fd = -EBADF;
    int r;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        return -errno;
    }
    strbuf_init(&sb, max);
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            r = -errno;
            goto out;
        }
        if (n == 0) {
            break;
        }
        r = strbuf_append(&sb, buf, (size_t)n);
        if (r < 0) {
            r = r == -E2BIG ? -EFBIG : r;
            goto out;
        }
    }
    *ret = strbuf_detach(&sb, ret_len);
    r = *ret ? 0 : -ENOMEM;
out:
    strbuf_release(&sb);
    close_safe(fd);
    return r;
}

/*
 * Temp file, rename over path. durable: fsync of the file before the rename and of the
 * directory after it, so that the new content is on the disk when we return. Without it
 * the rename is still atomic for readers, and ext4 (auto_da_alloc) writes a file replaced
 * by rename out before the rename commits, so a crash leaves the old or the new content.
 */
static int write_file_replace(const char *path, const void *data, size_t len, bool durable)
{
    char tmp[PATH_MAX], dir[PATH_MAX];
    int fd = -EBADF, dfd = -EBADF;
    int r;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp) ||
        snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
        return -ENAMETOOLONG;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return -errno;
    }
    r = write_all(fd, data, len);
    if (r < 0) {
        goto fail;
    }
    if (durable) {
        r = NERRNO(fsync(fd));
        if (r < 0) {
            goto fail;
        }
    }
    r = NERRNO(rename(tmp, path));
    if (r < 0) {
        goto fail;
    }
    if (durable) {
        dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
        }
    }
    close_safe(dfd);
    close_safe(fd);
    return 0;
fail:
    close_safe(fd);
    unlink(tmp);
    return r;
}

int write_file_atomic(const char *path, const void *data, size_t len)
{
    return write_file_replace(path, data, len, true);
}

int write_file_atomic_nosync(const char *path, const void *data, size_t len)
{
    return write_file_replace(path, data, len, false);
}

int mkdir_p(const char *path, unsigned mode)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);

    if (n == 0 || n >= sizeof(buf)) {
        return -EINVAL;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, mode) < 0 && errno != EEXIST) {
                return -errno;
            }
            *p = '/';
        }
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST) {
        return -errno;
    }
    return 0;
}

static int rm_rf_at(int dfd, const char *name, dev_t dev)
{
    struct stat st;
    DIR *d = NULL;
    struct dirent *de;
    int fd, r = 0;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        return NERRNO(unlinkat(dfd, name, 0));
    }
    if (st.st_dev != dev) {
        return -EXDEV; /* a mount point below: never descend into it */
    }
    fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    d = fdopendir(fd);
    if (!d) {
        r = -errno;
        close(fd);
        return r;
    }
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        int k = rm_rf_at(dirfd(d), de->d_name, dev);
        if (k < 0 && r == 0) {
            r = k;
        }
    }
    closedir(d);
    if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && r == 0) {
        r = -errno;
    }
    return r;
}

int rm_rf(const char *path)
{
    struct stat st;

    if (lstat(path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    return rm_rf_at(AT_FDCWD, path, st.st_dev);
}

int fsync_path(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    int r;

    if (fd < 0) {
        return -errno;
    }
    r = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}

int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n < 0 ? -errno : -EIO;
        }
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

int for_each_nonzero_page(int fd, uint64_t size, page_fn fn, void *userdata)
{
    enum { CHUNK = 1 << 20, PAGE = 4096 };
    static const uint8_t zero[PAGE];
    uint8_t *buf = malloc(CHUNK);
    int r = 0;

    if (!buf) {
        return -ENOMEM;
    }
    for (off_t off = 0; (uint64_t)off < size;) {
        off_t data = lseek(fd, off, SEEK_DATA);
        if (data < 0) {
            r = errno == ENXIO ? 0 : -errno; /* ENXIO: only a hole is left */
            break;
        }
        off_t hole = lseek(fd, data, SEEK_HOLE);
        if (hole < 0) {
            r = -errno;
            break;
        }
        hole = MIN(hole, (off_t)size);
        for (off = data & ~(off_t)(PAGE - 1); off < hole && r == 0;) {
            size_t want = (size_t)MIN((off_t)CHUNK, hole - off);
            ssize_t got = pread(fd, buf, want, off);
            if (got <= 0) {
                r = got < 0 ? -errno : -EIO;
                break;
            }
            for (size_t i = 0; i < (size_t)got && r == 0; i += PAGE) {
                size_t len = MIN((size_t)PAGE, (size_t)got - i);
                if (memcmp(buf + i, zero, len) != 0) {
                    r = fn(buf + i, len, off + (off_t)i, userdata);
                }
            }
            off += got;
        }
        if (r < 0 || hole >= (off_t)size) {
            break;
        }
        off = hole;
    }
    free(buf);
    return r;
}
