#pragma once
/*
 * The node's tunnel endpoint: a Unix socket through which a local process
 * (space-api's ingress) reaches a TCP port inside a running sandbox.
 * space-node is the only process that can enter a sandbox's network
 * namespace, so sandbox traffic from outside goes through here.
 *
 * Protocol (one tunnel per connection):
 *
 *   client: "TUNNEL <sandbox-id> <port>\n"        at most 128 bytes, within 10 s
 *   node:   "OK\n"                                 connected to the guest port
 *      or:  "ERR <http-status> <message>\n", then close
 *            400 malformed line, 404 unknown or not running sandbox,
 *            502 the guest refused or could not be reached, 504 connect timeout,
 *            503 the node is stopping, or too many tunnels to that sandbox
 * Over the node's tunnel cap (src/shared/listener.h, from RLIMIT_NOFILE) a
 * connection is closed before any line. The lines are src/shared/tunnel-proto.h.
 *
 * After OK the bytes are copied both ways until both sides have closed;
 * a half-close (EOF) on one side becomes shutdown(SHUT_WR) on the other.
 * Memory per tunnel is bounded by a high-water mark per direction.
 * A tunnel never holds the vm: it looks the sandbox up by id at connect
 * time and on a periodic sweep, and is closed as soon as the sandbox is no
 * longer running (killed, died), so no tunnel outlives its sandbox. The
 * sweep also closes a tunnel whose client has closed its socket (POLLHUP),
 * even when the guest never answers.
 *
 * Everything here runs on the manager's loop thread.
 */
#include <stddef.h>

struct manager;
struct tunnel;

/*
 * Listens on the Unix socket path (mode 0660, replacing a stale socket) and
 * serves tunnels into m's sandboxes on m's loop. Borrows m until
 * tunnel_free(). Returns 0, -ENAMETOOLONG, or a negative errno.
 */
int tunnel_new(struct manager *m, const char *path, struct tunnel **ret);
/* Closes the listener and every tunnel, removes the socket. NULL-safe; returns NULL. */
struct tunnel *tunnel_free(struct tunnel *t);
/* Number of open tunnels (for tests and /health). */
size_t tunnel_count(const struct tunnel *t);
