/*
 * Per-sandbox cgroups (cgroup.h). The layout is resolved once: for v1 one
 * base directory per controller we use (memory, cpu, pids), for v2 one.
 * Control files are written as the kernel documents them:
 *
 *   v1: memory.limit_in_bytes (+ memory.memsw.limit_in_bytes when swap is
 *       accounted: no swap beyond it), cpu.shares (1024 = one default
 *       share), cpu.cfs_period_us / cpu.cfs_quota_us, pids.max;
 *   v2: memory.max, memory.swap.max 0, memory.oom.group 1 (the OOM killer
 *       takes the whole VMM, never a thread of it), cpu.weight,
 *       cpu.max "<quota> <period>", pids.max.
 */
#include "node/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CPU_PERIOD_US 100000

static const char *const v1_controllers[] = { "memory", "cpu", "pids" };

static struct {
    enum cgroup_version v;
    bool fake; /* cgroup_init_as(): control files are created, not found */
    char base[ARRAY_SIZE(v1_controllers)][PATH_MAX]; /* v2: base[0] only */
} cg_layout;

struct cgroup {
    char name[128];
};

const char *cgroup_version_to_string(enum cgroup_version v)
{
    return v == CGROUP_V1 ? "v1" : v == CGROUP_V2 ? "v2" : "none";
}

enum cgroup_version cgroup_version(void)
{
    return cg_layout.v;
}

static int write_text(const char *dir, const char *file, const char *text)
{
    char path[PATH_MAX + 64];
    int fd, r;

    if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path)) {
        return -ENAMETOOLONG;
    }
    fd = open(path, O_WRONLY | O_CLOEXEC | (cg_layout.fake ? O_CREAT | O_TRUNC : 0), 0644);
    if (fd < 0) {
        return -errno;
    }
    r = write_all(fd, text, strlen(text));
    close_safe(fd);
    return r;
}

/* Our own cgroup in the hierarchy with `controller` ("" for v2's "0::"), from /proc/self/cgroup's
 * text: lines "ID:CONTROLLERS:PATH". */
static int self_path(const char *text, const char *controller, char *buf, size_t n)
{
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (c2) {
            size_t clen = (size_t)(c2 - c1 - 1);
            bool match = false;
            if (!*controller) {
                match = clen == 0 && strncmp(line, "0:", 2) == 0;
            } else {
                /* v1 lines may list co-mounted controllers: "cpu,cpuacct". */
                for (const char *p = c1 + 1; p < c2;) {
                    const char *comma = memchr(p, ',', (size_t)(c2 - p));
                    size_t l = comma ? (size_t)(comma - p) : (size_t)(c2 - p);
                    match = match || (l == strlen(controller) && strncmp(p, controller, l) == 0);
                    p += l + 1;
                }
            }
            if (match) {
                size_t plen = len - (size_t)(c2 + 1 - line);
                if (plen >= n) {
                    return -ENAMETOOLONG;
                }
                memcpy(buf, c2 + 1, plen);
                buf[plen] = '\0';
                if (strcmp(buf, "/") == 0) {
                    buf[0] = '\0';
                }
                return 0;
            }
        }
        line = end ? end + 1 : NULL;
    }
    return -ENOENT;
}

/* v2: the controllers must be enabled in the base's subtree_control, which a cgroup holding
 * processes cannot do (no internal processes): we move into a `node` child first. */
static int v2_delegate(const char *base)
{
    char node[PATH_MAX + 8], pid[32];
    int r = write_text(base, "cgroup.subtree_control", "+memory +cpu +pids");

    if (r != -EBUSY) {
        return r;
    }
    snprintf(node, sizeof(node), "%s/node", base);
    if (mkdir(node, 0755) < 0 && errno != EEXIST) {
        return -errno;
    }
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    r = write_text(node, "cgroup.procs", pid);
    if (r < 0) {
        return r;
    }
    return write_text(base, "cgroup.subtree_control", "+memory +cpu +pids");
}

