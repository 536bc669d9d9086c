#pragma once
/*
 * A growable byte buffer with a hard cap. The cap is what keeps input from a
 * guest or a client bounded: appending past it fails with -E2BIG and leaves
 * the buffer unchanged. The buffer is always NUL-terminated after len bytes.
 * Embedded by callers: strbuf_init() / strbuf_release().
 */
#include <stdarg.h>
#include <stddef.h>

#include "basic/macro.h"

struct strbuf {
    char *buf;
    size_t len;
    size_t alloc;
    size_t max; /* 0 means SIZE_MAX / 2 */
};

#define STRBUF_INIT                                                                                \
    {                                                                                              \
        0                                                                                          \
    }

void strbuf_init(struct strbuf *sb, size_t max);
void strbuf_release(struct strbuf *sb);
int strbuf_append(struct strbuf *sb, const void *data, size_t len);
int strbuf_appends(struct strbuf *sb, const char *s);
int strbuf_appendf(struct strbuf *sb, const char *fmt, ...) _printf_(2, 3);
/* Drops the first n bytes. */
void strbuf_consume(struct strbuf *sb, size_t n);
/* Returns the buffer (caller frees) and resets sb. Never NULL unless OOM. */
char *strbuf_detach(struct strbuf *sb, size_t *ret_len);
