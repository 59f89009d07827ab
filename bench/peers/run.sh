#!/usr/bin/env bash
# Side-by-side benchmark: agentq vs plain asynq vs BullMQ vs River.
#
#   make bench-peers                              full sizes, 3 rounds (about 25-35 min on a loaded 2-core box)
#   make bench-peers SCALE=0.1 ROUNDS=1           a tenth of every task count (a quick correctness check)
#   make bench-peers ROUNDS=5 SYSTEMS=agentq,asynq SCENARIOS=noop,stream
#
# Installs what it needs (Debian packages, npm packages into ./node, Go modules
# through the module proxy), starts its own redis-server (127.0.0.1:16600),
# PostgreSQL (127.0.0.1:16601, data under $BASE) and fake LLM
# (127.0.0.1:16602), runs every scenario for every system, prints one table,
# and stops everything it started, by PID, whatever happens.
set -euo pipefail

SHARED="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"   # bench/peers in the agentq checkout
BASE="${BASE:-${TMPDIR:-/tmp}/peerbench}"
HERE="$BASE/src"                     # a copy of go/ and node/ (npm install and go mod edit write there, not in the checkout)
mkdir -p "$HERE" && cp -r "$SHARED/go" "$SHARED/node" "$HERE/"
AGENTQ="${AGENTQ:-$(cd "$SHARED/../.." && pwd)}"   # the agentq checkout to measure: the one this script is in
SCALE="${SCALE:-1}"
ROUNDS="${ROUNDS:-3}"
SYSTEMS="${SYSTEMS:-agentq,asynq,asynq-def,bullmq,river,river-tuned}"
SCENARIOS="${SCENARIOS:-noop,io,stream,enqueue,retry,durable}"
REDIS_PORT=16600
PG_PORT=16601
LLM_PORT=16602
RUN_ID="$(date +%Y%m%d-%H%M%S)"
OUT="${OUT:-$BASE/results/$RUN_ID}"
WORK="$BASE/run-$RUN_ID"            # server data of this run (deleted at the end)
PG_BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"

