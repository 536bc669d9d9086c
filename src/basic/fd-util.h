#pragma once
/* File-descriptor helpers: closing that tolerates -EBADF, and full reads/writes. */
#include <stddef.h>
#include <sys/types.h>

/* Closes fd if it is valid; returns -EBADF so `fd = close_safe(fd);` resets it. */
int close_safe(int fd);

/* Writes all of buf, retrying on EINTR and short writes. Returns 0 or -errno. */
int write_all(int fd, const void *buf, size_t len);

/* Reads exactly len bytes. Returns 0, -EPIPE on early EOF, or -errno. */
int read_exact(int fd, void *buf, size_t len);

/* Sets or clears O_NONBLOCK. */
int fd_set_nonblock(int fd, int nonblock);
