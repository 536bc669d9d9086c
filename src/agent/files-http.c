/*
 * /files. Downloads never load a file into memory: identity responses
 * hand the fd to evbuffer_add_file() (sendfile), gzip responses are
 * produced 64 KiB at a time, pumped by evhttp's "output drained" callback
 * (the same flow control as process streams). Uploads arrive whole in an
 * evbuffer (evhttp buffers request bodies, capped by --max-upload) and
 * part bodies are written to disk straight from it.
 *
 * File creation follows envd's processFile(): missing parent directories
 * are created and owned by the user, the file is truncated and chowned to
 * the user, ENOSPC becomes 507 (the SDK's NotEnoughSpaceError).
 */
#include "agent/files-http.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>
#include <zlib.h>

#include "agent/agent.h"
#include "agent/auth.h"
#include "agent/entry.h"
#include "agent/http-gate.h"
#include "agent/metadata.h"
#include "agent/multipart.h"
#include "agent/reply.h"
#include "agent/sha256.h"
#include "agent/user.h"
#include "basic/base64.h"
#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/parse-util.h"
#include "basic/strbuf.h"
#include "shared/json-util.h"

#define FILES_CHUNK (64u * 1024)
/* Pump more gzip output only while less than this is queued for the client. */
#define FILES_HIGH_WATER (256u * 1024)
/* Files one multipart upload may carry. */
#define FILES_MAX_PARTS 1000

void files_signature(const char *path, const char *op, const char *user, const char *token,
                     const char *expiration, char out[64])
{
    uint8_t digest[SHA256_DIGEST_SIZE];
    char b64[64];
    struct sha256 s;
    size_t n;

    sha256_init(&s);
    sha256_update(&s, path, strlen(path));
    sha256_update(&s, ":", 1);
    sha256_update(&s, op, strlen(op));
    sha256_update(&s, ":", 1);
    sha256_update(&s, user, strlen(user));
    sha256_update(&s, ":", 1);
    sha256_update(&s, token, strlen(token));
    if (expiration) {
        sha256_update(&s, ":", 1);
        sha256_update(&s, expiration, strlen(expiration));
    }
    sha256_final(&s, digest);
    base64_encode(digest, sizeof(digest), b64);
    n = strlen(b64);
    while (n > 0 && b64[n - 1] == '=') {
        n--;
    }
    b64[n] = '\0';
    snprintf(out, 64, "v1_%s", b64);
}

int files_check_access(struct agent *a, const char *hdr, const struct evkeyvalq *q, const char *op,
                       const char **ret_msg)
{
    const char *sig = evhttp_find_header(q, "signature");
    const char *exp = evhttp_find_header(q, "signature_expiration");
    const char *path = evhttp_find_header(q, "path");
    const char *user = evhttp_find_header(q, "username");
    char want[64];
    int64_t when;

    if (!a->access_token) {
        return 0;
    }
    if (hdr && *hdr) {
        if (!auth_secret_equal(hdr, a->access_token)) {
            *ret_msg = "access token present in header but does not match";
            return -EACCES;
        }
        return 0;
    }
    if (!sig) {
        *ret_msg = "missing signature query parameter";
        return -EACCES;
    }
    if (exp && parse_i64(exp, &when) < 0) {
        *ret_msg = "invalid signature expiration";
        return -EACCES;
    }
    files_signature(path ? path : "", op, user ? user : "", a->access_token, exp, want);
    if (!auth_secret_equal(sig, want)) {
        *ret_msg = "invalid signature";
        return -EACCES;
    }
    if (exp && when < (int64_t)time(NULL)) {
        *ret_msg = "signature is already expired";
        return -EACCES;
    }
    return 0;
}

static const struct {
    const char *ext;
    const char *type;
} mime_types[] = {
    /* Go's built-in table (mime.TypeByExtension) plus common text types. */
    { ".avif", "image/avif" },
    { ".css", "text/css; charset=utf-8" },
    { ".csv", "text/csv; charset=utf-8" },
    { ".gif", "image/gif" },
    { ".gz", "application/gzip" },
    { ".htm", "text/html; charset=utf-8" },
    { ".html", "text/html; charset=utf-8" },
    { ".jpeg", "image/jpeg" },
    { ".jpg", "image/jpeg" },
    { ".js", "text/javascript; charset=utf-8" },
    { ".json", "application/json" },
    { ".md", "text/markdown; charset=utf-8" },
    { ".mjs", "text/javascript; charset=utf-8" },
    { ".pdf", "application/pdf" },
    { ".png", "image/png" },
    { ".py", "text/x-python; charset=utf-8" },
    { ".sh", "text/x-sh; charset=utf-8" },
    { ".svg", "image/svg+xml" },
    { ".tar", "application/x-tar" },
    { ".txt", "text/plain; charset=utf-8" },
    { ".wasm", "application/wasm" },
    { ".webp", "image/webp" },
    { ".xml", "text/xml; charset=utf-8" },
    { ".zip", "application/zip" },
};

