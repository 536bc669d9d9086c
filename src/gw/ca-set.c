/*
 * The egress CA and its rotation (ca-set.h has the phases and the files).
 */
#include "gw/ca-set.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/strbuf.h"
#include "shared/ca.h"

#define PHASE_SWITCHED_TEXT "switched\n"

struct ca_set {
    char *dir;
    struct ca *cur, *next; /* next: NULL when stable */
    enum ca_phase phase;
    char *bundle;
    char fp_cur[CA_FINGERPRINT_LEN + 1], fp_next[CA_FINGERPRINT_LEN + 1];
};

static const char *const phase_names[] = {
    [CA_PHASE_STABLE] = "stable",
    [CA_PHASE_STAGED] = "staged",
    [CA_PHASE_SWITCHED] = "switched",
};
static const char *const step_names[] = {
    [CA_STEP_STAGE] = "stage",
    [CA_STEP_SWITCH] = "switch",
    [CA_STEP_FINISH] = "finish",
};

const char *ca_phase_str(enum ca_phase p)
{
    return (size_t)p < ARRAY_SIZE(phase_names) ? phase_names[p] : "?";
}

int ca_step_from_string(const char *s, enum ca_step *ret)
{
    for (size_t i = 0; s && i < ARRAY_SIZE(step_names); i++) {
        if (strcmp(s, step_names[i]) == 0) {
            *ret = (enum ca_step)i;
            return 0;
        }
    }
    return -EINVAL;
}

static _printf_(2, 3) void set_err(char *err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, CA_SET_ERROR_MAX, fmt, ap);
    va_end(ap);
}

static void path_of(const struct ca_set *s, const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", s->dir, name);
}

static bool exists(const struct ca_set *s, const char *name)
{
    char p[4096];

    path_of(s, name, p, sizeof(p));
    return access(p, F_OK) == 0;
}

static int remove_file(const struct ca_set *s, const char *name)
{
    char p[4096];

    path_of(s, name, p, sizeof(p));
    return unlink(p) < 0 && errno != ENOENT ? -errno : 0;
}

static int rename_file(const struct ca_set *s, const char *from, const char *to)
{
    char a[4096], b[4096];

    path_of(s, from, a, sizeof(a));
    path_of(s, to, b, sizeof(b));
    return rename(a, b) < 0 ? -errno : 0;
}

static int sync_dir(const struct ca_set *s)
{
    return fsync_path(s->dir, O_DIRECTORY);
}

static int fingerprint(X509 *cert, char out[CA_FINGERPRINT_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;

    if (X509_digest(cert, EVP_sha256(), md, &n) != 1 || n * 2 != CA_FINGERPRINT_LEN) {
        return -EIO;
    }
    for (unsigned i = 0; i < n; i++) {
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    }
    return 0;
}

static int append_pem(struct strbuf *sb, X509 *cert)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *data;
    long n;
    int r = -ENOMEM;

    if (bio && PEM_write_bio_X509(bio, cert) == 1 && (n = BIO_get_mem_data(bio, &data)) > 0) {
        r = strbuf_append(sb, data, (size_t)n);
    }
    BIO_free(bio);
    return r;
}

/* The bundle and fingerprints from cur and next. */
static int refresh(struct ca_set *s)
{
    struct strbuf sb = STRBUF_INIT;
    int r;

    r = append_pem(&sb, ca_cert(s->cur));
    if (r >= 0 && s->next) {
        r = append_pem(&sb, ca_cert(s->next));
    }
    if (r >= 0) {
        r = fingerprint(ca_cert(s->cur), s->fp_cur);
    }
    s->fp_next[0] = '\0';
    if (r >= 0 && s->next) {
        r = fingerprint(ca_cert(s->next), s->fp_next);
    }
    if (r < 0) {
        strbuf_release(&sb);
        return r;
    }
    free(s->bundle);
    s->bundle = strbuf_detach(&sb, NULL);
    return 0;
}

/* What an interrupted step left (ca-set.h "Restart safety"); then the phase from the files. */
static int repair_and_load(struct ca_set *s)
{
    bool phase = exists(s, CA_PHASE_FILE), key = exists(s, CA_NEXT_KEY_FILE),
         crt = exists(s, CA_NEXT_CERT_FILE);
    int r;

    if (phase && !key) {
        if (crt) {
            log_warning("'%s': completing a rotation's finish that was interrupted", s->dir);
            r = rename_file(s, CA_NEXT_CERT_FILE, CA_CERT_FILE);
            if (r < 0) {
                return log_error_errno(r, "cannot complete the finish in '%s': %m", s->dir);
            }
        }
        r = remove_file(s, CA_PHASE_FILE);
        if (r < 0) {
            return log_error_errno(r, "cannot remove '%s/%s': %m", s->dir, CA_PHASE_FILE);
        }
        (void)sync_dir(s);
        phase = crt = false;
    } else if (!phase && key != crt) {
        log_warning("'%s': removing the next CA of a stage that did not complete", s->dir);
        (void)remove_file(s, CA_NEXT_KEY_FILE);
        (void)remove_file(s, CA_NEXT_CERT_FILE);
        key = crt = false;
    }
    r = ca_open(s->dir, &s->cur);
    if (r < 0) {
        return r;
    }
    s->phase = CA_PHASE_STABLE;
    if (key) {
        r = ca_open_files(s->dir, CA_NEXT_KEY_FILE, CA_NEXT_CERT_FILE, &s->next);
        if (r < 0) {
            return r;
        }
        s->phase = phase ? CA_PHASE_SWITCHED : CA_PHASE_STAGED;
    }
    return refresh(s);
}

