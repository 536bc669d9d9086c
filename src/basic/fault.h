#pragma once
/*
 * Fault points for crash and failure tests. A daemon marks the steps worth
 * breaking with fault_point("area.step"); a test starts it with
 *
 *   SPACE_FAULT=name:action[,name:action...]
 *
 * where action is `crash` (SIGKILL ourselves there, as a kill -9 or a host
 * crash would), `fail` (the point returns -EIO, so the step fails and its
 * error path runs) or `exit` (_exit(70)). Names match exactly; `*` matches
 * every point. Compiled in only with -DSPACE_FAULT_POINTS=1 (every
 * non-release build, meson.build); otherwise fault_point() is a constant 0
 * and the environment is never read.
 */
#include <stdbool.h>

#if SPACE_FAULT_POINTS
int fault_point(const char *name);
/* True when SPACE_FAULT names at least one point (for a startup warning). */
bool fault_points_armed(void);
#else
static inline int fault_point(const char *name)
{
    (void)name;
    return 0;
}
static inline bool fault_points_armed(void)
{
    return false;
}
#endif
