#pragma once
/*
 * The deployment CA: one self-signed EC P-256 certificate authority per data
 * directory, which mints short-lived leaf certificates for names we serve
 * (the ingress' "*.{domain}" and "{domain}"; the egress gateway's per-SNI
 * leaves). Clients trust it by file (NODE_EXTRA_CA_CERTS, SSL_CERT_FILE,
 * REQUESTS_CA_BUNDLE), so nothing of the host's trust store changes.
 *
 *   <dir>/ca.key  PEM PKCS#8 private key, 0600, created with O_EXCL
 *   <dir>/ca.crt  PEM certificate, 0644, valid CA_VALID_DAYS
 *
 * Created on the first ca_open() of a directory, loaded afterwards (a key
 * without a certificate, or one that does not match it, is an error, never
 * silently replaced: clients may already trust the old one). Leaves are
 * cached by their name list (at most CA_CACHE_MAX, least recently used
 * out) and re-minted when less than a day of validity is left.
 *
 * Not thread-safe: one owner (a loop thread) per struct ca.
 */
#include <stddef.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#define CA_VALID_DAYS 3650
#define CA_LEAF_VALID_DAYS 90
#define CA_CACHE_MAX 1024
#define CA_NAMES_MAX 16
#define CA_KEY_FILE "ca.key"
#define CA_CERT_FILE "ca.crt"

struct ca;

/*
 * Opens (creating when absent) the CA in dir (which must exist). Returns 0,
 * -EINVAL (unreadable or mismatched files), -ENOMEM, or -errno.
 */
int ca_open(const char *dir, struct ca **ret);
/* The same with other file names in dir (the egress gateway's next CA, ca-set.h). */
int ca_open_files(const char *dir, const char *key_file, const char *cert_file, struct ca **ret);

/* The CA certificate's path, for clients to trust (borrowed). */
const char *ca_cert_path(const struct ca *ca);
/* The CA certificate (borrowed; X509_up_ref() to keep it). */
X509 *ca_cert(const struct ca *ca);

/*
 * A leaf for names[0..n) (DNS names, "*." wildcards allowed as the first
 * label, or IPv4/IPv6 literals): subjectAltName lists them all, the
 * subject CN is names[0], extendedKeyUsage serverAuth, signed by the CA.
 * *cert and *key are new references the caller frees (X509_free,
 * EVP_PKEY_free). Returns 0, -EINVAL (no names, too many, or one that is
 * not a host name), -ENOMEM or -EIO (OpenSSL failed).
 */
int ca_issue_leaf(struct ca *ca, const char *const names[], size_t n, X509 **cert, EVP_PKEY **key);

/* Leaves in the cache (tests). */
size_t ca_cache_size(const struct ca *ca);

/* NULL-safe; returns NULL. */
struct ca *ca_free(struct ca *ca);
