// Package bench holds agentq's benchmarks (`make bench`): the throughput of
// the whole worker pipeline against a plain asynq server on the same
// redis-server (in one process, and as 4 worker processes against 4 asynq
// server processes), the cost of the circuit-breaker gate, how many calls
// reach a dead backend from 4 worker processes sharing one breaker, idle
// pickup latency (1 to 100 idle workers), retry timing, an I/O-bound HTTP
// agent (50 ms calls at concurrency 200, and 200 ms calls at concurrency
// 400) against asynq making the same calls, with the worker's CPU per task
// (the backend a process of its own), enqueue throughput
// (single, concurrent, batched with EnqueueMany, and the enqueuer binary's
// --file), and what agentq costs its Redis: Redis CPU per task, and Redis
// CPU, round trips and commands per idle worker (1, 10 and 50 idle workers
// against asynq with its defaults and with a 10ms poll), and how soon a
// waiter hears of its task's end (BenchmarkWaitNotify: the latency, the
// Redis CPU per notified waiter, and no SPUBLISH for tasks nobody waits
// for), and durable runs' costs (BenchmarkWaitingIdle: N waiting tasks
// hold no worker slot, the idle fleet's Redis CPU with and without them,
// Redis memory per waiting task; BenchmarkResumeLatency: a signal to the
// resumed attempt's start; BenchmarkFanOut: a 1,000-child fan-out on a
// standalone redis-server and on a 6-node Cluster, children/s, every
// child ended once and the parent resumed once, and the last child's
// terminal write to the parent's resumed start).
//
// Each benchmark prints its own headline line ("wait notification p50:",
// "idle Redis CPU per worker:",
// "single enqueue/asynq ratio:", "pipeline/asynq 4-process throughput
// ratio:", "pipeline/asynq Redis CPU per task ratio:", "pipeline/asynq
// throughput ratio:", "io-bound 50ms/c=200 agentq/asynq throughput ratio:",
// "io-bound 200ms/c=400 agentq/asynq throughput ratio:", "worker CPU per
// task agentq/asynq ratio:", "waiting tasks idle-fleet Redis CPU
// with/without ratio:", "signal resume latency p50:", "1000-child fan-out
// children/s:"); the summary
// printed after the run, and `make bench`, end with them in that order.
//
// Every figure is measured in one run, A/B interleaved (A, B, A, B, …), on
// one real redis-server started on a free port and flushed between rounds;
// the benchmarks print medians and ratios and never assert wall-clock
// numbers. Child processes are this test binary run again with
// AGENTQ_BENCH_ROLE set (TestMain dispatches them) or run as
// TestHelperBackend (BenchmarkIOBound's backend), or the worker and
// enqueuer binaries built for the run. Plain `go test ./...` runs only the
// cheap helper tests here; the benchmarks run with `-bench`. BENCHMARKS.md
// at the repository root has the figures of a reference run.
package bench
