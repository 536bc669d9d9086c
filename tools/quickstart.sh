#!/usr/bin/env bash
# The README's first command: on a fresh Debian 12 machine (as root) install
# what is missing, build and install space, build the default template if it
# is not cached, start the single-host platform in the background, and show a
# sandbox running a command. Safe to run again: every step is idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
bash tools/setup-datadir.sh
[ -f build/build.ninja ] || meson setup build --prefix=/usr/local >&2
ninja -C build >&2
meson install -C build --quiet >&2

space up --detach
id=$(space sandbox create)
echo "sandbox $id:" >&2
space sandbox exec "$id" -- /bin/sh -c 'echo "hello from $(hostname), kernel $(uname -r), $(python3 --version)"'
space sandbox kill "$id"
echo "space is up. Try: space sandbox create; space sandbox exec ID -- uname -a; space down" >&2
