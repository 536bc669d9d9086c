#pragma once
/*
 * The guest's serial console, capped on disk. QEMU writes the serial port
 * into a pipe; a small pump process (forked by the node, in its own session
 * and running as the sandbox's uid) copies it into console.log and keeps
 * that file at most `max` bytes: when the next chunk would not fit, the
 * newest half is moved to the front and the rest dropped. A guest printing
 * forever costs 2x its output in writes and never more than `max` on disk.
 *
 * Why a process, not a thread of the node: the pump must outlive a crash of
 * space-node as QEMU does, or a re-attached VM would lose its console (a
 * pipe with no reader makes QEMU drop serial output; it never blocks the
 * guest). Why not a file the node truncates: QEMU appends between the
 * node's checks, so the file is only bounded by how often the node looks.
 * The pump exits when QEMU closes the pipe (QEMU exited).
 */
#include <stddef.h>
#include <sys/types.h>

#define CONSOLE_LOG_MAX_DEFAULT (1u << 20)
#define CONSOLE_LOG_MAX_MIN (128u << 10)
/* Written at the front of the file each time older output was dropped. */
#define CONSOLE_DROPPED_MARK "[space: earlier console output dropped]\n"

/*
 * Starts the pump writing to path (created 0600, appended to) as uid:gid.
 * *ret_fd is the pipe's write end for QEMU (O_CLOEXEC); *ret_pid the pump,
 * our child, to be reaped with console_reap() after QEMU exits.
 */
int console_start(const char *path, size_t max, uid_t uid, gid_t gid, int *ret_fd, pid_t *ret_pid);
/* Waits (up to a second) for the pump to finish after QEMU exited, and reaps it. */
void console_reap(pid_t pid);
/*
 * The pump's loop: copies in_fd to out_fd (a regular file, written at its
 * end) keeping out_fd at most max bytes, until EOF on in_fd. Only
 * async-signal-safe calls: it runs in a child forked from a threaded process.
 * Exposed for tests.
 */
int console_pump(int in_fd, int out_fd, size_t max);
