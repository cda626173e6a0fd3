#!/usr/bin/env bash
# Closed-loop throughput and edge CPU per request of `tunnel2 server --workers N` (issue #33), one run per
# N in EDGE_WORKERS (default "1 2"): an edge with N workers, one agent (`tunnel2 http`) and the test backend
# as processes, `pnpm bench max --tunnel-url` against the tunnel; the edge's CPU is the primary's and every
# worker's utime+stime from /proc over the run. Usage (after `pnpm exec tsc -b`):
#   EDGE_WORKERS="1 2" CONNECTIONS=50 DURATION=15 bench/scripts/edge-workers.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
WORKERS_LIST=${EDGE_WORKERS:-"1 2"}
CONNECTIONS=${CONNECTIONS:-50}
DURATION=${DURATION:-15}
CLI=packages/cli/bin/tunnel2.js
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
wait_line() { for _ in $(seq 1 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done; echo "no $2 in $1" >&2; exit 1; }
# The CPU ticks (utime+stime) of a process and its live children.
edge_ticks() {
  local total=0 p
  for p in "$1" $(pgrep -P "$1" || true); do
    [ -r "/proc/$p/stat" ] && total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$total"
}
hz=$(getconf CLK_TCK)
node packages/test-backend/bin/test-backend.js --port 0 --host 127.0.0.1 >"$tmp/backend" 2>&1 &
pids+=($!)
wait_line "$tmp/backend" "listening on "
backend=$(grep -o 'http://[0-9.:]*' "$tmp/backend" | head -1)
printf '%-8s %-12s %-14s %-12s\n' workers 'requests/s' 'edge CPU s' 'edge µs/req'
for n in $WORKERS_LIST; do
  node "$CLI" server --port 0 --workers "$n" --json --log-level warn >"$tmp/edge$n" 2>&1 &
  edge=$!
  pids+=("$edge")
  wait_line "$tmp/edge$n" '"listening"'
  url=$(grep -o '"url":"[^"]*"' "$tmp/edge$n" | head -1 | cut -d'"' -f4)
  node "$CLI" http "$backend" --server "$url" --subdomain bench --json --log-level warn --no-inspect >"$tmp/agent$n" 2>&1 &
  agent=$!
  pids+=("$agent")
  wait_line "$tmp/agent$n" '"ready"'
  port=${url##*:}
  before=$(edge_ticks "$edge")
  node bench/dist/main.js max --tunnel-url "http://bench.localhost:$port/loadtest/ping" --connections "$CONNECTIONS" \
    --duration "$DURATION" --warmup 0 --out "$tmp/report$n" >"$tmp/bench$n" 2>&1
  after=$(edge_ticks "$edge")
  rps=$(node -e "const r=require('$tmp/report$n/report.json');console.log(Math.round(r.stages[0].tunnel.achievedRps))" 2>/dev/null || echo '?')
  cpu=$(echo "scale=2; ($after - $before) / $hz" | bc)
  per=$( [ "$rps" != '?' ] && echo "scale=1; ($after - $before) * 1000000 / $hz / ($rps * $DURATION)" | bc || echo '?')
  printf '%-8s %-12s %-14s %-12s\n' "$n" "$rps" "$cpu" "$per"
  kill "$agent"; wait "$agent" 2>/dev/null || true
  kill "$edge"; wait "$edge" 2>/dev/null || true
done
