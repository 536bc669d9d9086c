#pragma once
/*
 * The sandbox traffic proxy (architecture.md "Ingress", e2b-compat.md 4):
 * one TCP listener on space-api's loop. Each client connection carries one
 * HTTP/1.x request, routed by its Host "<port>-<sandboxID>.<domain>" or by
 * the E2b-Sandbox-Id / E2b-Sandbox-Port headers, and forwarded through the
 * tunnel socket of the sandbox's node (node/tunnel.h) to that port in the
 * guest. Bodies stream both ways, never buffered beyond fixed watermarks.
 *
 * Deviation from E2B's proxy: one request per connection. The head we
 * forward says "Connection: close" and so does the response head we pass
 * back (except for 101 Switching Protocols, after which the connection is a
 * raw tunnel), so clients open a fresh connection, and with it a fresh
 * tunnel, for every request. Nothing after the first request's body reaches
 * the sandbox.
 *
 * Port ENVD_PORT (shared/envd.h) is envd: when the target has an access token, requests must
 * carry it in X-Access-Token, except GET /health and /files with a
 * "signature" query parameter, which envd checks itself (e2b-compat.md
 * 5.1). envd's internal routes (/init and the pause helpers) are refused.
 * Every other port of a target with private_traffic demands its traffic
 * access token in e2b-traffic-access-token (403 otherwise, E2B's bodies).
 *
 * TLS (ingress_new_tls()): the same proxy behind TLS 1.2+ termination in
 * the api (libevent's bufferevent_openssl), for E2B SDKs in their default
 * mode (https://{port}-{id}.{domain}, e2b-compat.md 11). The handshake's
 * SNI must be {domain} or a name under it. After a 101 the upgraded
 * connection is copied through the bufferevents (the shared relay splices
 * sockets, and TLS records cannot be spliced).
 *
 * Loop thread only; not thread-safe.
 */
#include <stdbool.h>
#include <stdint.h>

struct event_base;
struct ingress;

/* Where a sandbox's traffic goes, as the control plane knows it. */
struct ingress_target {
    char tunnel_socket[108]; /* the node's tunnel socket (a sockaddr_un path) */
    char access_token[128];  /* envd's access token when has_token; NUL-terminated */
    bool has_token;
    /* Every port but envd's demands traffic_token in e2b-traffic-access-token (E2B
     * network.allowPublicTraffic: false); an empty traffic_token matches nothing. */
    bool private_traffic;
    char traffic_token[128];
};

/*
 * Resolves a (validated) sandbox id, once per connection, on the loop
 * thread; it should not block for long. Returns 0 with *ret filled,
 * -ENOENT for an unknown or killed sandbox, -EAGAIN for one that exists but
 * is not running yet (creating), -EHOSTDOWN for one that is paused or
 * suspended (or on its way there or back); any other negative errno is a
 * lookup failure. Both not-found cases answer 502 "The sandbox was not
 * found"; a paused one gets E2B's proxy answer: 409 {"sandboxId", "message":
 * "The sandbox is paused", "code": 409, "canAutoResume": false}. -EINPROGRESS: paused, and being
 * woken (auto-resume): the request is held, its lookup repeated every INGRESS_HOLD_POLL_MSEC until
 * it answers otherwise, at most INGRESS_HOLD_MAX held per sandbox (503 beyond) and INGRESS_HOLD_SEC
 * each (then 504 "The sandbox did not resume in time").
 */
typedef int (*ingress_lookup_fn)(void *userdata, const char *sandbox_id,
                                 struct ingress_target *ret);

/*
 * Listens on listen_ip:port (IPv4 or IPv6 literal; port 0 picks a free
 * one) and serves on base. domain is copied; lookup and userdata are
 * borrowed until ingress_free(). Returns 0, -EINVAL, or a negative errno
 * from socket/bind/listen.
 */
int ingress_new(struct event_base *base, const char *listen_ip, uint16_t port, const char *domain,
                ingress_lookup_fn lookup, void *userdata, struct ingress **ret);
/*
 * As ingress_new(), serving TLS with tls (a server context with its
 * certificate and key set; referenced, and its servername callback set to
 * this ingress' domain check, so one context serves one ingress).
 */
struct ssl_ctx_st;
int ingress_new_tls(struct event_base *base, const char *listen_ip, uint16_t port,
                    const char *domain, struct ssl_ctx_st *tls, ingress_lookup_fn lookup,
                    void *userdata, struct ingress **ret);
/* The bound port. */
uint16_t ingress_port(const struct ingress *ig);
/* Open client connections. */
unsigned ingress_connections(const struct ingress *ig);
/* Closes the listener and every connection at once. NULL-safe; returns NULL. */
struct ingress *ingress_free(struct ingress *ig);