static const char *mime_by_extension(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash : path, '.');

    if (!dot) {
        return NULL;
    }
    for (size_t i = 0; i < ARRAY_SIZE(mime_types); i++) {
        if (strcasecmp(dot, mime_types[i].ext) == 0) {
            return mime_types[i].type;
        }
    }
    return NULL;
}

/* Go's ServeContent sniffs when the extension says nothing; text vs binary is what matters. */
static const char *mime_sniff(int fd)
{
    unsigned char buf[512];
    ssize_t n = pread(fd, buf, sizeof(buf), 0);

    if (n <= 0) {
        return "text/plain; charset=utf-8";
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] < 0x20 && buf[i] != '\n' && buf[i] != '\r' && buf[i] != '\t' && buf[i] != 0x0c &&
            buf[i] != 0x1b) {
            return "application/octet-stream";
        }
    }
    return "text/plain; charset=utf-8";
}

static void http_date(time_t t, char out[64])
{
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(out, 64, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static int parse_http_date(const char *s, time_t *ret)
{
    struct tm tm = { 0 };
    const char *end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);

    if (!end || *end) {
        return -EINVAL;
    }
    *ret = timegm(&tm);
    return 0;
}

/* Best encoding per envd's parseAcceptEncoding(): 1 gzip, 0 identity, -1 none acceptable. */
static int choose_encoding(const char *header)
{
    struct {
        char name[32];
        double q;
    } list[32];
    size_t n = 0;
    bool identity_rejected = false;
    const char *p = header;

    if (!header || !*header) {
        return 0;
    }
    while (*p && n < ARRAY_SIZE(list)) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[128];
        char *semi, *name;
        size_t k;

        snprintf(item, sizeof(item), "%.*s", (int)MIN(len, sizeof(item) - 1), p);
        list[n].q = 1.0;
        semi = strchr(item, ';');
        if (semi) {
            char *qs = strcasestr(semi, "q=");
            *semi = '\0';
            if (qs) {
                list[n].q = strtod(qs + 2, NULL);
            }
        }
        name = item;
        while (*name == ' ' || *name == '\t') {
            name++;
        }
        k = strlen(name);
        while (k > 0 && (name[k - 1] == ' ' || name[k - 1] == '\t')) {
            name[--k] = '\0';
        }
        snprintf(list[n].name, sizeof(list[n].name), "%s", name);
        for (char *c = list[n].name; *c; c++) {
            *c = (char)tolower((unsigned char)*c);
        }
        if (strcmp(list[n].name, "identity") == 0 && list[n].q == 0) {
            identity_rejected = true;
        }
        n++;
        if (!end) {
            break;
        }
        p = end + 1;
    }
    /* Highest quality first; equal qualities keep their order. */
    for (double best = 1.0e9;;) {
        double next = -1;
        for (size_t i = 0; i < n; i++) {
            if (list[i].q < best && list[i].q > next) {
                next = list[i].q;
            }
        }
        if (next <= 0) {
            break;
        }
        for (size_t i = 0; i < n; i++) {
            if (list[i].q != next) {
                continue;
            }
            if (strcmp(list[i].name, "identity") == 0) {
                return 0;
            }
            if (strcmp(list[i].name, "*") == 0) {
                return identity_rejected ? 1 : 0;
            }
            if (strcmp(list[i].name, "gzip") == 0) {
                return 1;
            }
        }
        best = next;
    }
    return identity_rejected ? -1 : 0;
}

/* --- gzip download pump -------------------------------------------------------------------- */

struct gz_send {
    struct agent *agent;
    struct evhttp_request *req;
    struct evhttp_connection *evcon; /* NULL once the client is gone */
    struct event *close_ev;
    struct event *pump_ev; /* continues a pump that hit its per-callback budget */
    int fd;
    z_stream z;
    bool z_ready;
};

static void gz_free(struct gz_send *g)
{
    if (g->evcon) {
        http_gate_set_closecb(g->agent, g->evcon, NULL, NULL);
    }
    if (g->close_ev) {
        event_free(g->close_ev);
    }
    if (g->pump_ev) {
        event_free(g->pump_ev);
    }
    if (g->z_ready) {
        deflateEnd(&g->z);
    }
    close_safe(g->fd);
    free(g);
}

