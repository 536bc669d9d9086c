#pragma once
/*
 * Descriptor limits for daemons that size their connection caps from them (issue 7
 * "bounded daemons"): raise the soft RLIMIT_NOFILE to the hard limit once at start, then
 * derive each listener's cap from what is available, leaving room for everything else.
 */
#include <stdint.h>

/* Raises the soft RLIMIT_NOFILE to the hard limit. Returns the soft limit now in force
 * (>= 1), or -errno when it cannot even be read. Failing to raise is not an error. */
int64_t rlimit_nofile_raise(void);

/* The connection cap for a listener allowed `share` of the descriptors above `reserve`
 * (share in 1..100 percent), each connection costing `per_conn` descriptors; at least
 * `min`. Pure arithmetic so the sizing rule is unit-tested. */
uint32_t rlimit_conn_cap(int64_t nofile, uint32_t reserve, uint32_t share, uint32_t per_conn,
                         uint32_t min);
