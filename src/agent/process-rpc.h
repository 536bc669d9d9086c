#pragma once
/* process.Process RPC handlers (e2b-compat.md §6.3): decoding and errors only; process.c does the
 * work. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "agent/rpc.h"

/* A decoded StartRequest; strings and JSON values are borrowed from the message. */
struct start_request {
    const char *cmd;
    const json_t *args; /* array of strings, or NULL */
    size_t n_args;
    const json_t *envs; /* object of strings, or NULL */
    const char *cwd;    /* NULL: the default workdir */
    const char *tag;
    bool pty;
    uint16_t cols, rows;
    bool stdin_on; /* true when `stdin` is true or absent */
};

/*
 * Decodes and validates a StartRequest (pure: no I/O). Returns 0, or
 * -EINVAL with *ret_error set to a message for the client.
 */
int process_rpc_parse_start(const json_t *msg, struct start_request *ret, const char **ret_error);

void process_rpc_start(struct rpc_call *call);
void process_rpc_connect(struct rpc_call *call);
void process_rpc_list(struct rpc_call *call);
void process_rpc_send_input(struct rpc_call *call);
void process_rpc_send_signal(struct rpc_call *call);
void process_rpc_close_stdin(struct rpc_call *call);
void process_rpc_update(struct rpc_call *call);
void process_rpc_stream_input(struct rpc_call *call);