static void gz_pump(struct gz_send *g);

static void gz_drained_cb(struct evhttp_connection *evcon, void *userdata)
{
    gz_pump(userdata);
}

static void gz_closed_cb(struct evhttp_connection *evcon, void *userdata)
{
    struct gz_send *g = userdata;

    g->evcon = NULL;
    event_active(g->close_ev, 0, 0);
}

static void gz_pump_event_cb(evutil_socket_t fd, short what, void *userdata)
{
    gz_pump(userdata);
}

static void gz_close_event_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct gz_send *g = userdata;

    evhttp_send_reply_end(g->req); /* frees the detached request */
    gz_free(g);
}

static void gz_pump(struct gz_send *g)
{
    struct bufferevent *bev;
    unsigned char in[FILES_CHUNK], out[FILES_CHUNK];
    int budget = 16; /* 1 MiB of input per callback keeps the loop responsive */

    if (!g->evcon) {
        return;
    }
    bev = evhttp_connection_get_bufferevent(g->evcon);
    while (bev && evbuffer_get_length(bufferevent_get_output(bev)) < FILES_HIGH_WATER) {
        if (budget-- == 0) {
            event_active(g->pump_ev, 0, 0);
            return;
        }
        struct evbuffer *chunk = evbuffer_new();
        ssize_t n;
        int flush, zr;

        if (!chunk) {
            break;
        }
        do {
            n = read(g->fd, in, sizeof(in));
        } while (n < 0 && errno == EINTR);
        if (n < 0) {
            log_warning_errno(-errno, "download: read failed, truncating the response: %m");
            n = 0;
        }
        flush = n == 0 ? Z_FINISH : Z_NO_FLUSH;
        g->z.next_in = in;
        g->z.avail_in = (uInt)n;
        do {
            g->z.next_out = out;
            g->z.avail_out = sizeof(out);
            zr = deflate(&g->z, flush);
            evbuffer_add(chunk, out, sizeof(out) - g->z.avail_out);
        } while (g->z.avail_out == 0 || (flush == Z_FINISH && zr == Z_OK));
        evhttp_send_reply_chunk_with_cb(g->req, chunk, gz_drained_cb, g);
        evbuffer_free(chunk);
        if (flush == Z_FINISH) {
            http_gate_set_closecb(g->agent, g->evcon, NULL, NULL);
            g->evcon = NULL;
            evhttp_send_reply_end(g->req);
            gz_free(g);
            return;
        }
    }
}

/* --- GET ----------------------------------------------------------------------------------- */

static int parse_range(const char *h, off_t size, off_t *ret_start, off_t *ret_len)
{
    uint64_t a, b;
    const char *dash;
    char first[32];

    if (strncmp(h, "bytes=", 6) != 0 || strchr(h, ',')) {
        return -EOPNOTSUPP; /* several ranges: answer with the whole file */
    }
    h += 6;
    dash = strchr(h, '-');
    if (!dash || (size_t)(dash - h) >= sizeof(first)) {
        return -EINVAL;
    }
    snprintf(first, sizeof(first), "%.*s", (int)(dash - h), h);
    if (!*first) {
        /* suffix: the last N bytes */
        if (parse_u64(dash + 1, &b) < 0 || b == 0) {
            return -EINVAL;
        }
        b = MIN(b, (uint64_t)size);
        *ret_start = size - (off_t)b;
        *ret_len = (off_t)b;
        return 0;
    }
    if (parse_u64(first, &a) < 0 || a >= (uint64_t)size) {
        return -ERANGE;
    }
    if (!dash[1]) {
        b = (uint64_t)size - 1;
    } else if (parse_u64(dash + 1, &b) < 0 || b < a) {
        return -EINVAL;
    }
    b = MIN(b, (uint64_t)size - 1);
    *ret_start = (off_t)a;
    *ret_len = (off_t)(b - a + 1);
    return 0;
}

static void content_disposition(struct evkeyvalq *out, const char *path)
{
    const char *name = strrchr(path, '/');
    struct strbuf sb = STRBUF_INIT;

    name = name ? name + 1 : path;
    strbuf_appends(&sb, "inline; filename=\"");
    for (const char *c = name; *c; c++) {
        if (*c == '"' || *c == '\\') {
            strbuf_append(&sb, "\\", 1);
        }
        if ((unsigned char)*c >= 0x20) {
            strbuf_append(&sb, c, 1);
        }
    }
    strbuf_appends(&sb, "\"");
    if (sb.buf) {
        evhttp_add_header(out, "Content-Disposition", sb.buf);
    }
    strbuf_release(&sb);
}

