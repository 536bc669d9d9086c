/*
 * fork + exec with an explicit fd map. The child resets signal mask and
 * dispositions that the parent may have changed, enters the requested
 * network namespace, wires fds 0..2 and execs; anything else it inherited is
 * O_CLOEXEC by construction (R19). spawn_run() feeds stdin and drains the
 * output through one poll loop so neither side can deadlock on a full pipe.
 */
#include "shared/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
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

int spawn_start(const struct spawn_opts *opts, pid_t *ret_pid)
{
    int devnull;
    pid_t pid;

    assert(opts && opts->argv && opts->argv[0]);

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
        .argv = argv, .stdin_fd = in[0], .stdout_fd = out[1], .stderr_fd = out[1],
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
        struct pollfd p[2] = { { .fd = out[0], .events = POLLIN }, { .fd = in[1], .events = POLLOUT } };
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
