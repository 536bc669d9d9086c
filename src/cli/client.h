#pragma once
/*
 * The CLI's typed access to the node API over its Unix socket, and the
 * locations of the other installed pieces (node binary, agent, recipes).
 * Every function prints its own error to stderr and returns -errno.
 */
#include <jansson.h>
#include <stddef.h>

/* The api's local admin socket: $SPACE_SOCKET or /run/space/api.sock. */
const char *client_socket(void);
const char *client_data_dir(void);

/*
 * method path with an optional JSON body (borrowed). On success *ret_status
 * and *ret_body (parsed JSON or NULL for an empty body; caller decrefs).
 */
int client_call(const char *method, const char *path, json_t *body, int *ret_status,
                json_t **ret_body);
/* Like client_call but 2xx is required; prints the API's error message otherwise. */
int client_call_ok(const char *method, const char *path, json_t *body, json_t **ret_body);

/* Paths of our own pieces, from env overrides, the install tree, or the build tree. */
int client_find_node(char *buf, size_t n);
int client_find_api(char *buf, size_t n);
/* space-gw, the egress gateway ($SPACE_GW, beside space, or src/gw/ in the build tree). */
int client_find_gw(char *buf, size_t n);
int client_find_agent(char *buf, size_t n);
int client_find_share(char *buf, size_t n);
