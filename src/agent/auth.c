/*
 * Request authentication. The token comparison is constant-time in the
 * length of the expected token so a client cannot learn it byte by byte.
 */
#include "agent/auth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "agent/agent.h"
#include "agent/user.h"

bool auth_secret_equal(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    unsigned char diff = na != nb;

    for (size_t i = 0; i < nb; i++) {
        diff |= (unsigned char)(b[i] ^ (i < na ? a[i] : 0));
    }
    return diff == 0;
}

bool auth_token_ok(struct agent *a, struct evhttp_request *req)
{
    const char *got;

    if (!a->access_token) {
        return true;
    }
    got = evhttp_find_header(evhttp_request_get_input_headers(req), "X-Access-Token");
    return got && auth_secret_equal(got, a->access_token);
}

int auth_user_or_default(struct agent *a, const char *name, struct user **ret)
{
    if (!name || !*name) {
        name = a->default_user;
    }
    return user_lookup(name, ret);
}

int auth_request_user(struct agent *a, struct evhttp_request *req, struct user **ret)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    char *name = NULL;
    int r;

    if (h) {
        r = user_from_basic_auth(h, &name);
        if (r < 0) {
            return r;
        }
    }
    r = auth_user_or_default(a, name, ret);
    free(name);
    return r;
}
