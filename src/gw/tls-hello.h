#pragma once
/*
 * src/gw/tls-hello.h: pure parser of the first TLS record(s) from the guest.
 *
 * The gateway reads the guest's first bytes on a redirected TCP connection,
 * before it dials anything, and asks this parser whether they are a TLS
 * ClientHello and for which name. Everything here is hostile input: the
 * parser is strict (any length that disagrees with its container, any
 * field out of range, a duplicate extension, a record of another content
 * type before the ClientHello is complete: -EBADMSG) and bounded (it never
 * looks past TLS_HELLO_MAX bytes, never allocates, and is linear in len).
 *
 * What is read: TLS plaintext records (content type 22, handshake; record
 * version 0x0301..0x0303; 1..16384 bytes each) carrying one handshake
 * message of type 1 (ClientHello), which may span several records; its
 * legacy version (0x0301..0x0303), random, session id (<= 32 bytes),
 * cipher suites (even, non-empty), compression methods (must include
 * null), and the extensions (optional for pre-1.3 clients; each type at
 * most once):
 *   server_name (0)       exactly one entry, of type host_name. The name is
 *                         normalised with policy_normalize_name() into sni.
 *                         A name that is not a valid host name, or that is
 *                         an IP literal (the last label all digits, as
 *                         URL parsers treat it, or anything with ':'), is
 *                         "no usable SNI": has_sni = false, not an error,
 *                         so the gateway can deny and audit it as such.
 *   ALPN (16)             every protocol name 1..255 bytes; "http/1.1" sets
 *                         offers_http11, "h2" sets offers_h2.
 *   encrypted_client_hello (0xfe0d)  sets has_ech (the outer SNI is then a
 *                         public name that says nothing; the gateway denies).
 * Every other extension is skipped by its length. Bytes after the end of
 * the ClientHello message in its last record (another handshake message
 * coalesced into it) are -EBADMSG: a client sends nothing else before the
 * server's reply. Bytes after that record (e.g. TLS 1.3 early data) are
 * not looked at.
 *
 * Feeding: the gateway buffers the connection's first bytes and calls
 * tls_hello_parse() on the whole buffer after every read, while it returns
 * -EAGAIN. Any other result is final. With len >= TLS_HELLO_MAX the result
 * is never -EAGAIN, so a buffer of TLS_HELLO_MAX bytes is always enough.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TLS_HELLO_MAX 16384 /* bytes of ClientHello the gateway reads before giving up */

struct tls_hello {
    bool has_sni;  /* a usable server_name (see above) */
    char sni[254]; /* NUL-terminated, normalised; "" when !has_sni */
    bool has_ech;  /* encrypted_client_hello offered */
    bool offers_http11;
    bool offers_h2;
};

/* 0 = parsed; -EAGAIN = need more bytes (buf is a prefix); -EBADMSG = not a valid ClientHello;
 * -E2BIG = longer than TLS_HELLO_MAX. SNI normalised like policy_normalize_name().
 * -E2BIG is returned as soon as a record or handshake header shows that the
 * records carrying the ClientHello end beyond TLS_HELLO_MAX bytes. *out is
 * zeroed first and meaningful only on 0. */
int tls_hello_parse(const uint8_t *buf, size_t len, struct tls_hello *out);
