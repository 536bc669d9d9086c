#pragma once
/*
 * A minimal QMP client (QEMU Machine Protocol over a Unix socket). Blocking,
 * one command at a time, used from worker threads. Replies are hostile input
 * in principle (QEMU runs the guest): lines are capped at QMP_MAX_LINE and
 * parsed with jansson; asynchronous events are skipped.
 */
#include <jansson.h>

#include "basic/strbuf.h"
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
/* qmp_execute() with descriptor `fd` passed alongside (SCM_RIGHTS), for "getfd". */
int qmp_execute_fd(struct qmp *q, const char *command, json_t *args, int fd, json_t **ret_return);
struct qmp *qmp_close(struct qmp *q);

/*
 * The parsing under qmp_execute(), pure so fuzz-qmp can drive it.
 * qmp_take_message() takes the first complete line out of `in` and parses
 * it: 1 and *ret (new reference) for a JSON object, 0 while no line is
 * complete, -EPROTO for anything else (the line is consumed either way).
 */
int qmp_take_message(struct strbuf *in, json_t **ret);
/*
 * What a message read while waiting for a command's reply means: 1 for an
 * asynchronous event (skip it), -EIO for an error reply, 0 for the reply,
 * with *ret_return (may be NULL) set to its "return" value (new reference;
 * JSON null when absent).
 */
int qmp_reply_parse(json_t *msg, json_t **ret_return);
