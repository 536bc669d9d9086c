#!/usr/bin/env bash
# The test command's fuzzing: builds the libFuzzer targets (clang, ASan+UBSan,
# in build-fuzz/) and, for every fuzz-* target meson knows of:
#   1. replays its checked-in corpus, tests/fuzz/<name>/ (crash reproducers
#      kept under tests/fuzz/<name>/regressions/), every file once;
#   2. fuzzes for SECONDS with a fixed seed from a copy of that corpus.
# tools/fuzz.sh [SECONDS_PER_FUZZER]   (default 20; 0 replays only)
# tools/fuzz.sh --list                 builds, prints "name path" per fuzzer
# Nothing is written into the checkout: the working corpus, logs and every
# artifact (crash-*, leak-*, timeout-*, oom-*) live in a temporary directory,
# kept and printed only when a fuzzer fails. A failure prints the command that
# reproduces it. Longer fuzzing that grows a corpus is tools/fuzz-long.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# One seed for every run: the same tree fuzzes the same inputs each time (up
# to how many executions fit in the time budget). Override to explore.
seed=${SPACE_FUZZ_SEED:-20261201}
# SPACE_FUZZ_RUNS=N also stops each fuzzer after N inputs: with the time budget
# out of the way, two runs then end in the same state exactly.
runs=${SPACE_FUZZ_RUNS:+-runs=$SPACE_FUZZ_RUNS}
# Inputs larger than the largest head/envelope the targets accept add nothing.
max_len=${SPACE_FUZZ_MAX_LEN:-8192}

list=0
if [ "${1:-}" = --list ]; then
  list=1
  shift
fi
secs=${1:-20}

if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang meson setup build-fuzz -Dfuzzers=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dtests=disabled >&2
fi
ninja -C build-fuzz >&2

# The targets of this tree, from meson: a binary left behind by a renamed or
# removed target is not run.
mapfile -t fuzzers < <(meson introspect build-fuzz --targets | /usr/bin/python3 -c '
import json, sys
for t in sorted(json.load(sys.stdin), key=lambda t: t["name"]):
    if t["type"] == "executable" and t["name"].startswith("fuzz-"):
        print(t["name"], t["filename"][0])')
if [ ${#fuzzers[@]} -eq 0 ]; then
  echo "fuzz: no fuzzers built" >&2
  exit 1
fi
if [ $list = 1 ]; then
  printf '%s\n' "${fuzzers[@]}"
  exit 0
fi

# A corpus whose fuzzer is gone (renamed?) would silently stop being replayed.
for d in tests/fuzz/*/; do
  [ -d "$d" ] || continue
  d=$(basename "$d")
  if ! printf '%s\n' "${fuzzers[@]%% *}" | grep -qx -- "$d"; then
    echo "fuzz: warning: tests/fuzz/$d has no fuzzer of that name; move it with its target" >&2
  fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/space-fuzz.XXXXXX")
keep=0
trap '[ $keep = 1 ] || rm -rf "$tmp"' EXIT

# fail LOG WHAT BIN: shows the end of the log and how to rerun what failed.
fail()
{
  local a
  keep=1
  tail -40 "$1" >&2
  echo "fuzz: $2 failed; log, corpus and artifacts kept in $tmp" >&2
  for a in "$(dirname "$1")"/artifacts/*; do
    [ -e "$a" ] && echo "fuzz: reproduce with: $3 $a" >&2
  done
  # A replayed input is its own reproducer: the last one libFuzzer started.
  a=$(sed -n 's/^Running: //p' "$1" | tail -1)
  [ -n "$a" ] && echo "fuzz: reproduce with: $3 $a" >&2
  exit 1
}

# Options shared by both phases. -reload=0: the corpus dir is ours alone, and
# re-reading it on a timer would make the run depend on timing.
common=(-rss_limit_mb=2048 -timeout=10 -max_len="$max_len" -reload=0 -print_final_stats=1)

# The fuzzers run with ASLR off and a fixed environment: libFuzzer feeds the
# operands of comparisons back into its mutations, pointers included, so with
# randomized addresses one seed would not give one sequence of inputs.
norandom=(setarch "$(uname -m)" -R)
if ! "${norandom[@]}" true 2>/dev/null; then
  echo "fuzz: cannot turn ASLR off here; runs with the same seed may differ" >&2
  norandom=()
fi
run_fuzzer()
{
  env -i PATH=/usr/bin:/bin \
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
    ${norandom[@]+"${norandom[@]}"} "$@"
}

for entry in "${fuzzers[@]}"; do
  name=${entry%% *}
  bin=${entry#* }
  dir=$root/tests/fuzz/$name
  work=$tmp/$name
  mkdir -p "$work/corpus" "$work/artifacts"

  # 1. Replay: each checked-in input once, in a fixed order.
  inputs=()
  if [ -d "$dir" ]; then
    mapfile -t inputs < <(find "$dir" -type f ! -name 'README*' | LC_ALL=C sort)
  fi
  if [ ${#inputs[@]} -gt 0 ]; then
    (cd "$work" && run_fuzzer "$bin" "${common[@]}" -artifact_prefix=artifacts/ "${inputs[@]}") \
      >"$work/replay.log" 2>&1 ||
      fail "$work/replay.log" "$name: replay of tests/fuzz/$name" "$bin"
    i=0
    for f in "${inputs[@]}"; do
      cp "$f" "$work/corpus/$((i++))"
    done
  fi
  if [ "$secs" = 0 ]; then
    echo "fuzz: $name: replayed ${#inputs[@]} inputs" >&2
    continue
  fi

  # 2. Fuzz from a copy of the corpus for a bounded time with the fixed seed.
  # Paths are relative so the process image is the same whatever mktemp chose.
  (cd "$work" && run_fuzzer "$bin" "${common[@]}" -seed="$seed" -max_total_time="$secs" $runs \
    -artifact_prefix=artifacts/ corpus) >"$work/fuzz.log" 2>&1 ||
    fail "$work/fuzz.log" "$name: fuzzing with -seed=$seed" "$bin"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log")
  last=$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' "$work/fuzz.log" | tail -1)
  echo "fuzz: $name: replayed ${#inputs[@]} inputs; ${execs:-?} runs (budget ${secs}s), $last" >&2
done
echo "fuzz: ${#fuzzers[@]} fuzzers: corpora replayed, fuzzed ${secs}s each with -seed=$seed, no crash"
