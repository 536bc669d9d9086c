/*
 * A generic JSON <-> protobuf transcoder over protobuf-c descriptors.
 *
 * Decoding unpacks with protobuf-c (which bounds every allocation by the
 * input size) and walks the message. Encoding builds a message in an
 * arena: every string, array and sub-message comes from the arena and is
 * released in one go after packing, so we never depend on how
 * protobuf_c_message_free_unpacked() treats memory it did not allocate.
 * Nesting is limited to PROTO_MAX_DEPTH on both paths.
 */
#include "agent/proto-codec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <protobuf-c/protobuf-c.h>

#include "agent/entry.h"
#include "agent/state.h"
#include "basic/base64.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "shared/json-util.h"
#include "timestamp.pb-c.h"

#define PROTO_MAX_DEPTH 32

#define MEMBER(type, msg, off) (*(type *)((char *)(msg) + (off)))
#define CMEMBER(type, msg, off) (*(const type *)((const char *)(msg) + (off)))

struct arena {
    void **ptrs;
    size_t n, cap;
};

static void *arena_alloc(struct arena *a, size_t size)
{
    void *m;

    if (a->n == a->cap) {
        size_t ncap = a->cap ? a->cap * 2 : 32;
        void **np = realloc(a->ptrs, ncap * sizeof(void *));
        if (!np) {
            return NULL;
        }
        a->ptrs = np;
        a->cap = ncap;
    }
    m = calloc(1, size ? size : 1);
    if (m) {
        a->ptrs[a->n++] = m;
    }
    return m;
}

static void arena_release(struct arena *a)
{
    for (size_t i = 0; i < a->n; i++) {
        free(a->ptrs[i]);
    }
    free(a->ptrs);
    *a = (struct arena){ 0 };
}

static bool is_map_entry(const ProtobufCMessageDescriptor *d)
{
    size_t n = strlen(d->name);

    return n > 5 && strcmp(d->name + n - 5, "Entry") == 0 && d->n_fields == 2 &&
           d->fields[0].id == 1 && strcmp(d->fields[0].name, "key") == 0 && d->fields[1].id == 2 &&
           strcmp(d->fields[1].name, "value") == 0;
}

static bool is_timestamp(const ProtobufCMessageDescriptor *d)
{
    return strcmp(d->name, "google.protobuf.Timestamp") == 0;
}

/* protojson's name: snake_case -> lowerCamelCase. */
static void json_name(const char *name, char *out, size_t size)
{
    size_t o = 0;
    bool upper = false;

    for (const char *c = name; *c && o + 1 < size; c++) {
        if (*c == '_') {
            upper = true;
            continue;
        }
        out[o++] = upper && *c >= 'a' && *c <= 'z' ? (char)(*c - 'a' + 'A') : *c;
        upper = false;
    }
    out[o] = '\0';
}

static size_t elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_ENUM:
        return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return 8;
    case PROTOBUF_C_TYPE_FLOAT:
        return sizeof(float);
    case PROTOBUF_C_TYPE_DOUBLE:
        return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* --- protobuf -> JSON ---------------------------------------------------------------------- */

static json_t *message_to_json(const ProtobufCMessage *m, int depth);

static json_t *value_to_json(const ProtobufCFieldDescriptor *f, const void *p, int depth)
{
    char num[32];

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        return json_integer(*(const int32_t *)p);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return json_integer(*(const uint32_t *)p);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        snprintf(num, sizeof(num), "%" PRId64, *(const int64_t *)p);
        return json_string(num);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        snprintf(num, sizeof(num), "%" PRIu64, *(const uint64_t *)p);
        return json_string(num);
    case PROTOBUF_C_TYPE_FLOAT:
        return json_real(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE:
        return json_real(*(const double *)p);
    case PROTOBUF_C_TYPE_BOOL:
        return json_boolean(*(const protobuf_c_boolean *)p);
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
        return ev ? json_string(ev->name) : json_integer(*(const int *)p);
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return json_string(s ? s : ""); /* NULL for text that is not UTF-8 */
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        return json_util_bytes(b->data, b->len);
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
        return sub ? message_to_json(sub, depth + 1) : json_object();
    }
    }
    return NULL;
}