static int layout_from(enum cgroup_version v, const char *root, const char *self)
{
    char own[PATH_MAX];
    int r;

    cg_layout.v = CGROUP_NONE;
    if (v == CGROUP_V2) {
        r = self_path(self, "", own, sizeof(own));
        if (r < 0) {
            return r;
        }
        if (snprintf(cg_layout.base[0], sizeof(cg_layout.base[0]), "%s%s/space", root, own) >=
            (int)sizeof(cg_layout.base[0])) {
            return -ENAMETOOLONG;
        }
        r = mkdir_p(cg_layout.base[0], 0755);
        if (r < 0) {
            return r;
        }
        /* Enable for space/ itself, in the node's own cgroup, then for space/'s children. */
        char parent[PATH_MAX];
        snprintf(parent, sizeof(parent), "%s%s", root, own);
        r = cg_layout.fake ? 0 : v2_delegate(parent);
        if (r >= 0) {
            r = write_text(cg_layout.base[0], "cgroup.subtree_control", "+memory +cpu +pids");
        }
        if (r < 0) {
            return r;
        }
        /* space/ is one entity beside the node: weight it like many, or every VMM together
         * would get one default share against each of the host's other cgroups. */
        r = write_text(cg_layout.base[0], "cpu.weight", "1000");
        if (r < 0) {
            return r;
        }
    } else if (v == CGROUP_V1) {
        for (size_t i = 0; i < ARRAY_SIZE(v1_controllers); i++) {
            r = self_path(self, v1_controllers[i], own, sizeof(own));
            if (r < 0) {
                return r;
            }
            if (snprintf(cg_layout.base[i], sizeof(cg_layout.base[i]), "%s/%s%s/space", root,
                         v1_controllers[i], own) >= (int)sizeof(cg_layout.base[i])) {
                return -ENAMETOOLONG;
            }
            r = mkdir_p(cg_layout.base[i], 0755);
            if (r < 0) {
                return r;
            }
        }
        /* v1 counts every task of the root cgroup as one entity of 1024 shares, and space/ as
         * one: give it as many as 64 tasks, or all VMMs together would weigh as one process. */
        r = write_text(cg_layout.base[1], "cpu.shares", "65536");
        if (r < 0) {
            return r;
        }
    }
    cg_layout.v = v;
    return 0;
}

int cgroup_init_as(enum cgroup_version v, const char *root, const char *self_cgroup)
{
    cg_layout.fake = true;
    return layout_from(v, root, self_cgroup);
}

int cgroup_init(const char *root)
{
    char *self = NULL, path[PATH_MAX];
    struct statfs fs;
    enum cgroup_version v = CGROUP_NONE;
    int r;

    cg_layout.fake = false;
    if (statfs(root, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC) {
        v = CGROUP_V2;
    } else {
        /* Hybrid hosts have an unified mount too, but with the controllers on v1. */
        snprintf(path, sizeof(path), "%s/memory", root);
        if (statfs(path, &fs) == 0 && fs.f_type != CGROUP2_SUPER_MAGIC) {
            v = CGROUP_V1;
        }
    }
    if (v == CGROUP_NONE) {
        log_warning("cgroups: no memory controller under '%s': sandboxes run without limits", root);
        return 0;
    }
    r = read_file("/proc/self/cgroup", 1 << 16, &self, NULL);
    if (r >= 0) {
        r = layout_from(v, root, self);
    }
    free(self);
    if (r < 0) {
        return log_error_errno(r, "cgroups: cannot set up %s under '%s': %m",
                               cgroup_version_to_string(v), root);
    }
    log_info("cgroups: %s, sandboxes under '%s'", cgroup_version_to_string(v), cg_layout.base[0]);
    return 0;
}

static bool name_is_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof(((struct cgroup *)0)->name)) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_')) {
            return false;
        }
    }
    return true;
}

int cgroup_path(const char *name, const char *controller, char *buf, size_t n)
{
    size_t i = 0;
    if (cg_layout.v == CGROUP_NONE || !name_is_valid(name)) {
        return cg_layout.v == CGROUP_NONE ? -EOPNOTSUPP : -EINVAL;
    }
    if (cg_layout.v == CGROUP_V1) {
        while (i < ARRAY_SIZE(v1_controllers) && strcmp(v1_controllers[i], controller) != 0) {
            i++;
        }
        if (i == ARRAY_SIZE(v1_controllers)) {
            return -EINVAL;
        }
    }
    return snprintf(buf, n, "%s/%s", cg_layout.base[i], name) >= (int)n ? -ENAMETOOLONG : 0;
}

