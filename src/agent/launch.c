/*
 * fork + exec with the exact process setup envd gives (e2b-compat.md §6.3):
 * (shared/spawn.h starts host helpers with a plain fd map; user processes
 * need credentials, a PTY, cwd and env, so the agent sets them up here)
 * own session, oom_score_adj 100, the user's uid/gid/groups, cwd, env, and
 * stdout/stderr pipes or a PTY as controlling terminal.
 *
 * The child reports a failure before exec through a close-on-exec pipe
 * (struct child_error); the parent reads it until EOF, which exec causes.
 * That read waits only for the child to reach exec(), which is what
 * posix_spawn() waits for too.
 *
 * PATH is searched here, with the PATH of the environment the child gets
 * (not ours): candidates are built before fork and tried in order, the way
 * execvp() does, but as the target user.
 */
#include "agent/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent/user.h"
#include "basic/fd-util.h"
#include "basic/macro.h"
#include "basic/strbuf.h"

enum child_stage { STAGE_SETUP, STAGE_CREDENTIALS, STAGE_CWD };

struct child_error {
    int stage;
    int error;
};

struct child_plan {
    const struct launch_params *p;
    char **candidates;         /* NULL-terminated exec paths */
    int in_fd, out_fd, err_fd; /* child ends, all >= 3 */
    int report_fd;
    bool switch_user;
    char not_found_msg[512];
    char denied_msg[512];
};

static const struct {
    int sig;
    const char *name;
} signal_names[] = {
    /* Go's syscall signal table, which ProcessState.String() prints. */
    { SIGHUP, "hangup" },
    { SIGINT, "interrupt" },
    { SIGQUIT, "quit" },
    { SIGILL, "illegal instruction" },
    { SIGTRAP, "trace/breakpoint trap" },
    { SIGABRT, "aborted" },
    { SIGBUS, "bus error" },
    { SIGFPE, "floating point exception" },
    { SIGKILL, "killed" },
    { SIGUSR1, "user defined signal 1" },
    { SIGSEGV, "segmentation fault" },
    { SIGUSR2, "user defined signal 2" },
    { SIGPIPE, "broken pipe" },
    { SIGALRM, "alarm clock" },
    { SIGTERM, "terminated" },
    { SIGSTKFLT, "stack fault" },
    { SIGCHLD, "child exited" },
    { SIGCONT, "continued" },
    { SIGSTOP, "stopped (signal)" },
    { SIGTSTP, "stopped" },
    { SIGTTIN, "stopped (tty input)" },
    { SIGTTOU, "stopped (tty output)" },
    { SIGURG, "urgent I/O condition" },
    { SIGXCPU, "CPU time limit exceeded" },
    { SIGXFSZ, "file size limit exceeded" },
    { SIGVTALRM, "virtual timer expired" },
    { SIGPROF, "profiling timer expired" },
    { SIGWINCH, "window changed" },
    { SIGIO, "I/O possible" },
    { SIGPWR, "power failure" },
    { SIGSYS, "bad system call" },
};

void launch_status_string(int wait_status, char *buf, size_t size)
{
    if (WIFEXITED(wait_status)) {
        snprintf(buf, size, "exit status %d", WEXITSTATUS(wait_status));
        return;
    }
    if (WIFSIGNALED(wait_status)) {
        int sig = WTERMSIG(wait_status);
        const char *name = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(signal_names); i++) {
            if (signal_names[i].sig == sig) {
                name = signal_names[i].name;
            }
        }
        if (name) {
            snprintf(buf, size, "signal: %s%s", name,
                     WCOREDUMP(wait_status) ? " (core dumped)" : "");
        } else {
            snprintf(buf, size, "signal: signal %d%s", sig,
                     WCOREDUMP(wait_status) ? " (core dumped)" : "");
        }
        return;
    }
    snprintf(buf, size, "unknown status %d", wait_status);
}

/* Moves fd to a number >= 3 (close-on-exec), so dup2() onto 0..2 cannot clobber it. */
static int fd_move_high(int fd)
{
    int n;

    if (fd < 0 || fd >= 3) {
        return fd;
    }
    n = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (n < 0) {
        n = -errno;
    }
    close(fd);
    return n;
}

