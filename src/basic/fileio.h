#pragma once
/* Whole-file reads and atomic writes (write temp, fsync, rename, fsync dir). */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads the file at path (at most max bytes, else -EFBIG). *ret is NUL-terminated; caller frees. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len);
/* Atomically replaces path with data; durable when the call returns 0. */
int write_file_atomic(const char *path, const void *data, size_t len);
/*
 * The same replace (readers see the old or the new content, never a mix), but not durable:
 * the data reaches the disk with the kernel's writeback or the next sync/syncfs. For files
 * on tmpfs, and for what the guest's /init writes on a create's path, where every path that
 * persists a sandbox either keeps its RAM (page cache included) or syncs first.
 */
int write_file_atomic_nosync(const char *path, const void *data, size_t len);
/* fsync of the file (or, with O_DIRECTORY, the directory) at path: 0 or -errno. */
int fsync_path(const char *path, int flags);
/* mkdir -p with mode for each missing component. */
int mkdir_p(const char *path, unsigned mode);
/* rm -rf that stays on one filesystem and never follows symlinks. */
int rm_rf(const char *path);
/* pwrite until all of buf is written (EINTR retried): 0 or -errno (-EIO on a zero write). */
int pwrite_all(int fd, const void *buf, size_t len, off_t off);

/* Called for each page of a file that is not all zero; a negative return stops the walk. */
typedef int (*page_fn)(const uint8_t *page, size_t len, off_t at, void *userdata);
/*
 * Walks the first size bytes of fd skipping holes (SEEK_DATA/SEEK_HOLE) and
 * zero pages, calling fn for every other 4 KiB page in order: how a guest's
 * sparse RAM file is copied and hashed without touching what it never used.
 * 0, fn's negative return, or -errno.
 */
int for_each_nonzero_page(int fd, uint64_t size, page_fn fn, void *userdata);
