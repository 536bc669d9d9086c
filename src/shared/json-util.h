#pragma once
/*
 * jansson helpers for proto3 canonical JSON (e2b-compat.md §6.1), used by
 * the agent to decode Connect requests. Every getter looks a field up by
 * its lowerCamelCase JSON name first and then by the proto (snake_case)
 * name `alt` (may be NULL), treats JSON null like an absent field, and
 * accepts the spellings proto3 parsers accept: numbers or decimal strings
 * for integers, names or numbers for enums, standard or URL-safe base64
 * for bytes. Getters write *ret only on success and return:
 *   0        the field is present and valid;
 *   -ENOENT  the field is absent or null (*ret untouched: keep your default);
 *   -EINVAL  the field has the wrong type or an out-of-range value.
 * Borrowed references stay valid as long as the object they came from.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Returns the field (borrowed), or NULL when absent or null. */
json_t *json_util_field(const json_t *obj, const char *name, const char *alt);

int json_util_get_string(const json_t *obj, const char *name, const char *alt, const char **ret);
int json_util_get_bool(const json_t *obj, const char *name, const char *alt, bool *ret);
int json_util_get_u32(const json_t *obj, const char *name, const char *alt, uint32_t *ret);
int json_util_get_i64(const json_t *obj, const char *name, const char *alt, int64_t *ret);
/* Object-typed field (borrowed). */
int json_util_get_object(const json_t *obj, const char *name, const char *alt, json_t **ret);
/* Array-typed field (borrowed). */
int json_util_get_array(const json_t *obj, const char *name, const char *alt, json_t **ret);

/*
 * Decodes a base64 `bytes` field into a new buffer (caller frees; it has
 * one spare NUL byte). Values decoding to more than max bytes give -E2BIG
 * before anything is allocated.
 */
int json_util_get_bytes(const json_t *obj, const char *name, const char *alt, size_t max,
                        void **ret, size_t *ret_len);

struct json_util_enum {
    const char *name;
    int value;
};
/* Enum field: one of table's names, or a number that appears in table. */
int json_util_get_enum(const json_t *obj, const char *name, const char *alt,
                       const struct json_util_enum *table, size_t n, int *ret);

/*
 * A JSON string for bytes that should be UTF-8 but may not be (file names):
 * invalid sequences become U+FFFD. Returns a new reference or NULL on OOM.
 */
json_t *json_util_string_lossy(const char *s, size_t len);

/* Encodes len bytes as a base64 JSON string (new reference, NULL on OOM). */
json_t *json_util_bytes(const void *data, size_t len);

/*
 * Sets obj[key] = value and drops the reference to value, like
 * json_object_set_new(), but treats a NULL value as an allocation failure.
 * Returns 0 or -ENOMEM.
 */
int json_util_set_new(json_t *obj, const char *key, json_t *value);