static void files_get(struct agent *a, struct evhttp_request *req, const struct evkeyvalq *q)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    const char *raw = evhttp_find_header(q, "path");
    const char *accept = evhttp_find_header(in, "Accept-Encoding");
    const char *range = evhttp_find_header(in, "Range");
    const char *ims = evhttp_find_header(in, "If-Modified-Since");
    const char *type;
    struct user *u = NULL;
    struct evbuffer *body = NULL;
    char *path = NULL, date[64];
    struct stat st;
    int fd = -EBADF, enc, r;

    r = auth_user_or_default(a, evhttp_find_header(q, "username"), &u);
    if (r < 0) {
        reply_error(req, 401, "error looking up user '%s': unknown user",
                    evhttp_find_header(q, "username") ?: "");
        goto out;
    }
    r = user_resolve_path(u, raw ? raw : "", a->default_workdir, &path);
    if (r < 0) {
        reply_error(req, 400, "error expanding and resolving path '%s'", raw ? raw : "");
        goto out;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            reply_error(req, 404, "path '%s' does not exist", path);
        } else {
            reply_error(req, 500, "error opening file '%s': %s", path, strerror(errno));
        }
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        reply_error(req, 400, "path '%s' is a directory", path);
        goto out;
    }
    (void)fd_set_nonblock(fd, 0);
    enc = choose_encoding(accept);
    if (enc < 0) {
        reply_error(req, 406, "no acceptable encoding found, supported: [gzip]");
        goto out;
    }
    evhttp_add_header(out, "Vary", "Accept-Encoding");
    /* Range and conditional requests get identity, as envd falls back to ServeContent. */
    if (range || ims || evhttp_find_header(in, "If-None-Match") ||
        evhttp_find_header(in, "If-Range")) {
        enc = 0;
    }
    type = mime_by_extension(path);
    content_disposition(out, path);

    if (enc == 1 && S_ISREG(st.st_mode)) {
        struct gz_send *g = calloc(1, sizeof(*g));
        if (!g) {
            reply_error(req, 500, "out of memory");
            goto out;
        }
        g->agent = a;
        g->req = req;
        g->fd = TAKE_FD(fd);
        g->evcon = evhttp_request_get_connection(req);
        g->close_ev = event_new(a->base, -1, 0, gz_close_event_cb, g);
        g->pump_ev = event_new(a->base, -1, 0, gz_pump_event_cb, g);
        /* windowBits 15 + 16: a gzip wrapper rather than zlib's. */
        if (!g->close_ev || !g->pump_ev ||
            deflateInit2(&g->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                         Z_DEFAULT_STRATEGY) != Z_OK) {
            gz_free(g);
            reply_error(req, 500, "cannot start compression");
            goto out;
        }
        g->z_ready = true;
        evhttp_add_header(out, "Content-Type", type ? type : "application/octet-stream");
        evhttp_add_header(out, "Content-Encoding", "gzip");
        evhttp_send_reply_start(req, 200, "OK");
        http_gate_set_closecb(g->agent, g->evcon, gz_closed_cb, g);
        gz_pump(g);
        goto out;
    }

    http_date(st.st_mtim.tv_sec, date);
    evhttp_add_header(out, "Last-Modified", date);
    evhttp_add_header(out, "Accept-Ranges", "bytes");
    evhttp_add_header(out, "Content-Type", type ? type : mime_sniff(fd));
    if (ims && !range) {
        time_t since;
        if (parse_http_date(ims, &since) == 0 && st.st_mtim.tv_sec <= since) {
            reply_empty(req, 304);
            goto out;
        }
    }
    body = evbuffer_new();
    if (!body) {
        reply_error(req, 500, "out of memory");
        goto out;
    }
    if (range && S_ISREG(st.st_mode)) {
        off_t start = 0, len = 0;
        r = parse_range(range, st.st_size, &start, &len);
        if (r == -ERANGE || (r == -EINVAL && st.st_size == 0)) {
            char cr[64];
            snprintf(cr, sizeof(cr), "bytes */%lld", (long long)st.st_size);
            evhttp_add_header(out, "Content-Range", cr);
            reply_error(req, 416, "invalid range: failed to overlap");
            goto out;
        }
        if (r == 0) {
            char cr[96];
            snprintf(cr, sizeof(cr), "bytes %lld-%lld/%lld", (long long)start,
                     (long long)(start + len - 1), (long long)st.st_size);
            evhttp_add_header(out, "Content-Range", cr);
            if (evbuffer_add_file(body, fd, start, len) < 0) {
                reply_error(req, 500, "cannot read '%s'", path);
                goto out;
            }
            fd = -EBADF; /* the evbuffer owns it now */
            evhttp_send_reply(req, 206, "Partial Content", body);
            goto out;
        }
    }
    if (S_ISREG(st.st_mode)) {
        if (st.st_size > 0 && evbuffer_add_file(body, fd, 0, st.st_size) < 0) {
            reply_error(req, 500, "cannot read '%s'", path);
            goto out;
        }
        if (st.st_size > 0) {
            fd = -EBADF;
        }
    } else {
        /* Not a regular file (a FIFO, /dev/...): read a bounded amount. */
        char buf[FILES_CHUNK];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0) {
            evbuffer_add(body, buf, (size_t)n);
        }
    }
    evhttp_send_reply(req, 200, "OK", body);
