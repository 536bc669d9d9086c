#pragma once
/*
 * filesystem.EntryInfo as envd reports it (e2b-compat.md §6.4): lstat()
 * based; a symlink reports its target's type and permission bits and sets
 * symlinkTarget to the resolved path; permissions is Go's FileMode.String();
 * metadata is the entry's user.e2b.* xattrs (metadata.h).
 */
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <jansson.h>

enum entry_type {
    ENTRY_TYPE_UNSPECIFIED = 0,
    ENTRY_TYPE_FILE = 1,
    ENTRY_TYPE_DIRECTORY = 2,
    ENTRY_TYPE_SYMLINK = 3,
};

const char *entry_type_to_string(enum entry_type t);

/* Go's FileMode.String() for a Linux st_mode ("drwxr-xr-x", "Lrwxrwxrwx", "Dcrw-rw-rw-"). */
void entry_mode_string(mode_t mode, char out[16]);

/* protobuf Timestamp JSON: RFC 3339 UTC with 0, 3, 6 or 9 fractional digits. */
void entry_timestamp(const struct timespec *ts, char out[40]);

/*
 * EntryInfo JSON for path (absolute, cleaned). Returns 0, -ENOENT (and the
 * other lstat() errors), or -ENOMEM. *ret is a new reference.
 */
int entry_info(const char *path, json_t **ret);

/* Same, from an lstat() result already in hand (ListDir). */
int entry_info_from_stat(const char *path, const struct stat *st, json_t **ret);

/*
 * mkdir -p where every directory created is chowned to uid:gid (envd's
 * EnsureDirs). Existing components are left alone. Returns 0 or -errno
 * (-ENOTDIR when a component is not a directory).
 */
int entry_mkdir_owned(const char *path, uid_t uid, gid_t gid);
