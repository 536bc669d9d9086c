/* Fault points; see fault.h. */
#include "basic/fault.h"

#if SPACE_FAULT_POINTS

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/log.h"

/* Finds name's action in spec ("a:crash,b:fail"); copies it into action. */
static bool lookup(const char *spec, const char *name, char *action, size_t n)
{
    size_t len = strlen(name);

    for (const char *p = spec; p && *p;) {
        const char *end = strchr(p, ',');
        size_t item = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', item);
        if (colon) {
            size_t key = (size_t)(colon - p);
            bool match = (key == len && memcmp(p, name, len) == 0) || (key == 1 && *p == '*');
            size_t alen = item - key - 1;
            if (match && alen < n) {
                memcpy(action, colon + 1, alen);
                action[alen] = '\0';
                return true;
            }
        }
        p = end ? end + 1 : NULL;
    }
    return false;
}

bool fault_points_armed(void)
{
    const char *spec = getenv("SPACE_FAULT");
    return spec && *spec;
}

int fault_point(const char *name)
{
    const char *spec = getenv("SPACE_FAULT");
    char action[16];

    if (!spec || !lookup(spec, name, action, sizeof(action))) {
        return 0;
    }
    if (strcmp(action, "crash") == 0) {
        log_warning("fault point '%s': crashing (SIGKILL)", name);
        (void)kill(getpid(), SIGKILL);
        pause();
    } else if (strcmp(action, "exit") == 0) {
        log_warning("fault point '%s': exiting", name);
        _exit(70);
    } else if (strcmp(action, "fail") == 0) {
        log_warning("fault point '%s': failing", name);
        return -EIO;
    }
    log_warning("fault point '%s': unknown action '%s', ignoring", name, action);
    return 0;
}

#endif
