/*
 * The process-wide logger. Its level and identity are the only globals a
 * process has besides arg_* (style.md R13). Writes are one write(2) per line
 * so lines from threads never interleave.
 */
#include "basic/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level log_max_level = LOG_LEVEL_INFO;
static const char *log_ident = NULL;

static const char *const level_names[] = {
    [LOG_LEVEL_DEBUG] = "debug",
    [LOG_LEVEL_INFO] = "info",
    [LOG_LEVEL_WARNING] = "warning",
    [LOG_LEVEL_ERROR] = "error",
};

void log_set_level(enum log_level level)
{
    log_max_level = level;
}

void log_set_ident(const char *ident)
{
    log_ident = ident;
}

int log_level_from_string(const char *s)
{
    for (size_t i = 0; i < ARRAY_SIZE(level_names); i++) {
        if (strcmp(s, level_names[i]) == 0) {
            return (int)i;
        }
    }
    return -EINVAL;
}

/* Appends `src` to the message, escaping quotes and newlines so a line stays one line. */
static size_t append_escaped(char *dst, size_t pos, size_t cap, const char *src)
{
    for (; *src && pos + 2 < cap; src++) {
        if (*src == '"' || *src == '\\') {
            dst[pos++] = '\\';
            dst[pos++] = *src;
        } else if (*src == '\n') {
            dst[pos++] = '\\';
            dst[pos++] = 'n';
        } else {
            dst[pos++] = *src;
        }
    }
    return pos;
}

int log_internal(enum log_level level, int error, const char *sandbox, const char *fmt, ...)
{
    char msg[2048], line[4096];
    struct timespec ts;
    struct tm tm;
    size_t pos;
    va_list ap;
    int saved_errno = errno;

    if (error > 0) {
        error = -error;
    }
    if (level < log_max_level) {
        return error;
    }

    /* %m in our messages means the error we were given, not errno. */
    errno = -error;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    pos = strftime(line, sizeof(line), "ts=%Y-%m-%dT%H:%M:%S", &tm);
    pos += (size_t)snprintf(line + pos, sizeof(line) - pos, ".%03ldZ level=%s",
                            ts.tv_nsec / 1000000, level_names[level]);
    if (log_ident) {
        pos += (size_t)snprintf(line + pos, sizeof(line) - pos, " proc=%s", log_ident);
    }
    if (sandbox) {
        pos += (size_t)snprintf(line + pos, sizeof(line) - pos, " sandbox=%s", sandbox);
    }
    pos += (size_t)snprintf(line + pos, sizeof(line) - pos, " msg=\"");
    pos = append_escaped(line, pos, sizeof(line) - 2, msg);
    line[pos++] = '"';
    line[pos++] = '\n';
    (void)!write(STDERR_FILENO, line, pos);

    errno = saved_errno;
    return error;
}
