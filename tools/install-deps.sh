#!/usr/bin/env bash
# Installs every Debian package space needs to build, run and test, and
# nothing else. Idempotent: when everything is present it does no network
# access at all. Run as root on Debian 12.
set -euo pipefail

packages=(
  # build
  build-essential meson ninja-build pkg-config clang
  libssl-dev libsqlite3-dev libpq-dev libjansson-dev libprotobuf-c-dev protobuf-c-compiler
  libevent-dev libnftables-dev libseccomp-dev libcap-dev libcmocka-dev
  # runtime: VMs, disks, network
  qemu-system-x86 qemu-utils iproute2 nftables btrfs-progs xfsprogs e2fsprogs util-linux
  # guest image pipeline (tools/template-build.sh)
  debootstrap mmdebstrap linux-source-6.1 bc flex bison libelf-dev busybox-static cpio xz-utils
  # tests
  python3 python3-pytest python3-requests curl postgresql
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present" >&2
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
