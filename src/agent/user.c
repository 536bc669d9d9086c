/*
 * Users, paths and environments for processes and file operations. All of
 * this runs on the event loop; getpwnam_r() reads /etc/passwd (the guest
 * has no network NSS), so it does not block for long.
 */
#include "agent/user.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/base64.h"
#include "basic/macro.h"
#include "basic/strbuf.h"

struct user *user_free(struct user *u)
{
    if (!u) {
        return NULL;
    }
    free(u->name);
    free(u->home);
    free(u->groups);
    free(u);
    return NULL;
}

int user_lookup(const char *name, struct user **ret)
{
    struct passwd pw, *res = NULL;
    struct user *u = NULL;
    char *buf = NULL;
    long bufsz = sysconf(_SC_GETPW_R_SIZE_MAX);
    int n = 16, r;

    if (!name || !*name || strlen(name) > 256 || strchr(name, '/')) {
        return -ENOENT;
    }
    if (bufsz < 4096) {
        bufsz = 4096;
    }
    buf = malloc((size_t)bufsz);
    u = calloc(1, sizeof(*u));
    if (!buf || !u) {
        r = -ENOMEM;
        goto out;
    }
    r = getpwnam_r(name, &pw, buf, (size_t)bufsz, &res);
    if (r != 0 || !res) {
        r = -ENOENT;
        goto out;
    }
    u->name = strdup(pw.pw_name);
    u->home = strdup(pw.pw_dir && pw.pw_dir[0] == '/' ? pw.pw_dir : "/");
    u->uid = pw.pw_uid;
    u->gid = pw.pw_gid;
    if (!u->name || !u->home) {
        r = -ENOMEM;
        goto out;
    }
    for (int tries = 0; tries < 4; tries++) {
        gid_t *g = realloc(u->groups, sizeof(gid_t) * (size_t)n);
        int want = n;
        if (!g) {
            r = -ENOMEM;
            goto out;
        }
        u->groups = g;
        if (getgrouplist(pw.pw_name, pw.pw_gid, u->groups, &want) >= 0) {
            u->n_groups = want;
            break;
        }
        n = want > n ? want : n * 2;
    }
    if (u->n_groups == 0) {
        /* Could not list the groups: the primary group alone is the safe answer. */
        u->groups[0] = pw.pw_gid;
        u->n_groups = 1;
    }
    *ret = TAKE_PTR(u);
    r = 0;
out:
    free(buf);
    user_free(u);
    return r;
}

int user_from_basic_auth(const char *header, char **ret)
{
    char *dec = NULL, *colon;
    size_t n;
    long m;

    if (!header || strncasecmp(header, "Basic ", 6) != 0) {
        return -EINVAL;
    }
    header += 6;
    while (*header == ' ') {
        header++;
    }
    n = strlen(header);
    while (n > 0 && header[n - 1] == ' ') {
        n--;
    }
    if (n == 0 || n > 1024) {
        return -EINVAL;
    }
    dec = malloc(n / 4 * 3 + 4);
    if (!dec) {
        return -ENOMEM;
    }
    m = base64_decode(header, n, dec);
    if (m < 0) {
        free(dec);
        return -EINVAL;
    }
    dec[m] = '\0';
    if (strlen(dec) != (size_t)m) {
        free(dec);
        return -EINVAL;
    }
    colon = strchr(dec, ':');
    if (colon) {
        *colon = '\0';
    }
    *ret = dec;
    return 0;
}

