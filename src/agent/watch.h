#pragma once
/*
 * Directory watchers over inotify (e2b-compat.md §6.4): the WatchDir
 * stream, and the polled CreateWatcher / GetWatcherEvents / RemoveWatcher
 * trio the Python sync SDK uses.
 */
#include "agent/rpc.h"

struct agent;
struct watch_table;

int watch_table_new(struct agent *a, struct watch_table **ret);
/* Closes every watcher and ends every watch stream. */
struct watch_table *watch_table_free(struct watch_table *t);

void watch_rpc_watch_dir(struct rpc_call *call);
void watch_rpc_create_watcher(struct rpc_call *call);
void watch_rpc_get_watcher_events(struct rpc_call *call);
void watch_rpc_remove_watcher(struct rpc_call *call);
