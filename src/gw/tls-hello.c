/*
 * The guest's ClientHello (tls-hello.h), in two passes over bounded memory:
 *
 *   1. records -> handshake bytes: walk the TLS records from the start of
 *      buf, checking each header, and copy their fragments into one
 *      TLS_HELLO_MAX buffer until the ClientHello message (whose length
 *      its 4-byte header gives) is complete or the input ends;
 *   2. the ClientHello body, read through a cursor that knows two ends:
 *      `end`, what the enclosing length field declared, and `avail`, what
 *      has arrived. Reading past `end` is a malformed message (-EBADMSG);
 *      reading past `avail` (but within `end`) is a prefix (-EAGAIN). So a
 *      prefix is checked as far as it goes, and an error in the first bytes
 *      is final without waiting for the rest.
 */
#include "gw/tls-hello.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "basic/macro.h"
#include "gw/policy.h"

#define REC_HEADER 5
#define REC_FRAGMENT_MAX 16384 /* 2^14: RFC 8446 5.1 */
#define REC_HANDSHAKE 22
#define HS_HEADER 4
#define HS_CLIENT_HELLO 1

#define EXT_SERVER_NAME 0x0000
#define EXT_ALPN 0x0010
#define EXT_ECH 0xfe0d
#define SNI_HOST_NAME 0

/* A window on the handshake bytes: [pos, end) declared, [pos, avail) present. */
struct cur {
    const uint8_t *b;
    size_t pos, end, avail;
};

/* Checks that n more bytes exist; the error says whether they could still come. */
static int need(const struct cur *c, size_t n)
{
    if (n > c->end - c->pos) {
        return -EBADMSG;
    }
    if (c->avail < c->pos || n > c->avail - c->pos) {
        return -EAGAIN; /* (pos may be past avail: a skipped vector not here yet) */
    }
    return 0;
}

static int get_u8(struct cur *c, size_t *v)
{
    int r = need(c, 1);

    if (r < 0) {
        return r;
    }
    *v = c->b[c->pos++];
    return 0;
}

static int get_u16(struct cur *c, size_t *v)
{
    int r = need(c, 2);

    if (r < 0) {
        return r;
    }
    *v = (size_t)c->b[c->pos] << 8 | c->b[c->pos + 1];
    c->pos += 2;
    return 0;
}

static int skip(struct cur *c, size_t n)
{
    int r = need(c, n);

    if (r < 0) {
        return r;
    }
    c->pos += n;
    return 0;
}

/*
 * A vector of n bytes at c's position: *sub covers exactly it (n beyond
 * c's end is malformed, whatever has arrived), and c moves past it. Bytes
 * not yet here stay out of sub->avail, so reading them says -EAGAIN.
 */
static int sub_vector(struct cur *c, size_t n, struct cur *sub)
{
    if (n > c->end - c->pos) {
        return -EBADMSG;
    }
    *sub = (struct cur){ .b = c->b, .pos = c->pos, .end = c->pos + n };
    sub->avail = MIN(c->avail, sub->end);
    c->pos += n;
    return 0;
}

/* A vector with a 1- or 2-byte length prefix, of min..max bytes. */
static int get_vector(struct cur *c, int prefix, size_t min, size_t max, struct cur *sub)
{
    size_t n;
    int r = prefix == 1 ? get_u8(c, &n) : get_u16(c, &n);

    if (r < 0) {
        return r;
    }
    if (n < min || n > max) {
        return -EBADMSG;
    }
    return sub_vector(c, n, sub);
}

/* Whether everything in [pos, end) has arrived (a vector read in full). */
static int complete(const struct cur *c)
{
    return c->avail == c->end ? 0 : -EAGAIN;
}

/*
 * URL parsers read a host whose last label is a number (decimal, or 0x
 * hex) as an IPv4 address; no top-level domain is numeric, so such a name
 * is an address in disguise and never a usable SNI.
 */
static bool ends_in_number(const char *name)
{
    const char *last = strrchr(name, '.');

    last = last ? last + 1 : name;
    if (last[0] == '0' && last[1] == 'x') {
        last += 2;
        return strspn(last, "0123456789abcdef") == strlen(last);
    }
    return strspn(last, "0123456789") == strlen(last);
}

