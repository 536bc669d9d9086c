#pragma once
/*
 * Starting child processes (style.md R19, after git's run-command.h): an
 * explicit argv, an explicit fd map, optionally inside a network namespace.
 * Every child starts here; nothing else forks. Safe to call from worker
 * threads: the child only calls async-signal-safe functions before exec.
 */
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct spawn_opts {
    const char *const *argv; /* argv[0] is looked up in PATH */
    int stdin_fd;            /* -1: /dev/null */
    int stdout_fd;           /* -1: /dev/null */
    int stderr_fd;           /* -1: /dev/null */
    int netns_fd;            /* -1: stay in our network namespace */
    bool new_session;        /* setsid(): not killed with our terminal's process group */
    /* Kept open across exec under the same numbers (each must be >= 3); all else is closed. */
    const int *pass_fds;
    size_t n_pass_fds;
    /*
     * Run as uid/gid with only `groups` as supplementary groups, no
     * capabilities in any set (the bounding set emptied, so nothing the child
     * execs can regain one), securebits locked so uid 0 means nothing to it,
     * and no_new_privs. Needs root; the child refuses to exec (status 127, a
     * line on its stderr) if any step fails.
     */
    bool drop_privileges;
    uid_t uid;
    gid_t gid;
    const gid_t *groups;
    size_t n_groups;
};

/* Forks and execs; the child's exec failure shows as exit status 127. */
int spawn_start(const struct spawn_opts *opts, pid_t *ret_pid);

/* Waits for pid; returns its exit code (128+signal when killed) or -errno. */
int spawn_wait(pid_t pid);

/*
 * Runs argv to completion with stdin_data (may be NULL) on its stdin, and
 * collects stdout and stderr together into *ret_output (may be NULL, then
 * discarded; at most max bytes kept). Returns the exit code or -errno.
 */
int spawn_run(const char *const *argv, int netns_fd, const char *stdin_data, char **ret_output,
              size_t max);
