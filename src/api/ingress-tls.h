#pragma once
/*
 * The TLS server context of the ingress (ingress.h, e2b-compat.md 11):
 * TLS 1.2 or newer, no renegotiation, HTTP/1.1 only (no ALPN), and either
 * the operator's certificate chain and key (production: a wildcard
 * certificate for *.{domain}) or a leaf for "*.{domain}" and "{domain}"
 * minted by the deployment CA in the data dir (shared/ca.h).
 */
struct ssl_ctx_st;

/*
 * cert_file and key_file both set: those PEM files (the chain, leaf first);
 * both NULL: the deployment CA in data_dir, created if absent, whose
 * certificate's path goes to *ret_ca_path (malloc'ed; NULL otherwise).
 * Returns 0, -EINVAL (one of the two files, unreadable or mismatched
 * files, an invalid domain), -ENOMEM or -EIO. Errors are logged.
 */
int ingress_tls_ctx_new(const char *data_dir, const char *domain, const char *cert_file,
                        const char *key_file, struct ssl_ctx_st **ret, char **ret_ca_path);
