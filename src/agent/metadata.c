/*
 * File metadata in user.e2b.* extended attributes (metadata.h), byte for
 * byte what envd's packages/shared/pkg/filesystem/xattr.go does.
 */
#include "agent/metadata.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#define PREFIX_LEN (sizeof(METADATA_XATTR_PREFIX) - 1)
/* Largest xattr list or value the kernel hands out (XATTR_LIST_MAX, XATTR_SIZE_MAX). */
#define XATTR_BUF_MAX (64 * 1024)

/* Go's %q of an ASCII-ish string, enough for error messages. */
static void quote(const char *s, char *out, size_t out_size)
{
    size_t o = 0;

    if (out_size < 3) {
        return;
    }
    out[o++] = '"';
    for (; *s && o + 6 < out_size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c > 0x7e) {
            o += (size_t)snprintf(out + o, out_size - o, "\\x%02x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
}

static int check_printable(const char *label, const char *s, size_t len, char *msg, size_t msg_size)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7e) {
            snprintf(msg, msg_size,
                     "metadata %s contains non-printable-ASCII byte 0x%02x at offset %zu", label, c,
                     i);
            return -EINVAL;
        }
    }
    return 0;
}

int metadata_check_entry(const char *key, const char *value, size_t value_len, char *msg,
                         size_t msg_size)
{
    size_t klen = strlen(key);
    char q[600], label[640];

    quote(key, q, sizeof(q));
    if (klen == 0) {
        snprintf(msg, msg_size, "metadata key must not be empty");
        return -EINVAL;
    }
    if (klen > METADATA_MAX_KEY) {
        snprintf(msg, msg_size, "metadata key %s exceeds %zu bytes", q, METADATA_MAX_KEY);
        return -EINVAL;
    }
    if (check_printable("key", key, klen, msg, msg_size) < 0) {
        return -EINVAL;
    }
    snprintf(label, sizeof(label), "value for key %s", q);
    return check_printable(label, value, value_len, msg, msg_size);
}

int metadata_validate(const json_t *md, char *msg, size_t msg_size)
{
    const char *k;
    json_t *v;
    size_t total = 0;

    json_object_foreach ((json_t *)md, k, v) {
        if (!json_is_string(v)) {
            snprintf(msg, msg_size, "metadata values must be strings");
            return -EINVAL;
        }
        if (metadata_check_entry(k, json_string_value(v), json_string_length(v), msg, msg_size) <
            0) {
            return -EINVAL;
        }
        total += PREFIX_LEN + strlen(k) + json_string_length(v);
    }
    if (total > METADATA_MAX_TOTAL) {
        snprintf(msg, msg_size, "total metadata size %zu exceeds %d bytes", total,
                 METADATA_MAX_TOTAL);
        return -EINVAL;
    }
    return 0;
}

/* The names list of path (fd < 0) or fd, in a new buffer; its length, or -errno. */
static ssize_t list_names(const char *path, int fd, char **ret)
{
    char *buf = NULL;
    ssize_t n;

    *ret = NULL;
    for (int attempt = 0; attempt < 3; attempt++) {
        n = fd >= 0 ? flistxattr(fd, NULL, 0) : listxattr(path, NULL, 0);
        if (n <= 0) {
            return n < 0 ? -errno : 0;
        }
        if (n > XATTR_BUF_MAX) {
            return -E2BIG;
        }
        buf = malloc((size_t)n);
        if (!buf) {
            return -ENOMEM;
        }
        n = fd >= 0 ? flistxattr(fd, buf, (size_t)n) : listxattr(path, buf, (size_t)n);
        if (n >= 0) {
            *ret = buf;
            return n;
        }
        free(buf);
        if (errno != ERANGE) {
            return -errno;
        }
        /* The list grew between the two calls: ask again. */
    }
    return -ERANGE;
}

static bool has_prefix(const char *name)
{
    return strncmp(name, METADATA_XATTR_PREFIX, PREFIX_LEN) == 0;
}

json_t *metadata_read(const char *path)
{
    char *names = NULL, *value = NULL;
    json_t *obj = NULL;
    ssize_t n = list_names(path, -1, &names);

    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
        const char *name = names + i;
        json_t *s;
        ssize_t len;

        if (!has_prefix(name)) {
            continue;
        }
        if (!value && !(value = malloc(XATTR_BUF_MAX))) {
            break;
        }
        len = getxattr(path, name, value, XATTR_BUF_MAX);
        if (len < 0) {
            if (errno == ENODATA) {
                continue; /* removed since the listing */
            }
            /* envd: any other error loses the whole set (the entry is still reported) */
            json_decref(obj);
            obj = NULL;
            break;
        }
        /* json_stringn() refuses what is not UTF-8; json_object_set_new() a non-UTF-8 key. */
        s = json_stringn(value, (size_t)len);
        if (!s) {
            continue;
        }
        if (!obj && !(obj = json_object())) {
            json_decref(s);
            break;
        }
        (void)json_object_set_new(obj, name + PREFIX_LEN, s);
    }
    free(value);
    free(names);
    if (obj && json_object_size(obj) == 0) {
        json_decref(obj);
        obj = NULL;
    }
    return obj;
}

int metadata_write(int fd, const json_t *md)
{
    char *names = NULL, msg[64];
    const char *k;
    json_t *v;
    ssize_t n;

    if (metadata_validate(md, msg, sizeof(msg)) < 0) {
        return -EINVAL;
    }
    n = list_names(NULL, fd, &names);
    if (n < 0) {
        return n == -ENOTSUP ? -EOPNOTSUPP : (int)n;
    }
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
        const char *name = names + i;
        if (!has_prefix(name) || json_object_get(md, name + PREFIX_LEN)) {
            continue;
        }
        if (fremovexattr(fd, name) < 0 && errno != ENODATA) {
            int r = -errno;
            free(names);
            return r;
        }
    }
    free(names);
    json_object_foreach ((json_t *)md, k, v) {
        char name[256];
        snprintf(name, sizeof(name), METADATA_XATTR_PREFIX "%s", k);
        if (fsetxattr(fd, name, json_string_value(v), json_string_length(v), 0) < 0) {
            return errno == ENOTSUP ? -EOPNOTSUPP : -errno;
        }
    }
    return 0;
}
