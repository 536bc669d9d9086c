/*
 * Capped serial console (design in console.h). The pump is a fork without
 * exec: its whole job is a read/pwrite/ftruncate loop, all async-signal-safe,
 * so it needs no binary of its own. Right after the fork it moves its two
 * fds to 0 and 1 and closes everything else it inherited (the node's
 * listeners among them), then gives up root.
 */
#include "node/console.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/macro.h"
#include "basic/time-util.h"

#define CHUNK (64u << 10)
#define BATCH (4u << 10)

/* Moves the newest `keep` bytes of [0, size) to the front, after the dropped mark. */
static int compact(int fd, char *buf, off_t size, size_t keep, off_t *ret_size)
{
    off_t mark = (off_t)(sizeof(CONSOLE_DROPPED_MARK) - 1);
    off_t src = size - (off_t)keep, dst = mark;
    int r;

    /* dst < src always (keep + mark <= max/2 < size), so a forward copy never overlaps badly. */
    while (src < size) {
        size_t want = MIN((size_t)(size - src), CHUNK);
        ssize_t n = pread(fd, buf, want, src);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) {
                continue;
            }
            return n < 0 ? -errno : -EIO;
        }
        r = pwrite_all(fd, buf, (size_t)n, dst);
        if (r < 0) {
            return r;
        }
        src += n;
        dst += n;
    }
    r = pwrite_all(fd, CONSOLE_DROPPED_MARK, (size_t)mark, 0);
    if (r < 0) {
        return r;
    }
    if (ftruncate(fd, dst) < 0) {
        return -errno;
    }
    *ret_size = dst;
    return 0;
}

int console_pump(int in_fd, int out_fd, size_t max)
{
    static char buf[CHUNK], copy[CHUNK]; /* static: the pump is single-threaded by construction */
    size_t mark = sizeof(CONSOLE_DROPPED_MARK) - 1;
    struct stat st;
    off_t size;
    int r;

    if (max < CONSOLE_LOG_MAX_MIN) {
        return -EINVAL;
    }
    if (fstat(out_fd, &st) < 0) {
        return -errno;
    }
    size = st.st_size;
    for (;;) {
        ssize_t n = read(in_fd, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (n == 0) {
            return 0;
        }
        if (size + n > (off_t)max) {
            size_t keep = MIN((size_t)size, max / 2 - mark);
            r = compact(out_fd, copy, size, keep, &size);
            if (r < 0) {
                return r;
            }
        }
        r = pwrite_all(out_fd, buf, (size_t)n, size);
        if (r < 0) {
            return r;
        }
        size += n;
        if ((size_t)n < BATCH) {
            /* QEMU writes the serial port a byte per write(): let a batch gather in the pipe
             * rather than paying two syscalls per byte. Costs at most 10 ms of log latency. */
            struct timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
            (void)nanosleep(&ts, NULL);
        }
    }
}

static _Noreturn void pump_main(int in_fd, int out_fd, int devnull, size_t max, uid_t uid,
                                gid_t gid)
{
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    for (int s = 1; s < NSIG; s++) {
        if (s != SIGKILL && s != SIGSTOP) {
            struct sigaction sa = { .sa_handler = SIG_DFL };
            sigaction(s, &sa, NULL);
        }
    }
    (void)setsid(); /* not killed with the node's process group */
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(devnull, 2) < 0 ||
        syscall(SYS_close_range, 3, ~0u, 0) < 0) {
        _exit(1);
    }
    (void)prctl(PR_SET_NAME, "space-console", 0, 0, 0);
    if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0 ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        _exit(1);
    }
    _exit(console_pump(0, 1, max) < 0 ? 1 : 0);
}

int console_start(const char *path, size_t max, uid_t uid, gid_t gid, int *ret_fd, pid_t *ret_pid)
{
    int p[2] = { -EBADF, -EBADF }, out = -EBADF, devnull = -EBADF;
    pid_t pid;
    int r;

    if (max < CONSOLE_LOG_MAX_MIN || uid == 0 || gid == 0) {
        return -EINVAL;
    }
    out = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (out < 0 || devnull < 0 || pipe2(p, O_CLOEXEC) < 0) {
        r = -errno;
        goto out;
    }
    pid = fork();
    if (pid < 0) {
        r = -errno;
        goto out;
    }
    if (pid == 0) {
        close(p[1]);
        pump_main(p[0], out, devnull, max, uid, gid);
    }
    *ret_fd = TAKE_FD(p[1]);
    *ret_pid = pid;
    r = 0;
out:
    close_safe(p[0]);
    close_safe(p[1]);
    close_safe(out);
    close_safe(devnull);
    return r;
}

void console_reap(pid_t pid)
{
    usec_t deadline = now_monotonic() + USEC_PER_SEC;

    if (pid <= 0) {
        return;
    }
    for (;;) {
        pid_t k = waitpid(pid, NULL, WNOHANG);
        if (k == pid || (k < 0 && errno != EINTR)) {
            return;
        }
        if (now_monotonic() >= deadline) {
            /* QEMU is gone, so the pump has its EOF; a stuck one must not linger. */
            (void)kill(pid, SIGKILL);
            (void)waitpid(pid, NULL, 0);
            return;
        }
        sleep_usec(2 * USEC_PER_MSEC);
    }
}
