/*
 * filesystem.Filesystem, the unary half. Like envd, the agent performs the
 * operation itself (as root); the request's user only decides how
 * relative paths and "~" resolve and who owns the directories it creates.
 * Error codes are the ones the SDKs turn into booleans: Stat's not_found
 * makes files.exists() false, MakeDir's already_exists makes makeDir()
 * return false.
 */
#include "agent/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/auth.h"
#include "agent/entry.h"
#include "agent/limits.h"
#include "agent/user.h"
#include "basic/fileio.h"
#include "basic/strbuf.h"
#include "shared/json-util.h"

/*
 * Resolves the string field `name` of the request to an absolute path for
 * the request's user. On failure the call has been answered and NULL is
 * returned. *ret_user (optional) receives the user.
 */
static char *request_path(struct rpc_call *call, const char *name, struct user **ret_user)
{
    const char *raw = "";
    struct user *u = NULL;
    char *path = NULL;
    int r;

    if (json_util_get_string(call->msg, name, NULL, &raw) == -EINVAL) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "'%s' must be a string", name);
        return NULL;
    }
    r = auth_request_user(call->agent, call->req, &u);
    if (r < 0) {
        rpc_fail(call, r == -ENOMEM ? CONNECT_RESOURCE_EXHAUSTED : CONNECT_UNAUTHENTICATED,
                 "invalid user");
        return NULL;
    }
    r = user_resolve_path(u, raw, call->agent->default_workdir, &path);
    if (r < 0) {
        user_free(u);
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "invalid path '%s'", raw);
        return NULL;
    }
    if (strlen(path) >= PATH_MAX) {
        free(path);
        user_free(u);
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "path is too long");
        return NULL;
    }
    if (ret_user) {
        *ret_user = u;
    } else {
        user_free(u);
    }
    return path;
}

static void reply_entry(struct rpc_call *call, const char *path)
{
    json_t *entry = NULL;
    int r = entry_info(path, &entry);

    if (r == -ENOENT) {
        rpc_fail(call, CONNECT_NOT_FOUND, "file not found: '%s'", path);
        return;
    }
    if (r < 0) {
        rpc_fail_errno(call, r, "error getting file info for '%s': %m", path);
        return;
    }
    rpc_reply(call, json_pack("{s:o}", "entry", entry));
}

void fs_rpc_stat(struct rpc_call *call)
{
    char *path = request_path(call, "path", NULL);

    if (path) {
        reply_entry(call, path);
        free(path);
    }
}

struct walk {
    json_t *entries;
    uint32_t depth;
    size_t count;
};

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends the entries below dir (shown as shown_prefix), sorted, pre-order like Go's WalkDir. */
static int walk_dir(struct walk *w, int dfd, const char *shown_prefix, uint32_t level)
{
    DIR *d = fdopendir(dfd);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int r = 0;

    if (!d) {
        r = -errno;
        close(dfd);
        return r;
    }
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        if (w->count + n >= AGENT_MAX_LIST_ENTRIES) {
            r = -E2BIG;
            goto out;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **nn = realloc(names, ncap * sizeof(char *));
            if (!nn) {
                r = -ENOMEM;
                goto out;
            }
            names = nn;
            cap = ncap;
        }
        names[n] = strdup(de->d_name);
        if (!names[n]) {
            r = -ENOMEM;
            goto out;
        }
        n++;
    }
    qsort(names, n, sizeof(char *), name_cmp);

    for (size_t i = 0; i < n && r >= 0; i++) {
        struct strbuf path = STRBUF_INIT;
        struct stat st;
        json_t *entry = NULL;

        if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            continue; /* vanished while listing */
        }
        r = strbuf_appendf(&path, "%s%s%s", shown_prefix,
                           shown_prefix[strlen(shown_prefix) - 1] == '/' ? "" : "/", names[i]);
        if (r >= 0) {
            r = entry_info_from_stat(path.buf, &st, &entry);
        }
        if (r >= 0 && json_array_append_new(w->entries, entry) < 0) {
            r = -ENOMEM;
        }
        if (r >= 0) {
            w->count++;
        }
        /* Walk into real directories only: ListDir does not follow symlinks. */
        if (r >= 0 && S_ISDIR(st.st_mode) && level < w->depth) {
            int fd = openat(dirfd(d), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0) {
                r = walk_dir(w, fd, path.buf, level + 1);
                if (r == -EACCES || r == -ENOENT) {
                    r = 0; /* an unreadable subdirectory is listed but not entered */
                }
            }
        }
        strbuf_release(&path);
    }
out:
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
    closedir(d);
    return r;
}

