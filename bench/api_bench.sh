#!/usr/bin/env bash
# GET /v2/sandboxes requests/s with 100 concurrent connections (wrk), against a
# real space-api with N sandboxes listed, next to GET /health on the same
# listener as the baseline (the HTTP stack without store or auth).
# Usage: bench/api_bench.sh [SANDBOXES] [SECONDS]   (needs a running `space up`)
set -euo pipefail
n=${1:-5}
secs=${2:-10}
eval "$(space up --detach)"
ids=()
for _ in $(seq "$n"); do ids+=("$(space sandbox create)"); done
trap 'space sandbox kill "${ids[@]}" >/dev/null 2>&1 || true' EXIT
lua=$(mktemp)
printf 'wrk.headers["X-API-Key"] = "%s"\n' "$E2B_API_KEY" > "$lua"
echo "baseline: GET /health (no auth, no store)"
wrk -t2 -c100 -d"${secs}s" "$E2B_API_URL/health" | grep -E 'Requests/sec|Latency'
echo "GET /v2/sandboxes with $n sandboxes (auth + store query + JSON)"
wrk -t2 -c100 -d"${secs}s" -s "$lua" "$E2B_API_URL/v2/sandboxes" | grep -E 'Requests/sec|Latency|Non-2xx'
rm -f "$lua"
