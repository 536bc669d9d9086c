#pragma once
/*
 * A template's default size (architecture.md "Sizes"): the vcpus and
 * memory_mb that tools/template-build.sh wrote into template.json from the
 * recipe's `size` file. A create that gives no size gets it; the warm pool
 * keeps members of it. A template.json without them (built before sizes)
 * is 1 vCPU, 512 MiB.
 */
#include <stdbool.h>

#define TEMPLATE_SIZE_DEFAULT_VCPUS 1
#define TEMPLATE_SIZE_DEFAULT_MEMORY_MIB 512
/* The bounds a create's size is held to as well (http-api.c). */
#define TEMPLATE_SIZE_MAX_VCPUS 16
#define TEMPLATE_SIZE_MIN_MEMORY_MIB 128
#define TEMPLATE_SIZE_MAX_MEMORY_MIB (64u * 1024)

struct template_size {
    unsigned vcpus, memory_mib;
};

static inline bool template_size_equal(const struct template_size *a, const struct template_size *b)
{
    return a->vcpus == b->vcpus && a->memory_mib == b->memory_mib;
}

/* The size in template.json's text; -EINVAL with *why when a field is there but not an
 * integer in bounds (or the text is no JSON object). */
int template_size_parse(const char *json_text, struct template_size *ret, const char **why);
/* The same from tdir/template.json; -errno when it cannot be read. */
int template_size_load(const char *tdir, struct template_size *ret, const char **why);
