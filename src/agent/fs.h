#pragma once
/* filesystem.Filesystem unary RPCs (e2b-compat.md §6.4): Stat, ListDir, MakeDir, Move, Remove. */
#include "agent/rpc.h"

void fs_rpc_stat(struct rpc_call *call);
void fs_rpc_list_dir(struct rpc_call *call);
void fs_rpc_make_dir(struct rpc_call *call);
void fs_rpc_move(struct rpc_call *call);
void fs_rpc_remove(struct rpc_call *call);