static int set_limits(const char *name, const struct cgroup_limits *l)
{
    char dir[PATH_MAX], text[64];
    int r = 0;

    if (cg_layout.v == CGROUP_V2) {
        r = cgroup_path(name, "", dir, sizeof(dir));
        if (r >= 0 && l->memory_max) {
            snprintf(text, sizeof(text), "%llu", (unsigned long long)l->memory_max);
            r = write_text(dir, "memory.max", text);
            if (r >= 0) {
                r = write_text(dir, "memory.swap.max", "0");
                r = r == -ENOENT ? 0 : r; /* no swap accounting */
            }
            if (r >= 0) {
                r = write_text(dir, "memory.oom.group", "1");
            }
        }
        if (r >= 0 && l->cpu_weight) {
            snprintf(text, sizeof(text), "%u", MIN(MAX(l->cpu_weight, 1u), 10000u));
            r = write_text(dir, "cpu.weight", text);
        }
        if (r >= 0 && l->cpu_quota_pc) {
            snprintf(text, sizeof(text), "%llu %u",
                     (unsigned long long)l->cpu_quota_pc * CPU_PERIOD_US / 100, CPU_PERIOD_US);
            r = write_text(dir, "cpu.max", text);
        }
        if (r >= 0 && l->pids_max) {
            snprintf(text, sizeof(text), "%u", l->pids_max);
            r = write_text(dir, "pids.max", text);
        }
        return r;
    }
    if (l->memory_max) {
        r = cgroup_path(name, "memory", dir, sizeof(dir));
        snprintf(text, sizeof(text), "%llu", (unsigned long long)l->memory_max);
        if (r >= 0) {
            r = write_text(dir, "memory.limit_in_bytes", text);
        }
        if (r >= 0 && !cg_layout.fake) {
            int k = write_text(dir, "memory.memsw.limit_in_bytes", text);
            r = k == -ENOENT ? 0 : k; /* swap not accounted: nothing to limit */
        }
    }
    if (r >= 0 && (l->cpu_weight || l->cpu_quota_pc)) {
        r = cgroup_path(name, "cpu", dir, sizeof(dir));
        if (r >= 0 && l->cpu_weight) {
            /* v2's weight 100 is v1's 1024 shares. */
            snprintf(text, sizeof(text), "%llu",
                     MAX((unsigned long long)l->cpu_weight * 1024 / 100, 2ULL));
            r = write_text(dir, "cpu.shares", text);
        }
        if (r >= 0 && l->cpu_quota_pc) {
            snprintf(text, sizeof(text), "%u", CPU_PERIOD_US);
            r = write_text(dir, "cpu.cfs_period_us", text);
            snprintf(text, sizeof(text), "%llu",
                     (unsigned long long)l->cpu_quota_pc * CPU_PERIOD_US / 100);
            if (r >= 0) {
                r = write_text(dir, "cpu.cfs_quota_us", text);
            }
        }
    }
    if (r >= 0 && l->pids_max) {
        r = cgroup_path(name, "pids", dir, sizeof(dir));
        snprintf(text, sizeof(text), "%u", l->pids_max);
        if (r >= 0) {
            r = write_text(dir, "pids.max", text);
        }
    }
    return r;
}

static size_t n_dirs(void)
{
    return cg_layout.v == CGROUP_V1 ? ARRAY_SIZE(v1_controllers) : 1;
}

int cgroup_create(const char *name, const struct cgroup_limits *l, struct cgroup **ret)
{
    struct cgroup *cg;
    char dir[PATH_MAX];
    int r;

    if (cg_layout.v == CGROUP_NONE) {
        *ret = NULL;
        return 0;
    }
    if (!name_is_valid(name)) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n_dirs(); i++) {
        snprintf(dir, sizeof(dir), "%s/%s", cg_layout.base[i], name);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
            r = -errno;
            (void)cgroup_remove(name);
            return r;
        }
    }
    r = set_limits(name, l);
    if (r < 0) {
        (void)cgroup_remove(name);
        return r;
    }
    cg = calloc(1, sizeof(*cg));
    if (!cg) {
        (void)cgroup_remove(name);
        return -ENOMEM;
    }
    snprintf(cg->name, sizeof(cg->name), "%s", name);
    *ret = cg;
    return 0;
}

int cgroup_attach(struct cgroup *cg, pid_t pid)
{
    char dir[PATH_MAX], text[32];
    int r;

    if (!cg) {
        return 0;
    }
    snprintf(text, sizeof(text), "%d", (int)pid);
    for (size_t i = 0; i < n_dirs(); i++) {
        snprintf(dir, sizeof(dir), "%s/%s", cg_layout.base[i], cg->name);
        r = write_text(dir, "cgroup.procs", text);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

int cgroup_remove(const char *name)
{
    char dir[PATH_MAX];
    int r = 0;

    if (cg_layout.v == CGROUP_NONE) {
        return 0;
    }
    if (!name_is_valid(name)) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n_dirs(); i++) {
        snprintf(dir, sizeof(dir), "%s/%s", cg_layout.base[i], name);
        int k = cg_layout.fake ? rm_rf(dir) : NERRNO(rmdir(dir));
        if (k < 0 && k != -ENOENT && r >= 0) {
            r = k;
        }
    }
    return r;
}

void cgroup_free(struct cgroup *cg)
{
    free(cg);
}
