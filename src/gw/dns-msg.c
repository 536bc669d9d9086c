/*
 * DNS message codec (dns-msg.h). Parsing is a cursor over a bounded
 * buffer; every read checks the length first. Compression pointers must
 * point strictly before the name (or pointer) that uses them, so a chain of
 * jumps always moves backwards and ends; a hop limit caps the work anyway.
 */
#include "gw/dns-msg.h"

#include "basic/macro.h"

#define POINTER_HOPS_MAX 32
#define WIRE_NAME_MAX 255

static const char *const error_names[_DNS_E_MAX] = {
    [DNS_OK] = "ok",
    [DNS_E_TRUNCATED] = "truncated message",
    [DNS_E_TOO_BIG] = "message too big",
    [DNS_E_NOT_QUERY] = "wrong QR bit",
    [DNS_E_OPCODE] = "opcode is not QUERY",
    [DNS_E_FLAGS] = "invalid header flags",
    [DNS_E_QDCOUNT] = "not exactly one question",
    [DNS_E_SECTIONS] = "unexpected records",
    [DNS_E_LABEL_TYPE] = "invalid label type",
    [DNS_E_LABEL_CHARS] = "invalid characters in name",
    [DNS_E_NAME_TOO_LONG] = "name too long",
    [DNS_E_COMPRESSION] = "compression pointer not allowed here",
    [DNS_E_POINTER] = "invalid compression pointer",
    [DNS_E_POINTER_LOOP] = "compression pointer loop",
    [DNS_E_ROOT] = "query for the root name",
    [DNS_E_QCLASS] = "class is not IN",
    [DNS_E_QTYPE] = "invalid query type",
    [DNS_E_OPT] = "malformed EDNS0 OPT record",
    [DNS_E_OPT_VERSION] = "unsupported EDNS version",
    [DNS_E_RDATA] = "malformed record data",
    [DNS_E_TOO_MANY_RECORDS] = "too many records",
    [DNS_E_TRAILING] = "trailing bytes after the last record",
    [DNS_E_BUFFER] = "output buffer too small",
    [DNS_E_ARGS] = "invalid arguments",
};

