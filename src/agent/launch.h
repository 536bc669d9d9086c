#pragma once
/*
 * Launching one user process for process.c: pipes or a PTY, credentials,
 * cwd, environment, then exec. Everything the child needs is prepared
 * before fork(); between fork() and exec() the child calls only
 * async-signal-safe functions.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct user;

struct launch_params {
    const struct user *user; /* credentials to switch to (when running as root) */
    const char *cwd;         /* absolute, must exist */
    char *const *argv;       /* argv[0] is the command as the client gave it */
    char *const *envp;
    bool pty;
    uint16_t cols, rows; /* PTY size */
    bool stdin_pipe;     /* false: stdin is /dev/null (ignored with a PTY) */
};

struct launch_result {
    pid_t pid;
    int stdin_fd;  /* write end of the stdin pipe, or the PTY master (dup), or -EBADF */
    int stdout_fd; /* read end, or the PTY master */
    int stderr_fd; /* read end, or -EBADF with a PTY */
};

/*
 * Forks and execs. All returned fds are non-blocking and close-on-exec.
 * Failures before exec (cwd, credentials) return a negative errno and the
 * child is already gone (reaped by the SIGCHLD handler). A command that
 * cannot be exec'd is *not* a failure here: the child writes a message to
 * its stderr and exits 127 (126 when not executable), as a shell would.
 */
int launch_process(const struct launch_params *p, struct launch_result *ret);

/* Go's ProcessState.String() wording for a wait status ("exit status 3", "signal: killed"). */
void launch_status_string(int wait_status, char *buf, size_t size);
