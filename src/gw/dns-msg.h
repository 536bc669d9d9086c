#pragma once
/*
 * DNS message codec for space-gw's DNS proxy: a strict parser for queries
 * from the guest (hostile), a parser for replies from the upstream
 * resolver, and builders for the only messages the proxy ever sends.
 *
 * Why so strict: the guest is root in its VM and may send anything. A query
 * the proxy forwards is rebuilt from the parsed question (never relayed
 * byte for byte), so EDNS options, extra records or odd flags cannot carry
 * data upstream (no DNS tunnelling beyond the name itself, which the policy
 * checks). A reply the guest receives is rebuilt too: only the A/AAAA/CNAME
 * records on the CNAME chain of the asked name survive, TTLs are clamped,
 * HTTPS/SVCB (and every other type) are dropped, so a hostile upstream can
 * neither plant records for other names nor hand out ECH keys.
 *
 * Names are returned normalised for policy lookup: lowercase ASCII, labels
 * joined by '.', no trailing dot. Labels may hold only letters, digits,
 * '-' and '_' — a label holding '.' or a NUL would make two different wire
 * names look alike to the policy, so such a query is refused.
 *
 * All functions are pure (no I/O, no allocation) and bounded by the input
 * length; errors are negative enum dns_error values, never errno.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DNS_HEADER_LEN 12
#define DNS_NAME_MAX 253       /* presentation form, no trailing dot */
#define DNS_MSG_MAX 4096       /* largest message either parser accepts */
#define DNS_ANSWERS_MAX 32     /* A/AAAA/CNAME records kept from one reply */
#define DNS_RECORDS_MAX 256    /* records a reply may hold in all sections */
#define DNS_CHAIN_MAX 8        /* CNAME hops followed from the asked name */
#define DNS_OPT_RDATA_MAX 512  /* EDNS0 options a guest query may carry */
#define DNS_EDNS_UDP_SIZE 1232 /* what we advertise and answer within (DNS flag day 2020) */

enum dns_type {
    DNS_TYPE_A = 1,
    DNS_TYPE_CNAME = 5,
    DNS_TYPE_AAAA = 28,
    DNS_TYPE_OPT = 41,
    DNS_TYPE_SVCB = 64,
    DNS_TYPE_HTTPS = 65,
    DNS_TYPE_ANY = 255,
};

enum { DNS_CLASS_IN = 1 };

enum dns_rcode {
    DNS_RCODE_NOERROR = 0,
    DNS_RCODE_FORMERR = 1,
    DNS_RCODE_SERVFAIL = 2,
    DNS_RCODE_NXDOMAIN = 3,
    DNS_RCODE_NOTIMP = 4,
    DNS_RCODE_REFUSED = 5,
};

/* Header flag bits (RFC 1035 4.1.1) in host order. */
enum {
    DNS_FLAG_QR = 0x8000,
    DNS_FLAG_AA = 0x0400,
    DNS_FLAG_TC = 0x0200,
    DNS_FLAG_RD = 0x0100,
    DNS_FLAG_RA = 0x0080,
    DNS_FLAG_Z = 0x0040,
    DNS_FLAG_AD = 0x0020,
    DNS_FLAG_CD = 0x0010,
};

/* Why a message was refused; dns_error_str() names each for the audit log. */
enum dns_error {
    DNS_OK = 0,
    DNS_E_TRUNCATED = 1,    /* the message ends inside a field */
    DNS_E_TOO_BIG,          /* longer than DNS_MSG_MAX */
    DNS_E_NOT_QUERY,        /* QR set in a query, or clear in a reply */
    DNS_E_OPCODE,           /* opcode other than QUERY */
    DNS_E_FLAGS,            /* TC, Z or a non-zero RCODE in a query */
    DNS_E_QDCOUNT,          /* not exactly one question */
    DNS_E_SECTIONS,         /* answers/authority in a query, or more than one additional */
    DNS_E_LABEL_TYPE,       /* 0x40/0x80 label types (RFC 6891 obsoleted them) */
    DNS_E_LABEL_CHARS,      /* a byte other than letter, digit, '-', '_' in a query name */
    DNS_E_NAME_TOO_LONG,    /* more than 255 wire bytes */
    DNS_E_COMPRESSION,      /* a compression pointer where none is legal (a query) */
    DNS_E_POINTER,          /* a pointer forward, into itself or into the header */
    DNS_E_POINTER_LOOP,     /* too many pointer hops */
    DNS_E_ROOT,             /* a query for the root name */
    DNS_E_QCLASS,           /* class other than IN */
    DNS_E_QTYPE,            /* meta or zero type (0, OPT, TKEY..ANY) */
    DNS_E_OPT,              /* malformed OPT record or options */
    DNS_E_OPT_VERSION,      /* EDNS version other than 0 */
    DNS_E_RDATA,            /* rdata length wrong for its type, or a bad CNAME target */
    DNS_E_TOO_MANY_RECORDS, /* more than DNS_RECORDS_MAX records */
    DNS_E_TRAILING,         /* bytes after the last record */
    DNS_E_BUFFER,           /* a builder's output buffer is too small */
    DNS_E_ARGS,             /* a builder was given an invalid argument */
    _DNS_E_MAX,
};

const char *dns_error_str(int error);

/* A query from the guest, as the proxy needs it. */
struct dns_query {
    uint16_t id;
    uint16_t flags;              /* as received; only RD and CD are echoed */
    char name[DNS_NAME_MAX + 1]; /* normalised */
    uint16_t qtype;
    uint16_t qclass;
    bool has_edns;
    uint16_t edns_udp_size; /* requester's payload size, clamped to [512, 1232] */
    bool edns_do;           /* DNSSEC OK bit */
    /* The question exactly as received (original letter case, for 0x20 randomisation
     * in the guest's resolver), echoed in every answer. */
    uint8_t question[DNS_NAME_MAX + 2 + 4];
    size_t question_len;
};

