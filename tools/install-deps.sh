#!/usr/bin/env bash
# Installs every Debian package space needs to build, run and test, and
# nothing else. Idempotent: when everything is present it does no network
# access at all. Run as root on Debian 12.
set -euo pipefail

packages=(
  # build
  build-essential meson ninja-build pkg-config clang clang-format
  libssl-dev libsqlite3-dev libpq-dev libjansson-dev libprotobuf-c-dev protobuf-c-compiler
  libevent-dev libnftables-dev libseccomp-dev libcap-dev libcmocka-dev
  # runtime: VMs, disks, network
  qemu-system-x86 qemu-utils iproute2 nftables btrfs-progs xfsprogs e2fsprogs util-linux
  # guest image pipeline (tools/template-build.sh)
  debootstrap mmdebstrap linux-source-6.1 bc flex bison libelf-dev busybox-static cpio xz-utils
  # tests
  python3 python3-pytest python3-requests curl postgresql wrk
  dnsmasq-base  # tests/compat/test_tls_default_mode.py: *.{domain} inside a test netns
  sqlite3 # tests/ingress/test_routing.py holds the store locked from another process
  nginx-light bind9-dnsutils  # tests/lib/internet.py: the simulated internet's web servers, dig
  python3-cryptography  # tests/gw/sealing.py: seals test secrets (a second implementation)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present" >&2
else
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  # Packages with a service (nginx) must not start it: the tests run their own servers inside
  # namespaces they create, and a stock nginx would listen on this host's :80. policy-rc.d is
  # Debian's switch for "maintainer scripts start nothing"; ours only while we install.
  policy_rc=/usr/sbin/policy-rc.d
  own_policy_rc=false
  if [ ! -e "$policy_rc" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy_rc" && chmod 755 "$policy_rc" && own_policy_rc=true
  fi
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
  if $own_policy_rc; then rm -f "$policy_rc"; fi
fi
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ] && systemctl is-enabled nginx >/dev/null 2>&1; then
  systemctl disable --now nginx >&2 || true
fi

# The compatibility tests run the real `e2b` SDK (pinned in tests/compat/package.json),
# which needs Node.js >= 20.18. Debian 12 ships 18: then Node 20 comes from the npm
# registry's `node` package (a registry package that carries the binary), cached outside
# the checkout.
cd "$(dirname "$0")/.."
node_ok() { "$1" -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=18)?0:1)' 2>/dev/null; }
if ! command -v npm >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm >&2
fi
nodejs=$(command -v node || true)
if [ -z "$nodejs" ] || ! node_ok "$nodejs"; then
  cache=/var/cache/space/nodejs
  if ! node_ok "$cache/node_modules/node/bin/node"; then
    echo "install-deps: installing Node.js 20 from the npm registry into $cache" >&2
    npm install --prefix "$cache" --no-audit --no-fund node@20 >&2
  fi
  nodejs=$cache/node_modules/node/bin/node
fi
if [ ! -d tests/compat/node_modules/e2b ] || [ tests/compat/package-lock.json -nt tests/compat/node_modules ]; then
  echo "install-deps: installing the pinned e2b SDK for tests/compat" >&2
  (cd tests/compat && PATH="$(dirname "$nodejs"):$PATH" npm ci --no-audit --no-fund >&2)
fi
echo "$nodejs" > /var/cache/space/nodejs.path 2>/dev/null || true
