#pragma once
/*
 * Every hard limit space-agent enforces on what a client or a guest process
 * can make it hold (style.md R18). A request past a limit fails with
 * resource_exhausted or invalid_argument; it never grows the agent.
 */

/* One Connect message (request or response), before decoding. */
#define AGENT_MAX_RPC_BODY (16u * 1024 * 1024)
/* Any HTTP request body except /files uploads. */
#define AGENT_MAX_HTTP_BODY (4u * 1024 * 1024)
/* Request headers, all together. */
#define AGENT_MAX_HEADERS (64u * 1024)

/* Processes started through Start and still running. */
#define AGENT_MAX_PROCS 4096
/* Finished processes remembered for a late Connect (oldest dropped first). */
#define AGENT_MAX_ENDED_PROCS 256
/* Streams attached to one process (Start + Connect). */
#define AGENT_MAX_SUBSCRIBERS 64
/* argv entries and env entries of one Start. */
#define AGENT_MAX_ARGS 65536
#define AGENT_MAX_ENVS 65536

/*
 * Output a stream may have queued for a slow client before the agent stops
 * reading that process's pipes. This bounds memory per subscriber: a process
 * writing 1 GiB to a slow reader is paused by its pipe, not buffered here.
 */
#define AGENT_STREAM_HIGH_WATER (1024u * 1024)
/* Pipe reads per chunk: 32 KiB for stdout/stderr, 16 KiB for a PTY (as envd). */
#define AGENT_CHUNK_STD (32u * 1024)
#define AGENT_CHUNK_PTY (16u * 1024)
/* After a process exits, at most this much is still read from its pipes. */
#define AGENT_MAX_DRAIN_AFTER_EXIT (4u * 1024 * 1024)
/* Stdin bytes queued for a process that is not reading them. */
#define AGENT_MAX_STDIN_QUEUE (1024u * 1024)
/* One SendInput payload. */
#define AGENT_MAX_INPUT (4u * 1024 * 1024)

/* Directory watchers (WatchDir streams and CreateWatcher handles together). */
#define AGENT_MAX_WATCHERS 256
/* Events queued on a polled watcher between two GetWatcherEvents calls. */
#define AGENT_MAX_WATCHER_EVENTS 4096
/* Bytes of events queued for a slow WatchDir client before its stream is ended. */
#define AGENT_MAX_WATCH_BACKLOG (8u * 1024 * 1024)
/* inotify watches per recursive watcher. */
#define AGENT_MAX_WATCH_DIRS 8192

/* Entries one ListDir may return. */
#define AGENT_MAX_LIST_ENTRIES 100000
/* ListDir depth. */
#define AGENT_MAX_LIST_DEPTH 64
