#pragma once
/*
 * logfmt logger on stderr: one line per event,
 *   ts=... level=info msg="..." key=value
 * Library code (basic/, shared/) logs at debug at most; process code logs
 * and returns in one call: `return log_error_errno(r, "cannot open '%s': %m", p);`
 * `%m` is replaced by strerror(-r) for the *_errno variants.
 */
#include <stdarg.h>

#include "basic/macro.h"

enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARNING, LOG_LEVEL_ERROR };

void log_set_level(enum log_level level);
void log_set_ident(const char *ident);
int log_level_from_string(const char *s);

/* Returns -abs(error) (or 0 when error is 0), so callers can `return log_...errno(r, ...)`. */
int log_internal(enum log_level level, int error, const char *sandbox, const char *fmt, ...)
    _printf_(4, 5);

#define log_debug(...) log_internal(LOG_LEVEL_DEBUG, 0, NULL, __VA_ARGS__)
#define log_info(...) log_internal(LOG_LEVEL_INFO, 0, NULL, __VA_ARGS__)
#define log_warning(...) log_internal(LOG_LEVEL_WARNING, 0, NULL, __VA_ARGS__)
#define log_error(...) log_internal(LOG_LEVEL_ERROR, 0, NULL, __VA_ARGS__)
#define log_debug_errno(e, ...) log_internal(LOG_LEVEL_DEBUG, (e), NULL, __VA_ARGS__)
#define log_info_errno(e, ...) log_internal(LOG_LEVEL_INFO, (e), NULL, __VA_ARGS__)
#define log_warning_errno(e, ...) log_internal(LOG_LEVEL_WARNING, (e), NULL, __VA_ARGS__)
#define log_error_errno(e, ...) log_internal(LOG_LEVEL_ERROR, (e), NULL, __VA_ARGS__)

/* Sandbox-scoped messages carry sandbox=<id>. */
#define log_sandbox_debug(id, ...) log_internal(LOG_LEVEL_DEBUG, 0, (id), __VA_ARGS__)
#define log_sandbox_info(id, ...) log_internal(LOG_LEVEL_INFO, 0, (id), __VA_ARGS__)
#define log_sandbox_warning(id, ...) log_internal(LOG_LEVEL_WARNING, 0, (id), __VA_ARGS__)
#define log_sandbox_error(id, ...) log_internal(LOG_LEVEL_ERROR, 0, (id), __VA_ARGS__)
#define log_sandbox_warning_errno(id, e, ...)                                                      \
    log_internal(LOG_LEVEL_WARNING, (e), (id), __VA_ARGS__)
#define log_sandbox_error_errno(id, e, ...) log_internal(LOG_LEVEL_ERROR, (e), (id), __VA_ARGS__)
