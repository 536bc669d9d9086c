#pragma once
/*
 * Small macros used everywhere: ownership transfer (TAKE_PTR/TAKE_FD),
 * errno conversion (NERRNO) and array sizing. Included by every module,
 * which also pulls in banned.h so unsafe libc calls fail to compile.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Steal a pointer or fd: returns the value and clears the variable, so the
 * common exit label does not release what the caller now owns. */
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _p = (p);                                                                    \
        (p) = NULL;                                                                                \
        _p;                                                                                        \
    })
#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int _fd = (fd);                                                                            \
        (fd) = -EBADF;                                                                             \
        _fd;                                                                                       \
    })

/* Turns a libc "-1 and errno" result into a negative errno. */
#define NERRNO(expr)                                                                               \
    ({                                                                                             \
        long _r = (long)(expr);                                                                    \
        _r < 0 ? -errno : (int)_r;                                                                 \
    })

#define assert_not_reached() assert(!"unreachable code reached")

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

/* The headers that declare banned functions come first, so banned.h
 * (which must be last, as in git) cannot clash with their definitions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/banned.h"
