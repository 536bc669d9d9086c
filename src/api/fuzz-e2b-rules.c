/*
 * libFuzzer target over the E2B network.rules mapping (egress.c: header transforms onto
 * native inject rules, literals onto sandbox secrets) and the placeholder scanner
 * (secrets_for_each_ref()): API clients send both. The input is a PUT
 * /sandboxes/{id}/network body; nothing is stored. Built only with -Dfuzzers=true.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/egress.h"
#include "api/secrets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count(const char *name, void *userdata)
{
    (*(size_t *)userdata) += strlen(name) > 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct policy_error err = { { 0 } };
    char buf[8192], *text = NULL;
    json_error_t jerr;
    size_t refs = 0;
    json_t *body, *literals;

    if (size >= sizeof(buf)) {
        return 0;
    }
    memcpy(buf, data, size);
    buf[size] = '\0';
    (void)secrets_for_each_ref(buf, count, &refs);
    body = json_loadb(buf, size, 0, &jerr);
    literals = json_object();
    if (json_is_object(body) && literals &&
        egress_from_e2b(body, NULL, true, "abcdefghij0123456789", literals, &text, &err) >= 0) {
        /* What was stored must read back as a policy. */
        json_t *native = egress_native(text), *echo = egress_e2b_network(text);
        if (!native || !echo) {
            abort();
        }
        json_decref(native);
        json_decref(echo);
    }
    free(text);
    json_decref(literals);
    json_decref(body);
    return 0;
}
