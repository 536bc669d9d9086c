/* See traffic-token.h. */
#include "api/traffic-token.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

/* Changing the label changes every sandbox's token: it is part of the format. */
static const char LABEL[] = "space traffic access token v1";

int traffic_token_derive(const char *envd_access_token, char out[TRAFFIC_TOKEN_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    if (!envd_access_token || !*envd_access_token) {
        return -EINVAL;
    }
    if (!HMAC(EVP_sha256(), envd_access_token, (int)strlen(envd_access_token),
              (const unsigned char *)LABEL, sizeof(LABEL) - 1, mac, &n) ||
        n * 2 < TRAFFIC_TOKEN_LEN) {
        return -EIO;
    }
    for (size_t i = 0; i < TRAFFIC_TOKEN_LEN / 2; i++) {
        out[2 * i] = hex[mac[i] >> 4];
        out[2 * i + 1] = hex[mac[i] & 0xf];
    }
    out[TRAFFIC_TOKEN_LEN] = '\0';
    OPENSSL_cleanse(mac, sizeof(mac));
    return 0;
}
