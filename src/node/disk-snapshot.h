#pragma once
/*
 * Snapshots of a sandbox (architecture.md "A sandbox's life", issue 12): a point-in-time copy
 * of its root disk ("disk"), or of its disk, memory and devices at one instant ("full"),
 * taken while it keeps running, and rollback of the sandbox onto one.
 *
 * On disk, beside the instances (a snapshot outlives its sandbox):
 *
 *   <data>/snapshots/<id>/rootfs.ext4   reflink (FICLONE) of the disk at the snapshot
 *                         vmstate       full only: memory, devices, vCPUs (runtime.h)
 *                         agent-token   full only: the agent's token then (0600 dir)
 *                         meta.json     id, kind, sandbox, template, sizes, created_at, and
 *                                       each file's size and sparse-independent SHA-256
 *
 * Written as <id>.new/, every file and the directory fsync'd, then renamed to <id> and the
 * parent fsync'd: the rename is the commit point. A crash before it leaves a .new the next
 * node start removes (disk_snapshot_sweep()); nothing lists or restores a .new.
 *
 * Ids are sandbox-id shaped (20 × [a-z0-9], shared/sandbox-id.h): the api chooses them.
 */
#include <jansson.h>
#include <stdbool.h>

#include "node/vm.h"

#define DISK_SNAPSHOT_FORMAT "space-snapshot-1"
/* full only: the guest agent's access token when it was taken (a branch proves it). */
#define DISK_SNAPSHOT_TOKEN_FILE "agent-token"

/* <data>/snapshots/<id> into buf. */
int disk_snapshot_dir(const struct vm_host *host, const char *id, char *buf, size_t n);
/* The guest's `sync` through its agent (bounded): whether it ran and exited 0 (logged when
 * not). The quiesce before a snapshot, and before a suspend without memory (vm.h). */
bool disk_snapshot_guest_sync(const struct vm_host *host, const struct vm *vm);

/*
 * Worker: takes snapshot id of vm (running, or paused: was_paused leaves it paused). The
 * guest's page cache is written out first (an exec of `sync` through the agent: what a
 * guest wrote and never fsync'd is in the snapshot; a guest that does not answer in 30 s
 * gets a crash-consistent one, "quiesced": false), then QMP stop, the full snapshot's
 * vmstate, the disk's reflink, QMP cont: the guest stands still only for the copy. Then the
 * files are hashed and committed. *ret_meta: meta.json's content. -EEXIST: id exists.
 */
int disk_snapshot_take(const struct vm_host *host, const struct vm *vm, const char *id, bool full,
                       bool was_paused, json_t **ret_meta, char **ret_error);

/*
 * Worker: rollback of vm (running, no other job on it) onto snapshot id of the same sandbox.
 * The snapshot's disk is cloned beside the instance's while the guest still runs; then the
 * VMM is stopped, the clone renamed over the disk, and a fresh VMM started on it: a cold
 * boot for a disk snapshot (the guest reboots; files as at the snapshot, its processes
 * gone), a restore of the vmstate for a full one (the guest goes on from the snapshot's
 * instant, its processes and memory as they were then, clock re-synced). Both are
 * re-identified as at create (same sandbox id, token, env). ret->rt: the new VMM. On a
 * failure before the stop nothing changed (*ret_lost false); after it the sandbox is lost
 * (*ret_lost true) and the caller destroys it.
 */
int disk_snapshot_rollback(const struct vm_host *host, const struct vm *vm, const char *id,
                           struct vm_restore_result *ret, bool *ret_lost);

/* meta.json of snapshot id (-ENOENT: none committed). Any thread. */
int disk_snapshot_read(const struct vm_host *host, const char *id, json_t **ret);
/* Every committed snapshot's meta, of sandbox_id only unless NULL, oldest first. */
int disk_snapshot_list(const struct vm_host *host, const char *sandbox_id, json_t **ret);
/* Removes snapshot id (-ENOENT: none). The directory is renamed aside first, so a
 * half-deleted snapshot is never listed. */
int disk_snapshot_delete(const struct vm_host *host, const char *id);
/* Node start: removes what a crash left (<id>.new, <id>.del). */
void disk_snapshot_sweep(const struct vm_host *host);
