#!/usr/bin/env bash
# record-cost.sh [MODE...]: the instructions a redis-server executes for the
# record package's writes (internal/record's TestScriptCostWorkload), counted
# by valgrind's callgrind — a measure a busy machine does not blur, unlike
# INFO cpu or commandstats. For each MODE (default: create none usage priced
# again) it starts a private redis-server under callgrind (collecting only
# inside processInputBuffer: reading, running and answering commands, not the
# event loop), runs the workload of RECORD_COST_N tasks (default 1000) and
# prints the instructions per task, less the "create" workload's (the
# creates every mode starts with): the cost of each task's writes.
# Needs valgrind. RECORD_TEST=path/to/record.test runs a test binary built
# with `go test -c ./internal/record/` (e.g. of another commit) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${RECORD_COST_N:-1000}
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(create none usage priced again)
[ "${modes[0]}" = create ] || modes=(create "${modes[@]}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=${RECORD_TEST:-}
if [ -z "$bin" ]; then
  bin=$tmp/record.test
  go test -c -o "$bin" ./internal/record/
fi
port=$(( 20000 + RANDOM % 20000 ))
base=0
for mode in "${modes[@]}"; do
  out=$tmp/cg.$mode
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect=processInputBuffer \
    --callgrind-out-file="$out" redis-server --port "$port" --bind 127.0.0.1 --save "" \
    --appendonly no --dir "$tmp" --loglevel warning >"$tmp/vg.$mode.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.2
  done
  RECORD_COST_ADDR=127.0.0.1:$port RECORD_COST_MODE=$mode RECORD_COST_N=$n \
    "$bin" -test.run '^TestScriptCostWorkload$' -test.count=1 >"$tmp/test.$mode.log" 2>&1 ||
    { cat "$tmp/test.$mode.log"; kill "$pid"; exit 1; }
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" || true
  ir=$(sed -n 's/^summary: *//p' "$out" | head -n 1)
  if [ "$mode" = create ]; then
    base=$ir
    printf '%-8s %12d instructions (%d per create)\n' "$mode" "$ir" $(( ir / n ))
  else
    printf '%-8s %12d instructions: %d per task beyond its create\n' "$mode" "$ir" $(( (ir - base) / n ))
  fi
done
