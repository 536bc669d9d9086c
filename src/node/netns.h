#pragma once
/*
 * Running code inside a sandbox's network namespace from the calling thread.
 * setns(CLONE_NEWNET) switches only this thread; sockets, netlink handles and
 * /proc/sys/net files opened in between stay bound to that namespace after
 * the thread switches back. Children spawned in between start inside it.
 */
#include <stddef.h>

/* Enters the namespace at path (/run/netns/...); *ret_saved is this thread's own. */
int netns_enter(const char *path, int *ret_saved);
/* Returns to the namespace netns_enter() saved and closes it. Aborts if that fails:
 * a worker thread left inside a sandbox's namespace would be worse than a crash. */
void netns_leave(int saved);
/*
 * Writes value to /proc/sys/<key> (key with '/' separators, e.g.
 * "net/ipv4/ip_forward") in the calling thread's namespaces, then reads it back.
 */
int netns_sysctl_write(const char *key, const char *value);
/* Reads /proc/sys/<key> into buf, without the trailing newline. */
int netns_sysctl_read(const char *key, char *buf, size_t n);
