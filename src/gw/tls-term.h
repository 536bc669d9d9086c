#pragma once
/*
 * src/gw/tls-term.h: TLS termination for the egress gateway.
 *
 * The gateway terminates the guest's TLS with a leaf certificate for the
 * SNI it allowed, minted by the egress CA (src/shared/ca.c; the guest
 * trusts that CA through the /init caBundle), reads every request in
 * HTTP/1.1 so it can check each Host, and opens its own TLS connection
 * upstream, verifying the server's chain against the system store plus
 * --upstream-ca and its name against the same SNI.
 *
 * During a rotation (ca-set.h) the leaves come from the CA the phase
 * names, and the bundle guests are given holds both.
 *
 * The egress CA lives in its own directory (space-gw --data-dir,
 * `<data>/gw` under `space up`), never the ingress CA's: the two keys
 * have different readers and different blast radii.
 *
 * SSL_CTXs are built once and cached: one client context for every
 * upstream connection, and one server context per leaf (at most
 * TLS_TERM_CTX_MAX, least recently used out; re-minted when the leaf has
 * less than a day left), so a connection costs SSL_new() and the
 * handshake, never a signature by the CA.
 *
 * Not thread-safe: one owner (the gateway's loop thread) per struct
 * tls_term. The SSL objects returned are independent of each other and
 * may outlive nothing: free them (SSL_free, or a bufferevent_openssl with
 * BEV_OPT_CLOSE_ON_FREE) before tls_term_free().
 */
#include <stddef.h>

#include <openssl/ssl.h>

#include "gw/ca-set.h"

#define TLS_TERM_CTX_MAX 1024      /* cached server contexts (one per SNI) */
#define TLS_TERM_SESSIONS_MAX 1024 /* cached upstream sessions (one per SNI) */

/* the egress CA (src/shared/ca.c in --data-dir) + an upstream trust store */
struct tls_term;

/*
 * Opens (creating when absent) the egress CA in ca_dir: the directory is
 * created 0700 when missing (its parent must exist), then ca_open().
 * upstream_ca_file: a PEM bundle trusted for upstream TLS besides the
 * system store (NULL = the system store only). Returns 0, or a negative
 * errno (logged): -EINVAL for an unreadable CA or bundle, -ENOMEM, -EIO.
 */
int tls_term_new(const char *ca_dir, const char *upstream_ca_file /* NULL ok */,
                 struct tls_term **ret);

/* The egress CA bundle as PEM (ca-set.h: the current certificate, and the
 * next one during a rotation; NUL-terminated, borrowed until the next
 * tls_term_ca_step()): the gw-proto caCert, the guest's caBundle. */
const char *tls_term_ca_pem(const struct tls_term *t);

/* The CA set (phase, fingerprints), borrowed. */
const struct ca_set *tls_term_ca_set(const struct tls_term *t);

/*
 * A rotation step (ca_set_step(): 1 changed, 0 a repeat, negative errno
 * with err set). A change flushes the cached server contexts, so the next
 * handshake of every name gets a leaf of the signer the phase names.
 */
int tls_term_ca_step(struct tls_term *t, enum ca_step step, char *err);

/*
 * Guest leg: a new server-side SSL (accept state set) whose certificate is
 * a leaf for sni alone (a normalised host name, as tls_hello gives it;
 * not an IP literal). TLS 1.2+, no renegotiation. ALPN: http/1.1 is
 * selected when offered; a client that offers ALPN without http/1.1 (h2
 * only) fails the handshake with a no_application_protocol alert, so the
 * gateway sees every request as HTTP/1.1. A client without ALPN gets none
 * (HTTP/1.1 is then implied). Returns NULL (logged) on an invalid name or
 * when minting fails. The caller frees it.
 */
SSL *tls_term_server(struct tls_term *t, const char *sni);

/*
 * Upstream leg: a new client-side SSL (connect state set) sending sni as
 * server_name, offering ALPN http/1.1 only, TLS 1.2+, verifying the chain
 * against the system store plus upstream_ca_file and the certificate's
 * name against sni (X509_VERIFY_PARAM_set1_host, no partial wildcards).
 * A verification failure fails the handshake; SSL_get_verify_result()
 * then says why (X509_verify_cert_error_string() for the audit reason).
 * The newest session verified for sni is offered for resumption (one per
 * name, at most TLS_TERM_SESSIONS_MAX names).
 * Returns NULL (logged) on an invalid name or OOM. The caller frees it.
 */
SSL *tls_term_client(struct tls_term *t, const char *sni);

/* Server contexts in the cache (tests). */
size_t tls_term_ctx_cache_size(const struct tls_term *t);

/* NULL-safe; returns NULL. Frees the cached contexts and the CA. */
struct tls_term *tls_term_free(struct tls_term *t);
