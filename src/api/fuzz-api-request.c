/*
 * libFuzzer target over space-api's own request parsing: route matching of
 * the request path (every pattern of the table), the allowlists of query
 * parameters and fields, the E2B metadata filter's
 * nested decoding, and RFC 3339 times. The handlers' JSON parsing is
 * jansson's; what is ours is fuzzed here. Built only with -Dfuzzers=true.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "e2b-sandboxes.c"
#include "routes.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char buf[4096], id[256] = "";
    char **pairs = NULL;
    int64_t t;

    if (size >= sizeof(buf)) {
        return 0;
    }
    memcpy(buf, data, size);
    buf[size] = '\0';
    for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
        if (match(routes[i].pattern, buf, id, sizeof(id))) {
            (void)sandbox_id_is_valid(id);
            (void)is_hex32(id);
        }
    }
    /* query and field allowlists (routes.c) */
    (void)word_in(buf, "metadata");
    (void)word_in("metadata state limit nextToken", buf);
    if (parse_metadata_filter(buf, &pairs) >= 0) {
        free_strv(pairs);
    }
    (void)sandbox_parse_time(buf, &t);
    return 0;
}
