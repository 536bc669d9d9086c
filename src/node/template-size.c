/* A template's default size from its template.json (template-size.h). */
#include "node/template-size.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "basic/fileio.h"

static int field(json_t *t, const char *key, unsigned min, unsigned max, unsigned *value)
{
    json_t *v = json_object_get(t, key);
    if (!v) {
        return 0; /* the default stays */
    }
    if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)min ||
        json_integer_value(v) > (json_int_t)max) {
        return -EINVAL;
    }
    *value = (unsigned)json_integer_value(v);
    return 0;
}

int template_size_parse(const char *json_text, struct template_size *ret, const char **why)
{
    struct template_size s = { .vcpus = TEMPLATE_SIZE_DEFAULT_VCPUS,
                               .memory_mib = TEMPLATE_SIZE_DEFAULT_MEMORY_MIB };
    json_error_t err;
    json_t *t = json_text ? json_loads(json_text, 0, &err) : NULL;
    int r = 0;

    *why = NULL;
    if (!json_is_object(t)) {
        *why = "template.json is not a JSON object";
        r = -EINVAL;
    } else if (field(t, "vcpus", 1, TEMPLATE_SIZE_MAX_VCPUS, &s.vcpus) < 0) {
        *why = "template.json's 'vcpus' is not an integer 1..16";
        r = -EINVAL;
    } else if (field(t, "memory_mb", TEMPLATE_SIZE_MIN_MEMORY_MIB, TEMPLATE_SIZE_MAX_MEMORY_MIB,
                     &s.memory_mib) < 0) {
        *why = "template.json's 'memory_mb' is not an integer 128..65536";
        r = -EINVAL;
    }
    json_decref(t);
    if (r >= 0) {
        *ret = s;
    }
    return r;
}

int template_size_load(const char *tdir, struct template_size *ret, const char **why)
{
    char path[PATH_MAX + 32], *text = NULL;
    int r;

    snprintf(path, sizeof(path), "%s/template.json", tdir);
    r = read_file(path, 1 << 16, &text, NULL);
    if (r < 0) {
        *why = "template.json cannot be read";
        return r;
    }
    r = template_size_parse(text, ret, why);
    free(text);
    return r;
}