log() { printf '[run.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ---------- stop everything we started, by PID ----------
PIDS_REDIS="" PIDS_PG="" PIDS_LLM="" PM_PID="" ORCH_PID=""
stop_pid() { # name pid signal
  local name=$1 pid=$2 sig=$3
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$sig" "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then log "$name ($pid) still up: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; fi
  fi
}
cleanup() {
  local rc=$?
  set +e
  stop_pid orchestrator "$ORCH_PID" TERM   # it kills its own worker/producer children by PID
  stop_pid fakellm "$PIDS_LLM" TERM
  stop_pid redis-server "$PIDS_REDIS" TERM
  if [ -n "$PM_PID" ]; then               # anything of ours still alive under the postmaster
    stop_pid postgres "$PM_PID" INT       # fast shutdown: the postmaster ends its children
    for p in $(pgrep -P "$PM_PID" 2>/dev/null); do stop_pid postgres-child "$p" KILL; done
  fi
  stop_pid runuser-postgres "$PIDS_PG" INT
  rm -rf "$WORK"
  log "stopped fakellm, redis-server, postgres (exit $rc)"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------- install what is missing ----------
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
[ -n "$PG_BIN" ] && [ -x "$PG_BIN/postgres" ] || need+=(postgresql)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
command -v git >/dev/null || need+=(git)
command -v make >/dev/null || need+=(make)
if [ ${#need[@]} -gt 0 ]; then
  log "apt-get install ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  PG_BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
fi
command -v go >/dev/null || { log "Go toolchain missing"; exit 1; }

[ -f "$AGENTQ/go.mod" ] && grep -q 'module github.com/agentq/agentq' "$AGENTQ/go.mod" || { log "run this from agentq's root (or set AGENTQ)"; exit 1; }
if [ ! -x "$AGENTQ/bin/worker" ]; then
  log "make build in $AGENTQ"
  (cd "$AGENTQ" && make build >/dev/null)
fi
if [ ! -d "$HERE/node/node_modules/bullmq" ] || [ ! -d "$HERE/node/node_modules/ioredis" ]; then
  log "npm install (bullmq, ioredis) into $HERE/node"
  (cd "$HERE/node" && npm install --no-audit --no-fund --silent)
fi
log "building the Go harness (agentq via replace => $AGENTQ, asynq, River)"
mkdir -p "$HERE/bin" && (cd "$HERE/go" && go mod edit -replace "github.com/agentq/agentq=$AGENTQ" && go build -o "$HERE/bin/qbench" .)

# ---------- servers (loopback only) ----------
for port in $REDIS_PORT $PG_PORT $LLM_PORT; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then log "port $port is already in use: stop that first"; exit 1; fi
done
mkdir -p "$WORK/redis" "$OUT"

# Redis: AOF on, fsync every second (the usual production durability), no RDB
# snapshots (a BGSAVE fork in the middle of a measurement is noise; the AOF
# is the durable copy), no memory limit.
redis-server --bind 127.0.0.1 --port $REDIS_PORT --dir "$WORK/redis" --appendonly yes --appendfsync everysec \
  --save "" --daemonize no --logfile "$WORK/redis/redis.log" --protected-mode yes &
PIDS_REDIS=$!
log "redis-server pid $PIDS_REDIS on 127.0.0.1:$REDIS_PORT ($(redis-server --version | awk '{print $3}'))"

# PostgreSQL: own data dir under $BASE, owned by the postgres user (initdb
# refuses root). fsync on; synchronous_commit=off, so that a commit may be
# lost (≤ 3 × wal_writer_delay = 600 ms) on a crash but never corrupts: the
# Postgres counterpart of Redis's appendfsync everysec.
id postgres >/dev/null 2>&1 || useradd -r -m postgres
PGDATA="$WORK/pgdata"
mkdir -p "$PGDATA" "$WORK/pgsock"
chown -R postgres "$WORK/pgdata" "$WORK/pgsock"
chmod 755 "$WORK"
runuser -u postgres -- "$PG_BIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 >/dev/null
runuser -u postgres -- "$PG_BIN/postgres" -D "$PGDATA" -c listen_addresses=127.0.0.1 -c port=$PG_PORT \
  -c unix_socket_directories="$WORK/pgsock" -c synchronous_commit=off -c fsync=on -c max_connections=200 \
  -c logging_collector=off >"$WORK/postgres.log" 2>&1 &
PIDS_PG=$!
for _ in $(seq 1 100); do
  runuser -u postgres -- "$PG_BIN/pg_isready" -h 127.0.0.1 -p $PG_PORT -q && break; sleep 0.2
done
# the postmaster is the child runuser exec'd; record its PID for CPU accounting and shutdown
PM_PID="$(head -1 "$PGDATA/postmaster.pid")"
if [ "$PM_PID" != "$PIDS_PG" ]; then log "note: postmaster pid $PM_PID (runuser pid $PIDS_PG)"; fi
runuser -u postgres -- "$PG_BIN/psql" -h 127.0.0.1 -p $PG_PORT -U postgres -qc "CREATE DATABASE qbench" >/dev/null
log "postgres pid $PM_PID on 127.0.0.1:$PG_PORT ($("$PG_BIN/postgres" --version))"

"$HERE/bin/qbench" fakellm --addr 127.0.0.1:$LLM_PORT --delay 50ms --max-life 3h >"$WORK/fakellm.log" 2>&1 &
PIDS_LLM=$!
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$LLM_PORT") 2>/dev/null && break; sleep 0.1; done
log "fake LLM pid $PIDS_LLM on 127.0.0.1:$LLM_PORT (50 ms, ~1 KB JSON)"

# ---------- versions ----------
{
  echo "date: $(date -Is)"
  echo "machine: $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "agentq: $(cd "$AGENTQ" && git log -1 --format='%h %cs %s') (module github.com/agentq/agentq)"
  (cd "$HERE/go" && go list -m github.com/hibiken/asynq github.com/redis/go-redis/v9 github.com/riverqueue/river github.com/riverqueue/river/riverdriver/riverpgxv5 github.com/jackc/pgx/v5)
  echo "go: $(go version | awk '{print $3}')"
  echo "bullmq: $(node -p "require('$HERE/node/node_modules/bullmq/package.json').version")  ioredis: $(node -p "require('$HERE/node/node_modules/ioredis/package.json').version")  node: $(node --version)"
  echo "redis-server: $(redis-server --version | awk '{print $3}' | cut -d= -f2)  (appendonly yes, appendfsync everysec, save \"\")"
  echo "postgres: $("$PG_BIN/postgres" --version | awk '{print $3}')  (fsync on, synchronous_commit off, shared_buffers default)"
} | tee "$OUT/versions.txt" >&2

# ---------- the benchmark ----------
# PM_PID's data dir carries postmaster.pid, which the orchestrator reads for Postgres CPU
"$HERE/bin/qbench" run --bin "$HERE/bin/qbench" --node "$(command -v node)" --node-script "$HERE/node/bullmq.js" \
  --redis 127.0.0.1:$REDIS_PORT --pg "postgres://postgres@127.0.0.1:$PG_PORT/qbench?sslmode=disable" --pgdata "$PGDATA" \
  --llm "http://127.0.0.1:$LLM_PORT" --out "$OUT" --scale "$SCALE" --rounds "$ROUNDS" \
  --systems "$SYSTEMS" --scenarios "$SCENARIOS" > >(tee "$OUT/output.txt") 2>&1 &
ORCH_PID=$!
wait "$ORCH_PID"
ORCH_PID=""
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/versions.txt" >&2
log "results in $OUT (table.md, results.jsonl, runs/)"
