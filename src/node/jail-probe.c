/*
 * jail-probe: test program (not installed), run inside the VMM's jail by
 * jail-run. Each argument is one attempt; it prints one JSON object with a
 * result per attempt ({"allowed":bool,"errno":"..."}) and what it is
 * (uid, capabilities, no_new_privs, seccomp, pid, hostname, what / holds).
 *
 *   read:PATH      open(PATH) for reading
 *   write:PATH     open(PATH) for writing (creating)
 *   list:PATH      opendir(PATH)
 *   kill:PID       kill(PID, 0)
 *   tcp:IP:PORT    connect()
 *   unix:PATH      connect() to a Unix socket
 *   fork:N         fork N children that wait (a fork bomb's first N steps); fails at the first
 *                  fork that fails (pids limit, RLIMIT_NPROC)
 *   hog:MIB        (last) allocate and touch MIB MiB; past the cgroup's memory limit the kernel
 *                  kills the probe
 *   syscall:NAME   one forbidden syscall (ptrace, mount, unshare, bpf, setns, userfaultfd,
 *                  keyctl, clone-newuser); the filter must kill the probe (SIGSYS)
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            putchar('\\');
        }
        putchar((unsigned char)*s >= 0x20 ? *s : '?');
    }
    putchar('"');
}

static long last_count = -1; /* fork: how many forks succeeded */

static int try_one(const char *arg)
{
    if (strncmp(arg, "read:", 5) == 0) {
        int fd = open(arg + 5, O_RDONLY | O_CLOEXEC);
        return fd < 0 ? -errno : (close(fd), 0);
    }
    if (strncmp(arg, "write:", 6) == 0) {
        int fd = open(arg + 6, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        return fd < 0 ? -errno : (close(fd), 0);
    }
    if (strncmp(arg, "list:", 5) == 0) {
        DIR *d = opendir(arg + 5);
        return d ? (closedir(d), 0) : -errno;
    }
    if (strncmp(arg, "kill:", 5) == 0) {
        return kill((pid_t)atoi(arg + 5), 0) < 0 ? -errno : 0;
    }
    if (strncmp(arg, "tcp:", 4) == 0) {
        char ip[64];
        const char *colon = strrchr(arg + 4, ':');
        struct sockaddr_in sa = { .sin_family = AF_INET };
        if (!colon || (size_t)(colon - arg - 4) >= sizeof(ip)) {
            return -EINVAL;
        }
        memcpy(ip, arg + 4, (size_t)(colon - arg - 4));
        ip[colon - arg - 4] = '\0';
        sa.sin_port = htons((uint16_t)atoi(colon + 1));
        if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
            return -EINVAL;
        }
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            return -errno;
        }
        int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        close(fd);
        return r;
    }
    if (strncmp(arg, "unix:", 5) == 0) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", arg + 5);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            return -errno;
        }
        int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        close(fd);
        return r;
    }
    if (strcmp(arg, "socket:netlink") == 0) {
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0);
        return fd < 0 ? -errno : (close(fd), 0);
    }
    if (strncmp(arg, "fork:", 5) == 0) {
        int n = atoi(arg + 5), pipefd[2], r = 0, i;
        if (pipe(pipefd) < 0) {
            return -errno;
        }
        for (i = 0; i < n; i++) {
            pid_t pid = fork();
            if (pid == 0) {
                char c;
                close(pipefd[1]);
                (void)!read(pipefd[0], &c, 1); /* until the parent closes: then exit */
                _exit(0);
            }
            if (pid < 0) {
                r = -errno;
                break;
            }
        }
        close(pipefd[0]);
        close(pipefd[1]);
        while (wait(NULL) > 0) {
        }
        last_count = i;
        return r;
    }
    if (strncmp(arg, "hog:", 4) == 0) {
        size_t mib = (size_t)atol(arg + 4);
        for (size_t i = 0; i < mib; i++) {
            char *p = malloc(1 << 20);
            if (!p) {
                return -ENOMEM;
            }
            memset(p, 0x5a, 1 << 20);
        }
        return 0;
    }
    if (strncmp(arg, "syscall:", 8) == 0) {
        const char *n = arg + 8;
        fflush(stdout);
        if (strcmp(n, "ptrace") == 0) {
            return ptrace(PTRACE_TRACEME, 0, 0, 0) < 0 ? -errno : 0;
        }
        if (strcmp(n, "mount") == 0) {
            return mount("none", "/tmp", "tmpfs", 0, NULL) < 0 ? -errno : 0;
        }
        if (strcmp(n, "unshare") == 0) {
            return unshare(CLONE_NEWUSER) < 0 ? -errno : 0;
        }
        if (strcmp(n, "setns") == 0) {
            return setns(0, 0) < 0 ? -errno : 0;
        }
        if (strcmp(n, "bpf") == 0) {
            return syscall(SYS_bpf, 0, NULL, 0) < 0 ? -errno : 0;
        }
        if (strcmp(n, "userfaultfd") == 0) {
            return syscall(SYS_userfaultfd, 0) < 0 ? -errno : 0;
        }
        if (strcmp(n, "keyctl") == 0) {
            return syscall(SYS_keyctl, 0, 0, 0, 0, 0) < 0 ? -errno : 0;
        }
        if (strcmp(n, "process_vm_readv") == 0) {
            return syscall(SYS_process_vm_readv, 1, NULL, 0, NULL, 0, 0) < 0 ? -errno : 0;
        }
        if (strcmp(n, "clone-newuser") == 0) {
            long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
            if (pid == 0) {
                _exit(0);
            }
            return pid < 0 ? -errno : 0;
        }
        return -EINVAL;
    }
    return -EINVAL;
}