out:
    if (body) {
        evbuffer_free(body);
    }
    close_safe(fd);
    free(path);
    user_free(u);
}

/* --- POST ---------------------------------------------------------------------------------- */

/* Inflates a gzip body in place (bounded by max bytes of output). */
static int gunzip_buffer(struct evbuffer *buf, size_t max)
{
    struct evbuffer *out = evbuffer_new();
    unsigned char obuf[FILES_CHUNK];
    z_stream z = { 0 };
    size_t total = 0;
    int zr = Z_OK, r = 0;

    if (!out) {
        return -ENOMEM;
    }
    if (inflateInit2(&z, 15 + 32) != Z_OK) {
        evbuffer_free(out);
        return -ENOMEM;
    }
    while (zr != Z_STREAM_END) {
        struct evbuffer_iovec v;
        if (evbuffer_peek(buf, -1, NULL, &v, 1) < 1 || v.iov_len == 0) {
            r = -EBADMSG; /* truncated */
            break;
        }
        z.next_in = v.iov_base;
        z.avail_in = (uInt)MIN(v.iov_len, (size_t)UINT32_MAX);
        do {
            z.next_out = obuf;
            z.avail_out = sizeof(obuf);
            zr = inflate(&z, Z_NO_FLUSH);
            if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
                r = -EBADMSG;
                break;
            }
            total += sizeof(obuf) - z.avail_out;
            if (total > max) {
                r = -EFBIG;
                break;
            }
            evbuffer_add(out, obuf, sizeof(obuf) - z.avail_out);
        } while (z.avail_out == 0 && zr != Z_STREAM_END);
        evbuffer_drain(buf, v.iov_len - z.avail_in);
        if (r < 0) {
            break;
        }
    }
    inflateEnd(&z);
    if (r == 0) {
        evbuffer_drain(buf, evbuffer_get_length(buf));
        evbuffer_add_buffer(buf, out);
    }
    evbuffer_free(out);
    return r;
}

/*
 * Writes the first len bytes of buf to path (removing them from buf), the
 * way envd's processFile() does. Returns an HTTP status (200 on success)
 * and sets *ret_msg.
 */
static int store_file(const struct user *u, const char *path, struct evbuffer *buf, size_t len,
                      const json_t *md, char *msg, size_t msg_size)
{
    char *parent = strdup(path);
    char *slash;
    struct stat st;
    int fd = -EBADF, r, status = 500;

    if (!parent) {
        snprintf(msg, msg_size, "out of memory");
        goto out;
    }
    slash = strrchr(parent, '/');
    slash[slash == parent ? 1 : 0] = '\0';
    r = entry_mkdir_owned(parent, u->uid, u->gid);
    if (r < 0) {
        status = r == -ENOSPC ? 507 : r == -ENOTDIR ? 400 : 500;
        snprintf(msg, msg_size, "error ensuring directories: %s", strerror(-r));
        goto out;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        status = 400;
        snprintf(msg, msg_size, "path is a directory: %s", path);
        goto out;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0) {
        status = errno == ENOSPC ? 507 : errno == EISDIR ? 400 : 500;
        snprintf(msg, msg_size, "error opening file: %s", strerror(errno));
        goto out;
    }
    if (fchown(fd, u->uid, u->gid) < 0) {
        snprintf(msg, msg_size, "error changing file ownership: %s", strerror(errno));
        goto out;
    }
    while (len > 0) {
        int n = evbuffer_write_atmost(buf, fd, (ev_ssize_t)len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            status = errno == ENOSPC || errno == EDQUOT ? 507 : 500;
            snprintf(msg, msg_size, "%s",
                     status == 507 ? "not enough disk space available" : strerror(errno));
            goto out;
        }
        len -= (size_t)n;
    }
    /* Always, with no metadata too: the new set replaces the old one (metadata.h). */
    r = metadata_write(fd, md);
    if (r == -EOPNOTSUPP) {
        /* envd: a file system without xattrs (tmpfs, /proc) keeps the body, not the metadata */
        log_warning("%s: file system does not support xattrs; metadata not persisted", path);
    } else if (r < 0) {
        status = r == -ENOSPC || r == -EDQUOT ? 507 : 500;
        snprintf(msg, msg_size, "%s: %s",
                 status == 507 ? "not enough space for file metadata"
                               : "error writing file metadata",
                 strerror(-r));
        goto out;
    }
    status = 200;
out:
    if (len > 0) {
        evbuffer_drain(buf, len);
    }
    close_safe(fd);
    free(parent);
    return status;
}

