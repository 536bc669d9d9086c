#pragma once
/*
 * The sandboxes whose VMM ended on its own (death.h), freed already: what the node reports
 * in GET /v1/sandboxes "failed" and GET /v1/sandboxes/{id} (404 naming the reason) until the
 * api has seen them. A ring of the newest FAILED_LIST_MAX, the oldest dropped. The node
 * saves it to <data>/failed.json on every death (rare) and reads it back at start: a node
 * restart between a death and the api's next sync (10 s) would otherwise turn the reason
 * into "lost by its node".
 */
#include <stdbool.h>
#include <stddef.h>

#include "basic/time-util.h"
#include "node/death.h"
#include "node/instance.h"

#define FAILED_LIST_MAX 64
#define FAILED_LIST_FILE "failed.json"

struct failure {
    char sandbox_id[SANDBOX_ID_LEN + 1];
    char iid[INSTANCE_ID_LEN + 1];
    enum death_reason reason;
    char message[DEATH_MESSAGE_MAX];
    usec_t at; /* realtime */
};

struct failed_list {
    struct failure ring[FAILED_LIST_MAX]; /* the oldest at first */
    size_t first, n;
};

/* The i-th oldest (NULL past the end); the newest of sandbox_id (NULL: none). */
const struct failure *failed_list_at(const struct failed_list *l, size_t i);
const struct failure *failed_list_find(const struct failed_list *l, const char *sandbox_id);
/* Appends f, dropping the oldest when full. */
void failed_list_add(struct failed_list *l, const struct failure *f);

/* Writes the list, oldest first, as a JSON array to path (atomically). 0 or -errno. */
int failed_list_save(const struct failed_list *l, const char *path);
/*
 * Replaces l with what path holds. -ENOENT (none: l empty), -EINVAL when it does not parse
 * or an entry is invalid (l empty: a damaged file costs the reasons, never the node).
 */
int failed_list_load(struct failed_list *l, const char *path);