const char *dns_error_str(int error)
{
    if (error < 0) {
        error = -error;
    }
    if (error >= _DNS_E_MAX || !error_names[error]) {
        return "unknown error";
    }
    return error_names[error];
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static bool label_char_ok(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/*
 * Reads the name at *off into out (normalised; DNS_NAME_MAX + 1 bytes) and
 * moves *off past it. allow_ptr: compression is legal here. A label byte
 * outside label_char_ok() sets *odd (the name is still consumed, so a reply
 * can drop that one record); queries turn *odd into an error.
 */
static int read_name(const uint8_t *msg, size_t len, size_t *off, bool allow_ptr, char *out,
                     bool *odd)
{
    size_t pos = *off, resume = 0, limit = *off, wire = 1, n = 0;
    unsigned hops = 0;
    bool jumped = false;

    *odd = false;
    for (;;) {
        uint8_t c;

        if (pos >= len) {
            return -DNS_E_TRUNCATED;
        }
        c = msg[pos];
        if ((c & 0xC0) == 0xC0) {
            size_t target;

            if (!allow_ptr) {
                return -DNS_E_COMPRESSION;
            }
            if (pos + 1 >= len) {
                return -DNS_E_TRUNCATED;
            }
            target = ((size_t)(c & 0x3F) << 8) | msg[pos + 1];
            /* Strictly before everything read so far: the walk only goes back. */
            if (target < DNS_HEADER_LEN || target >= limit) {
                return -DNS_E_POINTER;
            }
            if (++hops > POINTER_HOPS_MAX) {
                return -DNS_E_POINTER_LOOP;
            }
            if (!jumped) {
                resume = pos + 2;
                jumped = true;
            }
            limit = target;
            pos = target;
            continue;
        }
        if (c & 0xC0) {
            return -DNS_E_LABEL_TYPE;
        }
        if (c == 0) {
            pos++;
            break;
        }
        if (pos + 1 + c > len) {
            return -DNS_E_TRUNCATED;
        }
        wire += 1 + c;
        if (wire > WIRE_NAME_MAX) {
            return -DNS_E_NAME_TOO_LONG;
        }
        if (n > 0) {
            out[n++] = '.';
        }
        for (size_t i = 0; i < c; i++) {
            uint8_t ch = msg[pos + 1 + i];

            if (!label_char_ok(ch)) {
                *odd = true;
            }
            out[n++] = (char)((ch >= 'A' && ch <= 'Z') ? ch + ('a' - 'A') : ch);
        }
        pos += 1 + c;
    }
    /* wire <= 255 bounds n: n = wire - 2 for a non-root name. */
    out[n] = '\0';
    *off = jumped ? resume : pos;
    return DNS_OK;
}

static bool qtype_ok(uint16_t t)
{
    /* 0, OPT and the meta types TKEY, TSIG, IXFR, AXFR, MAILB, MAILA, ANY. */
    return t != 0 && t != DNS_TYPE_OPT && !(t >= 249 && t <= 255);
}

/* Checks an OPT record's fixed part at msg[*off] (after its root name) and its options. */
static int read_opt(const uint8_t *msg, size_t len, size_t *off, size_t rdata_max,
                    uint16_t *ret_udp, bool *ret_do)
{
    size_t pos = *off, rdlen, end;
    uint32_t ttl;

    if (pos + 10 > len) {
        return -DNS_E_TRUNCATED;
    }
    /* type already checked by the caller */
    ttl = get32(msg + pos + 4);
    rdlen = get16(msg + pos + 8);
    pos += 10;
    if (((ttl >> 16) & 0xFF) != 0) {
        return -DNS_E_OPT_VERSION;
    }
    if (rdlen > rdata_max) {
        return -DNS_E_OPT;
    }
    if (pos + rdlen > len) {
        return -DNS_E_TRUNCATED;
    }
    end = pos + rdlen;
    while (pos < end) {
        size_t olen;

        if (pos + 4 > end) {
            return -DNS_E_OPT;
        }
        olen = get16(msg + pos + 2);
        pos += 4;
        if (olen > end - pos) {
            return -DNS_E_OPT;
        }
        pos += olen;
    }
    *ret_udp = get16(msg + *off + 2);
    *ret_do = (ttl & 0x8000) != 0;
    *off = end;
    return DNS_OK;
}

int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *ret)
{
    struct dns_query q = {};
    size_t off = DNS_HEADER_LEN, qstart;
    uint16_t flags, arcount;
    bool odd;
    int r;

    if (len > DNS_MSG_MAX) {
        return -DNS_E_TOO_BIG;
    }
    if (len < DNS_HEADER_LEN) {
        return -DNS_E_TRUNCATED;
    }
    q.id = get16(msg);
    flags = get16(msg + 2);
    if (flags & DNS_FLAG_QR) {
        return -DNS_E_NOT_QUERY;
    }
    if ((flags >> 11) & 0xF) {
        return -DNS_E_OPCODE;
    }
    if ((flags & (DNS_FLAG_TC | DNS_FLAG_Z)) || (flags & 0xF)) {
        return -DNS_E_FLAGS;
    }
    if (get16(msg + 4) != 1) {
        return -DNS_E_QDCOUNT;
    }
    arcount = get16(msg + 10);
    if (get16(msg + 6) != 0 || get16(msg + 8) != 0 || arcount > 1) {
        return -DNS_E_SECTIONS;
    }
    q.flags = flags;

    qstart = off;
    r = read_name(msg, len, &off, false, q.name, &odd);
    if (r < 0) {
        return r;
    }
    if (odd) {
        return -DNS_E_LABEL_CHARS;
    }
    if (q.name[0] == '\0') {
        return -DNS_E_ROOT;
    }
    if (off + 4 > len) {
        return -DNS_E_TRUNCATED;
    }
    q.qtype = get16(msg + off);
    q.qclass = get16(msg + off + 2);
    off += 4;
    if (q.qclass != DNS_CLASS_IN) {
        return -DNS_E_QCLASS;
    }
    if (!qtype_ok(q.qtype)) {
        return -DNS_E_QTYPE;
    }
    q.question_len = off - qstart;
    memcpy(q.question, msg + qstart, q.question_len);

    if (arcount == 1) {
        uint16_t udp;
        bool dobit;

        /* Only an OPT with the root name: anything else is data we would not forward. */
        if (off + 3 > len) {
            return -DNS_E_TRUNCATED;
        }
        if (msg[off] != 0 || get16(msg + off + 1) != DNS_TYPE_OPT) {
            return -DNS_E_SECTIONS;
        }
        off += 1;
        r = read_opt(msg, len, &off, DNS_OPT_RDATA_MAX, &udp, &dobit);
        if (r < 0) {
            return r;
        }
        q.has_edns = true;
        q.edns_udp_size = (uint16_t)MIN(MAX(udp, 512), DNS_EDNS_UDP_SIZE);
        q.edns_do = dobit;
    }
    if (off != len) {
        return -DNS_E_TRAILING;
    }
    *ret = q;
    return DNS_OK;
}

/* Reads one record's name, type, class, TTL and rdata bounds. */
struct rr_head {
    char name[DNS_NAME_MAX + 1];
    bool odd;
    uint16_t type, class;
    uint32_t ttl;
    size_t rdata, rdlen;
};

static int read_rr_head(const uint8_t *msg, size_t len, size_t *off, struct rr_head *h)
{
    int r = read_name(msg, len, off, true, h->name, &h->odd);

    if (r < 0) {
        return r;
    }
    if (*off + 10 > len) {
        return -DNS_E_TRUNCATED;
    }
    h->type = get16(msg + *off);
    h->class = get16(msg + *off + 2);
    h->ttl = get32(msg + *off + 4);
    h->rdlen = get16(msg + *off + 8);
    h->rdata = *off + 10;
    if (h->rdata + h->rdlen > len) {
        return -DNS_E_TRUNCATED;
    }
    *off = h->rdata + h->rdlen;
    return DNS_OK;
}

/* Decodes an answer we keep; returns 1 when kept, 0 when skipped, or an error. */
static int take_answer(const uint8_t *msg, size_t len, const struct rr_head *h,
                       struct dns_answer *a)
{
    switch (h->type) {
    case DNS_TYPE_A:
        if (h->rdlen != 4) {
            return -DNS_E_RDATA;
        }
        memcpy(a->a, msg + h->rdata, 4);
        break;
    case DNS_TYPE_AAAA:
        if (h->rdlen != 16) {
            return -DNS_E_RDATA;
        }
        memcpy(a->aaaa, msg + h->rdata, 16);
        break;
    case DNS_TYPE_CNAME: {
        size_t p = h->rdata;
        bool odd;
        /* The target may point anywhere before itself, but must end where the rdata ends. */
        int r = read_name(msg, h->rdata + h->rdlen, &p, true, a->cname, &odd);

        if (r < 0 || p != h->rdata + h->rdlen || a->cname[0] == '\0') {
            return -DNS_E_RDATA;
        }
        if (odd) {
            return 0;
        }
        break;
    }
    default:
        return 0;
    }
    if (h->class != DNS_CLASS_IN || h->odd) {
        return 0;
    }
    memcpy(a->name, h->name, sizeof(a->name));
    a->type = h->type;
    a->ttl = (h->ttl & 0x80000000u) ? 0 : h->ttl;
    return 1;
}

int dns_parse_reply(const uint8_t *msg, size_t len, struct dns_reply *ret)
{
    size_t off = DNS_HEADER_LEN, ancount, total;
    uint16_t flags;
    bool odd, seen_opt = false;
    int r;

    if (len > DNS_MSG_MAX) {
        return -DNS_E_TOO_BIG;
    }
    if (len < DNS_HEADER_LEN) {
        return -DNS_E_TRUNCATED;
    }
    memset(ret, 0, offsetof(struct dns_reply, answers));
    ret->n_answers = ret->n_svcb_stripped = ret->n_skipped = 0;
    ret->id = get16(msg);
    flags = get16(msg + 2);
    if (!(flags & DNS_FLAG_QR)) {
        return -DNS_E_NOT_QUERY;
    }
    if ((flags >> 11) & 0xF) {
        return -DNS_E_OPCODE;
    }
    ret->flags = flags;
    ret->rcode = flags & 0xF;
    if (get16(msg + 4) != 1) {
        return -DNS_E_QDCOUNT;
    }
    ancount = get16(msg + 6);
    total = ancount + get16(msg + 8) + get16(msg + 10);
    if (total > DNS_RECORDS_MAX) {
        return -DNS_E_TOO_MANY_RECORDS;
    }
    /* Nothing precedes the question, so it cannot be compressed. */
    r = read_name(msg, len, &off, false, ret->qname, &odd);
    if (r < 0) {
        return r;
    }
    if (odd) {
        return -DNS_E_LABEL_CHARS;
    }
    if (off + 4 > len) {
        return -DNS_E_TRUNCATED;
    }
    ret->qtype = get16(msg + off);
    ret->qclass = get16(msg + off + 2);
    off += 4;

    for (size_t i = 0; i < total; i++) {
        struct rr_head h;

        r = read_rr_head(msg, len, &off, &h);
        if (r < 0) {
            return r;
        }
        if (i < ancount) {
            if (h.type == DNS_TYPE_HTTPS || h.type == DNS_TYPE_SVCB) {
                ret->n_svcb_stripped++;
                continue;
            }
            if (ret->n_answers == DNS_ANSWERS_MAX) {
                ret->n_skipped++;
                continue;
            }
            r = take_answer(msg, len, &h, &ret->answers[ret->n_answers]);
            if (r < 0) {
                return r;
            }
            if (r > 0) {
                ret->n_answers++;
            } else {
                ret->n_skipped++;
            }
        } else if (h.type == DNS_TYPE_OPT) {
            /* At most one, root-named, in the additional section (RFC 6891 6.1.1). */
            size_t o = h.rdata - 10;
            uint16_t udp;
            bool dobit;

            if (seen_opt || h.name[0] != '\0' || i < total - get16(msg + 10)) {
                return -DNS_E_OPT;
            }
            seen_opt = true;
            r = read_opt(msg, len, &o, UINT16_MAX, &udp, &dobit);
            if (r < 0 && r != -DNS_E_OPT_VERSION) {
                return r;
            }
        }
    }
    if (off != len) {
        return -DNS_E_TRAILING;
    }
    return DNS_OK;
}

bool dns_reply_matches(const struct dns_reply *reply, uint16_t upstream_id, const char *name,
                       uint16_t qtype, uint16_t qclass)
{
    return reply->id == upstream_id && reply->qtype == qtype && reply->qclass == qclass &&
           strcmp(reply->qname, name) == 0;
}

void dns_reply_foreach_chain(const struct dns_reply *reply,
                             void (*fn)(const struct dns_answer *a, void *userdata), void *userdata)
{
    const struct dns_answer *visited[DNS_CHAIN_MAX];
    const char *cur = reply->qname;

    for (unsigned hop = 0;; hop++) {
        const struct dns_answer *cname = NULL;

        for (size_t i = 0; i < reply->n_answers; i++) {
            if (reply->answers[i].type == DNS_TYPE_CNAME &&
                strcmp(reply->answers[i].name, cur) == 0) {
                cname = &reply->answers[i];
                break;
            }
        }
        if (!cname) {
            break;
        }
        /* A name with a CNAME has no other data (RFC 1034 3.6.2): follow it,
         * a bounded number of times (a loop a -> b -> a ends when it comes back). */
        if (hop == DNS_CHAIN_MAX) {
            return;
        }
        for (unsigned i = 0; i < hop; i++) {
            if (visited[i] == cname) {
                return;
            }
        }
        visited[hop] = cname;
        fn(cname, userdata);
        if (reply->qtype == DNS_TYPE_CNAME) {
            return;
        }
        cur = cname->cname;
    }
    for (size_t i = 0; i < reply->n_answers; i++) {
        const struct dns_answer *a = &reply->answers[i];

        if (a->type == reply->qtype && a->type != DNS_TYPE_CNAME && strcmp(a->name, cur) == 0) {
            fn(a, userdata);
        }
    }
}

static void min_ttl_cb(const struct dns_answer *a, void *userdata)
{
    uint32_t *m = userdata;

    *m = MIN(*m, a->ttl);
}

uint32_t dns_reply_min_ttl(const struct dns_reply *reply)
{
    uint32_t m = UINT32_MAX;

    dns_reply_foreach_chain(reply, min_ttl_cb, &m);
    return m;
}

/* Writes name (normalised, non-empty) in wire form; returns the bytes written or an error. */
static ssize_t write_name(const char *name, uint8_t *buf, size_t size)
{
    size_t n = strlen(name), out = 0;
    const char *p = name;

    if (n == 0 || n > DNS_NAME_MAX || size < n + 2) {
        return n == 0 || n > DNS_NAME_MAX ? -DNS_E_ARGS : -DNS_E_BUFFER;
    }
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);

        if (l == 0 || l > 63) {
            return -DNS_E_ARGS;
        }
        for (size_t i = 0; i < l; i++) {
            if (!label_char_ok((uint8_t)p[i])) {
                return -DNS_E_ARGS;
            }
        }
        buf[out++] = (uint8_t)l;
        memcpy(buf + out, p, l);
        out += l;
        p += l;
        if (dot) {
            p++;
            if (*p == '\0') {
                return -DNS_E_ARGS;
            }
        }
    }
    buf[out++] = 0;
    return (ssize_t)out;
}

