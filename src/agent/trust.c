/*
 * The egress CA in the guest's trust store (trust.h). The bundle comes from
 * the host, but /init is reachable by guest processes too (with the token),
 * so it is checked as hostile: bounded, certificates only (a private key or
 * arbitrary text must never land in a world-readable trust file).
 */
#include "agent/trust.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "basic/base64.h"
#include "basic/fileio.h"
#include "basic/macro.h"
#include "basic/strbuf.h"

#define PEM_BEGIN "-----BEGIN CERTIFICATE-----"
#define PEM_END "-----END CERTIFICATE-----"
#define MARK_BEGIN "# space-egress begin: managed by space-agent, replaced at every /init\n"
#define MARK_END "# space-egress end\n"
/* The system bundle is ~200 KiB; anything past this is not a trust store we should rewrite. */
#define TRUST_MAX_SYSTEM_BUNDLE (16u * 1024 * 1024)

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_b64(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/' || c == '=';
}

/* One block's body [p, end): base64 lines; must decode to a DER SEQUENCE of some size. */
static int check_body(const char *p, const char *end, const char **why)
{
    size_t n = 0;
    char *b64 = malloc((size_t)(end - p) + 1);
    unsigned char *der = NULL;
    long dlen;
    int r = -EBADMSG;

    if (!b64) {
        return -ENOMEM;
    }
    for (; p < end; p++) {
        if (is_space(*p)) {
            continue;
        }
        if (!is_b64(*p)) {
            *why = "caBundle: a certificate's body is not base64";
            goto out;
        }
        b64[n++] = *p;
    }
    der = malloc(n / 4 * 3 + 3);
    if (!der) {
        r = -ENOMEM;
        goto out;
    }
    dlen = n ? base64_decode(b64, n, der) : -EINVAL;
    if (dlen < 0) {
        *why = "caBundle: a certificate's body is not base64";
        goto out;
    }
    /* A certificate is a DER SEQUENCE with a long-form length (it is > 127 bytes). */
    if (dlen < 64 || der[0] != 0x30 || !(der[1] & 0x80)) {
        *why = "caBundle: a block is not a DER certificate";
        goto out;
    }
    r = 0;
out:
    free(b64);
    free(der);
    return r;
}

int trust_check_bundle(const char *pem, size_t len, const char **why)
{
    const char *p = pem, *end = pem + len;
    unsigned count = 0;
    int r;

    *why = NULL;
    if (len > TRUST_MAX_BUNDLE) {
        *why = "caBundle is larger than 64 KiB";
        return -E2BIG;
    }
    if (memchr(pem, '\0', len)) {
        *why = "caBundle contains a NUL byte";
        return -EBADMSG;
    }
    for (;;) {
        const char *body, *stop;
        while (p < end && is_space(*p)) {
            p++;
        }
        if (p == end) {
            break;
        }
        if ((size_t)(end - p) < strlen(PEM_BEGIN) || memcmp(p, PEM_BEGIN, strlen(PEM_BEGIN)) != 0) {
            *why = "caBundle must hold only PEM CERTIFICATE blocks";
            return -EBADMSG;
        }
        body = p + strlen(PEM_BEGIN);
        stop = memmem(body, (size_t)(end - body), PEM_END, strlen(PEM_END));
        if (!stop) {
            *why = "caBundle: a CERTIFICATE block has no END line";
            return -EBADMSG;
        }
        r = check_body(body, stop, why);
        if (r < 0) {
            return r;
        }
        count++;
        p = stop + strlen(PEM_END);
        if (p < end && !is_space(*p)) {
            *why = "caBundle must hold only PEM CERTIFICATE blocks";
            return -EBADMSG;
        }
    }
    if (count == 0) {
        *why = "caBundle holds no certificate";
        return -EBADMSG;
    }
    return 0;
}

/* pem without '\r', ending in exactly one '\n'. */
static int append_clean(struct strbuf *sb, const char *pem, size_t len)
{
    int r = 0;

    while (len && is_space(pem[len - 1])) {
        len--;
    }
    while (len && is_space(*pem)) {
        pem++, len--;
    }
    for (size_t i = 0; i < len && r >= 0; i++) {
        if (pem[i] != '\r') {
            r = strbuf_append(sb, &pem[i], 1);
        }
    }
    return r < 0 ? r : strbuf_appends(sb, "\n");
}