static void print_status_field(const char *name)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "re");
    printf(",");
    json_str(name);
    printf(":");
    while (f && fgets(line, sizeof(line), f)) {
        size_t n = strlen(name);
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            char *v = line + n + 1;
            v += strspn(v, " \t");
            v[strcspn(v, "\n")] = '\0';
            json_str(v);
            fclose(f);
            return;
        }
    }
    if (f) {
        fclose(f);
    }
    printf("null");
}

int main(int argc, char **argv)
{
    char host[256] = "";
    (void)gethostname(host, sizeof(host));
    printf("{\"uid\":%u,\"gid\":%u,\"pid\":%d,\"hostname\":", (unsigned)getuid(),
           (unsigned)getgid(), (int)getpid());
    json_str(host);
    print_status_field("CapEff");
    print_status_field("CapPrm");
    print_status_field("CapBnd");
    print_status_field("CapAmb");
    print_status_field("NoNewPrivs");
    print_status_field("Seccomp");
    printf(",\"root\":[");
    DIR *d = opendir("/");
    struct dirent *e;
    bool first = true;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] != '.') {
            printf("%s", first ? "" : ",");
            json_str(e->d_name);
            first = false;
        }
    }
    if (d) {
        closedir(d);
    }
    printf("],\"results\":{");
    first = true;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "syscall:", 8) == 0 || strncmp(argv[i], "hog:", 4) == 0) {
            continue;
        }
        last_count = -1;
        int r = try_one(argv[i]);
        printf("%s", first ? "" : ",");
        first = false;
        json_str(argv[i]);
        printf(":{\"allowed\":%s,\"count\":%ld,\"errno\":", r == 0 ? "true" : "false", last_count);
        json_str(r == 0 ? "" : strerror(-r));
        printf("}");
    }
    printf("}}\n");
    fflush(stdout);
    /* Forbidden syscalls last: the first one must kill us; a second line means it did not. */
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "syscall:", 8) == 0 || strncmp(argv[i], "hog:", 4) == 0) {
            int r = try_one(argv[i]);
            printf("{\"survived\":");
            json_str(argv[i]);
            printf(",\"errno\":");
            json_str(r == 0 ? "" : strerror(-r));
            printf("}\n");
            fflush(stdout);
        }
    }
    return 0;
}