static void put_header(uint8_t *buf, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
                       uint16_t ns, uint16_t ar)
{
    put16(buf, id);
    put16(buf + 2, flags);
    put16(buf + 4, qd);
    put16(buf + 6, an);
    put16(buf + 8, ns);
    put16(buf + 10, ar);
}

static void put_opt(uint8_t *p, bool dobit)
{
    p[0] = 0;
    put16(p + 1, DNS_TYPE_OPT);
    put16(p + 3, DNS_EDNS_UDP_SIZE);
    put32(p + 5, dobit ? 0x8000 : 0);
    put16(p + 9, 0);
}

#define OPT_LEN 11

ssize_t dns_build_query(const char *name, uint16_t qtype, uint16_t id, uint8_t *buf, size_t size)
{
    ssize_t n;
    size_t off = DNS_HEADER_LEN;

    if (!qtype_ok(qtype)) {
        return -DNS_E_ARGS;
    }
    if (size < DNS_HEADER_LEN) {
        return -DNS_E_BUFFER;
    }
    n = write_name(name, buf + off, size - off);
    if (n < 0) {
        return n;
    }
    off += (size_t)n;
    if (off + 4 + OPT_LEN > size) {
        return -DNS_E_BUFFER;
    }
    put16(buf + off, qtype);
    put16(buf + off + 2, DNS_CLASS_IN);
    off += 4;
    put_opt(buf + off, false);
    off += OPT_LEN;
    put_header(buf, id, DNS_FLAG_RD, 1, 0, 0, 1);
    return (ssize_t)off;
}

