#!/usr/bin/env bash
# The README's second command: builds everything twice (gcc release; clang
# with ASan+UBSan), runs the unit tests on both, and the end-to-end suites
# (real guests under QEMU, real namespaces) with the sanitized host daemons.
# The guest agent comes from the release build: the guest has no sanitizer
# runtime. Needs root (namespaces, taps, loop mounts).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
bash tools/setup-datadir.sh

[ -f build/build.ninja ] || meson setup build >&2
ninja -C build >&2
if [ ! -f build-asan/build.ninja ]; then
  CC=clang meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >&2
fi
ninja -C build-asan >&2

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
meson test -C build --suite unit --print-errorlogs
meson test -C build-asan --suite unit --print-errorlogs

SPACE_BUILD_DIR=build-asan SPACE_AGENT_BUILD_DIR=build \
  /usr/bin/python3 -m pytest -p no:cacheprovider -v tests "$@"
