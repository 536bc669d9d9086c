/*
 * proto3 JSON field access on top of jansson. Lookups try the JSON name and
 * then the proto name because the Connect JSON codec accepts both; numbers
 * may arrive as strings because proto3 JSON sends 64-bit integers that way
 * and parsers accept it for every integer type.
 */
#include "shared/json-util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "basic/base64.h"
#include "basic/macro.h"
#include "basic/parse-util.h"

json_t *json_util_field(const json_t *obj, const char *name, const char *alt)
{
    json_t *v;

    if (!json_is_object(obj)) {
        return NULL;
    }
    v = json_object_get(obj, name);
    if ((!v || json_is_null(v)) && alt) {
        v = json_object_get(obj, alt);
    }
    if (!v || json_is_null(v)) {
        return NULL;
    }
    return v;
}

int json_util_get_string(const json_t *obj, const char *name, const char *alt, const char **ret)
{
    json_t *v = json_util_field(obj, name, alt);

    if (!v) {
        return -ENOENT;
    }
    if (!json_is_string(v)) {
        return -EINVAL;
    }
    *ret = json_string_value(v);
    return 0;
}

int json_util_get_bool(const json_t *obj, const char *name, const char *alt, bool *ret)
{
    json_t *v = json_util_field(obj, name, alt);

    if (!v) {
        return -ENOENT;
    }
    if (!json_is_boolean(v)) {
        return -EINVAL;
    }
    *ret = json_is_true(v);
    return 0;
}

/* A JSON integer, or a string holding one (proto3 JSON allows both). */
static int number_value(const json_t *v, int64_t *ret)
{
    if (json_is_integer(v)) {
        *ret = json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        /* Range first: casting a double outside int64_t is undefined (4942e91, NaN). */
        if (!(d >= -0x1p63 && d < 0x1p63) || d != (double)(int64_t)d) {
            return -EINVAL;
        }
        *ret = (int64_t)d;
        return 0;
    }
    if (json_is_string(v)) {
        return parse_i64(json_string_value(v), ret) < 0 ? -EINVAL : 0;
    }
    return -EINVAL;
}

int json_util_get_u32(const json_t *obj, const char *name, const char *alt, uint32_t *ret)
{
    json_t *v = json_util_field(obj, name, alt);
    int64_t n;

    if (!v) {
        return -ENOENT;
    }
    if (number_value(v, &n) < 0 || n < 0 || n > UINT32_MAX) {
        return -EINVAL;
    }
    *ret = (uint32_t)n;
    return 0;
}

int json_util_get_i64(const json_t *obj, const char *name, const char *alt, int64_t *ret)
{
    json_t *v = json_util_field(obj, name, alt);
    int64_t n;

    if (!v) {
        return -ENOENT;
    }
    if (number_value(v, &n) < 0) {
        return -EINVAL;
    }
    *ret = n;
    return 0;
}

int json_util_get_object(const json_t *obj, const char *name, const char *alt, json_t **ret)
{
    json_t *v = json_util_field(obj, name, alt);

    if (!v) {
        return -ENOENT;
    }
    if (!json_is_object(v)) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

int json_util_get_array(const json_t *obj, const char *name, const char *alt, json_t **ret)
{
    json_t *v = json_util_field(obj, name, alt);

    if (!v) {
        return -ENOENT;
    }
    if (!json_is_array(v)) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

int json_util_get_bytes(const json_t *obj, const char *name, const char *alt, size_t max,
                        void **ret, size_t *ret_len)
{
    json_t *v = json_util_field(obj, name, alt);
    void *out = NULL;
    size_t n;
    long m;
    int r;

    if (!v) {
        return -ENOENT;
    }
    if (!json_is_string(v)) {
        return -EINVAL;
    }
    n = json_string_length(v);
    /* Every 4 characters decode to at most 3 bytes: check before allocating. */
    if (n / 4 * 3 > max + 3) {
        return -E2BIG;
    }
    out = malloc(n / 4 * 3 + 4);
    if (!out) {
        return -ENOMEM;
    }
    /* base64_decode() takes the URL-safe alphabet too, as protojson does. */
    m = base64_decode(json_string_value(v), n, out);
    if (m < 0) {
        r = -EINVAL;
        goto out;
    }
    if ((size_t)m > max) {
        r = -E2BIG;
        goto out;
    }
    ((char *)out)[m] = '\0';
    *ret = TAKE_PTR(out);
    *ret_len = (size_t)m;
    r = 0;
out:
    free(out);
    return r;
}

int json_util_get_enum(const json_t *obj, const char *name, const char *alt,
                       const struct json_util_enum *table, size_t n, int *ret)
{
    json_t *v = json_util_field(obj, name, alt);
    int64_t num;

    if (!v) {
        return -ENOENT;
    }
    if (json_is_string(v)) {
        for (size_t i = 0; i < n; i++) {
            if (strcmp(json_string_value(v), table[i].name) == 0) {
                *ret = table[i].value;
                return 0;
            }
        }
        return -EINVAL;
    }
    if (number_value(v, &num) < 0) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (table[i].value == num) {
            *ret = table[i].value;
            return 0;
        }
    }
    return -EINVAL;
}

/* Length of the valid UTF-8 sequence at s (at most len bytes), or 0 if invalid. */
static size_t utf8_seq_len(const unsigned char *s, size_t len)
{
    uint32_t cp;
    size_t n;

    if (s[0] < 0x80) {
        return 1;
    } else if ((s[0] & 0xe0) == 0xc0) {
        n = 2;
        cp = s[0] & 0x1f;
    } else if ((s[0] & 0xf0) == 0xe0) {
        n = 3;
        cp = s[0] & 0x0f;
    } else if ((s[0] & 0xf8) == 0xf0) {
        n = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (n > len) {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = cp << 6 | (s[i] & 0x3f);
    }
    /* Overlong forms, surrogates and values past U+10FFFF are invalid. */
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
        return 0;
    }
    return n;
}

json_t *json_util_string_lossy(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    char *buf;
    size_t o = 0;
    json_t *j;

    if (len > (SIZE_MAX - 1) / 3) {
        return NULL;
    }
    /* Each invalid byte becomes the 3-byte U+FFFD; NUL is dropped. */
    buf = malloc(len * 3 + 1);
    if (!buf) {
        return NULL;
    }
    for (size_t i = 0; i < len;) {
        size_t n = p[i] ? utf8_seq_len(p + i, len - i) : 0;
        if (n == 0) {
            if (p[i]) {
                memcpy(buf + o, "\xef\xbf\xbd", 3);
                o += 3;
            }
            i++;
            continue;
        }
        memcpy(buf + o, p + i, n);
        o += n;
        i += n;
    }
    j = json_stringn(buf, o);
    free(buf);
    return j;
}

json_t *json_util_bytes(const void *data, size_t len)
{
    size_t n = base64_encoded_len(len);
    char *buf = malloc(n + 1);
    json_t *j;

    if (!buf) {
        return NULL;
    }
    base64_encode(data, len, buf);
    j = json_stringn_nocheck(buf, n);
    free(buf);
    return j;
}

int json_util_set_new(json_t *obj, const char *key, json_t *value)
{
    if (!value) {
        return -ENOMEM;
    }
    return json_object_set_new(obj, key, value) < 0 ? -ENOMEM : 0;
}
