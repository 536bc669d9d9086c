/* Classifying a VMM's end (death.h). */
#include "node/death.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "basic/fileio.h"
#include "basic/macro.h"
#include "node/cgroup.h"

const char *death_reason_to_string(enum death_reason r)
{
    switch (r) {
    case DEATH_SHUTDOWN:
        return "shutdown";
    case DEATH_PANIC:
        return "panic";
    case DEATH_OOM:
        return "oom";
    case DEATH_VMM_CRASHED:
        return "vmm_crashed";
    }
    return "vmm_crashed";
}

int death_reason_from_string(const char *s)
{
    for (int r = DEATH_SHUTDOWN; r <= DEATH_VMM_CRASHED; r++) {
        if (strcmp(s, death_reason_to_string((enum death_reason)r)) == 0) {
            return r;
        }
    }
    return -EINVAL;
}

int death_parse_oom_kills(const char *text, uint64_t *ret)
{
    static const char key[] = "oom_kill ";

    for (const char *line = text; line && *line;) {
        if (strncmp(line, key, sizeof(key) - 1) == 0) {
            const char *p = line + sizeof(key) - 1;
            uint64_t v = 0;
            if (*p < '0' || *p > '9') {
                return -EINVAL;
            }
            for (; *p >= '0' && *p <= '9'; p++) {
                if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
                    return -EINVAL;
                }
                v = v * 10 + (uint64_t)(*p - '0');
            }
            if (*p && *p != '\n') {
                return -EINVAL;
            }
            *ret = v;
            return 0;
        }
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    return -EINVAL;
}

int death_read_oom_kills(const char *name, uint64_t *ret)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], *text = NULL;
    enum cgroup_version v = cgroup_version();
    int r;

    if (v == CGROUP_NONE) {
        return -EOPNOTSUPP;
    }
    r = cgroup_path(name, "memory", dir, sizeof(dir));
    if (r < 0) {
        return r;
    }
    snprintf(path, sizeof(path), "%s/%s", dir,
             v == CGROUP_V2 ? "memory.events" : "memory.oom_control");
    r = read_file(path, 64u << 10, &text, NULL);
    if (r >= 0) {
        r = death_parse_oom_kills(text, ret);
    }
    free(text);
    return r;
}

bool death_console_panic(const char *console, size_t len, char *msg, size_t n)
{
    static const char key[] = "Kernel panic";
    if (!console || len < sizeof(key) - 1) {
        return false;
    }
    /* memmem, not strstr: guest output may hold NUL bytes. The first: a panic ends with
     * "---[ end Kernel panic - not syncing: ... ]---", the same reason again. */
    const char *found = memmem(console, len, key, sizeof(key) - 1);
    if (!found) {
        return false;
    }
    size_t k = 0;
    for (const char *p = found; p < console + len && *p != '\n' && *p != '\r' && k + 1 < n; p++) {
        msg[k++] = *p >= 0x20 && *p < 0x7f ? *p : '?';
    }
    if (n > 0) {
        msg[k] = '\0';
    }
    return true;
}

bool death_console_halted(const char *console, size_t len)
{
    static const char *const keys[] = { "reboot: System halted", "reboot: Power down" };

    while (len > 0 && (console[len - 1] == '\n' || console[len - 1] == '\r')) {
        len--;
    }
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        size_t k = strlen(keys[i]);
        if (len >= k && memcmp(console + len - k, keys[i], k) == 0 &&
            (len == k || console[len - k - 1] == '\n' || console[len - k - 1] == ' ')) {
            return true;
        }
    }
    return false;
}

enum death_reason death_classify(const struct death_evidence *e, char *msg, size_t n)
{
    char line[DEATH_MESSAGE_MAX];

    if (e->oom_known && e->oom_kills > 0) {
        snprintf(msg, n,
                 "the VMM was killed by the kernel's OOM killer (%llu kill%s in its cgroup)",
                 (unsigned long long)e->oom_kills, e->oom_kills == 1 ? "" : "s");
        return DEATH_OOM;
    }
    if (death_console_panic(e->console, e->console_len, line, sizeof(line))) {
        snprintf(msg, n, "guest kernel panic: %s", line);
        return DEATH_PANIC;
    }
    /* Before the status: the node kills a halted guest's VMM itself (SIGKILL). A failing
     * exit of the VMM still says more than the guest's last words. */
    bool failed_exit =
        e->status_known && WIFEXITED(e->wait_status) && WEXITSTATUS(e->wait_status) != 0;
    if (!failed_exit && death_console_halted(e->console, e->console_len)) {
        snprintf(msg, n, "the guest halted its CPUs (halt or poweroff in the guest)");
        return DEATH_SHUTDOWN;
    }
    if (!e->status_known) {
        snprintf(msg, n, "the VMM exited (its exit status is unknown)");
        return DEATH_VMM_CRASHED;
    }
    if (WIFSIGNALED(e->wait_status)) {
        snprintf(msg, n, "the VMM was killed by signal %d (%s)", WTERMSIG(e->wait_status),
                 sigabbrev_np(WTERMSIG(e->wait_status)) ?: "?");
        return DEATH_VMM_CRASHED;
    }
    if (WIFEXITED(e->wait_status) && WEXITSTATUS(e->wait_status) != 0) {
        snprintf(msg, n, "the VMM exited with status %d", WEXITSTATUS(e->wait_status));
        return DEATH_VMM_CRASHED;
    }
    snprintf(msg, n, "the guest shut down");
    return DEATH_SHUTDOWN;
}
