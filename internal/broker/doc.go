// Package broker is everything agentq does to asynq's Redis. asynq stays
// the transport (leases, crash recovery, scheduling); this package holds
// agentq's copy of the asynq v0.26 internals it depends on (asynq.go:
// keys, the client's enqueue, the server scripts it recognises), the
// producers' run script (run.go), the fair dispatch that replaces asynq's
// dequeue (fair.go), and the client an asynq server runs on (client.go),
// which intercepts asynq's server scripts by SHA-1: it lets idle workers
// wait for work instead of polling Redis for it, and it lets a quick
// success's record write ride asynq's acknowledgement of the delivery.
//
// Every write that makes a task pending also pushes a token onto its
// queue's wake list (rkeys.Wake, in the queue's slot; capped at WakeCap): the
// enqueue scripts of package tasks, and the worker's forward of scheduled
// and retry tasks. An idle worker blocks on the wake lists of its queues
// (Waiter: BLPOP, at most the poll interval), so one token wakes one
// worker. Producers announce tasks scheduled for later on rkeys.DueChannel,
// so that workers forward them when due (Dues) without polling the
// scheduled sets.
//
// AsynqClient also runs agentq's fair dispatch (fair.go) in
// place of asynq's dequeue, and releases a run's tenant count in the same
// script as asynq's done, retry and requeue.
//
// AsynqClient fits both into an asynq server, which makes all its Redis
// calls through the client it is given: it recognises five of asynq's
// scripts by their SHA-1 (lua/asynq/ holds verbatim copies) and changes
// what happens around them (see AsynqClient for each). Two are not run as
// asynq wrote them:
//
//   - forward: asynq's forward script is run patched (forwardScript:
//     lua/forward.lua, asynq's with its LPUSH and reply replaced), so that it also
//     pushes a wake token per task it moves and replies when the set's
//     next task is due; it is asked of Redis only when Dues says a task
//     may be due or the poll interval has passed.
//   - done: a handler that succeeded quickly may leave its record write in
//     Acks instead of making it (worker/ack.go says when); asynq's done of
//     that delivery then runs the write's Ack.WithDone, one script that
//     writes the record and acknowledges the delivery
//     (record.Store.ApplyAcked). Any other answer asynq gives
//     such a delivery (retry, requeue) runs the write's Ack.Alone first.
//
// One Go file and one .lua (lua/; the functions they share in lua/lib/,
// asynq's own scripts in lua/asynq/) per operation, every script built by
// redisx.NewScripts (scripts.go) with its KEYS, ARGV and reply documented
// at the top of its file:
//
//   - dequeue.go, lua/dequeue.lua: the fair dequeue, in place of asynq's.
//   - forward.go, lua/forward.lua: asynq's forward, patched.
//   - retry.go, lua/retry.lua: asynq's retry and the release.
//   - requeue.go, lua/requeue.lua: asynq's requeue, patched, and the release.
//   - done.go, lua/done.lua: asynq's done and the release (DoneLua: the
//     same for internal/record's apply_acked).
//   - run.go, lua/run.lua (lua/lib/run.lua): the producers' enqueue of a run.
//   - wake.go, lua/wake.lua (lua/lib/wake.lua): wake tokens.
//   - remove.go, lua/remove.lua; run_now.go, lua/run_now.lua: a lane's run
//     taken out, or a deferred run made pending now.
//   - repair.go, lua/repair.lua: the fair dispatch's repair.
//   - asynq.go, lua/asynq/enqueue.lua and schedule.lua: asynq's enqueue.
//
// TestConformance runs their behaviours on miniredis, a redis-server and
// a Redis Cluster.
//
// The bound: a task whose token is lost waits at most the poll interval
// (worker.poll_interval) before an idle worker finds it, plus, for a
// delayed task, the forwarder's tick (worker.forward_interval).
package broker
