#pragma once
/*
 * OS users as envd selects them (e2b-compat.md §5.2): lookup by name, the
 * environment a process of that user starts with, and how a client-supplied
 * path or cwd resolves against the user's home directory.
 */
#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

struct user {
    char *name;
    char *home;
    uid_t uid;
    gid_t gid;
    gid_t *groups; /* supplementary groups, including gid */
    int n_groups;
};

/* Looks name up in the user database. Returns 0, -ENOENT for an unknown or
 * invalid name, -ENOMEM. */
int user_lookup(const char *name, struct user **ret);
struct user *user_free(struct user *u);

/*
 * Extracts the user name from an Authorization header value
 * "Basic base64(<user>:<password>)". Returns 0 and a new string (caller
 * frees), or -EINVAL for anything else.
 */
int user_from_basic_auth(const char *header, char **ret);

/*
 * Lexically cleans an absolute path like Go's filepath.Clean: collapses
 * "//", "." and "..", drops a trailing "/". Returns 0, -EINVAL for a
 * relative path, -ENOMEM. Caller frees *ret.
 */
int path_clean(const char *path, char **ret);

/*
 * Resolves a client path for user u: "" gives default_dir (or the home
 * directory when default_dir is NULL), "~" and "~/x" expand to the home
 * directory ("~other" is -EINVAL), a relative path is taken relative to
 * the home directory.
 * The result is absolute and cleaned. Caller frees *ret.
 */
int user_resolve_path(const struct user *u, const char *path, const char *default_dir, char **ret);

/*
 * Builds a process environment in envd's order, later entries winning:
 * PATH=path_env, HOME/USER/LOGNAME of u, every string in sandbox_env, then
 * every string in request_env (both JSON objects, may be NULL). Returns 0
 * and a NULL-terminated array (free with strv_free()), -EINVAL for a name
 * that contains '=' or is empty, -ENOMEM.
 */
int user_build_env(const struct user *u, const char *path_env, const json_t *sandbox_env,
                   const json_t *request_env, char ***ret);

/* Frees a NULL-terminated string array; returns NULL. */
char **strv_free(char **v);
