#!/usr/bin/env bash
# usage-instructions.sh [SIDE...]: the instructions redis-server executes per
# task in BenchmarkUsage's whole pipeline (enqueue, dequeue, the record's
# writes, acks, the usage totals' flushes, start-up and shutdown: all of a
# round), counted by valgrind's callgrind: unlike INFO cpu, a count that the
# other work of a busy machine does not inflate. Each SIDE (default: no-reply
# no-usage usage) is one round of AGENTQ_BENCH_TASKS tasks (default 2000) on
# a redis-server of its own under callgrind (the benchmark's redis-server
# found first in PATH is a wrapper). Slow: Redis runs ~50× slower.
# BENCH_TEST=path/to/bench.test runs a binary built with `go test -c ./bench/`
# (e.g. of another commit) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${AGENTQ_BENCH_TASKS:-2000}
sides=("$@")
[ ${#sides[@]} -gt 0 ] || sides=(no-reply no-usage usage)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=${BENCH_TEST:-}
if [ -z "$bin" ]; then
  bin=$tmp/bench.test
  go test -c -o "$bin" ./bench/
fi
real=$(command -v redis-server)
mkdir "$tmp/path"
cat >"$tmp/path/redis-server" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.\$\$" "$real" "\$@" 2>"$tmp/vg.\$\$.log"
EOF
chmod +x "$tmp/path/redis-server"
for side in "${sides[@]}"; do
  rm -f "$tmp"/cg.*
  (cd bench && PATH="$tmp/path:$PATH" AGENTQ_BENCH_USAGE_SIDE=$side AGENTQ_BENCH_ROUNDS=1 AGENTQ_BENCH_TASKS=$n \
    "$bin" -test.run '^$' -test.bench '^BenchmarkUsage$' -test.benchtime 1x -test.timeout 30m >"$tmp/out.$side" 2>&1) ||
    { cat "$tmp/out.$side"; exit 1; }
  # The server writes its counts as it exits, after the benchmark's end.
  for _ in $(seq 1 300); do
    f=$(ls "$tmp"/cg.* 2>/dev/null | head -n 1 || true)
    [ -n "$f" ] && grep -q '^totals:' "$f" && break
    sleep 0.2
  done
  ir=$(sed -n 's/^totals: *//p' "$f" | head -n 1)
  printf '%-9s %13d instructions: %d per task (%s)\n' "$side" "$ir" $(( ir / n )) \
    "$(grep -o 'Redis CPU per task [0-9.]*µs' "$tmp/out.$side" | head -n 1) under valgrind"
done
