#pragma once
/*
 * Copy-on-write disk clones: FICLONE (reflink) on btrfs/xfs, a plain copy
 * only as a fallback the caller logs. O(1) on reflink filesystems.
 */
#include <stdbool.h>

/* Clones src to dst (created 0600, must not exist). *ret_reflinked tells which path was taken. */
int clone_file(const char *src, const char *dst, bool *ret_reflinked);
/* True when dir's filesystem supports FICLONE (probed with a scratch file). */
bool clone_supported(const char *dir);
