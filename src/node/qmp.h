#pragma once
/*
 * A minimal QMP client (QEMU Machine Protocol over a Unix socket). Blocking,
 * one command at a time, used from worker threads. Replies are hostile input
 * in principle (QEMU runs the guest): lines are capped at QMP_MAX_LINE and
 * parsed with jansson; asynchronous events are skipped.
 */
#include <jansson.h>

#include "basic/time-util.h"

#define QMP_MAX_LINE (1024u * 1024)

struct qmp;

/* Connects, reads the greeting and negotiates capabilities. */
int qmp_open(const char *socket_path, usec_t timeout, struct qmp **ret);
/*
 * Runs `command` with `args` (stolen; may be NULL). On success *ret_return
 * (may be NULL) gets the "return" value (new reference). A QMP error reply
 * gives -EIO.
 */
int qmp_execute(struct qmp *q, const char *command, json_t *args, json_t **ret_return);
struct qmp *qmp_close(struct qmp *q);
