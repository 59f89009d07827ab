// Package redisx is agentq's one layer between its Redis scripts and
// go-redis: it runs scripts (EVALSHA, EVAL when the server's script cache
// misses them), pipelines and group-commits script calls, reads their
// array replies, and classifies Redis errors.
//
//   - Runner (script.go) is what every store runs its scripts through:
//     Direct(rdb) for one round trip per call, a Batcher (batch.go) to
//     share round trips between concurrent callers.
//   - Pipelined (script.go) sends many script calls in one round trip and
//     reruns, with EVAL, those the server did not know (NOSCRIPT: it
//     restarted or was flushed); it is the one place that fallback lives.
//   - Reply (script.go) reads a script's array reply by position, for the
//     typed reply parsers that sit beside each script.
//   - IsUnavailable and Unanswered (errors.go) say whether Redis failed to
//     answer: the worker's wait-for-Redis loop, the circuit breaker's
//     fallback and the API's 503 all ask them.
//
// The packages that own keys (tasks, resilience, deadletter, restart,
// worker's alerts) keep each script as a named redis.NewScript next to the
// Go method that runs it, with a comment listing KEYS, ARGV and replies,
// and a typed wrapper where the arguments or replies are more than a few.
package redisx
