/* Strict decimal parsing on top of strtoull/strtoll with full error checks. */
#include "basic/parse-util.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "basic/macro.h"

static int parse_u64_prefix(const char *s, uint64_t *ret, const char **ret_end)
{
    char *end = NULL;
    unsigned long long v;

    if (!s || !isdigit((unsigned char)s[0])) {
        return -EINVAL;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno == ERANGE) {
        return -ERANGE;
    }
    if (errno != 0 || end == s) {
        return -EINVAL;
    }
    *ret = v;
    *ret_end = end;
    return 0;
}

int parse_u64(const char *s, uint64_t *ret)
{
    const char *end;
    uint64_t v;
    int r = parse_u64_prefix(s, &v, &end);
    if (r < 0) {
        return r;
    }
    if (*end != '\0') {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

int parse_u32(const char *s, uint32_t *ret)
{
    uint64_t v;
    int r = parse_u64(s, &v);
    if (r < 0) {
        return r;
    }
    if (v > UINT32_MAX) {
        return -ERANGE;
    }
    *ret = (uint32_t)v;
    return 0;
}

int parse_i64(const char *s, int64_t *ret)
{
    char *end = NULL;
    long long v;

    if (!s || !(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1])))) {
        return -EINVAL;
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno == ERANGE) {
        return -ERANGE;
    }
    if (errno != 0 || *end != '\0') {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

int parse_size(const char *s, uint64_t *ret)
{
    const char *end;
    uint64_t v, mult = 1;
    int r = parse_u64_prefix(s, &v, &end);
    if (r < 0) {
        return r;
    }
    switch (*end) {
    case '\0':
        break;
    case 'K':
    case 'k':
        mult = 1ULL << 10;
        end++;
        break;
    case 'M':
    case 'm':
        mult = 1ULL << 20;
        end++;
        break;
    case 'G':
    case 'g':
        mult = 1ULL << 30;
        end++;
        break;
    default:
        return -EINVAL;
    }
    if (mult > 1 && end[0] == 'i' && end[1] == 'B') {
        end += 2;
    } else if (mult > 1 && end[0] == 'B') {
        end++;
    }
    if (*end != '\0') {
        return -EINVAL;
    }
    if (v > UINT64_MAX / mult) {
        return -ERANGE;
    }
    *ret = v * mult;
    return 0;
}