/* server_name (RFC 6066 3): one host_name entry; anything unusable just leaves has_sni false. */
static int parse_sni(struct cur *ext, struct tls_hello *out)
{
    struct cur list, name;
    char raw[POLICY_NAME_MAX + 2];
    size_t type;
    int r;

    r = get_vector(ext, 2, 1, SIZE_MAX, &list);
    if (r < 0) {
        return r;
    }
    if (list.end != ext->end) {
        return -EBADMSG;
    }
    r = get_u8(&list, &type);
    if (r < 0) {
        return r;
    }
    if (type != SNI_HOST_NAME) {
        return -EBADMSG;
    }
    r = get_vector(&list, 2, 1, SIZE_MAX, &name);
    if (r < 0) {
        return r;
    }
    /* "MUST NOT contain more than one name of the same name_type", and no other type exists. */
    if (list.pos != list.end) {
        return -EBADMSG;
    }
    r = complete(&name);
    if (r < 0) {
        return r;
    }
    size_t n = name.end - name.pos;
    if (n >= sizeof(raw) || memchr(name.b + name.pos, '\0', n)) {
        return 0; /* no usable SNI: too long for a host name, or a C string in disguise */
    }
    memcpy(raw, name.b + name.pos, n);
    raw[n] = '\0';
    if (policy_normalize_name(raw, out->sni) < 0 || ends_in_number(out->sni)) {
        memset(out->sni, 0, sizeof(out->sni));
        return 0;
    }
    out->has_sni = true;
    return 0;
}

/* ALPN (RFC 7301 3.1): a non-empty list of non-empty protocol names. */
static int parse_alpn(struct cur *ext, struct tls_hello *out)
{
    struct cur list, proto;
    int r;

    r = get_vector(ext, 2, 2, SIZE_MAX, &list);
    if (r < 0) {
        return r;
    }
    if (list.end != ext->end) {
        return -EBADMSG;
    }
    while (list.pos < list.end) {
        r = get_vector(&list, 1, 1, 255, &proto);
        if (r < 0) {
            return r;
        }
        r = complete(&proto);
        if (r < 0) {
            return r;
        }
        size_t n = proto.end - proto.pos;
        const uint8_t *p = proto.b + proto.pos;
        if (n == 8 && memcmp(p, "http/1.1", 8) == 0) {
            out->offers_http11 = true;
        } else if (n == 2 && memcmp(p, "h2", 2) == 0) {
            out->offers_h2 = true;
        }
    }
    return 0;
}

