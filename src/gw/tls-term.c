/*
 * TLS termination for the egress gateway (tls-term.h).
 *
 * Per connection the gateway already knows the SNI (tls-hello.h parsed it
 * before anything was dialled), so the server side needs no SNI callback:
 * each name gets its own SSL_CTX holding its leaf, built once, and a
 * connection is SSL_new() on it. A hash table finds the context in O(1)
 * (a gateway sees the same few names over and over), an LRU list bounds
 * them. One client SSL_CTX serves every upstream connection: the trust
 * store (system + --upstream-ca) is loaded once, and the name to verify is
 * set per SSL; the newest verified session per name is kept, so repeated
 * connections to one name resume rather than verify a chain each time.
 */
#include "gw/tls-term.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "gw/policy.h"
#include "gw/ca-set.h"
#include "shared/ca.h"

#define CTX_BUCKETS 2048 /* > TLS_TERM_CTX_MAX: chains stay short */
/* Rebuild a context whose leaf has less than this left. Shorter than the
 * CA's own renewal window (a day), so the CA mints a fresh leaf then. */
#define CTX_RENEW_SEC (12 * 3600)

static const unsigned char alpn_http11[] = "\x08http/1.1";
#define ALPN_HTTP11_LEN 9

/*
 * A name -> value cache: hash table for the lookup, LRU list for the
 * bound. Two of them: the server contexts (one per leaf) and the upstream
 * sessions (one per name, for resumption).
 */
struct entry {
    struct entry *prev, *next; /* LRU, most recent first */
    struct entry *hnext;       /* bucket chain */
    uint32_t hash;
    char *name;
    SSL_CTX *ctx;      /* server cache */
    time_t not_after;  /* server cache: the leaf's expiry */
    SSL_SESSION *sess; /* session cache */
};

struct cache {
    struct entry *buckets[CTX_BUCKETS];
    struct entry *first, *last;
    size_t n, max;
};

struct tls_term {
    struct ca_set *cas; /* the current CA, and the next one during a rotation */
    SSL_CTX *client;
    struct cache server_ctxs; /* one SSL_CTX per SNI leaf */
    struct cache sessions;    /* the newest upstream session per name */
};

static int log_ssl(int r, const char *what, const char *arg)
{
    char buf[256] = "";
    unsigned long e = ERR_peek_last_error();

    if (e) {
        ERR_error_string_n(e, buf, sizeof(buf));
    }
    ERR_clear_error();
    return log_error_errno(r, "%s '%s': %s", what, arg, buf[0] ? buf : "failed");
}

/* FNV-1a: names are short and come from our own normaliser. */
static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;

    for (; *s; s++) {
        h = (h ^ (uint8_t)*s) * 16777619u;
    }
    return h;
}

/*
 * The names we terminate: normalised host names (as tls_hello gives
 * them), never addresses (a certificate for an IP would let a name-less
 * connection look named).
 */
static bool sni_ok(const char *sni)
{
    char norm[POLICY_NAME_MAX + 1];
    ASN1_OCTET_STRING *ip;

    if (!sni || policy_normalize_name(sni, norm) < 0 || strcmp(norm, sni) != 0) {
        return false;
    }
    /* Host names allow '_', certificates do not (the CA refuses to mint one). */
    if (strchr(sni, '_')) {
        return false;
    }
    ip = a2i_IPADDRESS(sni);
    ASN1_OCTET_STRING_free(ip);
    return ip == NULL;
}

/*
 * Server ALPN: http/1.1 or nothing. The gateway reads every request as
 * HTTP/1.1 to check its Host; a client that can speak only h2 gets a
 * no_application_protocol alert rather than a protocol we cannot audit.
 */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    unsigned int i = 0;

    while (i < inlen) {
        unsigned int l = in[i];

        if (l == 0 || l > inlen - i - 1) {
            break; /* OpenSSL checked the list; belt and braces */
        }
        if (l == ALPN_HTTP11_LEN - 1 && memcmp(in + i + 1, alpn_http11 + 1, l) == 0) {
            *out = in + i + 1;
            *outlen = (unsigned char)l;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + l;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static void ctx_harden(SSL_CTX *ctx)
{
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    /* TLS 1.3: the same three suites as OpenSSL's default, AES-128-GCM first (10 AES rounds
     * against 14; AES-NI on any host we run on), since every byte is decrypted and encrypted
     * again here. The server context prefers its own order. */
    (void)SSL_CTX_set_ciphersuites(
        ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
}

/* A server context for sni's leaf; *not_after is when the leaf expires. */
static SSL_CTX *server_ctx_new(struct tls_term *t, const char *sni, time_t *not_after)
{
    const char *names[] = { sni };
    X509 *cert = NULL;
    EVP_PKEY *key = NULL;
    SSL_CTX *ctx = NULL;
    struct tm tm;
    int r;

    r = ca_issue_leaf(ca_set_signer(t->cas), names, 1, &cert, &key);
    if (r < 0) {
        log_error_errno(r, "cannot mint an egress certificate for '%s': %m", sni);
        return NULL;
    }
    if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) {
        log_ssl(-EIO, "cannot read the expiry of the leaf for", sni);
        goto fail;
    }
    *not_after = timegm(&tm);
    ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        log_ssl(-ENOMEM, "cannot create a TLS context for", sni);
        goto fail;
    }
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1) {
        log_ssl(-EIO, "cannot set up the TLS context for", sni);
        goto fail;
    }
    ctx_harden(ctx);
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    X509_free(cert);
    EVP_PKEY_free(key);
    return ctx;
fail:
    SSL_CTX_free(ctx);
    X509_free(cert);
    EVP_PKEY_free(key);
    return NULL;
}