/* Not fsync'd, like identity_apply()'s files: the node's pause, suspend and snapshot paths
 * keep the guest's page cache or sync it, and this runs on every create's /init. */
static int write_public(const char *path, const char *data, size_t len)
{
    int r = write_file_atomic_nosync(path, data, len);

    if (r < 0) {
        return r;
    }
    return chmod(path, 0644) < 0 ? -errno : 0;
}

/* old without the block an earlier trust_install() appended (markers included). */
static int append_without_block(struct strbuf *sb, const char *old, size_t len)
{
    const char *b = old, *e;
    int r;

    /* The marker counts only at the start of a line. */
    while ((b = memmem(b, (size_t)(old + len - b), MARK_BEGIN, strlen(MARK_BEGIN))) && b != old &&
           b[-1] != '\n') {
        b++;
    }
    if (!b) {
        r = strbuf_append(sb, old, len);
        /* The block goes on a line of its own. */
        return r >= 0 && len && old[len - 1] != '\n' ? strbuf_appends(sb, "\n") : r;
    }
    r = strbuf_append(sb, old, (size_t)(b - old));
    e = memmem(b, (size_t)(old + len - b), MARK_END, strlen(MARK_END));
    if (r >= 0 && e) {
        e += strlen(MARK_END);
        r = strbuf_append(sb, e, (size_t)(old + len - e));
    }
    return r;
}

static int path_under(struct strbuf *sb, const char *root, const char *path)
{
    strbuf_release(sb);
    return strbuf_appendf(sb, "%s%s", root, path);
}

int trust_install(const char *root, const char *pem, size_t len)
{
    struct strbuf path = STRBUF_INIT, cert = STRBUF_INIT, bundle = STRBUF_INIT;
    char *old = NULL;
    size_t old_len = 0;
    int r;

    r = append_clean(&cert, pem, len);
    if (r < 0) {
        goto out;
    }
    r = path_under(&path, root, "/usr/local/share/ca-certificates");
    r = r < 0 ? r : mkdir_p(path.buf, 0755);
    r = r < 0 ? r : path_under(&path, root, TRUST_CERT_PATH);
    r = r < 0 ? r : write_public(path.buf, cert.buf, cert.len);
    if (r < 0) {
        goto out;
    }
    r = path_under(&path, root, "/etc/ssl/certs");
    r = r < 0 ? r : mkdir_p(path.buf, 0755);
    r = r < 0 ? r : path_under(&path, root, TRUST_BUNDLE_PATH);
    if (r < 0) {
        goto out;
    }
    r = read_file(path.buf, TRUST_MAX_SYSTEM_BUNDLE, &old, &old_len);
    if (r == -ENOENT) {
        old_len = 0;
        r = 0;
    }
    r = r < 0 ? r : append_without_block(&bundle, old ? old : "", old_len);
    r = r < 0 ? r : strbuf_appends(&bundle, MARK_BEGIN);
    r = r < 0 ? r : strbuf_append(&bundle, cert.buf, cert.len);
    r = r < 0 ? r : strbuf_appends(&bundle, MARK_END);
    r = r < 0 ? r : write_public(path.buf, bundle.buf, bundle.len);
out:
    free(old);
    strbuf_release(&path);
    strbuf_release(&cert);
    strbuf_release(&bundle);
    return r;
}

int trust_env_defaults(const char *root, json_t *env)
{
    static const struct {
        const char *name, *path;
    } vars[] = {
        { "SSL_CERT_FILE", TRUST_BUNDLE_PATH },     { "REQUESTS_CA_BUNDLE", TRUST_BUNDLE_PATH },
        { "PIP_CERT", TRUST_BUNDLE_PATH },          { "CURL_CA_BUNDLE", TRUST_BUNDLE_PATH },
        { "NODE_EXTRA_CA_CERTS", TRUST_CERT_PATH },
    };
    struct strbuf value = STRBUF_INIT;
    int r = 0;

    for (size_t i = 0; i < ARRAY_SIZE(vars) && r >= 0; i++) {
        if (json_object_get(env, vars[i].name)) {
            continue;
        }
        r = path_under(&value, root, vars[i].path);
        if (r >= 0 && json_object_set_new(env, vars[i].name, json_string(value.buf)) < 0) {
            r = -ENOMEM;
        }
    }
    strbuf_release(&value);
    return r;
}
