#pragma once
/*
 * Numbered leases shared by every process on the host: lease n is the file
 * <dir>/<n> holding its owner's name. Numbers index host-wide resources that
 * must never be handed to two owners at once (a sandbox slot: its VMM's uid
 * and gid, later its egress addresses), and several nodes may run on one
 * host (tests do), so the directory lives on /run and every change happens
 * under flock(<dir>/.lock). Leases live as long as /run, like the network
 * namespaces whose slots they number.
 */
#include <stdbool.h>

/* Returns true when the lease of owner may be taken away (its holder is gone). */
typedef bool (*lease_stale_fn)(const char *owner, void *userdata);

/*
 * Gives owner a number in [0, max): its existing lease if it has one, else
 * the lowest free number, else one whose lease `stale` declares abandoned
 * (may be NULL). -ENOSPC when all are taken.
 */
int lease_acquire(const char *dir, unsigned max, const char *owner, lease_stale_fn stale,
                  void *userdata, unsigned *ret);
/* The number owner holds, or -ENOENT. */
int lease_find(const char *dir, const char *owner, unsigned *ret);
/* Drops owner's lease; a missing one is success. */
int lease_release(const char *dir, const char *owner);
