/* Processes found through /proc. */
#include "basic/proc-util.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The real, effective and saved uids of pid from /proc/<pid>/status; -ENOENT when it is gone. */
static int proc_uids(const char *pid, uid_t uids[3])
{
    char path[64], line[256];
    int r = -ENOENT;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%s/status", pid);
    f = fopen(path, "re");
    if (!f) {
        return -errno;
    }
    while (fgets(line, sizeof(line), f)) {
        unsigned long u[3];
        if (strncmp(line, "Uid:", 4) == 0) {
            if (sscanf(line + 4, "%lu %lu %lu", &u[0], &u[1], &u[2]) == 3) {
                for (int i = 0; i < 3; i++) {
                    uids[i] = (uid_t)u[i];
                }
                r = 0;
            } else {
                r = -EINVAL;
            }
            break;
        }
    }
    fclose(f);
    return r;
}

int proc_kill_uid(uid_t uid, int sig, unsigned *ret_n)
{
    struct dirent *de;
    unsigned n = 0;
    DIR *d;

    if (uid == 0) {
        return -EINVAL;
    }
    d = opendir("/proc");
    if (!d) {
        return -errno;
    }
    while ((de = readdir(d))) {
        uid_t uids[3];
        char *end;
        long pid = strtol(de->d_name, &end, 10);

        if (*end != '\0' || pid <= 1 || proc_uids(de->d_name, uids) < 0) {
            continue;
        }
        if ((uids[0] == uid || uids[1] == uid || uids[2] == uid) && kill((pid_t)pid, sig) == 0) {
            n++;
        }
    }
    closedir(d);
    if (ret_n) {
        *ret_n = n;
    }
    return 0;
}
