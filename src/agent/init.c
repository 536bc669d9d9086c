/*
 * The guest's PID 1. Kept apart from the server so that the code running
 * as init is small: if init exits or crashes the kernel panics, while a
 * crashed server child is simply restarted.
 *
 * init_setup() mounts what a Debian userland expects without systemd
 * (kvmtool's guest/init.c ignores mount errors; we log each one) and
 * init_supervise() is the whole PID-1 loop: fork the server, then
 * waitpid(-1) forever, which also reaps orphans reparented to us.
 */
#include "agent/init.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/time-util.h"

#define INIT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct init_mount {
    const char *source, *target, *type;
    unsigned long flags;
    const char *data;
    mode_t dir_mode;
};

static const struct init_mount init_mounts[] = {
    { "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, 0555 },
    { "sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, 0555 },
    { "devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755", 0755 },
    { "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
      "newinstance,ptmxmode=0666,mode=0620,gid=5", 0755 },
    { "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777 },
    { "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777 },
    { "tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", 0755 },
};

static void init_mount_one(const struct init_mount *m)
{
    if (mkdir(m->target, m->dir_mode) < 0 && errno != EEXIST) {
        log_warning_errno(-errno, "cannot create '%s', ignoring: %m", m->target);
    }
    if (mount(m->source, m->target, m->type, m->flags, m->data) < 0) {
        /* EBUSY: already mounted (the kernel mounts devtmpfs itself with DEVTMPFS_MOUNT). */
        if (errno != EBUSY) {
            log_warning_errno(-errno, "cannot mount %s on '%s', ignoring: %m", m->type, m->target);
        }
    }
}

static void init_symlink(const char *target, const char *path)
{
    if (symlink(target, path) < 0 && errno != EEXIST) {
        log_warning_errno(-errno, "cannot link '%s', ignoring: %m", path);
    }
}

static void init_loopback_up(void)
{
    struct ifreq ifr = { .ifr_name = "lo" };
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        log_warning_errno(-errno, "cannot open a socket to bring up lo, ignoring: %m");
        return;
    }
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
        log_warning_errno(-errno, "cannot read flags of lo, ignoring: %m");
    } else {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) {
            log_warning_errno(-errno, "cannot bring up lo, ignoring: %m");
        }
    }
    close(fd);
}

void init_setup(void)
{
    umask(022);
    for (size_t i = 0; i < ARRAY_SIZE(init_mounts); i++) {
        init_mount_one(&init_mounts[i]);
    }
    /* What udev/systemd would create and shells rely on (process substitution uses /dev/fd). */
    if (access("/dev/ptmx", F_OK) < 0) {
        init_symlink("pts/ptmx", "/dev/ptmx");
    }
    init_symlink("/proc/self/fd", "/dev/fd");
    init_symlink("/proc/self/fd/0", "/dev/stdin");
    init_symlink("/proc/self/fd/1", "/dev/stdout");
    init_symlink("/proc/self/fd/2", "/dev/stderr");
    /* /run is a fresh tmpfs: recreate what the image keeps there. */
    if (mkdir("/run/e2b", 0755) < 0 && errno != EEXIST) {
        log_warning_errno(-errno, "cannot create '/run/e2b', ignoring: %m");
    }
    if (mkdir("/run/lock", 01777) < 0 && errno != EEXIST) {
        log_warning_errno(-errno, "cannot create '/run/lock', ignoring: %m");
    }
    if (sethostname("sandbox", strlen("sandbox")) < 0) {
        log_warning_errno(-errno, "cannot set the hostname, ignoring: %m");
    }
    init_loopback_up();
    setenv("PATH", INIT_PATH, 1);
}

int init_supervise(void)
{
    usec_t backoff = 100 * USEC_PER_MSEC;

    for (;;) {
        usec_t started = now_monotonic();
        int status = 0;
        pid_t pid = fork();

        if (pid == 0) {
            /* The OOM killer takes user processes (oom_score_adj 100) before the agent. */
            int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
            if (fd < 0 || write(fd, "-1000", 5) != 5) {
                log_warning_errno(-errno,
                                  "cannot protect the server from the OOM killer, ignoring: %m");
            }
            close_safe(fd);
            return 0;
        }
        if (pid < 0) {
            log_error_errno(-errno, "cannot fork the server, retrying: %m");
            sleep_usec(backoff);
            continue;
        }
        for (;;) {
            pid_t w = waitpid(-1, &status, 0);
            if (w == pid) {
                break;
            }
            if (w < 0 && errno == ECHILD) {
                break;
            }
        }
        log_error("server (pid %d) exited with status 0x%x, restarting", (int)pid, status);
        /* A server that ran for a while gets restarted at once; a crash loop backs off. */
        if (now_monotonic() - started > 10 * USEC_PER_SEC) {
            backoff = 100 * USEC_PER_MSEC;
        } else {
            sleep_usec(backoff);
            backoff = MIN(backoff * 2, 5 * USEC_PER_SEC);
        }
    }
}