/* The upload reply's entry; metadata is read back from the file, as envd does. */
static json_t *upload_entry(const char *path)
{
    const char *name = strrchr(path, '/');

    return json_pack("{s:s, s:s, s:s, s:o*}", "name", name ? name + 1 : path, "path", path, "type",
                     "file", "metadata", metadata_read(path));
}

/*
 * X-Metadata-<key>: <value> request headers as a JSON object, keys
 * lowercased, the first of repeated headers winning, a header with an
 * empty key ignored (envd's extractMetadataHeaders), checked as envd's
 * ValidateMetadata. NULL when there are none. Returns -EINVAL with the
 * reason in msg, or -ENOMEM.
 */
static int request_metadata(struct evhttp_request *req, json_t **ret, char *msg, size_t msg_size)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evkeyval *h;
    json_t *md = NULL;
    int r;

    *ret = NULL;
    TAILQ_FOREACH (h, in, next) {
        char *key;
        if (strncasecmp(h->key, "X-Metadata-", 11) != 0 || h->key[11] == '\0') {
            continue;
        }
        key = strdup(h->key + 11);
        if (!key) {
            json_decref(md);
            return -ENOMEM;
        }
        for (char *c = key; *c; c++) {
            *c = (char)tolower((unsigned char)*c);
        }
        if (json_object_get(md, key)) {
            free(key);
            continue;
        }
        r = metadata_check_entry(key, h->value, strlen(h->value), msg, msg_size);
        if (r >= 0 && ((!md && !(md = json_object())) ||
                       json_object_set_new(md, key, json_string(h->value)) < 0)) {
            r = -ENOMEM;
        }
        free(key);
        if (r < 0) {
            json_decref(md);
            return r;
        }
    }
    r = metadata_validate(md, msg, msg_size);
    if (r < 0) {
        json_decref(md);
        return r;
    }
    *ret = md;
    return 0;
}

static bool already_uploaded(const json_t *done, const char *path)
{
    size_t i;
    json_t *e;

    json_array_foreach (done, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "path")), path) == 0) {
            return true;
        }
    }
    return false;
}

