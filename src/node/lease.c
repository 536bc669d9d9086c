/*
 * Leases as files (see lease.h). The whole table is read under the lock on
 * every call: leases number live sandboxes, so there are at most a few
 * hundred, and a directory scan costs far less than the VM they belong to.
 * A lease is written to a temporary name and renamed into place, so a
 * reader never sees an empty owner.
 */
#include "node/lease.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/macro.h"
#include "basic/parse-util.h"

#define OWNER_MAX 128

static int lease_lock(const char *dir)
{
    char path[PATH_MAX];
    int fd, r;

    r = mkdir_p(dir, 0700);
    if (r < 0) {
        return r;
    }
    if (snprintf(path, sizeof(path), "%s/.lock", dir) >= (int)sizeof(path)) {
        return -ENAMETOOLONG;
    }
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        return -errno;
    }
    while (flock(fd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            r = -errno;
            close_safe(fd);
            return r;
        }
    }
    return fd;
}

static void lease_unlock(int fd)
{
    close_safe(fd); /* drops the flock */
}

/* Reads lease n's owner into buf; -ENOENT when n is free. */
static int lease_read(const char *dir, unsigned n, char *buf, size_t len)
{
    char path[PATH_MAX], *text = NULL;
    int r;

    snprintf(path, sizeof(path), "%s/%u", dir, n);
    r = read_file(path, OWNER_MAX, &text, NULL);
    if (r < 0) {
        return r;
    }
    snprintf(buf, len, "%s", text);
    free(text);
    return 0;
}

/* Calls fn for each lease file; stops at the first nonzero return and returns it. Under the lock.
 */
static int lease_each(const char *dir, int (*fn)(unsigned n, const char *owner, void *u), void *u)
{
    struct dirent *de;
    DIR *d = opendir(dir);
    int r = 0;

    if (!d) {
        return errno == ENOENT ? 0 : -errno;
    }
    while (r == 0 && (de = readdir(d))) {
        char owner[OWNER_MAX + 1];
        uint32_t n;
        if (strstr(de->d_name, ".tmp.")) {
            /* Leases are written only under the lock we hold: this is a writer that died. */
            (void)unlinkat(dirfd(d), de->d_name, 0);
            continue;
        }
        if (de->d_name[0] == '.' || parse_u32(de->d_name, &n) < 0) {
            continue;
        }
        if (lease_read(dir, n, owner, sizeof(owner)) < 0) {
            continue;
        }
        r = fn(n, owner, u);
    }
    closedir(d);
    return r;
}

struct find {
    const char *owner;
    unsigned n;
};

static int find_cb(unsigned n, const char *owner, void *u)
{
    struct find *f = u;
    if (strcmp(owner, f->owner) == 0) {
        f->n = n;
        return 1;
    }
    return 0;
}

static int lease_find_locked(const char *dir, const char *owner, unsigned *ret)
{
    struct find f = { .owner = owner };
    int r = lease_each(dir, find_cb, &f);
    if (r < 0) {
        return r;
    }
    if (r == 0) {
        return -ENOENT;
    }
    *ret = f.n;
    return 0;
}

static int lease_write(const char *dir, unsigned n, const char *owner)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%u", dir, n);
    return write_file_atomic(path, owner, strlen(owner));
}

int lease_acquire(const char *dir, unsigned max, const char *owner, lease_stale_fn stale,
                  void *userdata, unsigned *ret)
{
    char other[OWNER_MAX + 1];
    unsigned stale_n = max;
    int lock, r;

    if (!*owner || strlen(owner) > OWNER_MAX || strchr(owner, '\n')) {
        return -EINVAL;
    }
    lock = lease_lock(dir);
    if (lock < 0) {
        return lock;
    }
    r = lease_find_locked(dir, owner, ret);
    if (r != -ENOENT) {
        goto out;
    }
    r = -ENOSPC;
    for (unsigned n = 0; n < max; n++) {
        int k = lease_read(dir, n, other, sizeof(other));
        if (k == -ENOENT) {
            r = lease_write(dir, n, owner);
            if (r >= 0) {
                *ret = n;
            }
            goto out;
        }
        if (k >= 0 && stale_n == max && stale && stale(other, userdata)) {
            stale_n = n;
        }
    }
    if (stale_n < max) {
        r = lease_write(dir, stale_n, owner);
        if (r >= 0) {
            *ret = stale_n;
        }
    }
out:
    lease_unlock(lock);
    return r;
}

int lease_find(const char *dir, const char *owner, unsigned *ret)
{
    int lock = lease_lock(dir);
    if (lock < 0) {
        return lock;
    }
    int r = lease_find_locked(dir, owner, ret);
    lease_unlock(lock);
    return r;
}

int lease_release(const char *dir, const char *owner)
{
    char path[PATH_MAX];
    unsigned n;
    int lock, r;

    lock = lease_lock(dir);
    if (lock < 0) {
        return lock;
    }
    r = lease_find_locked(dir, owner, &n);
    if (r == 0) {
        snprintf(path, sizeof(path), "%s/%u", dir, n);
        r = NERRNO(unlink(path));
    }
    lease_unlock(lock);
    return r == -ENOENT ? 0 : r < 0 ? r : 0;
}