int path_clean(const char *path, char **ret)
{
    size_t n, o = 0;
    char *out;

    if (!path || path[0] != '/') {
        return -EINVAL;
    }
    n = strlen(path);
    out = malloc(n + 2);
    if (!out) {
        return -ENOMEM;
    }
    out[o++] = '/';
    for (size_t i = 0; i < n;) {
        size_t j;
        while (i < n && path[i] == '/') {
            i++;
        }
        j = i;
        while (j < n && path[j] != '/') {
            j++;
        }
        if (j == i) {
            break;
        }
        if (j - i == 1 && path[i] == '.') {
            /* skip */
        } else if (j - i == 2 && path[i] == '.' && path[i + 1] == '.') {
            /* Go back one component; ".." at the root stays at the root. */
            if (o > 1) {
                o--;
                while (o > 1 && out[o - 1] != '/') {
                    o--;
                }
                if (o > 1) {
                    o--;
                }
            }
        } else {
            if (o > 1) {
                out[o++] = '/';
            }
            memcpy(out + o, path + i, j - i);
            o += j - i;
        }
        i = j;
    }
    out[o] = '\0';
    *ret = out;
    return 0;
}

int user_resolve_path(const struct user *u, const char *path, const char *default_dir, char **ret)
{
    struct strbuf sb = STRBUF_INIT;
    int r;

    if (!path || !*path) {
        path = default_dir ? default_dir : u->home;
    }
    if (path[0] == '~' && path[1] != '\0' && path[1] != '/') {
        return -EINVAL; /* "~other": another user's home is not expanded (envd refuses too) */
    }
    if (path[0] == '~') {
        r = strbuf_appends(&sb, u->home);
        if (r >= 0) {
            r = strbuf_appendf(&sb, "/%s", path + 1);
        }
    } else if (path[0] != '/') {
        r = strbuf_appendf(&sb, "%s/%s", u->home, path);
    } else {
        r = strbuf_appends(&sb, path);
    }
    if (r >= 0) {
        r = path_clean(sb.buf, ret);
    }
    strbuf_release(&sb);
    return r;
}

char **strv_free(char **v)
{
    if (!v) {
        return NULL;
    }
    for (char **p = v; *p; p++) {
        free(*p);
    }
    free(v);
    return NULL;
}

/* Sets name=value in env (n entries), replacing an existing entry with that name. */
static int env_set(char **env, size_t *n, const char *name, const char *value)
{
    size_t len = strlen(name);
    struct strbuf sb = STRBUF_INIT;
    char *entry;
    int r;

    if (len == 0 || strchr(name, '=')) {
        return -EINVAL;
    }
    r = strbuf_appendf(&sb, "%s=%s", name, value);
    if (r < 0) {
        strbuf_release(&sb);
        return r;
    }
    entry = strbuf_detach(&sb, NULL);
    if (!entry) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < *n; i++) {
        if (strncmp(env[i], name, len) == 0 && env[i][len] == '=') {
            free(env[i]);
            env[i] = entry;
            return 0;
        }
    }
    env[(*n)++] = entry;
    return 0;
}

static int env_set_all(char **env, size_t *n, const json_t *obj)
{
    const char *k;
    json_t *v;
    int r;

    if (!json_is_object(obj)) {
        return 0;
    }
    json_object_foreach ((json_t *)obj, k, v) {
        if (!json_is_string(v)) {
            continue;
        }
        r = env_set(env, n, k, json_string_value(v));
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

int user_build_env(const struct user *u, const char *path_env, const json_t *sandbox_env,
                   const json_t *request_env, char ***ret)
{
    size_t cap = 5, n = 0;
    char **env = NULL;
    int r;

    cap += json_is_object(sandbox_env) ? json_object_size(sandbox_env) : 0;
    cap += json_is_object(request_env) ? json_object_size(request_env) : 0;
    env = calloc(cap, sizeof(char *));
    if (!env) {
        return -ENOMEM;
    }
    r = env_set(env, &n, "PATH",
                path_env ? path_env
                         : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    if (r >= 0) {
        r = env_set(env, &n, "HOME", u->home);
    }
    if (r >= 0) {
        r = env_set(env, &n, "USER", u->name);
    }
    if (r >= 0) {
        r = env_set(env, &n, "LOGNAME", u->name);
    }
    if (r >= 0) {
        r = env_set_all(env, &n, sandbox_env);
    }
    if (r >= 0) {
        r = env_set_all(env, &n, request_env);
    }
    if (r < 0) {
        strv_free(env);
        return r;
    }
    *ret = env;
    return 0;
}
