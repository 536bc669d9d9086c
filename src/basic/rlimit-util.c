/* See rlimit-util.h. */
#include "basic/rlimit-util.h"

#include <errno.h>
#include <sys/resource.h>

int64_t rlimit_nofile_raise(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
        return -errno;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit raised = { .rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max };
        /* select() cannot see fds >= FD_SETSIZE: libevent uses epoll, and the one library
         * that selects (libnftables) runs under fresh_fds_run() (fresh-fds.h). */
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
            rl = raised;
        }
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > INT32_MAX) {
        return INT32_MAX;
    }
    return rl.rlim_cur > 0 ? (int64_t)rl.rlim_cur : 1;
}

uint32_t rlimit_conn_cap(int64_t nofile, uint32_t reserve, uint32_t share, uint32_t per_conn,
                         uint32_t min)
{
    int64_t avail = nofile - (int64_t)reserve, cap;

    if (share == 0 || share > 100) {
        share = 100;
    }
    if (per_conn == 0) {
        per_conn = 1;
    }
    cap = avail > 0 ? avail / 100 * share / per_conn + avail % 100 * share / 100 / per_conn : 0;
    if (cap > UINT32_MAX) {
        cap = UINT32_MAX;
    }
    return cap < min ? min : (uint32_t)cap;
}