static bool field_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        return CMEMBER(uint32_t, m, f->quantifier_offset) == f->id;
    }
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
        if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE) {
            return CMEMBER(void *, m, f->offset) != NULL;
        }
        return CMEMBER(protobuf_c_boolean, m, f->quantifier_offset);
    }
    return true; /* required (proto3 implicit fields are not generated here) */
}

static json_t *message_to_json(const ProtobufCMessage *m, int depth)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    json_t *obj;

    if (depth > PROTO_MAX_DEPTH) {
        return NULL;
    }
    if (is_timestamp(d)) {
        const Google__Protobuf__Timestamp *ts = (const void *)m;
        struct timespec t = { .tv_sec = (time_t)ts->seconds, .tv_nsec = ts->nanos };
        char buf[40];
        if (ts->nanos < 0 || ts->nanos > 999999999) {
            return NULL;
        }
        entry_timestamp(&t, buf);
        return json_string(buf);
    }
    obj = json_object();
    if (!obj) {
        return NULL;
    }
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        char name[128];
        json_t *v = NULL;

        json_name(f->name, name, sizeof(name));
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = CMEMBER(size_t, m, f->quantifier_offset);
            const char *arr = CMEMBER(char *, m, f->offset);
            size_t sz = elem_size(f->type);
            bool map = f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor);

            if (n == 0) {
                continue;
            }
            v = map ? json_object() : json_array();
            for (size_t k = 0; v && k < n; k++) {
                if (map) {
                    const ProtobufCMessage *e = ((ProtobufCMessage *const *)arr)[k];
                    const ProtobufCMessageDescriptor *ed = e->descriptor;
                    json_t *key = value_to_json(&ed->fields[0],
                                                (const char *)e + ed->fields[0].offset, depth);
                    json_t *val = value_to_json(&ed->fields[1],
                                                (const char *)e + ed->fields[1].offset, depth);
                    /* Map keys are JSON strings whatever their proto type. */
                    char kbuf[32];
                    const char *ks = json_is_string(key) ? json_string_value(key) : NULL;
                    if (json_is_integer(key)) {
                        snprintf(kbuf, sizeof(kbuf), "%" JSON_INTEGER_FORMAT,
                                 json_integer_value(key));
                        ks = kbuf;
                    } else if (json_is_boolean(key)) {
                        ks = json_is_true(key) ? "true" : "false";
                    }
                    if (!ks || !val || json_object_set_new(v, ks, val) < 0) {
                        json_decref(val);
                        json_decref(key);
                        json_decref(v);
                        v = NULL;
                        break;
                    }
                    json_decref(key);
                } else if (json_array_append_new(v, value_to_json(f, arr + k * sz, depth)) < 0) {
                    json_decref(v);
                    v = NULL;
                }
            }
        } else {
            if (!field_present(m, f)) {
                continue;
            }
            v = value_to_json(f, (const char *)m + f->offset, depth);
        }
        if (!v || json_object_set_new(obj, name, v) < 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}

int proto_codec_decode(const void *desc, const uint8_t *data, size_t len, json_t **ret)
{
    ProtobufCMessage *m;
    json_t *j;

    if (!desc) {
        return -EOPNOTSUPP;
    }
    m = protobuf_c_message_unpack(desc, NULL, len, data);
    if (!m) {
        return -EINVAL;
    }
    j = message_to_json(m, 0);
    protobuf_c_message_free_unpacked(m, NULL);
    if (!j) {
        return -EINVAL;
    }
    *ret = j;
    return 0;
}

/* --- JSON -> protobuf ---------------------------------------------------------------------- */

static int message_from_json(const ProtobufCMessageDescriptor *d, const json_t *j, struct arena *a,
                             int depth, ProtobufCMessage **ret);

static int number_of(const json_t *v, int64_t *ret)
{
    if (json_is_integer(v)) {
        *ret = json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        return parse_i64(json_string_value(v), ret) < 0 ? -EINVAL : 0;
    }
    if (json_is_real(v) && json_real_value(v) == (double)(int64_t)json_real_value(v)) {
        *ret = (int64_t)json_real_value(v);
        return 0;
    }
    return -EINVAL;
}

