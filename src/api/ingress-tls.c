/* The ingress' TLS server context (ingress-tls.h). */
#include "api/ingress-tls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "basic/log.h"
#include "basic/strbuf.h"
#include "shared/ca.h"

static int log_ssl_error(const char *what, const char *arg)
{
    char buf[256] = "";
    unsigned long e = ERR_peek_last_error();

    if (e) {
        ERR_error_string_n(e, buf, sizeof(buf));
    }
    ERR_clear_error();
    return log_error_errno(-EINVAL, "%s '%s': %s", what, arg, buf[0] ? buf : "failed");
}

static int use_files(SSL_CTX *ctx, const char *cert_file, const char *key_file)
{
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
        return log_ssl_error("cannot load the ingress certificate chain", cert_file);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        return log_ssl_error("cannot load the ingress key", key_file);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        return log_ssl_error("the ingress key does not match the certificate", cert_file);
    }
    return 0;
}

static int use_ca(SSL_CTX *ctx, const char *data_dir, const char *domain, char **ret_ca_path)
{
    struct strbuf wildcard = STRBUF_INIT;
    struct ca *ca = NULL;
    X509 *cert = NULL;
    EVP_PKEY *key = NULL;
    int r;

    r = ca_open(data_dir, &ca);
    if (r < 0) {
        return log_error_errno(r, "cannot open the deployment CA in '%s': %m", data_dir);
    }
    if (strbuf_appendf(&wildcard, "*.%s", domain) < 0) {
        r = -ENOMEM;
        goto out;
    }
    const char *names[] = { wildcard.buf, domain };
    r = ca_issue_leaf(ca, names, 2, &cert, &key);
    if (r < 0) {
        log_error_errno(r, "cannot mint a certificate for '%s': %m", wildcard.buf);
        goto out;
    }
    if (SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1) {
        r = log_ssl_error("cannot use the minted certificate for", wildcard.buf);
        goto out;
    }
    *ret_ca_path = strdup(ca_cert_path(ca));
    r = *ret_ca_path ? 0 : -ENOMEM;
out:
    X509_free(cert);
    EVP_PKEY_free(key);
    strbuf_release(&wildcard);
    ca_free(ca);
    return r;
}

int ingress_tls_ctx_new(const char *data_dir, const char *domain, const char *cert_file,
                        const char *key_file, SSL_CTX **ret, char **ret_ca_path)
{
    SSL_CTX *ctx;
    int r;

    *ret_ca_path = NULL;
    if (!cert_file != !key_file) {
        return log_error_errno(-EINVAL, "--ingress-cert and --ingress-key go together");
    }
    ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        return -ENOMEM;
    }
    /* TLS 1.2+; renegotiation is a client-driven CPU sink we do not need. */
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        SSL_CTX_free(ctx);
        return -EIO;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    r = cert_file ? use_files(ctx, cert_file, key_file)
                  : use_ca(ctx, data_dir, domain, ret_ca_path);
    if (r < 0) {
        SSL_CTX_free(ctx);
        return r;
    }
    *ret = ctx;
    return 0;
}