static void files_post(struct agent *a, struct evhttp_request *req, const struct evkeyvalq *q)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    const char *ct = evhttp_find_header(in, "Content-Type");
    const char *ce = evhttp_find_header(in, "Content-Encoding");
    const char *raw = evhttp_find_header(q, "path");
    const char *uname = evhttp_find_header(q, "username");
    struct multipart mp;
    struct multipart_part part = { 0 };
    struct user *u = NULL;
    json_t *done = NULL, *md = NULL;
    char *path = NULL, msg[512];
    int status = 200, r;

    r = auth_user_or_default(a, uname, &u);
    if (r < 0) {
        reply_error(req, 401, "error looking up user '%s': unknown user", uname ? uname : "");
        goto out;
    }
    if (ce && strcasecmp(ce, "identity") != 0) {
        if (strcasecmp(ce, "gzip") != 0) {
            reply_error(req, 400, "unsupported Content-Encoding: %s, supported: [gzip]", ce);
            goto out;
        }
        r = gunzip_buffer(body, (size_t)a->max_upload);
        if (r < 0) {
            reply_error(req, r == -EFBIG ? 413 : 400, "error decompressing request body: %s",
                        r == -EFBIG ? "too large" : "invalid gzip data");
            goto out;
        }
    }
    /* After the user and the body's encoding, as envd checks them. */
    r = request_metadata(req, &md, msg, sizeof(msg));
    if (r < 0) {
        reply_error(req, r == -ENOMEM ? 500 : 400, "invalid metadata: %s",
                    r == -ENOMEM ? "out of memory" : msg);
        goto out;
    }
    done = json_array();
    if (!done) {
        reply_error(req, 500, "out of memory");
        goto out;
    }

    if (ct && strncasecmp(ct, "application/octet-stream", 24) == 0) {
        if (!raw) {
            reply_error(req, 400, "path query parameter is required for raw body upload");
            goto out;
        }
        if (user_resolve_path(u, raw, a->default_workdir, &path) < 0) {
            reply_error(req, 400, "error resolving path '%s'", raw);
            goto out;
        }
        status = store_file(u, path, body, evbuffer_get_length(body), md, msg, sizeof(msg));
        if (status != 200) {
            reply_error(req, status, "%s", msg);
            goto out;
        }
        json_array_append_new(done, upload_entry(path));
        reply_json(req, 200, TAKE_PTR(done));
        goto out;
    }
    if (!ct || multipart_init(&mp, body, ct) < 0) {
        reply_error(req, 400,
                    "unsupported content type: %s, expected multipart/form-data or "
                    "application/octet-stream",
                    ct ? ct : "");
        goto out;
    }
    for (int parts = 0;; parts++) {
        const char *target;

        r = multipart_next(&mp, &part);
        if (r == 0) {
            break;
        }
        if (r < 0 || parts >= FILES_MAX_PARTS) {
            reply_error(req, r == -ENOMEM ? 500 : 400,
                        "error reading form: malformed multipart body");
            goto out;
        }
        if (!part.name || strcmp(part.name, "file") != 0) {
            evbuffer_drain(body, part.len);
            multipart_part_release(&part);
            continue;
        }
        target = raw ? raw : part.filename;
        if (!target) {
            reply_error(req, 400, "file part has no filename and no path was given");
            goto out;
        }
        free(path);
        path = NULL;
        if (user_resolve_path(u, target, a->default_workdir, &path) < 0) {
            reply_error(req, 400, "error resolving path '%s'", target);
            goto out;
        }
        if (already_uploaded(done, path)) {
            reply_error(req, 400,
                        "you cannot upload multiple files to the same path '%s' in one upload "
                        "request, only the first specified file was uploaded",
                        path);
            goto out;
        }
        status = store_file(u, path, body, part.len, md, msg, sizeof(msg));
        if (status != 200) {
            reply_error(req, status, "%s", msg);
            goto out;
        }
        if (json_array_append_new(done, upload_entry(path)) < 0) {
            reply_error(req, 500, "out of memory");
            goto out;
        }
        multipart_part_release(&part);
    }
    reply_json(req, 200, TAKE_PTR(done));
out:
    multipart_part_release(&part);
    json_decref(md);
    json_decref(done);
    free(path);
    user_free(u);
}

void files_http_handle(struct agent *a, struct evhttp_request *req)
{
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    struct evkeyvalq q;
    const char *msg = NULL;

    TAILQ_INIT(&q);
    if (query && evhttp_parse_query_str(query, &q) < 0) {
        reply_error(req, 400, "invalid query string");
        return;
    }
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_POST) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, POST");
        reply_error(req, 405, "method not allowed");
        goto out;
    }
    if (files_check_access(
            a, evhttp_find_header(evhttp_request_get_input_headers(req), "X-Access-Token"), &q,
            cmd == EVHTTP_REQ_GET ? "read" : "write", &msg) < 0) {
        reply_error(req, 401, "%s", msg);
        goto out;
    }
    if (cmd == EVHTTP_REQ_GET) {
        files_get(a, req, &q);
    } else {
        files_post(a, req, &q);
    }
out:
    evhttp_clear_headers(&q);
}

/* --- compose ------------------------------------------------------------------------------- */

#define FILES_MAX_COMPOSE 1000

/*
 * Appends src to fd with copy_file_range() (kernel-side; the loop is busy
 * for as long as the copy takes, which is what envd's ReadFrom does too).
 */
static int append_file(int fd, const char *src)
{
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    int r = 0;

    if (in < 0) {
        return -errno;
    }
    for (;;) {
        ssize_t n = copy_file_range(in, NULL, fd, NULL, 1 << 30, 0);
        if (n == 0) {
            break;
        }
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP) {
                /* Not supported between these files: copy by hand. */
                char buf[FILES_CHUNK];
                ssize_t k;
                while ((k = read(in, buf, sizeof(buf))) > 0) {
                    r = write_all(fd, buf, (size_t)k);
                    if (r < 0) {
                        break;
                    }
                }
                if (k < 0) {
                    r = -errno;
                }
                break;
            }
            r = -errno;
            break;
        }
    }
    close(in);
    return r;
}

