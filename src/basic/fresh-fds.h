#pragma once
/*
 * Runs a function with a descriptor table of its own that holds only 0, 1
 * and 2, for libraries that still use select(2).
 *
 * Why: a daemon that serves thousands of connections holds thousands of
 * descriptors, and a new one gets the lowest free number, so past 1,024 held
 * descriptors every new fd is >= FD_SETSIZE. A library that FD_SET()s such an
 * fd writes past its fd_set; with _FORTIFY_SOURCE glibc aborts the process
 * ("bit out of range 0 - FD_SETSIZE on fd_set"). libnftables 1.0 does exactly
 * that with its netlink socket (mnl.c: select() on every reply), so before
 * this space-node died when a sandbox was created while ~1,200 ingress
 * connections were held open (tests/ingress/test_load.py).
 *
 * fn runs on a short-lived thread started from the caller's thread (so it
 * inherits that thread's namespaces, e.g. a sandbox's netns joined with
 * netns_enter()) that first unshares its descriptor table and closes all but
 * 0-2 in its copy (close_range(2) with CLOSE_RANGE_UNSHARE): what fn opens
 * gets a low number whatever the process holds, and the process' own
 * descriptors are untouched. Anything fn leaves open is closed when the
 * thread exits. fn must not use descriptors the caller opened.
 */

/* Returns what fn returned, or a negative errno when the thread cannot be had. */
int fresh_fds_run(int (*fn)(void *userdata), void *userdata);
