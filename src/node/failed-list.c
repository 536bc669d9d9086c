/* The node's list of sandboxes that died on their own (failed-list.h). */
#include "node/failed-list.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/fileio.h"

/* failed.json holds 64 entries of ~400 bytes: anything much bigger is not ours. */
#define FAILED_LIST_FILE_MAX (256u << 10)

const struct failure *failed_list_at(const struct failed_list *l, size_t i)
{
    return i < l->n ? &l->ring[(l->first + i) % FAILED_LIST_MAX] : NULL;
}

const struct failure *failed_list_find(const struct failed_list *l, const char *sandbox_id)
{
    for (size_t i = l->n; i-- > 0;) {
        const struct failure *f = failed_list_at(l, i);
        if (strcmp(f->sandbox_id, sandbox_id) == 0) {
            return f;
        }
    }
    return NULL;
}

void failed_list_add(struct failed_list *l, const struct failure *f)
{
    if (l->n == FAILED_LIST_MAX) {
        l->ring[l->first] = *f;
        l->first = (l->first + 1) % FAILED_LIST_MAX;
    } else {
        l->ring[(l->first + l->n++) % FAILED_LIST_MAX] = *f;
    }
}

int failed_list_save(const struct failed_list *l, const char *path)
{
    json_t *a = json_array();
    char *text;
    int r;

    for (size_t i = 0; a && i < l->n; i++) {
        const struct failure *f = failed_list_at(l, i);
        if (json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:I}", "id", f->sandbox_id,
                                               "instance_id", f->iid, "reason",
                                               death_reason_to_string(f->reason), "message",
                                               f->message, "at_us", (json_int_t)f->at)) < 0) {
            json_decref(a);
            a = NULL;
        }
    }
    text = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    if (!text) {
        return -ENOMEM;
    }
    /* No fsync: the list must outlive a node restart; a host crash ends the VMs anyway. */
    r = write_file_atomic_nosync(path, text, strlen(text));
    free(text);
    return r;
}

static int failure_from_json(json_t *o, struct failure *f)
{
    const char *id, *iid, *reason, *message;
    json_int_t at;

    if (json_unpack(o, "{s:s, s:s, s:s, s:s, s:I !}", "id", &id, "instance_id", &iid, "reason",
                    &reason, "message", &message, "at_us", &at) < 0 ||
        !sandbox_id_is_valid(id) || !instance_id_is_valid(iid) || at < 0 ||
        strlen(message) >= sizeof(f->message) || death_reason_from_string(reason) < 0) {
        return -EINVAL;
    }
    *f = (struct failure){ .reason = (enum death_reason)death_reason_from_string(reason),
                           .at = (usec_t)at };
    snprintf(f->sandbox_id, sizeof(f->sandbox_id), "%s", id);
    snprintf(f->iid, sizeof(f->iid), "%s", iid);
    snprintf(f->message, sizeof(f->message), "%s", message);
    return 0;
}

int failed_list_load(struct failed_list *l, const char *path)
{
    char *text = NULL;
    size_t len;
    json_t *a;
    int r;

    *l = (struct failed_list){ 0 };
    r = read_file(path, FAILED_LIST_FILE_MAX, &text, &len);
    if (r < 0) {
        return r == -ENOENT ? -ENOENT : -EINVAL;
    }
    a = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    free(text);
    r = json_is_array(a) ? 0 : -EINVAL;
    for (size_t i = 0; r == 0 && i < json_array_size(a); i++) {
        struct failure f;
        r = failure_from_json(json_array_get(a, i), &f);
        if (r == 0) {
            failed_list_add(l, &f);
        }
    }
    json_decref(a);
    if (r < 0) {
        *l = (struct failed_list){ 0 };
    }
    return r;
}