void fs_rpc_list_dir(struct rpc_call *call)
{
    struct walk w = { .depth = 1 };
    struct stat st;
    char *path = NULL;
    int fd, r;

    if (json_util_get_u32(call->msg, "depth", NULL, &w.depth) == -EINVAL) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "invalid depth");
        return;
    }
    if (w.depth == 0) {
        w.depth = 1;
    }
    if (w.depth > AGENT_MAX_LIST_DEPTH) {
        w.depth = AGENT_MAX_LIST_DEPTH;
    }
    path = request_path(call, "path", NULL);
    if (!path) {
        return;
    }
    /* The path itself may be a symlink to a directory (envd resolves it first). */
    if (stat(path, &st) < 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            rpc_fail(call, CONNECT_NOT_FOUND, "directory not found: '%s'", path);
        } else if (errno == ELOOP) {
            rpc_fail(call, CONNECT_FAILED_PRECONDITION, "cyclic symlink at '%s'", path);
        } else {
            rpc_fail_errno(call, -errno, "error getting file info for '%s': %m", path);
        }
        goto out;
    }
    if (!S_ISDIR(st.st_mode)) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "path is not a directory: '%s'", path);
        goto out;
    }
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        rpc_fail_errno(call, -errno, "cannot open '%s': %m", path);
        goto out;
    }
    w.entries = json_array();
    if (!w.entries) {
        close(fd);
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    r = walk_dir(&w, fd, path, 1);
    if (r == -E2BIG) {
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "more than %d entries, use a smaller depth",
                 AGENT_MAX_LIST_ENTRIES);
    } else if (r < 0) {
        rpc_fail_errno(call, r, "error reading directory '%s': %m", path);
    } else {
        rpc_reply(call, json_pack("{s:O}", "entries", w.entries));
    }
    json_decref(w.entries);
out:
    free(path);
}

void fs_rpc_make_dir(struct rpc_call *call)
{
    struct user *u = NULL;
    struct stat st;
    char *path = request_path(call, "path", &u);
    const char *name;
    int r;

    if (!path) {
        return;
    }
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            rpc_fail(call, CONNECT_ALREADY_EXISTS, "directory already exists: '%s'", path);
        } else {
            rpc_fail(call, CONNECT_INVALID_ARGUMENT,
                     "path already exists but it is not a directory: '%s'", path);
        }
        goto out;
    }
    r = entry_mkdir_owned(path, u->uid, u->gid);
    if (r < 0) {
        rpc_fail(call, r == -ENOTDIR ? CONNECT_INVALID_ARGUMENT : connect_code_from_errno(r),
                 "cannot create directory '%s': %s", path, strerror(-r));
        goto out;
    }
    name = strrchr(path, '/');
    rpc_reply(call, json_pack("{s:{s:s, s:s, s:s}}", "entry", "name", name[1] ? name + 1 : "/",
                              "type", entry_type_to_string(ENTRY_TYPE_DIRECTORY), "path", path));
out:
    free(path);
    user_free(u);
}

void fs_rpc_move(struct rpc_call *call)
{
    struct user *u = NULL;
    char *src = NULL, *dst = NULL, *parent = NULL;
    char *slash;
    int r;

    src = request_path(call, "source", &u);
    if (!src) {
        goto out;
    }
    dst = request_path(call, "destination", NULL);
    if (!dst) {
        goto out;
    }
    parent = strdup(dst);
    if (!parent) {
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    slash = strrchr(parent, '/');
    slash[slash == parent ? 1 : 0] = '\0';
    r = entry_mkdir_owned(parent, u->uid, u->gid);
    if (r < 0) {
        rpc_fail(call, r == -ENOTDIR ? CONNECT_INVALID_ARGUMENT : connect_code_from_errno(r),
                 "cannot create directory '%s': %s", parent, strerror(-r));
        goto out;
    }
    if (rename(src, dst) < 0) {
        if (errno == ENOENT) {
            rpc_fail(call, CONNECT_NOT_FOUND, "source file not found: '%s'", src);
        } else {
            rpc_fail(call, CONNECT_INTERNAL, "error renaming '%s' to '%s': %s", src, dst,
                     strerror(errno));
        }
        goto out;
    }
    reply_entry(call, dst);
out:
    free(src);
    free(dst);
    free(parent);
    user_free(u);
}

void fs_rpc_remove(struct rpc_call *call)
{
    char *path = request_path(call, "path", NULL);
    int r;

    if (!path) {
        return;
    }
    if (strcmp(path, "/") == 0) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "refusing to remove '/'");
        free(path);
        return;
    }
    r = rm_rf(path);
    if (r < 0) {
        rpc_fail(call, CONNECT_INTERNAL, "error removing file or directory '%s': %s", path,
                 strerror(-r));
    } else {
        rpc_reply(call, json_object());
    }
    free(path);
}
