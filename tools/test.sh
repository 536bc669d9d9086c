#!/usr/bin/env bash
# The README's second command: checks the include graph and the
# formatting, builds everything twice (gcc
# release; clang with ASan+UBSan), runs the unit tests on both, the store
# tests against a throwaway PostgreSQL, the route table against
# docs/api/openapi.yaml, every fuzzer (its corpus replayed, then a bounded
# run with a fixed seed: tools/fuzz.sh), and the end-to-end suites (real guests under
# QEMU, real namespaces, the real e2b SDK) with the sanitized host daemons on
# SQLite and PostgreSQL. The guest agent comes from the release build: the
# guest has no sanitizer runtime. Needs root (namespaces, taps, loop mounts).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh

# Cheap checks first: the include graph (basic -> shared -> programs) and
# the formatting (docs/style.md R23; tools/check-format.sh --fix repairs it).
/usr/bin/python3 tools/check-includes.py
bash tools/check-format.sh

bash tools/setup-datadir.sh

[ -f build/build.ninja ] || meson setup build >&2
ninja -C build >&2
if [ ! -f build-asan/build.ninja ]; then
  CC=clang meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >&2
fi
ninja -C build-asan >&2

/usr/bin/python3 tools/check-routes.py

# A small quarantine keeps RSS meaningful for the memory-bound tests.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:quarantine_size_mb=16
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
meson test -C build --suite unit --print-errorlogs
meson test -C build-asan --suite unit --print-errorlogs

# Each fuzzer: its corpus replayed, then 200000 inputs from the fixed seed (at most 20 s):
# the same inputs on every run, so a fuzz failure here is reproducible, not luck of the
# machine's speed. At the rates of an unloaded run that is 1-9 s a fuzzer instead of 20.
if [ "${SPACE_SKIP_FUZZ:-}" != 1 ]; then
  SPACE_FUZZ_RUNS=${SPACE_FUZZ_RUNS:-200000} bash tools/fuzz.sh 20
fi

trap 'bash tools/pg-test.sh stop >/dev/null 2>&1 || true' EXIT
SPACE_TEST_PG_URL=$(bash tools/pg-test.sh start)
export SPACE_TEST_PG_URL
meson test -C build-asan --suite pg --print-errorlogs

SPACE_NODEJS=$(cat /var/cache/space/nodejs.path 2>/dev/null || command -v node)
export SPACE_NODEJS
SPACE_BUILD_DIR=build-asan SPACE_AGENT_BUILD_DIR=build \
  /usr/bin/python3 -m pytest -p no:cacheprovider -v tests "$@"
