/* Id and name validation; pure, no allocation. */
#include "shared/sandbox-id.h"

#include <string.h>

#include "basic/macro.h"
#include "basic/random-util.h"

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool sandbox_id_is_valid(const char *id)
{
    if (!id || strlen(id) != SANDBOX_ID_LEN) {
        return false;
    }
    for (const char *p = id; *p; p++) {
        if (!is_lower_alnum(*p)) {
            return false;
        }
    }
    return true;
}

int sandbox_id_new(char out[SANDBOX_ID_LEN + 1])
{
    return random_id(out, SANDBOX_ID_LEN);
}

bool template_name_is_valid(const char *name)
{
    size_t n;

    if (!name) {
        return false;
    }
    n = strlen(name);
    if (n == 0 || n > 63 || !is_lower_alnum(name[0])) {
        return false;
    }
    for (const char *p = name; *p; p++) {
        if (!is_lower_alnum(*p) && *p != '-' && *p != '_') {
            return false;
        }
    }
    return true;
}
