#pragma once
/*
 * The control channel between space-node (root, owns each sandbox's
 * network namespace) and space-gw (unprivileged, owns the DNS proxy, the
 * egress gateway and the audit records). One definition, so the two sides
 * cannot drift apart.
 *
 * Why file descriptors cross it: no packet from a guest is ever routed by
 * the host kernel. space-node opens the proxy's UDP socket and the
 * gateway's TCP listener *inside* the sandbox's namespace, on the host side
 * of its tap (GW_PROTO_LISTEN_IP, where the guest's resolver and default
 * route already point), and hands them to space-gw; a socket stays bound
 * to the namespace it was created in, whoever holds it. space-gw accepts
 * and reads on them and dials upstream from its own namespace. space-gw
 * never needs CAP_NET_ADMIN, never enters a sandbox's namespace, and port
 * 53 is bound by the node, so it needs no CAP_NET_BIND_SERVICE either.
 *
 * Transport: AF_UNIX SOCK_SEQPACKET at the gateway's --control-socket
 * (space-gw listens, mode 0600; space-node connects). One datagram = one
 * JSON object (at most GW_PROTO_MSG_MAX bytes) plus, for "attach", exactly
 * two descriptors in one SCM_RIGHTS message: [0] the DNS UDP socket, [1]
 * the gateway's listening TCP socket. Anything else (unknown type, wrong
 * fd count, oversize, bad JSON) is refused with an error reply and the
 * received descriptors are closed.
 *
 * node -> gw
 *   {"type":"hello","node":"<node name>"}
 *       First message of every session. space-gw closes every descriptor
 *       an earlier session handed it (connections already accepted keep
 *       running to their end), so a restarted node can bind the addresses
 *       again. Reply: {"type":"hello","ok":true,"caCert":"<PEM>",
 *       "caPhase":"stable"|"staged"|"switched","caCurrent":"<sha256 hex>",
 *       "caNext":"<sha256 hex>" (while rotating)}: caCert is the bundle of
 *       egress CA certificates the guests trust (terminated TLS): the
 *       current one, and the next one during a rotation (src/gw/ca-set.h).
 *   {"type":"attach","instance":"<iid>","sandbox":"<sandbox id>",
 *    "policy":{native policy: policy_parse_native()}}      + 2 fds
 *       Starts serving DNS and TCP for that sandbox under that policy.
 *       Attaching an instance again replaces its descriptors and policy.
 *       The policy may carry "inject" rules and the "secrets" map of values
 *       sealed to space-gw's key (sealed-secret.h, <data-dir>/secrets.pub),
 *       added by the api; the whole message must fit GW_PROTO_MSG_MAX. A
 *       secret that does not open refuses the message ("ok": false, the
 *       error names it) and nothing of it is applied.
 *   {"type":"policy","instance":"<iid>","policy":{native policy}}
 *       Replaces the policy; new connections and queries see it at once,
 *       and the next request on a kept-alive one (a rotated secret too).
 *   {"type":"detach","instance":"<iid>"}
 *       Closes its descriptors and every open connection of the sandbox.
 *   {"type":"ca-rotate","step":"stage"|"switch"|"finish"}
 *       One step of the egress CA's rotation (src/gw/ca-set.h): stage
 *       creates the next CA (the bundle holds both), switch mints leaves
 *       with it, finish makes it the current one (the old one is deleted).
 *       A step out of order is refused; repeating stage or switch is a
 *       no-op. The reply carries the CA fields of the hello reply.
 *   Every request gets one reply of the same "type" with "instance" (when
 *   the request had one) and "ok": true, or "ok": false and "error":
 *   "<message>". Replies come in request order.
 *
 * gw -> node (unsolicited, interleaved with replies)
 *   {"type":"audit","records":[<record>...]}
 *       A batch of decisions, oldest first, at most GW_PROTO_AUDIT_BATCH
 *       records, sent at least every GW_PROTO_AUDIT_FLUSH_MS while any are
 *       pending. Record fields (absent = not applicable):
 *         sandbox   sandbox id            time       realtime, microseconds
 *         proto     "dns" | "http" | "tls" | "tcp"
 *         name      the DNS name asked    sni, host, method
 *         dst, port the destination the guest chose (the gateway dials it)
 *         verdict   "allow" | "deny"      reason     policy_reason_str() or
 *                                                    a gateway token ("no-sni",
 *                                                    "host-mismatch", ...)
 *         bytesOut, bytesIn   guest->upstream and back
 *         durationMs          connection (or query) lifetime
 *         secret    the names (never values) of the secrets injected into
 *                   the request, comma-joined: "gh" or "gh,npm" (inject.h)
 *       When space-gw cannot send (node gone, queue full) it keeps the
 *       newest GW_PROTO_AUDIT_QUEUE_MAX records and counts the ones it
 *       dropped in a record {"reason":"audit-dropped","count":N}. Likewise
 *       what a per-sandbox limit refused is one record per second at most,
 *       with "count": reasons "dns-rate-limit", "conn-limit" and
 *       "malformed-query: <why>".
 */

#define GW_PROTO_LISTEN_IP "169.254.0.1" /* = NETSLOT_HOST_IP, the host side of the tap */
#define GW_PROTO_DNS_PORT 53
#define GW_PROTO_GATEWAY_PORT 15001 /* every guest TCP connection is redirected here */
#define GW_PROTO_MSG_MAX 65536
#define GW_PROTO_AUDIT_BATCH 256
#define GW_PROTO_AUDIT_FLUSH_MS 200
#define GW_PROTO_AUDIT_QUEUE_MAX 65536
#define GW_PROTO_SOCKET_DEFAULT "/run/space/gw.sock"
