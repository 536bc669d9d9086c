#pragma once
/*
 * Guest trust of the deployment's egress CA (issue 9): space-gw terminates
 * the guest's TLS with leaves from that CA, so the guest's clients must
 * trust it. The node sends the CA's PEM as /init's "caBundle"; we install it
 * in the Debian trust store (the file update-ca-certificates keeps, and the
 * bundle every OpenSSL/GnuTLS client reads) and point the variables that
 * Python, pip, curl and Node read at it.
 */
#include <stddef.h>

#include <jansson.h>

/* Largest caBundle /init takes: a CA chain is a few KiB; this is not a place for data. */
#define TRUST_MAX_BUNDLE (64u * 1024)

/* Paths under the trust root ("" in the guest; a test directory in host test mode). */
#define TRUST_CERT_PATH "/usr/local/share/ca-certificates/space-egress.crt"
#define TRUST_BUNDLE_PATH "/etc/ssl/certs/ca-certificates.crt"

/*
 * Checks that pem (len bytes, no NUL needed) is one or more PEM CERTIFICATE
 * blocks and nothing else but whitespace: each block's body is base64 that
 * decodes to a DER SEQUENCE. Returns 0, -E2BIG past TRUST_MAX_BUNDLE, or
 * -EBADMSG (with *why set to a static reason).
 */
int trust_check_bundle(const char *pem, size_t len, const char **why);

/*
 * Writes the checked pem to root TRUST_CERT_PATH and puts it in root
 * TRUST_BUNDLE_PATH between marker lines, replacing the block an earlier
 * call wrote (so repeated /init adds it once; a new CA replaces the old).
 * Both files 0644, written atomically. Returns 0 or a negative errno.
 */
int trust_install(const char *root, const char *pem, size_t len);

/*
 * Sets SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT, CURL_CA_BUNDLE (the
 * system bundle) and NODE_EXTRA_CA_CERTS (the space certificate) in env
 * unless it has them already (the user's envVars win). 0 or -ENOMEM.
 */
int trust_env_defaults(const char *root, json_t *env);