static char **build_candidates(const char *cmd, char *const *envp)
{
    const char *path = NULL;
    char **v = NULL;
    size_t n = 0, cap = 2;

    if (strchr(cmd, '/') || !*cmd) {
        v = calloc(2, sizeof(char *));
        if (!v || !(v[0] = strdup(cmd))) {
            free(v);
            return NULL;
        }
        return v;
    }
    for (char *const *e = envp; *e; e++) {
        if (strncmp(*e, "PATH=", 5) == 0) {
            path = *e + 5;
        }
    }
    if (!path) {
        path = "/usr/local/bin:/usr/bin:/bin";
    }
    for (const char *p = path; *p; p++) {
        cap += *p == ':';
    }
    v = calloc(cap + 1, sizeof(char *));
    if (!v) {
        return NULL;
    }
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        struct strbuf sb = STRBUF_INIT;
        /* An empty element means the current directory, as in execvp(). */
        if (strbuf_appendf(&sb, "%.*s%s%s", (int)len, p, len ? "/" : "", cmd) < 0) {
            strbuf_release(&sb);
            strv_free(v);
            return NULL;
        }
        v[n++] = strbuf_detach(&sb, NULL);
        if (!v[n - 1]) {
            strv_free(v);
            return NULL;
        }
        if (!end) {
            break;
        }
        p = end + 1;
    }
    return v;
}

static _Noreturn void child_fail(const struct child_plan *c, int stage, int error)
{
    struct child_error e = { .stage = stage, .error = error };

    (void)!write(c->report_fd, &e, sizeof(e));
    _exit(127);
}

/* Runs in the child: async-signal-safe calls only. */
static _Noreturn void child_run(const struct child_plan *c)
{
    const struct launch_params *p = c->p;
    struct sigaction sa = { .sa_handler = SIG_DFL };
    sigset_t none;
    bool denied = false;
    int fd;

    /* Signal dispositions: ignored ones (SIGPIPE) survive exec, so reset them all. */
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig != SIGKILL && sig != SIGSTOP) {
            (void)sigaction(sig, &sa, NULL);
        }
    }
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);

    if (setsid() < 0) {
        child_fail(c, STAGE_SETUP, errno);
    }
    if (p->pty && ioctl(c->out_fd, TIOCSCTTY, 0) < 0) {
        child_fail(c, STAGE_SETUP, errno);
    }
    if (dup2(c->in_fd, 0) < 0 || dup2(c->out_fd, 1) < 0 || dup2(c->err_fd, 2) < 0) {
        child_fail(c, STAGE_SETUP, errno);
    }

    /* envd's OOM policy: user processes die before the agent. Best effort. */
    fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!write(fd, "100", 3);
        close(fd);
    }

    if (c->switch_user) {
        if (setgroups((size_t)p->user->n_groups, p->user->groups) < 0 || setgid(p->user->gid) < 0 ||
            setuid(p->user->uid) < 0) {
            child_fail(c, STAGE_CREDENTIALS, errno);
        }
    }
    if (chdir(p->cwd) < 0) {
        child_fail(c, STAGE_CWD, errno);
    }

    for (char **cand = c->candidates; *cand; cand++) {
        execve(*cand, p->argv, p->envp);
        if (errno == EACCES) {
            denied = true;
        } else if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP && errno != ENAMETOOLONG) {
            /* Found but not runnable (ENOEXEC, ETXTBSY, ...): stop searching. */
            denied = true;
            break;
        }
    }
    /* Like a shell: 127 for "not found", 126 for "found but cannot run". */
    if (denied) {
        (void)!write(2, c->denied_msg, strlen(c->denied_msg));
        _exit(126);
    }
    (void)!write(2, c->not_found_msg, strlen(c->not_found_msg));
    _exit(127);
}

