#!/usr/bin/env bash
# Makes the data directory (default /var/lib/space) a filesystem with reflink
# support, so sandbox disks are O(1) copy-on-write clones. When the host
# filesystem already has it (btrfs, xfs with reflink=1) the directory is used
# as is; otherwise a sparse btrfs image (/var/lib/space.img) is loop-mounted
# there. Idempotent; safe to run on every start.
set -euo pipefail

dir=${1:-${SPACE_DATA_DIR:-/var/lib/space}}
img=${SPACE_DATA_IMAGE:-${dir%/}.img}
size=${SPACE_DATA_IMAGE_SIZE:-64G}

reflink_ok() {
  local a b ok=1
  a=$(mktemp -p "$1" .reflink-probe.XXXXXX) || return 1
  b="$a.clone"
  echo probe > "$a"
  cp --reflink=always "$a" "$b" 2>/dev/null && ok=0
  rm -f "$a" "$b"
  return $ok
}

mkdir -p "$dir"
if reflink_ok "$dir"; then
  exit 0
fi
if mountpoint -q "$dir"; then
  echo "setup-datadir: $dir is a mount point without reflink support; disks will be full copies" >&2
  exit 0
fi
if [ ! -e "$img" ]; then
  echo "setup-datadir: creating a $size sparse btrfs image at $img for $dir" >&2
  truncate -s "$size" "$img"
  mkfs.btrfs -q -f "$img"
fi
mount -o loop,noatime "$img" "$dir"
chmod 0700 "$dir"
if reflink_ok "$dir"; then
  echo "setup-datadir: $dir is btrfs on $img (reflink clones)" >&2
else
  echo "setup-datadir: $dir still has no reflink support; disks will be full copies" >&2
fi
