#pragma once
/*
 * The node's tunnel protocol (src/node/tunnel.c serves it, the ingress in
 * src/api/ingress.c speaks it): one tunnel per Unix-socket connection.
 *
 *   client: "TUNNEL <sandbox-id> <port>\n"   at most TUNNEL_PROTO_LINE_MAX bytes
 *   node:   "OK\n"                            connected to the guest port
 *      or:  "ERR <http-status> <message>\n", then close
 *
 * After OK the connection carries the guest port's bytes both ways. The
 * helpers format and parse exactly these lines, so both sides agree.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/sandbox-id.h"

#define TUNNEL_PROTO_LINE_MAX 128 /* "TUNNEL <20 chars> <5 digits>\n" is 34 */
#define TUNNEL_PROTO_OK "OK\n"

/* Writes the request line (with its LF) into buf. Returns its length, or -ENOBUFS / -EINVAL. */
int tunnel_proto_format_request(char *buf, size_t size, const char *id, uint16_t port);

/*
 * Parses a request line (without its LF; a trailing CR is allowed).
 * Returns 0, or -EBADMSG (not "TUNNEL <id> <port>") / -EINVAL (bad id or port).
 */
int tunnel_proto_parse_request(const char *line, size_t len, char ret_id[SANDBOX_ID_LEN + 1],
                               uint16_t *ret_port);

/*
 * Parses the node's answer line (without its LF): 0 for OK, or the ERR
 * line's HTTP status (400..599) with its message (may be empty) as
 * *ret_message and *ret_message_len, inside line (both may be NULL). -EBADMSG
 * for anything else.
 */
int tunnel_proto_parse_reply(const char *line, size_t len, int *ret_status,
                             const char **ret_message, size_t *ret_message_len);
