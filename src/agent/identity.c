/* Re-identification fields of /init (identity.h). */
#include "agent/identity.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "basic/base64.h"
#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/log.h"

static bool hostname_is_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-')) {
            return false;
        }
    }
    return true;
}

static bool machine_id_is_valid(const char *s)
{
    if (strlen(s) != 32) {
        return false;
    }
    for (size_t i = 0; i < 32; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return false;
        }
    }
    /* All zero is "uninitialized" to systemd tools. */
    return strspn(s, "0") != 32;
}

int identity_parse(json_t *msg, struct identity *ret, const char **why)
{
    json_t *h = json_object_get(msg, "hostname");
    json_t *m = json_object_get(msg, "machineId");
    json_t *e = json_object_get(msg, "entropy");

    memset(ret, 0, sizeof(*ret));
    if (h && (!json_is_string(h) || !hostname_is_valid(json_string_value(h)))) {
        *why = "hostname must be 1..63 letters, digits or '-'";
        return -EINVAL;
    }
    if (m && (!json_is_string(m) || !machine_id_is_valid(json_string_value(m)))) {
        *why = "machineId must be 32 lowercase hex digits, not all zero";
        return -EINVAL;
    }
    if (e) {
        const char *b64 = json_string_value(e);
        size_t n = b64 ? strlen(b64) : 0;
        /* Decoded into a buffer big enough for any input this long, then bounded: base64 of
         * 512 bytes is 684 characters, which may also decode to 513. */
        uint8_t tmp[IDENTITY_ENTROPY_MAX + 8]; /* n / 4 * 3 + 3 for n <= 684 */
        long k =
            b64 && n <= base64_encoded_len(IDENTITY_ENTROPY_MAX) ? base64_decode(b64, n, tmp) : -1;
        if (k < IDENTITY_ENTROPY_MIN || k > IDENTITY_ENTROPY_MAX) {
            explicit_bzero(tmp, sizeof(tmp));
            identity_release(ret);
            *why = "entropy must be base64 of 32..512 bytes";
            return -EINVAL;
        }
        memcpy(ret->entropy, tmp, (size_t)k);
        explicit_bzero(tmp, sizeof(tmp));
        ret->entropy_len = (size_t)k;
    }
    ret->hostname = h ? json_string_value(h) : NULL;
    ret->machine_id = m ? json_string_value(m) : NULL;
    return 0;
}

static int add_entropy(const uint8_t *buf, size_t n)
{
    struct rand_pool_info *info = malloc(sizeof(*info) + n);
    int fd = -EBADF, r = 0;

    if (!info) {
        return -ENOMEM;
    }
    info->entropy_count = (int)(n * 8);
    info->buf_size = (int)n;
    memcpy(info->buf, buf, n);
    fd = open("/dev/random", O_WRONLY | O_CLOEXEC);
    /* Mixed in and credited, then the CRNG rekeyed from the pool at once (not at its next
     * scheduled reseed): the very next getrandom() differs between clones. */
    if (fd < 0 || ioctl(fd, RNDADDENTROPY, info) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0) {
        r = -errno;
    }
    explicit_bzero(info, sizeof(*info) + n);
    free(info);
    close_safe(fd);
    return r;
}

/*
 * /etc/hostname and /etc/machine-id are replaced without fsync: on this path (every create,
 * a warm-pool bind included) four journal commits cost tens of ms under TCG, and they buy
 * nothing the node does not already guarantee: a pause keeps the guest's RAM, a suspend and a
 * full snapshot save it (the page cache with these writes in it) beside a disk they describe,
 * a disk snapshot runs `sync` in the guest first (architecture.md "Fast create").
 */
int identity_apply(const struct identity *id)
{
    int r = 0;

    if (id->entropy_len > 0) {
        r = add_entropy(id->entropy, id->entropy_len);
        if (r < 0) {
            log_error_errno(r, "cannot add entropy to the kernel pool: %m");
        }
    }
    if (id->hostname) {
        if (sethostname(id->hostname, strlen(id->hostname)) < 0) {
            log_warning_errno(-errno, "cannot set the hostname, ignoring: %m");
        }
        char line[80];
        snprintf(line, sizeof(line), "%s\n", id->hostname);
        int k = write_file_atomic_nosync("/etc/hostname", line, strlen(line));
        if (k < 0) {
            log_warning_errno(k, "cannot write /etc/hostname, ignoring: %m");
        }
    }
    if (id->machine_id) {
        char line[40];
        snprintf(line, sizeof(line), "%s\n", id->machine_id);
        int k = write_file_atomic_nosync("/etc/machine-id", line, strlen(line));
        if (k < 0) {
            log_warning_errno(k, "cannot write /etc/machine-id, ignoring: %m");
        }
    }
    return r;
}

void identity_release(struct identity *id)
{
    explicit_bzero(id->entropy, sizeof(id->entropy));
    id->entropy_len = 0;
}
