/*
 * EntryInfo construction, shared by Stat, ListDir, MakeDir, Move, the
 * watchers and /files. Owner and group names come from the user and group
 * databases (numeric ids as strings when unknown), as envd's
 * getFileOwnership() does.
 */
#include "agent/entry.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdbool.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/metadata.h"
#include "basic/macro.h"
#include "shared/json-util.h"

const char *entry_type_to_string(enum entry_type t)
{
    switch (t) {
    case ENTRY_TYPE_FILE:
        return "FILE_TYPE_FILE";
    case ENTRY_TYPE_DIRECTORY:
        return "FILE_TYPE_DIRECTORY";
    case ENTRY_TYPE_SYMLINK:
        return "FILE_TYPE_SYMLINK";
    default:
        return "FILE_TYPE_UNSPECIFIED";
    }
}

void entry_mode_string(mode_t mode, char out[16])
{
    static const char rwx[] = "rwxrwxrwx";
    size_t o = 0;

    /* Go prints its type letters in the order of "dalTLDpSugct?". */
    switch (mode & S_IFMT) {
    case S_IFDIR:
        out[o++] = 'd';
        break;
    case S_IFLNK:
        out[o++] = 'L';
        break;
    case S_IFBLK:
        out[o++] = 'D';
        break;
    case S_IFCHR:
        out[o++] = 'D';
        break;
    case S_IFIFO:
        out[o++] = 'p';
        break;
    case S_IFSOCK:
        out[o++] = 'S';
        break;
    default:
        break;
    }
    if (mode & S_ISUID) {
        out[o++] = 'u';
    }
    if (mode & S_ISGID) {
        out[o++] = 'g';
    }
    if ((mode & S_IFMT) == S_IFCHR) {
        out[o++] = 'c';
    }
    if (mode & S_ISVTX) {
        out[o++] = 't';
    }
    if (o == 0) {
        out[o++] = '-';
    }
    for (int i = 0; i < 9; i++) {
        out[o++] = (mode & (1u << (8 - i))) ? rwx[i] : '-';
    }
    out[o] = '\0';
}

void entry_timestamp(const struct timespec *ts, char out[40])
{
    struct tm tm;
    size_t n;
    long ns = ts->tv_nsec;

    gmtime_r(&ts->tv_sec, &tm);
    n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    if (ns == 0) {
        snprintf(out + n, 40 - n, "Z");
    } else if (ns % 1000000 == 0) {
        snprintf(out + n, 40 - n, ".%03ldZ", ns / 1000000);
    } else if (ns % 1000 == 0) {
        snprintf(out + n, 40 - n, ".%06ldZ", ns / 1000);
    } else {
        snprintf(out + n, 40 - n, ".%09ldZ", ns);
    }
}

static json_t *owner_name(uid_t uid)
{
    struct passwd pw, *res = NULL;
    char buf[4096], num[32];

    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res) {
        return json_util_string_lossy(pw.pw_name, strlen(pw.pw_name));
    }
    snprintf(num, sizeof(num), "%u", (unsigned)uid);
    return json_string(num);
}

static json_t *group_name(gid_t gid)
{
    struct group gr, *res = NULL;
    char buf[8192], num[32];

    if (getgrgid_r(gid, &gr, buf, sizeof(buf), &res) == 0 && res) {
        return json_util_string_lossy(gr.gr_name, strlen(gr.gr_name));
    }
    snprintf(num, sizeof(num), "%u", (unsigned)gid);
    return json_string(num);
}

static enum entry_type type_of(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
        return ENTRY_TYPE_FILE;
    case S_IFDIR:
        return ENTRY_TYPE_DIRECTORY;
    case S_IFLNK:
        return ENTRY_TYPE_SYMLINK;
    default:
        return ENTRY_TYPE_UNSPECIFIED;
    }
}

int entry_info_from_stat(const char *path, const struct stat *st, json_t **ret)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash && slash[1] ? slash + 1 : path;
    char perms[16], ts[40], size[32];
    enum entry_type type;
    mode_t perm_bits;
    json_t *e = NULL;
    char *target = NULL;
    int r = -ENOMEM;

    entry_mode_string(st->st_mode, perms);
    type = type_of(st->st_mode);
    perm_bits = st->st_mode & 0777;
    if (S_ISLNK(st->st_mode)) {
        struct stat tst;
        /* envd: the resolved target (the link itself when it cannot resolve), and its type. */
        target = realpath(path, NULL);
        if (target && stat(target, &tst) == 0) {
            type = type_of(tst.st_mode);
            perm_bits = tst.st_mode & 0777;
        } else {
            type = ENTRY_TYPE_UNSPECIFIED;
            perm_bits = 0;
        }
        if (!target) {
            target = strdup(path);
            if (!target) {
                goto out;
            }
        }
    }
    entry_timestamp(&st->st_mtim, ts);
    snprintf(size, sizeof(size), "%lld", (long long)st->st_size);

    e = json_object();
    if (!e || json_util_set_new(e, "name", json_util_string_lossy(name, strlen(name))) < 0 ||
        (type != ENTRY_TYPE_UNSPECIFIED &&
         json_util_set_new(e, "type", json_string(entry_type_to_string(type))) < 0) ||
        json_util_set_new(e, "path", json_util_string_lossy(path, strlen(path))) < 0 ||
        (st->st_size != 0 && json_util_set_new(e, "size", json_string(size)) < 0) ||
        (perm_bits != 0 && json_util_set_new(e, "mode", json_integer(perm_bits)) < 0) ||
        json_util_set_new(e, "permissions", json_string(perms)) < 0 ||
        json_util_set_new(e, "owner", owner_name(st->st_uid)) < 0 ||
        json_util_set_new(e, "group", group_name(st->st_gid)) < 0 ||
        json_util_set_new(e, "modifiedTime", json_string(ts)) < 0 ||
        (target && json_util_set_new(e, "symlinkTarget",
                                     json_util_string_lossy(target, strlen(target))) < 0)) {
        goto out;
    }
    /* envd reads metadata for every entry, following a symlink; best effort. */
    {
        json_t *md = metadata_read(path);
        if (md) {
            json_object_set_new(e, "metadata", md);
        }
    }
    *ret = TAKE_PTR(e);
    r = 0;
out:
    json_decref(e);
    free(target);
    return r;
}

int entry_info(const char *path, json_t **ret)
{
    struct stat st;

    if (lstat(path, &st) < 0) {
        return -errno;
    }
    return entry_info_from_stat(path, &st, ret);
}

int entry_mkdir_owned(const char *path, uid_t uid, gid_t gid)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    struct stat st;

    if (n == 0 || n >= sizeof(buf) || path[0] != '/') {
        return -EINVAL;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1;; p++) {
        bool last = *p == '\0';
        if (*p != '/' && !last) {
            continue;
        }
        *p = '\0';
        if (mkdir(buf, 0755) == 0) {
            if (chown(buf, uid, gid) < 0) {
                return -errno;
            }
        } else if (errno != EEXIST) {
            return -errno;
        } else if (stat(buf, &st) < 0) {
            return -errno;
        } else if (!S_ISDIR(st.st_mode)) {
            return -ENOTDIR;
        }
        if (last) {
            break;
        }
        *p = '/';
    }
    return 0;
}
