/*
 * libFuzzer target for the ClientHello parser (tls-hello.h). Beyond "no
 * crash": the result is one of the four documented; a parsed SNI is a
 * normalised host name (a fixed point of policy_normalize_name()) that is
 * not an IP literal; a prefix of a valid prefix is a valid prefix; and
 * TLS_HELLO_MAX bytes always decide. Build with -Dfuzzers=true and clang.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "gw/policy.h"
#include "gw/tls-hello.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tls_hello h, h2;
    char norm[POLICY_NAME_MAX + 1];
    int r = tls_hello_parse(data, size, &h);

    assert(r == 0 || r == -EAGAIN || r == -EBADMSG || r == -E2BIG);
    if (size >= TLS_HELLO_MAX) {
        assert(r != -EAGAIN);
    }
    if (r == 0) {
        if (h.has_sni) {
            assert(strlen(h.sni) <= POLICY_NAME_MAX);
            assert(policy_normalize_name(h.sni, norm) == 0 && strcmp(norm, h.sni) == 0);
            assert(!strchr(h.sni, ':'));
        } else {
            assert(h.sni[0] == '\0');
        }
        /* Parsing is a function of the bytes. */
        assert(tls_hello_parse(data, size, &h2) == 0 && memcmp(&h, &h2, sizeof(h)) == 0);
    }
    if (r == -EAGAIN && size > 0) {
        assert(tls_hello_parse(data, size - 1, &h2) == -EAGAIN);
    }
    if (r == -EBADMSG || r == -E2BIG) {
        /* More bytes cannot repair what is already wrong. */
        uint8_t more[TLS_HELLO_MAX + 1];
        size_t n = size < TLS_HELLO_MAX ? size : TLS_HELLO_MAX;

        memcpy(more, data, n);
        more[n] = 0x16;
        r = tls_hello_parse(more, n + 1, &h2);
        assert(n < size || r == -EBADMSG || r == -E2BIG);
    }
    return 0;
}