/*
 * Parses a query from the guest. Rules: 12-byte header with QR=0, opcode
 * QUERY, TC=0, Z=0, RCODE=0; QDCOUNT=1, ANCOUNT=NSCOUNT=0, ARCOUNT<=1 and
 * that record an OPT with the root name, version 0, well-formed options
 * totalling at most DNS_OPT_RDATA_MAX bytes; no compression pointers
 * anywhere (nothing earlier in a query can be pointed at); class IN;
 * no meta QTYPE; no bytes after the last record.
 * Returns DNS_OK and fills *ret, or a negative enum dns_error.
 */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *ret);

struct dns_answer {
    char name[DNS_NAME_MAX + 1]; /* owner, normalised */
    uint16_t type;               /* A, AAAA or CNAME */
    uint32_t ttl;                /* RFC 2181 8: values with the top bit set read as 0 */
    union {
        uint8_t a[4];
        uint8_t aaaa[16];
        char cname[DNS_NAME_MAX + 1];
    };
};

/* A reply from upstream, reduced to what the proxy may pass on. */
struct dns_reply {
    uint16_t id;
    uint16_t flags;
    uint8_t rcode;
    char qname[DNS_NAME_MAX + 1];
    uint16_t qtype;
    uint16_t qclass;
    struct dns_answer answers[DNS_ANSWERS_MAX];
    size_t n_answers;
    size_t n_svcb_stripped; /* HTTPS/SVCB records dropped from the answer section */
    size_t n_skipped;       /* other answer records dropped (other types or classes,
                             * names with odd bytes, beyond DNS_ANSWERS_MAX) */
};

/*
 * Parses a reply from the upstream resolver. Rules: QR=1, opcode QUERY,
 * QDCOUNT=1 (the question is read like a query's, but compression is legal
 * from here on), at most DNS_RECORDS_MAX records in all; compression
 * pointers only backwards, never into the header, at most 32 hops; every
 * record's rdata inside the message; A rdata 4 bytes, AAAA 16, a CNAME's
 * rdata exactly one name. Authority and additional records are checked for
 * shape and dropped. Answers of other types are counted and dropped.
 * A reply with TC set parses; the caller decides (the proxy answers
 * SERVFAIL rather than retrying over TCP).
 */
int dns_parse_reply(const uint8_t *msg, size_t len, struct dns_reply *ret);

/*
 * True when reply answers query q as forwarded with upstream_id: same id,
 * same QTYPE/QCLASS, same (normalised) name. The caller also checks that
 * the datagram came from the upstream resolver's address and port.
 */
bool dns_reply_matches(const struct dns_reply *reply, uint16_t upstream_id, const char *name,
                       uint16_t qtype, uint16_t qclass);

/*
 * Smallest TTL of the records dns_build_reply() would keep for the reply's
 * question (the CNAME chain and the addresses at its end), or UINT32_MAX
 * when there are none.
 */
uint32_t dns_reply_min_ttl(const struct dns_reply *reply);

/*
 * Walks the CNAME chain from the reply's question name (at most
 * DNS_CHAIN_MAX hops) and calls fn for every record on it, in chain order:
 * each CNAME, then the A/AAAA records owned by the end of the chain whose
 * type is the question's. A chain that comes back to a name it passed, or
 * is longer than DNS_CHAIN_MAX, yields its CNAMEs and no addresses. This is what the proxy records
 * as "resolved for this name" and what dns_build_reply() keeps.
 */
void dns_reply_foreach_chain(const struct dns_reply *reply,
                             void (*fn)(const struct dns_answer *a, void *userdata),
                             void *userdata);

/*
 * Builds the query the proxy sends upstream for q: a fresh header (id
 * upstream_id, RD, nothing else), q's question in lowercase, and an OPT
 * record advertising DNS_EDNS_UDP_SIZE with no options. Returns the length
 * or a negative enum dns_error.
 */
ssize_t dns_build_query(const char *name, uint16_t qtype, uint16_t id, uint8_t *buf, size_t size);

/* Largest answer q's sender accepts: 512, or its EDNS size (at most 1232). */
size_t dns_query_max_answer(const struct dns_query *q);

/*
 * Builds an answer to q with no records and the given RCODE (REFUSED for a
 * name the policy denies, NXDOMAIN, SERVFAIL when upstream fails): q's id,
 * QR, RA, q's RD and CD, q's question as received, and an OPT record when
 * q had one. Returns the length or a negative enum dns_error.
 */
ssize_t dns_build_error(const struct dns_query *q, uint8_t rcode, uint8_t *buf, size_t size);

/*
 * Builds the answer the guest gets from an upstream reply r to q: q's id
 * and question, r's RCODE when it is NOERROR or NXDOMAIN (SERVFAIL
 * otherwise), and only the records dns_reply_foreach_chain() visits, each
 * TTL clamped to [ttl_min, ttl_max]. Owner names are compressed to the
 * question or the CNAME target they follow. When the records do not fit in
 * size bytes (or number more than DNS_ANSWERS_MAX, so that the answer
 * always re-parses whole), the ones that fit are kept and TC is set. r must
 * answer q's question (-DNS_E_ARGS otherwise). Returns the length or a
 * negative enum dns_error.
 */
ssize_t dns_build_reply(const struct dns_query *q, const struct dns_reply *r, uint32_t ttl_min,
                        uint32_t ttl_max, uint8_t *buf, size_t size);