static void lru_unlink(struct cache *c, struct entry *e)
{
    if (e->prev) {
        e->prev->next = e->next;
    } else {
        c->first = e->next;
    }
    if (e->next) {
        e->next->prev = e->prev;
    } else {
        c->last = e->prev;
    }
    e->prev = e->next = NULL;
}

static void lru_push_front(struct cache *c, struct entry *e)
{
    e->next = c->first;
    if (c->first) {
        c->first->prev = e;
    } else {
        c->last = e;
    }
    c->first = e;
}

/* Takes e out of c and frees it (live SSLs keep their own references). */
static void cache_drop(struct cache *c, struct entry *e)
{
    struct entry **p = &c->buckets[e->hash % CTX_BUCKETS];

    while (*p != e) {
        p = &(*p)->hnext;
    }
    *p = e->hnext;
    lru_unlink(c, e);
    c->n--;
    SSL_CTX_free(e->ctx);
    SSL_SESSION_free(e->sess);
    free(e->name);
    free(e);
}

/* The entry for name, now the most recently used; NULL when absent. */
static struct entry *cache_find(struct cache *c, const char *name)
{
    uint32_t h = hash_name(name);
    struct entry *e;

    for (e = c->buckets[h % CTX_BUCKETS]; e; e = e->hnext) {
        if (e->hash == h && strcmp(e->name, name) == 0) {
            if (c->first != e) {
                lru_unlink(c, e);
                lru_push_front(c, e);
            }
            return e;
        }
    }
    return NULL;
}

/* A new, empty entry for name (absent from c), added in front; the least recent goes. */
static struct entry *cache_add(struct cache *c, const char *name)
{
    struct entry *e = calloc(1, sizeof(*e));

    if (!e || !(e->name = strdup(name))) {
        free(e);
        return NULL;
    }
    e->hash = hash_name(name);
    e->hnext = c->buckets[e->hash % CTX_BUCKETS];
    c->buckets[e->hash % CTX_BUCKETS] = e;
    lru_push_front(c, e);
    c->n++;
    while (c->n > c->max) {
        cache_drop(c, c->last);
    }
    return e;
}

static void cache_clear(struct cache *c)
{
    while (c->first) {
        cache_drop(c, c->first);
    }
}

static SSL_CTX *server_ctx_get(struct tls_term *t, const char *sni)
{
    struct entry *e = cache_find(&t->server_ctxs, sni);
    SSL_CTX *ctx;
    time_t not_after;

    if (e && e->not_after - time(NULL) >= CTX_RENEW_SEC) {
        return e->ctx;
    }
    if (e) {
        cache_drop(&t->server_ctxs, e);
    }
    ctx = server_ctx_new(t, sni, &not_after);
    if (!ctx) {
        return NULL;
    }
    e = cache_add(&t->server_ctxs, sni);
    if (!e) {
        SSL_CTX_free(ctx);
        log_error_errno(-ENOMEM, "cannot cache a TLS context for '%s': %m", sni);
        return NULL;
    }
    e->ctx = ctx;
    e->not_after = not_after;
    return ctx;
}

SSL *tls_term_server(struct tls_term *t, const char *sni)
{
    SSL_CTX *ctx;
    SSL *ssl;

    if (!sni_ok(sni)) {
        /* debug: the name comes from the guest, which could flood the log */
        log_debug_errno(-EINVAL, "cannot terminate TLS for '%s': not a host name",
                        sni ? sni : "(null)");
        return NULL;
    }
    ctx = server_ctx_get(t, sni);
    if (!ctx) {
        return NULL;
    }
    ssl = SSL_new(ctx);
    if (!ssl) {
        log_ssl(-ENOMEM, "cannot create a TLS connection for", sni);
        return NULL;
    }
    SSL_set_accept_state(ssl);
    return ssl;
}