void files_http_compose(struct agent *a, struct evhttp_request *req)
{
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(body);
    json_t *msg = NULL, *sources = NULL, *v;
    const char *dest_raw = NULL, *uname = NULL;
    char **resolved = NULL, *dest = NULL, *tmp = NULL;
    struct user *u = NULL;
    struct strbuf sb = STRBUF_INIT;
    size_t n = 0, i;
    int fd = -EBADF, r;

    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        reply_error(req, 405, "method not allowed");
        return;
    }
    if (len > 4 * 1024 * 1024) {
        reply_error(req, 413, "request body too large");
        return;
    }
    msg = len ? json_loadb((const char *)evbuffer_pullup(body, -1), len, 0, NULL) : NULL;
    if (!json_is_object(msg) ||
        json_util_get_array(msg, "source_paths", "sourcePaths", &sources) < 0 ||
        json_util_get_string(msg, "destination", NULL, &dest_raw) < 0 ||
        json_util_get_string(msg, "username", NULL, &uname) == -EINVAL) {
        reply_error(req, 400, "invalid request body");
        goto out;
    }
    n = json_array_size(sources);
    if (n == 0 || n > FILES_MAX_COMPOSE || !*dest_raw) {
        reply_error(req, 400, n == 0 ? "source_paths must not be empty" : "invalid request body");
        goto out;
    }
    r = auth_user_or_default(a, uname, &u);
    if (r < 0) {
        reply_error(req, 401, "error looking up user '%s': unknown user", uname ? uname : "");
        goto out;
    }
    if (user_resolve_path(u, dest_raw, a->default_workdir, &dest) < 0) {
        reply_error(req, 400, "error resolving destination path");
        goto out;
    }
    resolved = calloc(n + 1, sizeof(char *));
    if (!resolved) {
        reply_error(req, 500, "out of memory");
        goto out;
    }
    json_array_foreach (sources, i, v) {
        struct stat st;
        if (!json_is_string(v) ||
            user_resolve_path(u, json_string_value(v), a->default_workdir, &resolved[i]) < 0) {
            reply_error(req, 400, "error resolving source path");
            goto out;
        }
        if (strcmp(resolved[i], dest) == 0) {
            reply_error(req, 400, "source path '%s' cannot be the same as destination",
                        json_string_value(v));
            goto out;
        }
        if (stat(resolved[i], &st) < 0) {
            reply_error(req, 404, "source file not found: %s", json_string_value(v));
            goto out;
        }
        if (!S_ISREG(st.st_mode)) {
            reply_error(req, 400, "source path is not a regular file: %s", json_string_value(v));
            goto out;
        }
    }
    {
        char *parent = strdup(dest), *slash;
        if (!parent) {
            reply_error(req, 500, "out of memory");
            goto out;
        }
        slash = strrchr(parent, '/');
        slash[slash == parent ? 1 : 0] = '\0';
        r = entry_mkdir_owned(parent, u->uid, u->gid);
        free(parent);
        if (r < 0) {
            reply_error(req, 500, "error ensuring directories: %s", strerror(-r));
            goto out;
        }
    }
    /* Assemble next to the destination and rename, so a failure keeps any old file. */
    if (strbuf_appendf(&sb, "%s.space-compose.%d.tmp", dest, (int)getpid()) < 0) {
        reply_error(req, 500, "out of memory");
        goto out;
    }
    tmp = sb.buf;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0) {
        reply_error(req, errno == ENOSPC ? 507 : 500, "error creating destination file: %s",
                    strerror(errno));
        tmp = NULL;
        goto out;
    }
    r = fchown(fd, u->uid, u->gid) < 0 ? -errno : 0;
    for (i = 0; i < n && r >= 0; i++) {
        r = append_file(fd, resolved[i]);
    }
    if (r >= 0 && close(fd) < 0) {
        r = -errno;
    }
    fd = -EBADF;
    if (r >= 0 && rename(tmp, dest) < 0) {
        r = -errno;
    }
    if (r < 0) {
        reply_error(req, r == -ENOSPC ? 507 : 500, "error composing file: %s", strerror(-r));
        goto out;
    }
    tmp = NULL;
    for (i = 0; i < n; i++) {
        (void)unlink(resolved[i]);
    }
    reply_json(req, 200, upload_entry(dest));
out:
    close_safe(fd);
    if (tmp) {
        (void)unlink(tmp);
    }
    strbuf_release(&sb);
    strv_free(resolved);
    free(dest);
    user_free(u);
    json_decref(msg);
}
