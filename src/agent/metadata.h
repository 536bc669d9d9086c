#pragma once
/*
 * User-defined file metadata, as envd keeps it (e2b-compat.md §6.6): one
 * extended attribute per key in the "user.e2b." namespace (the "e2b."
 * part keeps our keys apart from other tools' user.* attributes, which are
 * never reported nor touched). Set by X-Metadata-<key> headers on a /files
 * upload, reported as EntryInfo.metadata by Stat, ListDir, Move, MakeDir,
 * the watchers and the upload reply.
 *
 * An upload always replaces the whole set, with no headers too: O_TRUNC
 * keeps a file's xattrs, so without that an overwrite would leak the old
 * metadata (envd's WriteMetadata).
 */
#include <stddef.h>

#include <jansson.h>

#define METADATA_XATTR_PREFIX "user.e2b."
/* The kernel caps a whole xattr name at 255 bytes (XATTR_NAME_MAX). */
#define METADATA_MAX_KEY (255 - (sizeof(METADATA_XATTR_PREFIX) - 1))
/* ext4 keeps an inode's xattrs in one 4 KiB block: sum of prefix + key + value. */
#define METADATA_MAX_TOTAL 4096

/*
 * Checks a metadata set (an object of strings) as envd's ValidateMetadata:
 * keys not empty and at most METADATA_MAX_KEY bytes, keys and values
 * printable US-ASCII, the total within METADATA_MAX_TOTAL. NULL is the
 * empty set. Returns 0, or -EINVAL with the reason in msg.
 */
int metadata_validate(const json_t *md, char *msg, size_t msg_size);
/* The per-entry half of that, on raw bytes (a header value need not be UTF-8). */
int metadata_check_entry(const char *key, const char *value, size_t value_len, char *msg,
                         size_t msg_size);

/*
 * The metadata of path (following a symlink) as a new JSON object, or
 * NULL when it has none, its file system has no xattrs, or reading fails.
 * Attributes whose key or value is not UTF-8 (set by hand in the sandbox)
 * are skipped: EntryInfo.metadata is a map of strings.
 */
json_t *metadata_read(const char *path);

/*
 * Replaces the metadata of the open file fd with md (NULL: none): removes
 * the user.e2b.* attributes md does not name, then sets md's. Returns 0,
 * -EINVAL for an invalid set, -EOPNOTSUPP when the file system has no user
 * xattrs, or -errno.
 */
int metadata_write(int fd, const json_t *md);
