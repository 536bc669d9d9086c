#pragma once
/* Socket set-up shared by every daemon's listeners. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Binds and listens on a Unix stream socket at path (non-blocking, CLOEXEC).
 * Creates the parent directory (0755) and replaces a stale socket file. The
 * socket is created with no permissions and then given `mode`, so nobody can
 * connect before it has the intended mode. Returns the fd or -errno.
 */
int socket_listen_unix(const char *path, mode_t mode);

/* Splits "IP:PORT" at the last colon (so an IPv6 literal keeps its colons). */
int socket_parse_ip_port(const char *s, char *ip, size_t n, uint16_t *ret_port);
