/* Unix listener set-up and address parsing; see socket-util.h. */
#include "basic/socket-util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/macro.h"
#include "basic/parse-util.h"

int socket_listen_unix(const char *path, mode_t mode)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char dir[PATH_MAX];
    int fd, r;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        (void)mkdir_p(dir, 0755);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -errno;
    }
    (void)unlink(path);
    mode_t old = umask(0777);
    r = NERRNO(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
    umask(old);
    if (r >= 0) {
        r = NERRNO(chmod(path, mode));
    }
    if (r >= 0) {
        r = NERRNO(listen(fd, 128));
    }
    if (r < 0) {
        close_safe(fd);
        return r;
    }
    return fd;
}

int socket_parse_ip_port(const char *s, char *ip, size_t n, uint16_t *ret_port)
{
    const char *colon = strrchr(s, ':');
    uint32_t p;

    if (!colon || colon == s || (size_t)(colon - s) >= n || parse_u32(colon + 1, &p) < 0 ||
        p > 65535) {
        return -EINVAL;
    }
    snprintf(ip, n, "%.*s", (int)(colon - s), s);
    *ret_port = (uint16_t)p;
    return 0;
}
