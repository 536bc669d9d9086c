#pragma once
/*
 * multipart/form-data parsing over a request body held in an evbuffer
 * (RFC 7578), for POST /files. Part bodies are left in the buffer for the
 * caller to write straight to a file (evbuffer_write_atmost), so a large
 * upload is never copied. Filenames keep their directories: multi-file
 * uploads send the full destination path as the filename (e2b-compat.md
 * §6.6), which is why Go's FileName() is not good enough for envd either.
 */
#include <stddef.h>

struct evbuffer;

#define MULTIPART_MAX_BOUNDARY 70
#define MULTIPART_MAX_HEADERS (16u * 1024)

struct multipart {
    struct evbuffer *buf;
    char delim[MULTIPART_MAX_BOUNDARY + 5]; /* "\r\n--" + boundary */
    size_t delim_len;
    int state; /* 0: before the first part, 1: between parts, 2: done */
};

struct multipart_part {
    char *name;     /* form field name, or NULL */
    char *filename; /* as sent (directories kept), or NULL */
    size_t len;     /* body bytes now at the front of the buffer */
};

/* Reads the boundary from a Content-Type value. Returns 0 or -EINVAL. */
int multipart_init(struct multipart *mp, struct evbuffer *buf, const char *content_type);

/*
 * Advances to the next part. Returns 1 and fills *part (its body is the
 * first part->len bytes of the buffer; the caller must remove exactly
 * those before the next call), 0 after the last part, -EBADMSG for a
 * malformed body, -ENOMEM.
 */
int multipart_next(struct multipart *mp, struct multipart_part *part);
void multipart_part_release(struct multipart_part *part);

/*
 * Extracts parameter `param` (e.g. "filename") from a header value such as
 * `form-data; name="file"; filename="/a/b.txt"`: quoted strings are
 * unquoted (backslash escapes), RFC 5987 `param*=UTF-8''...` wins over
 * the plain form. Returns a new string or NULL (absent or no memory).
 */
char *multipart_header_param(const char *value, const char *param);
