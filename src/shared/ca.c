/*
 * The deployment CA (ca.h): key and certificate files in a data directory,
 * and a small LRU cache of the leaves it minted.
 */
#include "shared/ca.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/strbuf.h"

#define LEAF_RENEW_SEC (24 * 3600) /* re-mint a cached leaf with less than this left */
#define CA_RENEW_LEEWAY_SEC 300    /* notBefore this far back: clients with a slow clock */

struct leaf {
    struct leaf *prev, *next; /* most recently used first */
    char *key;                /* the names, each ended by '\n' */
    X509 *cert;
    EVP_PKEY *pkey;
    time_t not_after;
};

struct ca {
    char *cert_path;
    X509 *cert;
    EVP_PKEY *key;
    struct leaf *leaves, *last;
    size_t n_leaves;
};

static EVP_PKEY *new_ec_key(void)
{
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

/* A random positive 159-bit serial (RFC 5280: at most 20 octets, unique per issuer). */
static int set_serial(X509 *x)
{
    unsigned char buf[20];
    BIGNUM *bn = NULL;
    int r = -EIO;

    if (RAND_bytes(buf, sizeof(buf)) != 1) {
        return -EIO;
    }
    buf[0] &= 0x7f;
    bn = BN_bin2bn(buf, sizeof(buf), NULL);
    if (bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x))) {
        r = 0;
    }
    BN_free(bn);
    return r;
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509_EXTENSION *ext;

    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext) {
        return -EIO;
    }
    int ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -EIO;
}

/* Version 3, random serial, validity [now - leeway, now + days], subject CN. */
static X509 *new_cert(EVP_PKEY *pub, const char *cn, unsigned days)
{
    X509 *x = X509_new();
    X509_NAME *name;

    if (!x || X509_set_version(x, 2) != 1 || set_serial(x) < 0 ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -CA_RENEW_LEEWAY_SEC) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), (long)days * 24 * 3600) ||
        X509_set_pubkey(x, pub) != 1) {
        X509_free(x);
        return NULL;
    }
    name = X509_get_subject_name(x);
    if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)"space", -1, -1,
                                   0) != 1 ||
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                   0) != 1) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static int create_ca(struct ca *ca, const char *key_path)
{
    EVP_PKEY *key = new_ec_key();
    X509 *x = NULL;
    FILE *f = NULL;
    int fd = -EBADF, r = -EIO;

    if (!key) {
        return -EIO;
    }
    x = new_cert(key, "space deployment CA", CA_VALID_DAYS);
    if (!x || X509_set_issuer_name(x, X509_get_subject_name(x)) != 1 ||
        add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
        add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
        add_ext(x, x, NID_subject_key_identifier, "hash") < 0 ||
        X509_sign(x, key, EVP_sha256()) <= 0) {
        goto out;
    }
    /* The key first, exclusively: two processes racing here must not mix key and cert. */
    fd = open(key_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = -errno;
        goto out;
    }
    f = fdopen(fd, "w");
    if (!f) {
        r = -errno;
        goto out;
    }
    fd = -EBADF;
    if (PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) != 1 || fflush(f) != 0 ||
        fsync(fileno(f)) < 0) {
        r = -EIO;
        goto out;
    }
    fclose(f);
    f = NULL;

    int cfd = open(ca->cert_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (cfd < 0) {
        r = -errno;
        goto out;
    }
    (void)fchmod(cfd, 0644); /* whatever the umask */
    f = fdopen(cfd, "w");
    if (!f) {
        r = -errno;
        close_safe(cfd);
        goto out;
    }
    if (PEM_write_X509(f, x) != 1 || fflush(f) != 0 || fsync(fileno(f)) < 0) {
        r = -EIO;
        goto out;
    }
    ca->key = key;
    ca->cert = x;
    key = NULL;
    x = NULL;
    r = 0;
    log_info("created the deployment CA '%s'", ca->cert_path);
out:
    if (f) {
        fclose(f);
    }
    close_safe(fd);
    if (r < 0 && r != -EEXIST) {
        (void)unlink(key_path);
    }
    EVP_PKEY_free(key);
    X509_free(x);
    return r;
}

