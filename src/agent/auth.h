#pragma once
/*
 * Who a request is from (e2b-compat.md §5): the access token set by /init
 * and the OS user picked by "Authorization: Basic base64(user:)".
 */
#include <stdbool.h>

struct agent;
struct evhttp_request;
struct user;

/*
 * The user a request runs as: the Basic-auth user, else the default user.
 * Returns 0, -EINVAL for a malformed Authorization header, -ENOENT for an
 * unknown user, -ENOMEM. Caller frees *ret with user_free().
 */
int auth_request_user(struct agent *a, struct evhttp_request *req, struct user **ret);

/* Looks up name, or the default user when name is NULL or empty. */
int auth_user_or_default(struct agent *a, const char *name, struct user **ret);

/* True when no token is set or X-Access-Token matches it (constant time). */
bool auth_token_ok(struct agent *a, struct evhttp_request *req);

/* Constant-time string comparison for secrets. */
bool auth_secret_equal(const char *a, const char *b);
