/* getrandom-backed helpers; ids use rejection sampling so each char is uniform. */
#include "basic/random-util.h"

#include <errno.h>
#include <stdint.h>
#include <sys/random.h>

int random_bytes(void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = getrandom(p, n, 0);
        if (k < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int random_id(char *out, size_t n)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    size_t i = 0;
    while (i < n) {
        uint8_t b[32];
        int r = random_bytes(b, sizeof(b));
        if (r < 0) {
            return r;
        }
        for (size_t j = 0; j < sizeof(b) && i < n; j++) {
            if (b[j] < 252) { /* 252 = 7 * 36: keeps the distribution uniform */
                out[i++] = alphabet[b[j] % 36];
            }
        }
    }
    out[n] = '\0';
    return 0;
}

int random_hex(char *out, size_t nbytes)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t b[64];
    int r;

    if (nbytes > sizeof(b)) {
        return -EINVAL;
    }
    r = random_bytes(b, nbytes);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[2 * nbytes] = '\0';
    return 0;
}
