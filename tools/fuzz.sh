#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and runs each for a bounded
# time: tools/fuzz.sh [SECONDS_PER_FUZZER]. Fails on the first crash.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang meson setup build-fuzz -Dfuzzers=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dtests=disabled >&2
fi
ninja -C build-fuzz >&2
mapfile -t fuzzers < <(find build-fuzz/src -type f -perm -u+x -name 'fuzz-*' | sort)
if [ ${#fuzzers[@]} -eq 0 ]; then
  echo "fuzz: no fuzzers built" >&2
  exit 1
fi
for f in "${fuzzers[@]}"; do
  corpus=$(mktemp -d)
  echo "fuzz: $(basename "$f") for ${secs}s" >&2
  if ! "$f" -max_total_time="$secs" -rss_limit_mb=2048 "$corpus" >"$corpus.log" 2>&1; then
    tail -40 "$corpus.log" >&2
    rm -rf "$corpus" "$corpus.log"
    exit 1
  fi
  tail -1 "$corpus.log" >&2
  rm -rf "$corpus" "$corpus.log"
done
echo "fuzz: ${#fuzzers[@]} fuzzers ran ${secs}s each without a crash"
