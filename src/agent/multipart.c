/*
 * A multipart/form-data reader that works on the evbuffer evhttp filled.
 * The body is complete when we parse it (evhttp buffers it), so a missing
 * delimiter is an error rather than "need more data". Header blocks are
 * capped at MULTIPART_MAX_HEADERS; part bodies are never copied here.
 */
#include "agent/multipart.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "basic/macro.h"

/* Value of parameter `param` in a header like `multipart/form-data; boundary=xyz`, unquoted. */
static char *param_value(const char *value, const char *param, bool *ret_extended)
{
    size_t plen = strlen(param);
    const char *p = value;

    while ((p = strchr(p, ';'))) {
        const char *start, *end;
        bool extended = false;
        char *out;
        size_t o = 0;

        p++;
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (strncasecmp(p, param, plen) != 0) {
            continue;
        }
        start = p + plen;
        if (*start == '*') {
            extended = true;
            start++;
        }
        while (*start == ' ') {
            start++;
        }
        if (*start != '=') {
            continue;
        }
        if (extended != *ret_extended) {
            continue;
        }
        start++;
        while (*start == ' ') {
            start++;
        }
        out = malloc(strlen(start) + 1);
        if (!out) {
            return NULL;
        }
        if (*start == '"') {
            for (end = start + 1; *end && *end != '"'; end++) {
                if (*end == '\\' && end[1]) {
                    end++;
                }
                out[o++] = *end;
            }
        } else {
            for (end = start; *end && *end != ';' && *end != ' ' && *end != '\t'; end++) {
                out[o++] = *end;
            }
        }
        out[o] = '\0';
        return out;
    }
    return NULL;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = (char)tolower((unsigned char)c);
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

char *multipart_header_param(const char *value, const char *param)
{
    bool extended = true;
    char *v = param_value(value, param, &extended);

    if (v) {
        /* RFC 5987: charset'lang'percent-encoded; we take UTF-8 (and ASCII) only. */
        char *q = strchr(v, '\'');
        char *q2 = q ? strchr(q + 1, '\'') : NULL;
        size_t o = 0;
        if (!q2 || (strncasecmp(v, "UTF-8'", 6) != 0 && strncasecmp(v, "us-ascii'", 9) != 0)) {
            free(v);
            v = NULL;
        } else {
            for (char *s = q2 + 1; *s; s++) {
                if (*s == '%' && hexval(s[1]) >= 0 && hexval(s[2]) >= 0) {
                    v[o++] = (char)(hexval(s[1]) << 4 | hexval(s[2]));
                    s += 2;
                } else {
                    v[o++] = *s;
                }
            }
            v[o] = '\0';
            if (strlen(v) != o) {
                free(v); /* an encoded NUL */
                v = NULL;
            }
        }
    }
    if (v) {
        return v;
    }
    extended = false;
    return param_value(value, param, &extended);
}

int multipart_init(struct multipart *mp, struct evbuffer *buf, const char *content_type)
{
    bool extended = false;
    char *b;
    size_t n;

    *mp = (struct multipart){ .buf = buf };
    if (!content_type || strncasecmp(content_type, "multipart/", 10) != 0) {
        return -EINVAL;
    }
    b = param_value(content_type, "boundary", &extended);
    if (!b) {
        return -EINVAL;
    }
    n = strlen(b);
    if (n == 0 || n > MULTIPART_MAX_BOUNDARY) {
        free(b);
        return -EINVAL;
    }
    memcpy(mp->delim, "\r\n--", 4);
    memcpy(mp->delim + 4, b, n);
    mp->delim_len = 4 + n;
    free(b);
    return 0;
}

void multipart_part_release(struct multipart_part *part)
{
    free(part->name);
    free(part->filename);
    *part = (struct multipart_part){ 0 };
}

/* After a delimiter: "--" ends the body, else optional blanks then CRLF. */
static int after_delimiter(struct multipart *mp)
{
    unsigned char two[2];

    if (evbuffer_copyout(mp->buf, two, 2) == 2 && two[0] == '-' && two[1] == '-') {
        mp->state = 2;
        return 0;
    }
    for (;;) {
        if (evbuffer_copyout(mp->buf, two, 2) < 2) {
            return -EBADMSG;
        }
        if (two[0] == '\r' && two[1] == '\n') {
            evbuffer_drain(mp->buf, 2);
            return 1;
        }
        if (two[0] != ' ' && two[0] != '\t') {
            return -EBADMSG;
        }
        evbuffer_drain(mp->buf, 1);
    }
}

static int parse_headers(const char *block, struct multipart_part *part)
{
    const char *line = block;

    while (*line) {
        const char *eol = strstr(line, "\r\n");
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char *l = strndup(line, len);
        if (!l) {
            return -ENOMEM;
        }
        if (strncasecmp(l, "Content-Disposition:", 20) == 0) {
            free(part->name);
            free(part->filename);
            part->name = multipart_header_param(l + 20, "name");
            part->filename = multipart_header_param(l + 20, "filename");
        }
        free(l);
        if (!eol) {
            break;
        }
        line = eol + 2;
    }
    return 0;
}

int multipart_next(struct multipart *mp, struct multipart_part *part)
{
    struct evbuffer_ptr pos;
    char *headers = NULL;
    int r;

    *part = (struct multipart_part){ 0 };
    if (mp->state == 2) {
        return 0;
    }
    if (mp->state == 0) {
        /* The first delimiter may open the body without the leading CRLF. */
        pos = evbuffer_search(mp->buf, mp->delim + 2, mp->delim_len - 2, NULL);
        if (pos.pos < 0) {
            return -EBADMSG;
        }
        evbuffer_drain(mp->buf, (size_t)pos.pos + mp->delim_len - 2);
        mp->state = 1;
    } else {
        unsigned char probe[MULTIPART_MAX_BOUNDARY + 5];
        if (evbuffer_copyout(mp->buf, probe, mp->delim_len) != (ev_ssize_t)mp->delim_len ||
            memcmp(probe, mp->delim, mp->delim_len) != 0) {
            return -EBADMSG;
        }
        evbuffer_drain(mp->buf, mp->delim_len);
    }
    r = after_delimiter(mp);
    if (r <= 0) {
        return r;
    }

    /* Headers end at the first empty line; a part may have none at all. */
    pos = evbuffer_search(mp->buf, "\r\n\r\n", 4, NULL);
    if (evbuffer_get_length(mp->buf) >= 2) {
        unsigned char two[2];
        evbuffer_copyout(mp->buf, two, 2);
        if (two[0] == '\r' && two[1] == '\n') {
            pos.pos = -2; /* no headers */
        }
    }
    if (pos.pos == -1 || pos.pos > (ev_ssize_t)MULTIPART_MAX_HEADERS) {
        return -EBADMSG;
    }
    if (pos.pos >= 0) {
        headers = malloc((size_t)pos.pos + 1);
        if (!headers) {
            return -ENOMEM;
        }
        evbuffer_remove(mp->buf, headers, (size_t)pos.pos);
        headers[pos.pos] = '\0';
        if (strlen(headers) != (size_t)pos.pos) {
            free(headers);
            return -EBADMSG;
        }
        evbuffer_drain(mp->buf, 4);
        r = parse_headers(headers, part);
        free(headers);
        if (r < 0) {
            multipart_part_release(part);
            return r;
        }
    } else {
        evbuffer_drain(mp->buf, 2);
    }

    pos = evbuffer_search(mp->buf, mp->delim, mp->delim_len, NULL);
    if (pos.pos < 0) {
        multipart_part_release(part);
        return -EBADMSG;
    }
    part->len = (size_t)pos.pos;
    return 1;
}
