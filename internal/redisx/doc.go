// Package redisx is agentq's one layer between its Redis scripts and
// go-redis: it runs scripts (EVALSHA, EVAL when the server's script cache
// misses them), pipelines and group-commits script calls, reads their
// array replies, and classifies Redis errors.
//
//   - Runner (script.go) is what a store runs the scripts of its hot path
//     through: Direct(rdb) for one round trip per call, a Batcher
//     (batch.go) to share round trips between concurrent callers,
//     Replicated (replicate.go) to WAIT for replicas after each call.
//   - Pipelined (script.go) sends many script calls in one round trip and
//     reruns, with EVAL, those the server did not know (NOSCRIPT: it
//     restarted or was flushed); it is the one place that fallback lives.
//   - Reply (script.go) reads a script's array reply by position, for the
//     typed reply parsers that sit beside each script.
//   - IsUnavailable and Unanswered (errors.go) say whether Redis failed to
//     answer: the worker's wait-for-Redis loop, the circuit breaker's
//     fallback and the API's 503 all ask them.
//
// Which scripts go through a Runner. The writes a task's run makes many
// times a second, and those its outcome depends on, do, so that the worker
// can batch them and make them wait for replicas (redis.wait_replicas):
// the task record's writes and the enqueues (internal/record's Store,
// tasks.Client), a dead letter's Put (deadletter.WithWaitReplicas), the
// breaker's admissions and records (breaker.WithRunner) and the limiter's
// (limit.WithRunner), and a success's record written inside asynq's done
// (internal/record's apply_acked.lua and succeed_acked.lua, the latter
// lean for the common success, through the store's ack runner,
// record.WithAckRunner: the worker's batcher when it runs tasks
// concurrently, so that their acks share round trips; redisx.Direct when
// it runs one at a time, where a batcher's wait for company would hold the
// only slot in asynq's processor). Every other script is run straight on
// the client (redis.Script.Run, which has the same EVALSHA-then-EVAL
// fallback as Direct), each for a reason:
//
//   - asynq's round trip: internal/broker's
//     forwardScript (asynq's forward, run on the client asynq was given,
//     within asynq's own call), as are the fair versions of asynq's
//     dequeue, done, retry and requeue that it runs in their place, and
//     its done and retry that also fetch the queue's next run
//     (prefetch.go)
//     (AsynqClient.fairCall).
//   - best-effort, where a lost write costs a delay and nothing else:
//     internal/broker's pushScript (a wake token: a lost one delays a task
//     by at most the poll interval) and nudgeScript (the fleet's look for
//     work without a token; the next interval looks again), internal/alert's windowScript (the
//     fleet's alert window), internal/breaker's recordProbeScript (a
//     health probe's result; the next probe writes another),
//     internal/registry's heartbeatScript (a worker's registry entry; the
//     next heartbeat writes another),
//     internal/charts' chartCountScript (a worker's attempt counts for the
//     console's charts, once per flush number, sent again when Redis
//     did not answer) and chartQueuesScript (a console's reading of the queue
//     sizes; the next reading writes another), and usage's totalsScript
//     (a worker's usage totals, once per flush, kept for the next flush
//     when it fails).
//   - bookkeeping that repairs itself: restart's reserveScript (a slot in
//     the restart index, written before the run's enqueue, which goes
//     through the client's runner) and removeIfScoreScript (Repair frees
//     an orphaned slot); internal/broker's repairScript (the tenants' ready
//     sets and in-flight counts, recounted), removeScript (a canceled or
//     expired run taken out of its lane: one left there is dropped unrun
//     when a worker takes it) and runNowScript (a deferred run woken into
//     its lane: one left waits for its own due time).
//   - the operator's calls on dead letters, one at a time and not on a
//     task's path: deadletter's putManyScript (imports), deleteScript,
//     purgeScript, and a requeue's claimScript and releaseScript (the
//     requeue's enqueue goes through the client's runner).
//   - reads, which a replica wait would only slow: resilience's
//     snapshotScript and statusScript, deadletter's listScript.
//   - webhook deliveries (package webhook), which repair themselves: a
//     lease that expires puts its task back, the outbox stays until it is
//     taken, and a delivery is at least once anyway: claimScript,
//     renewScript, releaseScript, takeScript, repairScript, and retryScript
//     (the operator's `inspector webhooks retry`).
//   - a schedule's state (package schedule's recordScript): written after
//     the tick's enqueue, which is what makes a tick once; the state only
//     feeds the missed-tick policy and the operators' view.
//
// internal/lint's TestDirectScriptCallsDocumented holds this list to the
// code: a script run straight on a client that is not named here fails it.
//
// The packages that own keys keep each script as an embedded .lua file
// (in the package's lua/ directory) whose leading comments name its KEYS,
// ARGV and replies, built with NewScripts (luafile.go) into a named
// package variable next to the Go method that runs it, with a typed
// wrapper where the arguments or replies are more than a few; the names
// of fields, key parts and constants in it are rendered from Go.
// internal/lint's TestNoInlineScripts and TestScriptsDocumented hold it.
package redisx