int ca_set_open(const char *dir, struct ca_set **ret)
{
    struct ca_set *s = calloc(1, sizeof(*s));
    int r;

    if (!s || !(s->dir = strdup(dir))) {
        free(s);
        return -ENOMEM;
    }
    r = repair_and_load(s);
    if (r < 0) {
        ca_set_free(s);
        return r;
    }
    if (s->phase != CA_PHASE_STABLE) {
        log_info("egress CA rotation in '%s' is %s (current %.16s, next %.16s)", dir,
                 ca_phase_str(s->phase), s->fp_cur, s->fp_next);
    }
    *ret = s;
    return 0;
}

enum ca_phase ca_set_phase(const struct ca_set *s)
{
    return s->phase;
}

struct ca *ca_set_signer(struct ca_set *s)
{
    return s->phase == CA_PHASE_SWITCHED ? s->next : s->cur;
}

const char *ca_set_bundle(const struct ca_set *s)
{
    return s->bundle;
}

const char *ca_set_current_fingerprint(const struct ca_set *s)
{
    return s->fp_cur;
}

const char *ca_set_next_fingerprint(const struct ca_set *s)
{
    return s->fp_next;
}

static int do_stage(struct ca_set *s, char *err)
{
    struct ca *next = NULL;
    int r;

    /* Leftovers of a stage nobody was told about (repair_and_load() removes half ones). */
    (void)remove_file(s, CA_NEXT_KEY_FILE);
    (void)remove_file(s, CA_NEXT_CERT_FILE);
    r = ca_open_files(s->dir, CA_NEXT_KEY_FILE, CA_NEXT_CERT_FILE, &next);
    if (r < 0) {
        set_err(err, "cannot create the next CA: %s", strerror(-r));
        return r;
    }
    (void)sync_dir(s);
    s->next = next;
    s->phase = CA_PHASE_STAGED;
    return 1;
}

static int do_switch(struct ca_set *s, char *err)
{
    char p[4096];
    int r;

    path_of(s, CA_PHASE_FILE, p, sizeof(p));
    r = write_file_atomic(p, PHASE_SWITCHED_TEXT, strlen(PHASE_SWITCHED_TEXT));
    if (r < 0) {
        set_err(err, "cannot write '%s': %s", CA_PHASE_FILE, strerror(-r));
        return r;
    }
    s->phase = CA_PHASE_SWITCHED;
    return 1;
}

static int do_finish(struct ca_set *s, char *err)
{
    int r;

    /* The order repair_and_load() knows how to complete. */
    r = rename_file(s, CA_NEXT_KEY_FILE, CA_KEY_FILE);
    if (r >= 0) {
        r = rename_file(s, CA_NEXT_CERT_FILE, CA_CERT_FILE);
    }
    if (r >= 0) {
        r = remove_file(s, CA_PHASE_FILE);
    }
    if (r < 0) {
        set_err(err, "cannot finish the rotation: %s (the next start completes it)", strerror(-r));
        return r;
    }
    (void)sync_dir(s);
    ca_free(s->cur);
    s->cur = s->next;
    s->next = NULL;
    s->phase = CA_PHASE_STABLE;
    return 1;
}

int ca_set_step(struct ca_set *s, enum ca_step step, char *err)
{
    /* The step each phase takes next, and the phase each step leads to. */
    static const enum ca_step expected[] = {
        [CA_PHASE_STABLE] = CA_STEP_STAGE,
        [CA_PHASE_STAGED] = CA_STEP_SWITCH,
        [CA_PHASE_SWITCHED] = CA_STEP_FINISH,
    };
    static const enum ca_phase leads_to[] = {
        [CA_STEP_STAGE] = CA_PHASE_STAGED,
        [CA_STEP_SWITCH] = CA_PHASE_SWITCHED,
        [CA_STEP_FINISH] = CA_PHASE_STABLE,
    };
    int r;

    err[0] = '\0';
    if ((size_t)step >= ARRAY_SIZE(leads_to)) {
        set_err(err, "unknown step");
        return -EINVAL;
    }
    if (step != CA_STEP_FINISH && leads_to[step] == s->phase) {
        return 0; /* a repeat: already there */
    }
    if (expected[s->phase] != step) {
        set_err(err, "cannot %s: the egress CA rotation is %s (next step: %s)", step_names[step],
                phase_names[s->phase], step_names[expected[s->phase]]);
        return -EBUSY;
    }
    switch (step) {
    case CA_STEP_STAGE:
        r = do_stage(s, err);
        break;
    case CA_STEP_SWITCH:
        r = do_switch(s, err);
        break;
    case CA_STEP_FINISH:
        r = do_finish(s, err);
        break;
    default:
        assert_not_reached();
    }
    if (r < 0) {
        return r;
    }
    if (refresh(s) < 0) {
        set_err(err, "out of memory");
        return -ENOMEM;
    }
    log_info("egress CA rotation: %s, now %s (current %.16s, next %.16s)", step_names[step],
             phase_names[s->phase], s->fp_cur, s->fp_next[0] ? s->fp_next : "-");
    return r;
}

struct ca_set *ca_set_free(struct ca_set *s)
{
    if (!s) {
        return NULL;
    }
    ca_free(s->cur);
    ca_free(s->next);
    free(s->bundle);
    free(s->dir);
    free(s);
    return NULL;
}