static int load_ca(struct ca *ca, const char *key_path)
{
    FILE *f = fopen(key_path, "re");
    struct stat st;

    if (!f) {
        return -errno;
    }
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0) {
        log_warning("'%s' is readable by others; it should be 0600", key_path);
    }
    ca->key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    f = fopen(ca->cert_path, "re");
    if (!f) {
        return log_error_errno(-errno, "cannot open '%s' (the CA key exists): %m", ca->cert_path);
    }
    ca->cert = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!ca->key || !ca->cert) {
        return log_error_errno(-EINVAL, "cannot read the deployment CA in '%s'", key_path);
    }
    if (X509_check_private_key(ca->cert, ca->key) != 1) {
        return log_error_errno(-EINVAL, "'%s' does not match '%s'", key_path, ca->cert_path);
    }
    return 0;
}

int ca_open_files(const char *dir, const char *key_file, const char *cert_file, struct ca **ret)
{
    struct ca *ca = calloc(1, sizeof(*ca));
    struct strbuf key_path = STRBUF_INIT, cert_path = STRBUF_INIT;
    int r;

    if (!ca || strbuf_appendf(&key_path, "%s/%s", dir, key_file) < 0 ||
        strbuf_appendf(&cert_path, "%s/%s", dir, cert_file) < 0) {
        r = -ENOMEM;
        goto fail;
    }
    ca->cert_path = strbuf_detach(&cert_path, NULL);
    r = access(key_path.buf, F_OK) == 0 ? load_ca(ca, key_path.buf) : create_ca(ca, key_path.buf);
    if (r == -EEXIST) {
        r = load_ca(ca, key_path.buf); /* someone else created it just now */
    }
    if (r < 0) {
        goto fail;
    }
    strbuf_release(&key_path);
    *ret = ca;
    return 0;
fail:
    strbuf_release(&key_path);
    strbuf_release(&cert_path);
    ca_free(ca);
    return r;
}

int ca_open(const char *dir, struct ca **ret)
{
    return ca_open_files(dir, CA_KEY_FILE, CA_CERT_FILE, ret);
}

const char *ca_cert_path(const struct ca *ca)
{
    return ca->cert_path;
}

X509 *ca_cert(const struct ca *ca)
{
    return ca->cert;
}

size_t ca_cache_size(const struct ca *ca)
{
    return ca->n_leaves;
}

static bool name_valid(const char *s)
{
    size_t n = strlen(s), label = 0;

    if (n == 0 || n > 253) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '.') {
            if (label == 0) {
                return false;
            }
            label = 0;
            continue;
        }
        if (ch == '*') {
            /* Only a whole first label, with at least two labels after it. */
            if (i != 0 || n < 3 || s[1] != '.') {
                return false;
            }
            label++;
            continue;
        }
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-')) {
            return false;
        }
        if (++label > 63) {
            return false;
        }
    }
    return label > 0;
}

static bool is_ip(const char *s)
{
    ASN1_OCTET_STRING *ip = a2i_IPADDRESS(s);
    ASN1_OCTET_STRING_free(ip);
    return ip != NULL;
}

static void leaf_unlink(struct ca *ca, struct leaf *l)
{
    if (l->prev) {
        l->prev->next = l->next;
    } else {
        ca->leaves = l->next;
    }
    if (l->next) {
        l->next->prev = l->prev;
    } else {
        ca->last = l->prev;
    }
    l->prev = l->next = NULL;
    ca->n_leaves--;
}

static void leaf_push_front(struct ca *ca, struct leaf *l)
{
    l->next = ca->leaves;
    if (ca->leaves) {
        ca->leaves->prev = l;
    } else {
        ca->last = l;
    }
    ca->leaves = l;
    ca->n_leaves++;
}

