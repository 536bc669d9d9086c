#!/usr/bin/env bash
# Checks that every tracked C source and header is formatted per .clang-format
# (docs/style.md R23): tools/check-format.sh [--fix] [FILE...].
# Without --fix it only reports (clang-format --dry-run -Werror) and fails on
# the first difference; with --fix it rewrites the files in place.
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
if [ "${1:-}" = --fix ]; then
  fix=1
  shift
fi
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format not found (tools/install-deps.sh installs it)" >&2
  exit 1
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  # Tracked files only: build dirs and generated protobuf code are not ours to format.
  mapfile -t files < <(git ls-files -- '*.c' '*.h')
fi
if [ ${#files[@]} -eq 0 ]; then
  exit 0
fi
if [ $fix = 1 ]; then
  clang-format -i --style=file "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
if ! clang-format --dry-run -Werror --style=file "${files[@]}"; then
  echo "check-format: the files above differ from .clang-format; run tools/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