size_t dns_query_max_answer(const struct dns_query *q)
{
    return q->has_edns ? q->edns_udp_size : 512;
}

static uint16_t answer_flags(const struct dns_query *q, uint8_t rcode)
{
    return DNS_FLAG_QR | DNS_FLAG_RA | (q->flags & (DNS_FLAG_RD | DNS_FLAG_CD)) | (rcode & 0xF);
}

ssize_t dns_build_error(const struct dns_query *q, uint8_t rcode, uint8_t *buf, size_t size)
{
    size_t need = DNS_HEADER_LEN + q->question_len + (q->has_edns ? OPT_LEN : 0);

    if (q->question_len < 7 || q->question_len > sizeof(q->question) || rcode > 15) {
        return -DNS_E_ARGS;
    }
    if (size < need) {
        return -DNS_E_BUFFER;
    }
    put_header(buf, q->id, answer_flags(q, rcode), 1, 0, 0, q->has_edns ? 1 : 0);
    memcpy(buf + DNS_HEADER_LEN, q->question, q->question_len);
    if (q->has_edns) {
        put_opt(buf + DNS_HEADER_LEN + q->question_len, q->edns_do);
    }
    return (ssize_t)need;
}

struct build_state {
    uint8_t *buf;
    size_t size; /* bytes available for answers (OPT space reserved) */
    size_t off;
    uint16_t owner; /* offset of the current chain name */
    uint32_t ttl_min, ttl_max;
    uint16_t count;
    bool full;
    int error;
};

