#pragma once
/*
 * The process table behind process.Process (e2b-compat.md §6.3): processes
 * belong to the sandbox, not to the stream that started them. Each process
 * fans its output out to the streams attached to it (Start and any number
 * of Connects), is paused when a client reads slower than it writes, and
 * leaves an end record that a late Connect still receives.
 */
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "basic/time-util.h"

struct agent;
struct proc;
struct proc_table;
struct rpc_call;
struct launch_params;

int proc_table_new(struct agent *a, struct proc_table **ret);
/* Forgets every process (they keep running) and closes every stream. */
struct proc_table *proc_table_free(struct proc_table *t);

/*
 * Starts a process. config (the ProcessConfig JSON, for List) is borrowed
 * and copied. timeout > 0 kills the process when it elapses (SIGKILL),
 * after ending the stream attached with PROC_ATTACH_START with
 * deadline_exceeded.
 * Returns 0, -EMFILE past AGENT_MAX_PROCS, or launch_process()'s errors.
 */
int proc_spawn(struct proc_table *t, const struct launch_params *sp, const char *tag,
               const json_t *config, usec_t timeout, struct proc **ret);

/* Running process with this pid, else (include_ended) the newest finished one. */
struct proc *proc_by_pid(struct proc_table *t, uint32_t pid, bool include_ended);
/* Running process with this tag. */
struct proc *proc_by_tag(struct proc_table *t, const char *tag);

uint32_t proc_pid(const struct proc *p);
bool proc_is_running(const struct proc *p);
bool proc_is_pty(const struct proc *p);

enum proc_attach_mode {
    /* Start's own stream: its deadline is the process's timeout (proc_spawn). */
    PROC_ATTACH_START,
    /* A Connect: the stream ends with deadline_exceeded after call->timeout,
     * the process keeps running. */
    PROC_ATTACH_CONNECT,
};

/*
 * Opens call's response stream and attaches it to p: start{pid}, then new
 * output, then end and the end-stream frame. For a finished process the
 * stream gets start and end at once. Errors are reported on the call.
 */
void proc_attach(struct proc *p, struct rpc_call *call, enum proc_attach_mode mode);

/* Queues input for the process's stdin (or PTY). -EPIPE: stdin disabled or
 * closed; -EAGAIN: the process is not reading and the queue is full. */
int proc_write_input(struct proc *p, const void *data, size_t len);
/* EOF on stdin once queued input is written. -ENOTTY for a PTY process. */
int proc_close_stdin(struct proc *p);
/* Sends sig to the process; SIGKILL and SIGTERM also stop its output at once. */
int proc_signal(struct proc *p, int sig);
/* New PTY window size. -ENOTTY when the process has no PTY. */
int proc_resize(struct proc *p, uint16_t cols, uint16_t rows);

/* ListResponse JSON of the running processes (new reference, NULL on OOM). */
json_t *proc_list_json(struct proc_table *t);
