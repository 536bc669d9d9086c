/*
 * space up [--detach] [NODE OPTIONS...] / space down
 *
 * up builds (or confirms cached) the base template, then runs space-node in
 * the foreground, or with --detach starts it in its own session, logging to
 * <data>/node.log, and returns once the node answers /health. down sends
 * SIGTERM to that node, which kills its sandboxes and leaves nothing behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/time-util.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "shared/http-client.h"
#include "shared/spawn.h"

#define UP_TIMEOUT (180 * USEC_PER_SEC)

static const char *pidfile(void)
{
    const char *s = getenv("SPACE_PIDFILE");
    return s && *s ? s : "/run/space/node.pid";
}

static bool node_healthy(json_t **ret)
{
    json_t *res = NULL;
    int status = 0;
    int fd = -EBADF;

    /* Quietly probe first, so a stopped node is not reported as an error. */
    if (http_connect_unix(client_socket(), &fd) < 0) {
        return false;
    }
    close_safe(fd);
    if (client_call("GET", "/health", NULL, &status, &res) < 0 || status != 200) {
        json_decref(res);
        return false;
    }
    if (ret) {
        *ret = res;
    } else {
        json_decref(res);
    }
    return true;
}

static void print_ready(json_t *health)
{
    fprintf(stderr, "space: platform is up: node API on '%s', runtime %s, accelerator %s\n",
            client_socket(), json_string_value(json_object_get(health, "runtime")),
            json_string_value(json_object_get(health, "accel")));
}

int cmd_up(int argc, char **argv)
{
    char node[PATH_MAX], log_path[PATH_MAX];
    const char *nargv[64];
    bool detach = false;
    size_t n = 0;
    json_t *health = NULL;
    pid_t pid;
    int r;

    if (client_find_node(node, sizeof(node)) < 0) {
        fprintf(stderr, "space: cannot find space-node (set SPACE_NODE)\n");
        return 1;
    }
    nargv[n++] = node;
    nargv[n++] = "--data-dir";
    nargv[n++] = client_data_dir();
    nargv[n++] = "--socket";
    nargv[n++] = client_socket();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--detach") == 0 || strcmp(argv[i], "-d") == 0) {
            detach = true;
        } else if (n < ARRAY_SIZE(nargv) - 1) {
            nargv[n++] = argv[i]; /* everything else is for space-node */
        }
    }
    nargv[n] = NULL;

    if (node_healthy(&health)) {
        print_ready(health);
        json_decref(health);
        return 0;
    }
    if (template_build("base") != 0) {
        return 1;
    }
    if (!detach) {
        execv(node, (char *const *)nargv);
        fprintf(stderr, "space: cannot run '%s': %s\n", node, strerror(errno));
        return 1;
    }

    (void)mkdir_p(client_data_dir(), 0700);
    snprintf(log_path, sizeof(log_path), "%s/node.log", client_data_dir());
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) {
        fprintf(stderr, "space: cannot open '%s': %s\n", log_path, strerror(errno));
        return 1;
    }
    struct spawn_opts opts = { .argv = nargv, .stdin_fd = -1, .stdout_fd = log_fd,
                               .stderr_fd = log_fd, .netns_fd = -1, .new_session = true };
    r = spawn_start(&opts, &pid);
    close_safe(log_fd);
    if (r < 0) {
        fprintf(stderr, "space: cannot start space-node: %s\n", strerror(-r));
        return 1;
    }
    char text[32];
    snprintf(text, sizeof(text), "%d\n", (int)pid);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", pidfile());
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        (void)mkdir_p(dir, 0755);
    }
    (void)write_file_atomic(pidfile(), text, strlen(text));

    usec_t deadline = now_monotonic() + UP_TIMEOUT;
    while (now_monotonic() < deadline) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            fprintf(stderr, "space: space-node exited during start; see '%s'\n", log_path);
            return 1;
        }
        if (node_healthy(&health)) {
            print_ready(health);
            json_decref(health);
            return 0;
        }
        sleep_usec(100 * USEC_PER_MSEC);
    }
    fprintf(stderr, "space: space-node did not become ready; see '%s'\n", log_path);
    return 1;
}

/* kill(pid, 0) succeeds on zombies, and our init may never reap: read the state instead. */
static bool process_running(pid_t pid)
{
    char path[64], *stat = NULL;
    bool running;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (read_file(path, 4096, &stat, NULL) < 0) {
        return false;
    }
    char *paren = strrchr(stat, ')');
    running = paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
    free(stat);
    return running;
}

int cmd_down(int argc, char **argv)
{
    char *text = NULL;
    uint32_t pid;

    if (read_file(pidfile(), 64, &text, NULL) < 0) {
        fprintf(stderr, "space: no running platform (no '%s')\n", pidfile());
        return 0;
    }
    text[strcspn(text, "\n")] = '\0';
    if (parse_u32(text, &pid) < 0 || pid < 2) {
        fprintf(stderr, "space: invalid pidfile '%s'\n", pidfile());
        free(text);
        return 1;
    }
    free(text);
    if (kill((pid_t)pid, SIGTERM) < 0 && errno == ESRCH) {
        unlink(pidfile());
        fprintf(stderr, "space: platform was not running\n");
        return 0;
    }
    usec_t deadline = now_monotonic() + 120 * USEC_PER_SEC;
    while (process_running((pid_t)pid) && now_monotonic() < deadline) {
        (void)waitpid((pid_t)pid, NULL, WNOHANG);
        sleep_usec(50 * USEC_PER_MSEC);
    }
    if (process_running((pid_t)pid)) {
        fprintf(stderr, "space: space-node (pid %u) did not stop\n", pid);
        return 1;
    }
    unlink(pidfile());
    fprintf(stderr, "space: platform stopped\n");
    return 0;
}
