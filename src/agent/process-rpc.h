#pragma once
/* process.Process RPC handlers (e2b-compat.md §6.3): decoding and errors only; process.c does the work. */
#include "agent/rpc.h"

void process_rpc_start(struct rpc_call *call);
void process_rpc_connect(struct rpc_call *call);
void process_rpc_list(struct rpc_call *call);
void process_rpc_send_input(struct rpc_call *call);
void process_rpc_send_signal(struct rpc_call *call);
void process_rpc_close_stdin(struct rpc_call *call);
void process_rpc_update(struct rpc_call *call);
void process_rpc_stream_input(struct rpc_call *call);