SSL *tls_term_client(struct tls_term *t, const char *sni)
{
    struct entry *e;
    SSL *ssl;

    if (!sni_ok(sni)) {
        log_debug_errno(-EINVAL, "cannot dial TLS for '%s': not a host name", sni ? sni : "(null)");
        return NULL;
    }
    ssl = SSL_new(t->client);
    if (!ssl) {
        log_ssl(-ENOMEM, "cannot create a TLS connection for", sni);
        return NULL;
    }
    /* The name goes out as SNI and is what the certificate must be for. A
     * wildcard may match one whole label only ("*.example.com"). */
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (SSL_set_tlsext_host_name(ssl, sni) != 1 || SSL_set1_host(ssl, sni) != 1) {
        log_ssl(-ENOMEM, "cannot set the upstream name", sni);
        SSL_free(ssl);
        return NULL;
    }
    /* The cached session, as a copy again: a TLS 1.2 resumption runs on the
     * object it is given, and OpenSSL marks that one not resumable when the
     * connection ends without a close_notify (RFC 5246 no longer asks it to). */
    e = cache_find(&t->sessions, sni);
    if (e && SSL_SESSION_is_resumable(e->sess)) {
        SSL_SESSION *copy = SSL_SESSION_dup(e->sess);

        if (copy) {
            SSL_set_session(ssl, copy); /* a failure only costs the full handshake */
            SSL_SESSION_free(copy);
        }
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

/*
 * A new upstream session (full handshake, or a TLS 1.3 ticket after one):
 * kept per name, so the next connection for that name resumes instead of
 * verifying a chain again. Only verified sessions are kept, and only under
 * the name they were verified for: the key is the SNI we sent, which is
 * the name the certificate was checked against.
 */
static int new_session(SSL *ssl, SSL_SESSION *sess)
{
    struct tls_term *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    SSL_SESSION *copy;
    struct entry *e;

    if (!t || !name || SSL_get_verify_result(ssl) != X509_V_OK) {
        return 0;
    }
    /* A copy: OpenSSL marks the connection's own session not resumable when
     * it ends without a close_notify, as relayed connections often do. */
    copy = SSL_SESSION_dup(sess);
    if (!copy) {
        return 0;
    }
    e = cache_find(&t->sessions, name);
    if (!e) {
        e = cache_add(&t->sessions, name);
    }
    if (!e) {
        SSL_SESSION_free(copy);
        return 0;
    }
    SSL_SESSION_free(e->sess);
    e->sess = copy;
    return 0; /* sess stays OpenSSL's */
}

static int client_ctx_new(struct tls_term *t, const char *upstream_ca_file, SSL_CTX **ret)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

    if (!ctx) {
        return log_ssl(-ENOMEM, "cannot create the upstream TLS context", "client");
    }
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_alpn_protos(ctx, alpn_http11, ALPN_HTTP11_LEN) != 0) {
        SSL_CTX_free(ctx);
        return log_ssl(-EIO, "cannot set up the upstream TLS context", "client");
    }
    ctx_harden(ctx);
    /* The system store (what curl on the host trusts), plus the operator's bundle. */
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        SSL_CTX_free(ctx);
        return log_ssl(-EIO, "cannot load the system trust store", "default");
    }
    if (upstream_ca_file && SSL_CTX_load_verify_locations(ctx, upstream_ca_file, NULL) != 1) {
        SSL_CTX_free(ctx);
        return log_ssl(-EINVAL, "cannot load the upstream CA bundle", upstream_ca_file);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_app_data(ctx, t);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, new_session);
    *ret = ctx;
    return 0;
}

int tls_term_new(const char *ca_dir, const char *upstream_ca_file, struct tls_term **ret)
{
    struct tls_term *t;
    int r;

    if (mkdir(ca_dir, 0700) < 0 && errno != EEXIST) {
        return log_error_errno(-errno, "cannot create the egress CA directory '%s': %m", ca_dir);
    }
    t = calloc(1, sizeof(*t));
    if (!t) {
        return -ENOMEM;
    }
    r = ca_set_open(ca_dir, &t->cas);
    if (r < 0) {
        log_error_errno(r, "cannot open the egress CA in '%s': %m", ca_dir);
        goto fail;
    }
    t->server_ctxs.max = TLS_TERM_CTX_MAX;
    t->sessions.max = TLS_TERM_SESSIONS_MAX;
    r = client_ctx_new(t, upstream_ca_file, &t->client);
    if (r < 0) {
        goto fail;
    }
    *ret = t;
    return 0;
fail:
    tls_term_free(t);
    return r;
}

const char *tls_term_ca_pem(const struct tls_term *t)
{
    return ca_set_bundle(t->cas);
}

const struct ca_set *tls_term_ca_set(const struct tls_term *t)
{
    return t->cas;
}

int tls_term_ca_step(struct tls_term *t, enum ca_step step, char *err)
{
    int r = ca_set_step(t->cas, step, err);

    if (r > 0) {
        /* The signer may have changed: every cached leaf is minted again, by it. */
        cache_clear(&t->server_ctxs);
    }
    return r;
}

size_t tls_term_ctx_cache_size(const struct tls_term *t)
{
    return t->server_ctxs.n;
}

struct tls_term *tls_term_free(struct tls_term *t)
{
    if (!t) {
        return NULL;
    }
    cache_clear(&t->server_ctxs);
    cache_clear(&t->sessions);
    SSL_CTX_free(t->client);
    ca_set_free(t->cas);
    free(t);
    return NULL;
}
