#pragma once
/*
 * A sandbox's traffic access token (E2B `trafficAccessToken`, checked by the
 * ingress in `e2b-traffic-access-token` on every port but envd's when the
 * sandbox was created with network.allowPublicTraffic: false).
 *
 * Derived, not stored: HMAC-SHA256 keyed by the sandbox's envd access token
 * over a fixed label, as TRAFFIC_TOKEN_LEN hex characters. So it is
 * protected at rest exactly as the envd token is (docs/security.md), needs
 * no column of its own, and the one-way derivation means a traffic token
 * handed to a browser or a web app's users does not reveal the envd token
 * (which runs commands); the envd token's holder can compute it anyway.
 */
#include <stddef.h>

#define TRAFFIC_TOKEN_LEN 32

/* Writes the token (TRAFFIC_TOKEN_LEN + 1 bytes with the NUL). -EINVAL for an empty envd token. */
int traffic_token_derive(const char *envd_access_token, char out[TRAFFIC_TOKEN_LEN + 1]);