static int value_from_json(const ProtobufCFieldDescriptor *f, const json_t *v, void *dst,
                           struct arena *a, int depth)
{
    int64_t n;

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        if (number_of(v, &n) < 0 || n < INT32_MIN || n > INT32_MAX) {
            return -EINVAL;
        }
        *(int32_t *)dst = (int32_t)n;
        return 0;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        if (number_of(v, &n) < 0 || n < 0 || n > UINT32_MAX) {
            return -EINVAL;
        }
        *(uint32_t *)dst = (uint32_t)n;
        return 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if (number_of(v, &n) < 0) {
            return -EINVAL;
        }
        *(int64_t *)dst = n;
        return 0;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: {
        uint64_t u;
        if (json_is_string(v)) {
            if (parse_u64(json_string_value(v), &u) < 0) {
                return -EINVAL;
            }
        } else if (number_of(v, &n) < 0 || n < 0) {
            return -EINVAL;
        } else {
            u = (uint64_t)n;
        }
        *(uint64_t *)dst = u;
        return 0;
    }
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
        if (!json_is_number(v)) {
            return -EINVAL;
        }
        if (f->type == PROTOBUF_C_TYPE_FLOAT) {
            *(float *)dst = (float)json_number_value(v);
        } else {
            *(double *)dst = json_number_value(v);
        }
        return 0;
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v)) {
            return -EINVAL;
        }
        *(protobuf_c_boolean *)dst = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_ENUM:
        if (json_is_string(v)) {
            const ProtobufCEnumValue *ev =
                protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, json_string_value(v));
            if (!ev) {
                return -EINVAL;
            }
            *(int *)dst = ev->value;
            return 0;
        }
        if (number_of(v, &n) < 0 || n < INT32_MIN || n > INT32_MAX) {
            return -EINVAL;
        }
        *(int *)dst = (int)n;
        return 0;
    case PROTOBUF_C_TYPE_STRING: {
        char *s;
        if (!json_is_string(v)) {
            return -EINVAL;
        }
        s = arena_alloc(a, json_string_length(v) + 1);
        if (!s) {
            return -ENOMEM;
        }
        memcpy(s, json_string_value(v), json_string_length(v));
        *(char **)dst = s;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        ProtobufCBinaryData *b = dst;
        size_t len = json_is_string(v) ? json_string_length(v) : 0;
        long m;
        uint8_t *buf;
        if (!json_is_string(v)) {
            return -EINVAL;
        }
        buf = arena_alloc(a, len / 4 * 3 + 4);
        if (!buf) {
            return -ENOMEM;
        }
        m = base64_decode(json_string_value(v), len, buf);
        if (m < 0) {
            return -EINVAL;
        }
        b->data = buf;
        b->len = (size_t)m;
        return 0;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        return message_from_json(f->descriptor, v, a, depth + 1, (ProtobufCMessage **)dst);
    }
    return -EINVAL;
}

static int map_from_json(const ProtobufCFieldDescriptor *f, const json_t *v, void *msg,
                         struct arena *a, int depth)
{
    const ProtobufCMessageDescriptor *ed = f->descriptor;
    size_t n = json_object_size(v), k = 0;
    ProtobufCMessage **arr;
    const char *key;
    json_t *val;
    int r;

