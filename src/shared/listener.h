#pragma once
/*
 * One accepting socket for the raw-socket servers (the ingress, the node's
 * tunnel, later the egress gateway), on a libevent loop, with the bounds
 * every such server needs:
 *
 *   - a connection cap, by default derived from RLIMIT_NOFILE (raised to
 *     its hard limit by listener_raise_nofile()) and the descriptors each
 *     connection costs, so the process never runs out of fds by load alone;
 *   - a per-peer cap (TCP: by source address), so one client cannot take
 *     every slot;
 *   - no busy spin when accept() fails (EMFILE, ENFILE, ENOBUFS): accepting
 *     pauses for LISTENER_RETRY_MSEC, then resumes.
 *
 * Connections over a cap are closed at once, before any byte is read. The
 * owner calls listener_release() when a connection it was given ends, so
 * the counts stay true. Header and idle timeouts are per protocol and stay
 * with the owner; per-tenant caps (per sandbox) too, since only it knows
 * the tenant.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct event_base;
struct listener;

#define LISTENER_RETRY_MSEC 100
#define LISTENER_FD_RESERVE 256 /* descriptors left for everything else (files, store, logs) */

struct listener_limits {
    unsigned max_conns;    /* 0: from RLIMIT_NOFILE (listener_conns_from_rlimit()) */
    unsigned max_per_peer; /* 0: no per-peer cap */
    unsigned fds_per_conn; /* for the default max_conns; 0 counts as 1 */
};

/* A new connection: fd is the caller's (non-blocking, close-on-exec). peer is NULL for Unix
 * sockets. */
typedef void (*listener_accept_fn)(struct listener *l, int fd, const struct sockaddr *peer,
                                   socklen_t peer_len, void *userdata);

/*
 * Raises RLIMIT_NOFILE's soft limit to its hard limit (once per process is
 * enough; later calls are cheap). Returns the soft limit now in effect.
 */
unsigned long listener_raise_nofile(void);

/* (soft RLIMIT_NOFILE - LISTENER_FD_RESERVE) / fds_per_conn, at least 16. */
unsigned listener_conns_from_rlimit(unsigned fds_per_conn);

/*
 * Accepts on fd, an already bound and listening socket (owned from here
 * on, also on failure). Returns 0, -ENOMEM or -errno.
 */
int listener_new(struct event_base *base, int fd, const struct listener_limits *limits,
                 listener_accept_fn accept_fn, void *userdata, struct listener **ret);

/* Binds and listens on a numeric IPv4/IPv6 address (port 0: any free one), then listener_new(). */
int listener_new_tcp(struct event_base *base, const char *ip, uint16_t port,
                     const struct listener_limits *limits, listener_accept_fn accept_fn,
                     void *userdata, struct listener **ret);

/* A connection handed out by accept_fn has ended (peer as given then). */
void listener_release(struct listener *l, const struct sockaddr *peer);

unsigned listener_count(const struct listener *l);
unsigned listener_max_conns(const struct listener *l);
/* Connections refused by a cap so far (for tests and logs). */
uint64_t listener_refused(const struct listener *l);
/* The bound port (TCP), 0 for Unix sockets. */
uint16_t listener_port(const struct listener *l);

/* Closes the socket. NULL-safe; returns NULL. */
struct listener *listener_free(struct listener *l);
