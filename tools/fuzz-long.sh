#!/usr/bin/env bash
# Long fuzzing, for a developer rather than the test command:
#   tools/fuzz-long.sh [-t SECONDS] [-j JOBS] [--merge] DIR [FUZZER...]
# Runs each fuzzer (default: all; names as in `tools/fuzz.sh --list`) for
# SECONDS (default 600) with a random seed, starting from its checked-in
# corpus tests/fuzz/<name>/ and growing DIR/<name>/corpus/, which persists
# across runs: pass the same DIR to carry on. Artifacts (crash-*, leak-*,
# timeout-*, oom-*) go to DIR/<name>/artifacts/; every fuzzer runs even if an
# earlier one crashed, and the exit status is 1 if any did.
# --merge then minimizes DIR/<name>/corpus/ into tests/fuzz/<name>/ with
# -merge=1 (only inputs that add edge coverage are copied): the one way anything
# here writes into the checkout; review and commit the result. A crash input,
# once fixed, belongs in tests/fuzz/<name>/regressions/ (tools/fuzz.sh replays
# it on every run).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

secs=600
jobs=1
merge=0
while [ $# -gt 0 ]; do
  case $1 in
    -t) secs=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    --merge) merge=1; shift ;;
    -*) echo "fuzz-long: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 1 ]; then
  sed -n '2,4p' "$0" >&2
  exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
shift
case $out/ in
  "$root"/*)
    echo "fuzz-long: $out is inside the checkout; pass a directory outside it" >&2
    exit 2 ;;
esac

# As in tools/fuzz.sh: a UBSan report must stop the run, not scroll by.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

mapfile -t fuzzers < <(bash tools/fuzz.sh --list)
failed=()
for entry in "${fuzzers[@]}"; do
  name=${entry%% *}
  bin=${entry#* }
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx -- "$name"; then
    continue
  fi
  dir=$root/tests/fuzz/$name
  work=$out/$name
  mkdir -p "$work/corpus" "$work/artifacts"
  seeds=()
  [ -d "$dir" ] && seeds=("$dir")
  if [ "$secs" != 0 ]; then
    echo "fuzz-long: $name for ${secs}s, $jobs job(s), corpus $work/corpus" >&2
    # libFuzzer adds new inputs to the first directory only.
    if ! (cd "$work" && "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
      -max_len=8192 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
      $([ "$jobs" -gt 1 ] && echo "-jobs=$jobs -workers=$jobs") \
      "$work/corpus" ${seeds[@]+"${seeds[@]}"}) >"$work/fuzz.log" 2>&1; then
      tail -30 "$work/fuzz.log" >&2
      echo "fuzz-long: $name crashed; artifacts in $work/artifacts" >&2
      failed+=("$name")
    fi
  fi
  if [ $merge = 1 ]; then
    mkdir -p "$dir"
    before=$(find "$dir" -type f | wc -l)
    # Edge coverage only (-use_counters=0): hit counts would keep hundreds of
    # near-duplicates, and the checked-in corpus is meant to stay small.
    (cd "$work" && "$bin" -merge=1 -use_counters=0 -max_len=8192 -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$work/artifacts/" "$dir" "$work/corpus") >"$work/merge.log" 2>&1 || {
      tail -20 "$work/merge.log" >&2
      failed+=("$name (merge)")
      continue
    }
    echo "fuzz-long: $name: tests/fuzz/$name has $(find "$dir" -type f | wc -l) inputs" \
      "(was $before)" >&2
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz-long: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz-long: done; corpora in $out"
