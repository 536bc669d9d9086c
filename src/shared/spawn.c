/*
 * fork + exec with an explicit fd map. The child resets signal mask and
 * dispositions that the parent may have changed, enters the requested
 * network namespace, wires fds 0..2 and the fds it was asked to pass, drops
 * privileges when asked (raw prctl/capset: libcap allocates, and a child of
 * a threaded process must not) and execs; anything else it inherited is
 * O_CLOEXEC by construction (R19). spawn_run() feeds stdin and drains the
 * output through one poll loop so neither side can deadlock on a full pipe.
 */
#include "shared/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/macro.h"
#include "basic/strbuf.h"

static void child_dup(int from, int to, int devnull)
{
    int fd = from >= 0 ? from : devnull;
    if (fd == to) {
        int flags = fcntl(fd, F_GETFD);
        if (flags >= 0) {
            fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
        }
        return;
    }
    if (dup2(fd, to) < 0) {
        _exit(127);
    }
}

/* In the child: only async-signal-safe calls. */
static _Noreturn void child_fail(const char *what)
{
    static const char prefix[] = "spawn: cannot ";
    (void)!write(2, prefix, sizeof(prefix) - 1);
    (void)!write(2, what, strlen(what));
    (void)!write(2, "\n", 1);
    _exit(127);
}

static void child_drop_privileges(const struct spawn_opts *opts)
{
    struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = { { 0 } };

    if (setgroups(opts->n_groups, opts->groups) < 0) {
        child_fail("set supplementary groups");
    }
    if (setresgid(opts->gid, opts->gid, opts->gid) < 0) {
        child_fail("set gid");
    }
    /* Emptying the bounding set needs CAP_SETPCAP, so it comes before setresuid(). */
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) {
            child_fail("drop the capability bounding set");
        }
    }
    if (prctl(PR_SET_SECUREBITS,
              SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                  SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                  SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
              0, 0, 0) < 0) {
        child_fail("lock securebits");
    }
    /* From uid 0 to a nonzero uid in all three ids clears the permitted and effective sets. */
    if (setresuid(opts->uid, opts->uid, opts->uid) < 0) {
        child_fail("set uid");
    }
    if (syscall(SYS_capset, &head, none) < 0 ||
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0) {
        child_fail("clear capabilities");
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        child_fail("set no_new_privs");
    }
    if (getuid() != opts->uid || geteuid() != opts->uid || getgid() != opts->gid) {
        child_fail("verify the new ids");
    }
}

int spawn_start(const struct spawn_opts *opts, pid_t *ret_pid)
{
    int devnull;
    pid_t pid;

    assert(opts && opts->argv && opts->argv[0]);
    for (size_t i = 0; i < opts->n_pass_fds; i++) {
        if (opts->pass_fds[i] < 3) {
            return -EINVAL;
        }
    }
    if (opts->drop_privileges && (opts->uid == 0 || opts->gid == 0)) {
        return -EINVAL;
    }

    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) {
        return -errno;
    }
    pid = fork();
    if (pid < 0) {
        int r = -errno;
        close_safe(devnull);
        return r;
    }
    if (pid == 0) {
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        for (int s = 1; s < NSIG; s++) {
            if (s != SIGKILL && s != SIGSTOP) {
                struct sigaction sa = { .sa_handler = SIG_DFL };
                sigaction(s, &sa, NULL);
            }
        }
        if (opts->new_session) {
            setsid();
        }
        if (opts->netns_fd >= 0 && setns(opts->netns_fd, CLONE_NEWNET) < 0) {
            _exit(127);
        }
        child_dup(opts->stdin_fd, 0, devnull);
        child_dup(opts->stdout_fd, 1, devnull);
        child_dup(opts->stderr_fd, 2, devnull);
        for (size_t i = 0; i < opts->n_pass_fds; i++) {
            child_dup(opts->pass_fds[i], opts->pass_fds[i], devnull);
        }
        if (opts->drop_privileges) {
            child_drop_privileges(opts);
        }
        execvp(opts->argv[0], (char *const *)opts->argv);
        _exit(127);
    }
    close_safe(devnull);
    *ret_pid = pid;
    return 0;
}

int spawn_wait(pid_t pid)
{
    int status;

    for (;;) {
        if (waitpid(pid, &status, 0) < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        break;
    }
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return -EPROTO;
}

int spawn_run(const char *const *argv, int netns_fd, const char *stdin_data, char **ret_output,
              size_t max)
{
    int in[2] = { -EBADF, -EBADF }, out[2] = { -EBADF, -EBADF };
    struct strbuf sb;
    size_t in_len = stdin_data ? strlen(stdin_data) : 0, in_off = 0;
    pid_t pid = 0;
    int r;

    strbuf_init(&sb, max);
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
        r = -errno;
        goto out;
    }
    struct spawn_opts opts = {
        .argv = argv,
        .stdin_fd = in[0],
        .stdout_fd = out[1],
        .stderr_fd = out[1],
        .netns_fd = netns_fd,
    };
    r = spawn_start(&opts, &pid);
    if (r < 0) {
        goto out;
    }
    in[0] = close_safe(in[0]);
    out[1] = close_safe(out[1]);
    if (in_len == 0) {
        in[1] = close_safe(in[1]);
    }

    while (out[0] >= 0) {
        struct pollfd p[2] = { { .fd = out[0], .events = POLLIN },
                               { .fd = in[1], .events = POLLOUT } };
        if (poll(p, in[1] >= 0 ? 2 : 1, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (in[1] >= 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t n = write(in[1], stdin_data + in_off, in_len - in_off);
            if (n > 0) {
                in_off += (size_t)n;
            }
            if (n < 0 || in_off == in_len) {
                in[1] = close_safe(in[1]);
            }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            char buf[4096];
            ssize_t n = read(out[0], buf, sizeof(buf));
            if (n <= 0) {
                out[0] = close_safe(out[0]);
            } else if (ret_output) {
                (void)strbuf_append(&sb, buf, (size_t)n); /* beyond max: truncated */
            }
        }
    }
    r = spawn_wait(pid);
    if (r >= 0 && ret_output) {
        *ret_output = strbuf_detach(&sb, NULL);
    }
out:
    close_safe(in[0]);
    close_safe(in[1]);
    close_safe(out[0]);
    close_safe(out[1]);
    strbuf_release(&sb);
    return r;
}
