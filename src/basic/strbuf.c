/* Growable buffer; doubling growth, bounded by sb->max. */
#include "basic/strbuf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t strbuf_cap(const struct strbuf *sb)
{
    return sb->max ? sb->max : SIZE_MAX / 2;
}

void strbuf_init(struct strbuf *sb, size_t max)
{
    *sb = (struct strbuf){ .max = max };
}

void strbuf_release(struct strbuf *sb)
{
    free(sb->buf);
    *sb = (struct strbuf){ .max = sb->max };
}

static int strbuf_grow(struct strbuf *sb, size_t extra)
{
    size_t need, n;
    char *p;

    if (extra > strbuf_cap(sb) || sb->len > strbuf_cap(sb) - extra) {
        return -E2BIG;
    }
    need = sb->len + extra + 1;
    if (need <= sb->alloc) {
        return 0;
    }
    n = sb->alloc ? sb->alloc : 64;
    while (n < need) {
        n *= 2;
    }
    p = realloc(sb->buf, n);
    if (!p) {
        return -ENOMEM;
    }
    sb->buf = p;
    sb->alloc = n;
    return 0;
}

int strbuf_append(struct strbuf *sb, const void *data, size_t len)
{
    int r = strbuf_grow(sb, len);
    if (r < 0) {
        return r;
    }
    if (len > 0) {
        memcpy(sb->buf + sb->len, data, len);
    }
    sb->len += len;
    sb->buf[sb->len] = '\0';
    return 0;
}

int strbuf_appends(struct strbuf *sb, const char *s)
{
    return strbuf_append(sb, s, strlen(s));
}

int strbuf_appendf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    int n, r;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return -EINVAL;
    }
    r = strbuf_grow(sb, (size_t)n);
    if (r < 0) {
        return r;
    }
    va_start(ap, fmt);
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
    return 0;
}

void strbuf_consume(struct strbuf *sb, size_t n)
{
    if (n >= sb->len) {
        sb->len = 0;
    } else {
        memmove(sb->buf, sb->buf + n, sb->len - n);
        sb->len -= n;
    }
    if (sb->buf) {
        sb->buf[sb->len] = '\0';
    }
}

char *strbuf_detach(struct strbuf *sb, size_t *ret_len)
{
    char *p;

    if (!sb->buf) {
        if (strbuf_grow(sb, 0) < 0) {
            return NULL;
        }
        sb->buf[0] = '\0';
    }
    p = sb->buf;
    if (ret_len) {
        *ret_len = sb->len;
    }
    *sb = (struct strbuf){ .max = sb->max };
    return p;
}