static int parse_extensions(struct cur *c, struct tls_hello *out)
{
    uint64_t seen[65536 / 64] = { 0 };
    struct cur exts;
    int r;

    r = get_vector(c, 2, 0, SIZE_MAX, &exts);
    if (r < 0) {
        return r;
    }
    /* Nothing may follow the extensions inside the ClientHello. */
    if (exts.end != c->end) {
        return -EBADMSG;
    }
    while (exts.pos < exts.end) {
        struct cur ext;
        size_t type;

        r = get_u16(&exts, &type);
        if (r < 0) {
            return r;
        }
        if (seen[type / 64] & (UINT64_C(1) << (type % 64))) {
            return -EBADMSG; /* RFC 8446 4.2: at most one of each type */
        }
        seen[type / 64] |= UINT64_C(1) << (type % 64);
        r = get_vector(&exts, 2, 0, SIZE_MAX, &ext);
        if (r < 0) {
            return r;
        }
        switch (type) {
        case EXT_SERVER_NAME:
            r = parse_sni(&ext, out);
            break;
        case EXT_ALPN:
            r = parse_alpn(&ext, out);
            break;
        case EXT_ECH:
            out->has_ech = true;
            r = 0;
            break;
        default:
            r = 0;
            break;
        }
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* The ClientHello body (RFC 8446 4.1.2, RFC 5246 7.4.1.2). */
static int parse_body(struct cur *c, struct tls_hello *out)
{
    struct cur v;
    size_t version;
    int r;

    r = get_u16(c, &version);
    if (r < 0) {
        return r;
    }
    if (version < 0x0301 || version > 0x0303) {
        return -EBADMSG; /* SSL 3.0 and older, or a 1.3 client breaking the rules */
    }
    r = skip(c, 32); /* random */
    if (r < 0) {
        return r;
    }
    r = get_vector(c, 1, 0, 32, &v); /* legacy_session_id */
    if (r < 0) {
        return r;
    }
    r = get_vector(c, 2, 2, 65534, &v); /* cipher_suites */
    if (r < 0) {
        return r;
    }
    if ((v.end - v.pos) % 2 != 0) {
        return -EBADMSG;
    }
    r = get_vector(c, 1, 1, 255, &v); /* legacy_compression_methods */
    if (r < 0) {
        return r;
    }
    r = complete(&v);
    if (r < 0) {
        return r;
    }
    if (!memchr(v.b + v.pos, 0, v.end - v.pos)) {
        return -EBADMSG; /* the null method must be offered */
    }
    /* Extensions are optional before TLS 1.3. */
    if (c->pos == c->end) {
        return 0;
    }
    return parse_extensions(c, out);
}

int tls_hello_parse(const uint8_t *buf, size_t len, struct tls_hello *out)
{
    uint8_t hs[TLS_HELLO_MAX];
    size_t off = 0, hs_len = 0;
    size_t msg_len = 0; /* handshake header + body; 0 = not known yet */
    size_t rec_end = 0; /* where the last record's fragment ends, in hs */

    memset(out, 0, sizeof(*out));

    /* 1. Records, until the message is complete or the input ends. */
    while (msg_len == 0 || rec_end < msg_len) {
        size_t rest = len - off, frag, take;

        if (off + REC_HEADER > TLS_HELLO_MAX) {
            return -E2BIG;
        }
        /* Whatever of the record header is here must already be right. */
        if (rest >= 1 && buf[off] != REC_HANDSHAKE) {
            return -EBADMSG; /* alerts, change_cipher_spec, SSLv2 hellos, not TLS at all */
        }
        if (rest >= 2 && buf[off + 1] != 3) {
            return -EBADMSG;
        }
        if (rest >= 3 && (buf[off + 2] < 1 || buf[off + 2] > 3)) {
            return -EBADMSG;
        }
        if (rest < REC_HEADER) {
            break; /* check the body so far, then ask for more */
        }
        frag = (size_t)buf[off + 3] << 8 | buf[off + 4];
        if (frag == 0 || frag > REC_FRAGMENT_MAX) {
            return -EBADMSG; /* zero-length handshake fragments are forbidden */
        }
        if (off + REC_HEADER + frag > TLS_HELLO_MAX) {
            return -E2BIG;
        }
        take = MIN(frag, rest - REC_HEADER);
        memcpy(hs + hs_len, buf + off + REC_HEADER, take);
        rec_end = hs_len + frag;
        hs_len += take;
        off += REC_HEADER + take;

        if (hs_len == 0) {
            break; /* a record header alone */
        }
        if (hs[0] != HS_CLIENT_HELLO) {
            return -EBADMSG;
        }
        if (msg_len == 0 && hs_len >= HS_HEADER) {
            msg_len = HS_HEADER + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3]);
            /* Its records need at least one more header than the message has bytes. */
            if (msg_len + REC_HEADER > TLS_HELLO_MAX) {
                return -E2BIG;
            }
        }
        /* Another handshake message coalesced behind the ClientHello. */
        if (msg_len != 0 && rec_end > msg_len) {
            return -EBADMSG;
        }
        /* The rest needs another record: its header and the bytes still missing. */
        if (msg_len != 0 && rec_end < msg_len &&
            off + (frag - take) + REC_HEADER + (msg_len - rec_end) > TLS_HELLO_MAX) {
            return -E2BIG;
        }
        if (take < frag) {
            break; /* the input ends inside this record */
        }
    }
    if (msg_len == 0) {
        return -EAGAIN; /* not even the handshake header yet */
    }

    /* 2. The body, as far as it has arrived. */
    struct cur c = { .b = hs, .pos = HS_HEADER, .end = msg_len, .avail = hs_len };
    int r = parse_body(&c, out);
    if (r < 0) {
        return r;
    }
    return hs_len < msg_len ? -EAGAIN : 0;
}