static void build_cb(const struct dns_answer *a, void *userdata)
{
    struct build_state *s = userdata;
    size_t rd_off = s->off + 12, rdlen;
    uint32_t ttl = MIN(MAX(a->ttl, s->ttl_min), s->ttl_max);

    if (s->full || s->error) {
        return;
    }
    /* At most what dns_parse_reply() keeps, so a rebuilt answer re-parses whole. */
    if (s->count == DNS_ANSWERS_MAX || rd_off > s->size) {
        s->full = true;
        return;
    }
    switch (a->type) {
    case DNS_TYPE_A:
        rdlen = 4;
        if (rd_off + rdlen > s->size) {
            s->full = true;
            return;
        }
        memcpy(s->buf + rd_off, a->a, 4);
        break;
    case DNS_TYPE_AAAA:
        rdlen = 16;
        if (rd_off + rdlen > s->size) {
            s->full = true;
            return;
        }
        memcpy(s->buf + rd_off, a->aaaa, 16);
        break;
    case DNS_TYPE_CNAME: {
        ssize_t n = write_name(a->cname, s->buf + rd_off, s->size - rd_off);

        if (n == -DNS_E_BUFFER) {
            s->full = true;
            return;
        }
        if (n < 0) {
            s->error = (int)n;
            return;
        }
        rdlen = (size_t)n;
        break;
    }
    default:
        return;
    }
    /* Owner: a pointer to the chain name this record belongs to. */
    put16(s->buf + s->off, (uint16_t)(0xC000 | s->owner));
    put16(s->buf + s->off + 2, a->type);
    put16(s->buf + s->off + 4, DNS_CLASS_IN);
    put32(s->buf + s->off + 6, ttl);
    put16(s->buf + s->off + 10, (uint16_t)rdlen);
    if (a->type == DNS_TYPE_CNAME) {
        s->owner = (uint16_t)rd_off;
    }
    s->off = rd_off + rdlen;
    s->count++;
}