    if (!json_is_object(v)) {
        return -EINVAL;
    }
    arr = arena_alloc(a, n * sizeof(*arr));
    if (!arr) {
        return -ENOMEM;
    }
    json_object_foreach ((json_t *)v, key, val) {
        ProtobufCMessage *e = arena_alloc(a, ed->sizeof_message);
        json_t *kj;
        if (!e) {
            return -ENOMEM;
        }
        ed->message_init(e);
        /* Keys arrive as JSON strings; only string keys are used in our protos. */
        kj = json_string(key);
        r = kj ? value_from_json(&ed->fields[0], kj, (char *)e + ed->fields[0].offset, a, depth)
               : -ENOMEM;
        json_decref(kj);
        if (r >= 0) {
            r = value_from_json(&ed->fields[1], val, (char *)e + ed->fields[1].offset, a, depth);
        }
        if (r < 0) {
            return r;
        }
        for (unsigned i = 0; i < 2; i++) {
            if (ed->fields[i].label == PROTOBUF_C_LABEL_OPTIONAL &&
                ed->fields[i].type != PROTOBUF_C_TYPE_STRING &&
                ed->fields[i].type != PROTOBUF_C_TYPE_MESSAGE) {
                MEMBER(protobuf_c_boolean, e, ed->fields[i].quantifier_offset) = 1;
            }
        }
        arr[k++] = e;
    }
    MEMBER(size_t, msg, f->quantifier_offset) = n;
    MEMBER(ProtobufCMessage **, msg, f->offset) = arr;
    return 0;
}

static int message_from_json(const ProtobufCMessageDescriptor *d, const json_t *j, struct arena *a,
                             int depth, ProtobufCMessage **ret)
{
    ProtobufCMessage *m;
    int r;

    if (depth > PROTO_MAX_DEPTH) {
        return -EINVAL;
    }
    m = arena_alloc(a, d->sizeof_message);
    if (!m) {
        return -ENOMEM;
    }
    d->message_init(m);
    if (is_timestamp(d)) {
        Google__Protobuf__Timestamp *ts = (void *)m;
        struct timespec t;
        if (!json_is_string(j) || state_parse_rfc3339(json_string_value(j), &t) < 0) {
            return -EINVAL;
        }
        ts->seconds = t.tv_sec;
        ts->has_seconds = 1;
        ts->nanos = (int32_t)t.tv_nsec;
        ts->has_nanos = t.tv_nsec != 0;
        *ret = m;
        return 0;
    }
    if (!json_is_object(j)) {
        return -EINVAL;
    }
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        char name[128];
        json_t *v;

        json_name(f->name, name, sizeof(name));
        v = json_util_field(j, name, f->name);
        if (!v) {
            continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n, sz = elem_size(f->type);
            char *arr;
            if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor)) {
                r = map_from_json(f, v, m, a, depth);
                if (r < 0) {
                    return r;
                }
                continue;
            }
            if (!json_is_array(v)) {
                return -EINVAL;
            }
            n = json_array_size(v);
            arr = arena_alloc(a, n * sz);
            if (!arr) {
                return -ENOMEM;
            }
            for (size_t k = 0; k < n; k++) {
                r = value_from_json(f, json_array_get(v, k), arr + k * sz, a, depth);
                if (r < 0) {
                    return r;
                }
            }
            MEMBER(size_t, m, f->quantifier_offset) = n;
            MEMBER(char *, m, f->offset) = arr;
            continue;
        }
        r = value_from_json(f, v, (char *)m + f->offset, a, depth);
        if (r < 0) {
            return r;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            MEMBER(uint32_t, m, f->quantifier_offset) = f->id;
        } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
                   f->type != PROTOBUF_C_TYPE_MESSAGE) {
            MEMBER(protobuf_c_boolean, m, f->quantifier_offset) = 1;
        }
    }
    *ret = m;
    return 0;
}

int proto_codec_encode(const void *desc, const json_t *msg, struct evbuffer *out)
{
    struct arena a = { 0 };
    ProtobufCMessage *m = NULL;
    struct evbuffer_iovec v;
    size_t size;
    int r;

    if (!desc) {
        return -EOPNOTSUPP;
    }
    r = message_from_json(desc, msg, &a, 0, &m);
    if (r < 0) {
        goto out;
    }
    size = protobuf_c_message_get_packed_size(m);
    if (evbuffer_reserve_space(out, (ev_ssize_t)(size ? size : 1), &v, 1) < 1) {
        r = -ENOMEM;
        goto out;
    }
    v.iov_len = protobuf_c_message_pack(m, v.iov_base);
    r = evbuffer_commit_space(out, &v, 1) < 0 ? -ENOMEM : 0;
out:
    arena_release(&a);
    return r;
}
