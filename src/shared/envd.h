#pragma once
/*
 * envd, the in-guest agent E2B's SDKs talk to (src/agent implements it):
 * the constants every program shares. One definition, so the ingress'
 * port checks, the node's agent client, the agent's default listen
 * address and the CLI cannot drift apart.
 */

#define ENVD_PORT 49983
#define ENVD_PORT_STR "49983" /* for string literals */
