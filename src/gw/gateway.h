#pragma once
/*
 * The egress gateway of one sandbox: accepts on the TCP listener space-node
 * bound at 169.254.0.1:15001 in the sandbox's namespace (where nftables
 * redirects every TCP connection of the guest), finds the destination the
 * guest chose (SO_ORIGINAL_DST), decides by the first bytes what it is and
 * whether the policy lets it through, and if so dials that destination
 * from space-gw's own namespace and relays. gateway.c has the design.
 */
#include <stdbool.h>

struct sandbox;
struct gateway;

/* Connection table only; no listener yet. */
int gateway_new(struct sandbox *sb, struct gateway **ret);

/* Accepts on fd (a listening TCP socket, owned from here on, also on failure), instead of the
 * listener before. */
int gateway_listen(struct gateway *g, int fd);

/* Closes the listener; accepted connections go on. */
void gateway_stop_listening(struct gateway *g);

/* Closes the listener and every connection (detach). Connections end in a later loop turn. */
void gateway_close_all(struct gateway *g);

unsigned gateway_conns(const struct gateway *g);
bool gateway_listening(const struct gateway *g);

struct gateway *gateway_free(struct gateway *g);
