// Package bench holds agentq's benchmarks (`make bench`): the throughput of
// the whole worker pipeline against a plain asynq server on the same
// redis-server, the cost of the circuit-breaker gate, idle pickup latency,
// retry timing and enqueue throughput.
//
// Every figure is measured in one run, A/B interleaved (A, B, A, B, …), on
// one real redis-server started on a free port and flushed between rounds;
// the benchmarks print medians and ratios and never assert wall-clock
// numbers. Plain `go test ./...` runs only the cheap helper tests here;
// the benchmarks run with `-bench`. BENCHMARKS.md at the repository root
// has the figures of a reference run.
package bench
