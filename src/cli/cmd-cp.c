/*
 * space sandbox cp [--user U] LOCAL ID:PATH   (upload)
 * space sandbox cp [--user U] ID:PATH LOCAL   (download; LOCAL "-" is stdout)
 *
 * Files move through the sandbox ingress to the agent's /files endpoint,
 * authenticated with the sandbox's envd access token, exactly as an E2B
 * client's would. The api tells us where the ingress listens (/v1/info).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/macro.h"
#include "basic/socket-util.h"
#include "basic/strbuf.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "shared/envd.h"
#include "shared/http-client.h"
#include "shared/sandbox-id.h"

#define CP_MAX_UPLOAD (1ULL << 30)

/* Percent-encodes s for a query value into sb. */
static int query_escape(struct strbuf *sb, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int r = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && r >= 0; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-_.~/", *p)) {
            r = strbuf_append(sb, p, 1);
        } else {
            char e[3] = { '%', hex[*p >> 4], hex[*p & 15] };
            r = strbuf_append(sb, e, 3);
        }
    }
    return r;
}

/* Splits "ID:PATH"; returns false when s is not of that shape. */
static bool remote_spec(const char *s, char id[SANDBOX_ID_LEN + 1], const char **path)
{
    const char *colon = strchr(s, ':');
    if (!colon || colon - s != SANDBOX_ID_LEN) {
        return false;
    }
    memcpy(id, s, SANDBOX_ID_LEN);
    id[SANDBOX_ID_LEN] = '\0';
    *path = colon + 1;
    return sandbox_id_is_valid(id) && **path;
}

static int write_cb(const void *data, size_t len, void *userdata)
{
    return write_all(*(int *)userdata, data, len);
}

static int collect_cb(const void *data, size_t len, void *userdata)
{
    return strbuf_append(userdata, data, len);
}

int cmd_cp(int argc, char **argv)
{
    static const struct option opts[] = { { "user", required_argument, NULL, 'u' },
                                          { "help", no_argument, NULL, 'h' },
                                          {} };
    const char *user = "user", *path = NULL, *local;
    char id[SANDBOX_ID_LEN + 1], api_path[128], ip[64], hdr_id[64], hdr_token[200];
    struct strbuf target = STRBUF_INIT, err = STRBUF_INIT;
    json_t *info = NULL, *sb = NULL;
    char *data = NULL;
    size_t data_len = 0;
    int fd = -EBADF, out_fd = -EBADF, status = 0, c, r = 1;
    bool upload;

    optind = 1;
    while ((c = getopt_long(argc, argv, "+u:h", opts, NULL)) >= 0) {
        if (c != 'u') {
            goto usage;
        }
        user = optarg;
    }
    if (argc - optind != 2) {
        goto usage;
    }
    if (remote_spec(argv[optind + 1], id, &path)) {
        upload = true;
        local = argv[optind];
    } else if (remote_spec(argv[optind], id, &path)) {
        upload = false;
        local = argv[optind + 1];
    } else {
        goto usage;
    }

    if (upload) {
        r = read_file(local, CP_MAX_UPLOAD, &data, &data_len);
        if (r < 0) {
            fprintf(stderr, "space: cannot read '%s': %s\n", local, strerror(-r));
            r = 1;
            goto out;
        }
    }
    snprintf(api_path, sizeof(api_path), "/v1/sandboxes/%s", id);
    if (client_call_ok("GET", "/v1/info", NULL, &info) < 0 ||
        client_call_ok("GET", api_path, NULL, &sb) < 0) {
        r = 1;
        goto out;
    }
    const char *ingress = json_string_value(json_object_get(info, "ingress"));
    const char *token = json_string_value(json_object_get(sb, "envd_access_token"));
    uint16_t port;
    if (!ingress || socket_parse_ip_port(ingress, ip, sizeof(ip), &port) < 0) {
        fprintf(stderr, "space: the platform has no sandbox ingress configured\n");
        r = 1;
        goto out;
    }
    strbuf_appends(&target, "/files?path=");
    query_escape(&target, path);
    strbuf_appends(&target, "&username=");
    if (query_escape(&target, user) < 0) {
        r = 1;
        goto out;
    }
    snprintf(hdr_id, sizeof(hdr_id), "E2b-Sandbox-Id: %s", id);
    snprintf(hdr_token, sizeof(hdr_token), "X-Access-Token: %s", token ? token : "");
    const char *headers[] = { hdr_id, "E2b-Sandbox-Port: " ENVD_PORT_STR, hdr_token,
                              "Content-Type: application/octet-stream", NULL };
    r = http_connect_tcp(ip, port, 5 * USEC_PER_SEC, &fd);
    if (r < 0) {
        fprintf(stderr, "space: cannot reach the ingress at %s: %s\n", ingress, strerror(-r));
        r = 1;
        goto out;
    }
    struct http_request req = { .method = upload ? "POST" : "GET",
                                .path = target.buf,
                                .headers = headers,
                                .body = data,
                                .body_len = data_len };
    if (!upload) {
        out_fd = strcmp(local, "-") == 0
                     ? STDOUT_FILENO
                     : open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out_fd < 0) {
            fprintf(stderr, "space: cannot create '%s': %s\n", local, strerror(errno));
            r = 1;
            goto out;
        }
    }
    /* A download streams straight to the file; an error body is collected instead. */
    r = http_client_request(fd, &req, 0, &status, NULL, upload ? collect_cb : write_cb,
                            upload ? (void *)&err : (void *)&out_fd);
    if (r < 0 || status < 200 || status > 299) {
        fprintf(stderr, "space: copy failed: %s\n",
                r < 0 ? strerror(-r) : (err.len ? err.buf : "the agent refused it"));
        if (!upload && out_fd != STDOUT_FILENO) {
            unlink(local);
        }
        r = 1;
        goto out;
    }
    r = 0;
    goto out;
usage:
    r = cli_usage(c == 'h', "usage: space sandbox cp [--user U] LOCAL ID:PATH | ID:PATH LOCAL\n");
out:
    if (out_fd > STDOUT_FILENO) {
        close(out_fd);
    }
    close_safe(fd);
    free(data);
    json_decref(info);
    json_decref(sb);
    strbuf_release(&target);
    strbuf_release(&err);
    return r;
}
