#pragma once
/*
 * Sandbox-level state and the small envd endpoints around it
 * (e2b-compat.md §6.6): POST /init (env, token, default user and workdir,
 * clock), GET /envs, GET /metrics.
 */
struct agent;
struct evhttp_request;

void state_http_init(struct agent *a, struct evhttp_request *req);
void state_http_envs(struct agent *a, struct evhttp_request *req);
void state_http_metrics(struct agent *a, struct evhttp_request *req);

/* As the guest's init: re-applies what /init set before a restart of the server. */
int state_restore(struct agent *a);

/* Parses an RFC 3339 timestamp into a timespec. Returns 0 or -EINVAL. */
struct timespec;
int state_parse_rfc3339(const char *s, struct timespec *ret);