static void leaf_free(struct leaf *l)
{
    X509_free(l->cert);
    EVP_PKEY_free(l->pkey);
    free(l->key);
    free(l);
}

static int mint(struct ca *ca, const char *const names[], size_t n, X509 **ret_cert,
                EVP_PKEY **ret_key)
{
    struct strbuf san = STRBUF_INIT;
    EVP_PKEY *key = new_ec_key();
    X509 *x = NULL;
    int r = -EIO;

    if (!key) {
        return -EIO;
    }
    for (size_t i = 0; i < n; i++) {
        if (strbuf_appendf(&san, "%s%s:%s", i ? "," : "", is_ip(names[i]) ? "IP" : "DNS",
                           names[i]) < 0) {
            r = -ENOMEM;
            goto out;
        }
    }
    x = new_cert(key, names[0], CA_LEAF_VALID_DAYS);
    if (!x || X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) != 1 ||
        add_ext(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
        add_ext(x, ca->cert, NID_key_usage, "critical,digitalSignature") < 0 ||
        add_ext(x, ca->cert, NID_ext_key_usage, "serverAuth") < 0 ||
        add_ext(x, ca->cert, NID_authority_key_identifier, "keyid:always") < 0 ||
        add_ext(x, ca->cert, NID_subject_alt_name, san.buf) < 0 ||
        X509_sign(x, ca->key, EVP_sha256()) <= 0) {
        goto out;
    }
    *ret_cert = x;
    *ret_key = key;
    x = NULL;
    key = NULL;
    r = 0;
out:
    strbuf_release(&san);
    X509_free(x);
    EVP_PKEY_free(key);
    return r;
}

int ca_issue_leaf(struct ca *ca, const char *const names[], size_t n, X509 **cert, EVP_PKEY **key)
{
    struct strbuf k = STRBUF_INIT;
    struct leaf *l;
    time_t now = time(NULL);
    int r;

    if (n == 0 || n > CA_NAMES_MAX) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!names[i] || (!is_ip(names[i]) && !name_valid(names[i]))) {
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (strbuf_appendf(&k, "%s\n", names[i]) < 0) {
            strbuf_release(&k);
            return -ENOMEM;
        }
    }
    for (l = ca->leaves; l; l = l->next) {
        if (strcmp(l->key, k.buf) == 0) {
            break;
        }
    }
    if (l && l->not_after - now < LEAF_RENEW_SEC) {
        leaf_unlink(ca, l);
        leaf_free(l);
        l = NULL;
    }
    if (l) {
        leaf_unlink(ca, l);
        leaf_push_front(ca, l);
        strbuf_release(&k);
    } else {
        l = calloc(1, sizeof(*l));
        if (!l) {
            strbuf_release(&k);
            return -ENOMEM;
        }
        l->key = strbuf_detach(&k, NULL);
        r = mint(ca, names, n, &l->cert, &l->pkey);
        if (r < 0) {
            leaf_free(l);
            return r;
        }
        l->not_after = now + (time_t)CA_LEAF_VALID_DAYS * 24 * 3600;
        leaf_push_front(ca, l);
        while (ca->n_leaves > CA_CACHE_MAX) {
            struct leaf *old = ca->last;
            leaf_unlink(ca, old);
            leaf_free(old);
        }
    }
    X509_up_ref(l->cert);
    EVP_PKEY_up_ref(l->pkey);
    *cert = l->cert;
    *key = l->pkey;
    return 0;
}

struct ca *ca_free(struct ca *ca)
{
    if (!ca) {
        return NULL;
    }
    while (ca->leaves) {
        struct leaf *l = ca->leaves;
        leaf_unlink(ca, l);
        leaf_free(l);
    }
    X509_free(ca->cert);
    EVP_PKEY_free(ca->key);
    free(ca->cert_path);
    free(ca);
    return NULL;
}