int launch_process(const struct launch_params *p, struct launch_result *ret)
{
    struct child_plan c = { .p = p, .in_fd = -EBADF, .out_fd = -EBADF, .err_fd = -EBADF };
    int report[2] = { -EBADF, -EBADF };
    int in_w = -EBADF, out_r = -EBADF, err_r = -EBADF, master = -EBADF, master_in = -EBADF;
    struct child_error e;
    ssize_t n;
    pid_t pid;
    int r;

    assert(p && p->argv && p->argv[0] && p->envp && p->cwd && p->user);

    c.candidates = build_candidates(p->argv[0], p->envp);
    if (!c.candidates) {
        return -ENOMEM;
    }
    snprintf(c.not_found_msg, sizeof(c.not_found_msg), "space-agent: exec: %.400s: not found\n",
             p->argv[0]);
    snprintf(c.denied_msg, sizeof(c.denied_msg), "space-agent: exec: %.400s: permission denied\n",
             p->argv[0]);
    c.switch_user = geteuid() == 0;
    if (!c.switch_user && p->user->uid != geteuid()) {
        r = -EPERM;
        goto out;
    }

    if (p->pty) {
        struct winsize ws = { .ws_col = p->cols ? p->cols : 80, .ws_row = p->rows ? p->rows : 24 };
        int slave = -EBADF;
        if (openpty(&master, &slave, NULL, NULL, &ws) < 0) {
            r = -errno;
            goto out;
        }
        (void)fcntl(master, F_SETFD, FD_CLOEXEC);
        (void)fcntl(slave, F_SETFD, FD_CLOEXEC);
        slave = fd_move_high(slave);
        if (slave < 0) {
            r = slave;
            goto out;
        }
        c.in_fd = slave;
        c.out_fd = slave;
        c.err_fd = slave;
        master_in = fcntl(master, F_DUPFD_CLOEXEC, 3);
        if (master_in < 0) {
            r = -errno;
            goto out;
        }
    } else {
        int fds[2];
        if (p->stdin_pipe) {
            if (pipe2(fds, O_CLOEXEC) < 0) {
                r = -errno;
                goto out;
            }
            c.in_fd = fds[0];
            in_w = fds[1];
        } else {
            c.in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (c.in_fd < 0) {
                r = -errno;
                goto out;
            }
        }
        if (pipe2(fds, O_CLOEXEC) < 0) {
            r = -errno;
            goto out;
        }
        out_r = fds[0];
        c.out_fd = fds[1];
        if (pipe2(fds, O_CLOEXEC) < 0) {
            r = -errno;
            goto out;
        }
        err_r = fds[0];
        c.err_fd = fds[1];
        c.in_fd = fd_move_high(c.in_fd);
        c.out_fd = fd_move_high(c.out_fd);
        c.err_fd = fd_move_high(c.err_fd);
        if (c.in_fd < 0 || c.out_fd < 0 || c.err_fd < 0) {
            r = -EBADF;
            goto out;
        }
    }
    if (pipe2(report, O_CLOEXEC) < 0) {
        r = -errno;
        goto out;
    }
    c.report_fd = report[1];

    pid = fork();
    if (pid < 0) {
        r = -errno;
        goto out;
    }
    if (pid == 0) {
        child_run(&c);
    }

    /* Parent: drop the child's ends, then wait for exec (EOF) or a report. */
    report[1] = close_safe(report[1]);
    if (c.out_fd == c.in_fd) {
        c.in_fd = -EBADF;
        c.err_fd = -EBADF;
    }
    c.in_fd = close_safe(c.in_fd);
    c.out_fd = close_safe(c.out_fd);
    c.err_fd = close_safe(c.err_fd);
    do {
        n = read(report[0], &e, sizeof(e));
    } while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof(e)) {
        /* The child exits 127 right after reporting; the SIGCHLD handler reaps it. */
        r = -(e.error > 0 ? e.error : EIO);
        if (e.stage == STAGE_CWD && r == -ENOENT) {
            r = -ENOTDIR;
        }
        goto out;
    }

    if (p->pty) {
        ret->stdout_fd = TAKE_FD(master);
        ret->stdin_fd = TAKE_FD(master_in);
        ret->stderr_fd = -EBADF;
    } else {
        ret->stdout_fd = TAKE_FD(out_r);
        ret->stderr_fd = TAKE_FD(err_r);
        ret->stdin_fd = TAKE_FD(in_w);
    }
    ret->pid = pid;
    (void)fd_set_nonblock(ret->stdout_fd, 1);
    if (ret->stderr_fd >= 0) {
        (void)fd_set_nonblock(ret->stderr_fd, 1);
    }
    if (ret->stdin_fd >= 0) {
        (void)fd_set_nonblock(ret->stdin_fd, 1);
    }
    r = 0;
out:
    if (c.out_fd == c.in_fd) {
        c.in_fd = -EBADF;
    }
    if (c.err_fd == c.out_fd) {
        c.err_fd = -EBADF;
    }
    close_safe(c.in_fd);
    close_safe(c.out_fd);
    close_safe(c.err_fd);
    close_safe(report[0]);
    close_safe(report[1]);
    close_safe(in_w);
    close_safe(out_r);
    close_safe(err_r);
    close_safe(master);
    close_safe(master_in);
    strv_free(c.candidates);
    return r;
}