ssize_t dns_build_reply(const struct dns_query *q, const struct dns_reply *r, uint32_t ttl_min,
                        uint32_t ttl_max, uint8_t *buf, size_t size)
{
    size_t opt = q->has_edns ? OPT_LEN : 0;
    struct build_state s;
    uint8_t rcode = r->rcode;
    ssize_t n;

    if (ttl_min > ttl_max || q->qtype != r->qtype || q->qclass != r->qclass ||
        strcmp(q->name, r->qname) != 0) {
        return -DNS_E_ARGS;
    }
    /* Pointers reach 16 KiB; our messages stay far below. */
    size = MIN(size, (size_t)DNS_MSG_MAX);
    if (rcode != DNS_RCODE_NOERROR && rcode != DNS_RCODE_NXDOMAIN) {
        rcode = DNS_RCODE_SERVFAIL;
    }
    n = dns_build_error(q, rcode, buf, size);
    if (n < 0) {
        return n;
    }
    if (rcode == DNS_RCODE_SERVFAIL) {
        return n;
    }
    s = (struct build_state){
        .buf = buf,
        .size = size - opt,
        .off = DNS_HEADER_LEN + q->question_len,
        .owner = DNS_HEADER_LEN,
        .ttl_min = ttl_min,
        .ttl_max = ttl_max,
    };
    dns_reply_foreach_chain(r, build_cb, &s);
    if (s.error) {
        return s.error;
    }
    if (opt) {
        put_opt(buf + s.off, q->edns_do);
    }
    put_header(buf, q->id, answer_flags(q, rcode) | (s.full ? DNS_FLAG_TC : 0), 1, s.count, 0,
               opt ? 1 : 0);
    return (ssize_t)(s.off + opt);
}
