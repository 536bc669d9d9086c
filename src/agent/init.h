#pragma once
/*
 * PID-1 duties for when the guest kernel starts space-agent as init
 * (init=/usr/local/sbin/space-agent): mount the API file systems, name the
 * host, bring up lo, then supervise the server in a child process.
 */

/* Mounts /proc, /sys, /dev, /dev/pts, /dev/shm, /tmp, /run; hostname; lo up;
 * PATH. Failures are logged and skipped: a half-set-up guest still serves. */
void init_setup(void);

/*
 * Forks the server. Returns 0 in the child, which runs the server. The
 * parent stays PID 1 for good: it reaps every zombie and restarts the
 * server child when it dies, with a backoff. It never returns.
 */
int init_supervise(void);
