#pragma once
/*
 * Template snapshots (architecture.md "Fast create"): a template booted once,
 * its agent answering, the guest settled, then paused and snapshotted with
 * its RAM in a shared memory file. Creates restore from it copy-on-write
 * instead of booting a kernel (vm.c).
 *
 * On disk, beside the template (so a template rebuild, which swaps the
 * template directory whole, retires its snapshots):
 *
 *   templates/<name>/snapshots/<key>/vmstate       device state (runtime.h)
 *                                    memory        guest RAM, sparse
 *                                    rootfs.ext4   the disk as it was at the snapshot
 *                                    manifest.json sizes and SHA-256 of the three
 *
 * <key> is the SHA-256 of everything the snapshot depends on: template.json
 * (its kernel and image keys, its build time), the QEMU version, vcpus and
 * memory, the accelerator, tb-size and the guest command line. A snapshot is
 * verified against its manifest before its first use in each node process
 * (and its memory loaded into a sealed memfd that restores map private); a
 * corrupt or truncated one is deleted and rebuilt, never restored.
 *
 * One snapshot per size a create used (sizes: template-size.h), at most
 * SNAPSHOT_SIZES_MAX per template; a new size past that evicts the least
 * recently used (its directory is removed once no restore holds it). At
 * node start, snapshot_cleanup() removes what no current key names.
 *
 * Builds and verification run on one background thread of their own; a
 * create never waits for them: snapshot_get() answers -EAGAIN and the create
 * cold-boots meanwhile. Thread-safe.
 */
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "node/vm.h"

#define SNAPSHOT_SIZES_MAX 4

struct snapshot;

/*
 * The ready snapshot of template at this size, as a new reference in *ret,
 * or -EAGAIN when none is ready yet (its preparation is started in the
 * background, or is backing off after a failure), -ENOENT for no template,
 * -EOPNOTSUPP when the node runs with --snapshots off.
 */
int snapshot_get(const struct vm_host *host, const char *template_name, unsigned vcpus,
                 unsigned memory_mib, struct snapshot **ret);
/* NULL-safe; returns NULL. */
struct snapshot *snapshot_unref(struct snapshot *s);
/* The snapshot's directory (for runtime_restore()) and its sealed memory memfd. */
const char *snapshot_dir(const struct snapshot *s);
int snapshot_memory_fd(const struct snapshot *s);
/* A restore from s failed in the VMM: verify s again (rebuilding it if it is bad) before
 * any further restore uses it. */
void snapshot_suspect(struct snapshot *s);

/* Starts preparing the snapshot of template at this size in the background (a build
 * route, node start); no-op when it is ready or under way. */
void snapshot_prepare(const struct vm_host *host, const char *template_name, unsigned vcpus,
                      unsigned memory_mib);
/* "ready", "building", "failed" or "none" (never asked for, or --snapshots off). */
const char *snapshot_status(const char *template_name, unsigned vcpus, unsigned memory_mib);
/* [{vcpus, memory_mb, status}] of every size of template asked for since the node started,
 * the most recently used first. */
json_t *snapshot_sizes_to_json(const char *template_name);
/*
 * At node start, before any snapshot_get(): in every template's snapshots/, removes
 * directories no current key names (a half-built .tmp, an unreadable manifest, one of
 * another template build, QEMU or format), and of those left all but the
 * SNAPSHOT_SIZES_MAX most recently made. Returns how many it removed.
 */
int snapshot_cleanup(const struct vm_host *host);
/* The key (snapshots/<key>) of template's snapshot at this size now (file comment). */
int snapshot_key_of(const struct vm_host *host, const char *template_name, unsigned vcpus,
                    unsigned memory_mib, char out[65]);

/* The pieces under the above, for tests: writes dir/manifest.json (sizes and SHA-256 of
 * vmstate, memory, rootfs.ext4 as they are now), and checks dir against it, loading memory
 * into a sealed memfd (*ret_fd). -EBADMSG with *why when anything differs (wrong size,
 * checksum, key or format, a file missing), -ENOENT with no manifest. */
int snapshot_manifest_write(const char *dir, const char *key, const char *template_name,
                            unsigned vcpus, unsigned memory_mib);
int snapshot_verify(const char *dir, const char *key, int *ret_fd, const char **why);
/* The manifests' sparse-independent SHA-256 of the file at path (the offset and bytes of
 * every page not all zero, then the size), and its size. Also meta.json's (disk-snapshot.h). */
int snapshot_file_digest(const char *path, uint64_t *ret_size, char hex[65]);
