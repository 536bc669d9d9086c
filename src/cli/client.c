/*
 * CLI <-> node: HTTP over the node's Unix socket via shared/http-client,
 * JSON bodies via jansson. Also finds sibling binaries: the CLI may run from
 * the install tree (bin/space, libexec/space/, share/space/) or straight
 * from the build tree (src/cli/space next to src/node/, src/agent/).
 */
#include "cli/client.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/macro.h"
#include "basic/strbuf.h"
#include "shared/http-client.h"

#define CLIENT_MAX_RESPONSE (512u * 1024 * 1024)

const char *client_socket(void)
{
    const char *s = getenv("SPACE_SOCKET");
    return s && *s ? s : "/run/space/api.sock";
}

const char *client_data_dir(void)
{
    const char *s = getenv("SPACE_DATA_DIR");
    return s && *s ? s : "/var/lib/space";
}

int client_call(const char *method, const char *path, json_t *body, int *ret_status,
                json_t **ret_body)
{
    int r = http_client_unix_json(client_socket(), method, path, body, 0, CLIENT_MAX_RESPONSE,
                                  ret_status, ret_body);
    if (r == -ENOENT || r == -ECONNREFUSED) {
        fprintf(stderr,
                "space: cannot reach space-api at '%s': %s (is it running? try 'space up')\n",
                client_socket(), strerror(-r));
    } else if (r < 0) {
        fprintf(stderr, "space: request to space-api failed: %s\n", strerror(-r));
    }
    return r;
}

int client_call_ok(const char *method, const char *path, json_t *body, json_t **ret_body)
{
    json_t *res = NULL;
    int status, r;

    r = client_call(method, path, body, &status, &res);
    if (r < 0) {
        return r;
    }
    if (status < 200 || status > 299) {
        const char *msg = json_string_value(json_object_get(res, "message"));
        fprintf(stderr, "space: %s (HTTP %d)\n", msg ? msg : "request failed", status);
        json_decref(res);
        return status == 404 ? -ENOENT : -EIO;
    }
    if (ret_body) {
        *ret_body = res;
    } else {
        json_decref(res);
    }
    return 0;
}

static int exe_dir(char *buf, size_t n)
{
    ssize_t k = readlink("/proc/self/exe", buf, n - 1);
    if (k < 0) {
        return -errno;
    }
    buf[k] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash) {
        *slash = '\0';
    }
    return 0;
}

/* First existing of: $env, then exe_dir-relative candidates. */
static int find_path(const char *env, const char *const *rel, char *buf, size_t n)
{
    char base[PATH_MAX];
    const char *e = getenv(env);
    int r;

    if (e && *e) {
        snprintf(buf, n, "%s", e);
        return 0;
    }
    r = exe_dir(base, sizeof(base));
    if (r < 0) {
        return r;
    }
    for (; *rel; rel++) {
        snprintf(buf, n, "%s/%s", base, *rel);
        if (access(buf, X_OK) == 0) {
            return 0;
        }
    }
    return -ENOENT;
}

int client_find_node(char *buf, size_t n)
{
    static const char *const rel[] = { "space-node", "../node/space-node", NULL };
    return find_path("SPACE_NODE", rel, buf, n);
}

int client_find_api(char *buf, size_t n)
{
    static const char *const rel[] = { "space-api", "../api/space-api", NULL };
    return find_path("SPACE_API", rel, buf, n);
}

int client_find_gw(char *buf, size_t n)
{
    static const char *const rel[] = { "space-gw", "../gw/space-gw", NULL };
    return find_path("SPACE_GW", rel, buf, n);
}

int client_find_agent(char *buf, size_t n)
{
    static const char *const rel[] = { "../libexec/space/space-agent", "../agent/space-agent",
                                       NULL };
    return find_path("SPACE_AGENT", rel, buf, n);
}

int client_find_share(char *buf, size_t n)
{
    char base[PATH_MAX], probe[PATH_MAX + 64];
    const char *e = getenv("SPACE_SHARE_DIR");
    int r;

    if (e && *e) {
        snprintf(buf, n, "%s", e);
        return 0;
    }
    r = exe_dir(base, sizeof(base));
    if (r < 0) {
        return r;
    }
    /* Installed: <prefix>/bin/space and <prefix>/share/space; else the source tree we were built
     * from. */
    const char *candidates[] = { base, SPACE_SOURCE_ROOT };
    const char *suffix[] = { "/../share/space", "" };
    for (size_t i = 0; i < ARRAY_SIZE(candidates); i++) {
        snprintf(buf, n, "%s%s", candidates[i], suffix[i]);
        snprintf(probe, sizeof(probe), "%s/tools/template-build.sh", buf);
        if (access(probe, R_OK) == 0) {
            return 0;
        }
    }
    return -ENOENT;
}
