// Package rkeys builds every Redis key agentq uses, in one place, with pure
// functions. Keys that a Lua script touches together share a hash tag ({…}),
// so multi-key scripts work on Redis Cluster.
package rkeys

import "strconv"

// Prefix starts every agentq key. asynq's own keys start with "asynq:".
const Prefix = "agentq:"

// Task record (a hash: id, agent, action, state, attempts, restarts, run,
// error_class, error, …) of task id.
func Task(id string) string { return Prefix + "{task:" + id + "}" }

// TaskHistory is the list of lifecycle events (JSON) of task id.
func TaskHistory(id string) string { return Prefix + "{task:" + id + "}:history" }

// TaskEvents is the shard channel (SPUBLISH) on which every event of task
// id is announced as it is recorded, in the task's slot.
func TaskEvents(id string) string { return Prefix + "{task:" + id + "}:events" }

// TaskOutput is the list of task id's live output events (progress and
// output lines of its agents), numbered from the record's sequence.
func TaskOutput(id string) string { return Prefix + "{task:" + id + "}:output" }

// TaskSteps is the hash of task id's steps (step name -> the step's data,
// JSON): what its agents recorded while it ran (record.Store.Step), kept
// as long as its record.
func TaskSteps(id string) string { return Prefix + "{task:" + id + "}:steps" }

// TaskSignals is the hash of task id's signals (signal name -> its data,
// JSON): what was sent to it (record.Store.Signal), kept as long as its
// record, waited for or not.
func TaskSignals(id string) string { return Prefix + "{task:" + id + "}:signals" }

// TaskChildren is the list of the child IDs of task id's last children
// wait, in spawn order (record.Store.SetChildren).
func TaskChildren(id string) string { return Prefix + "{task:" + id + "}:children" }

// TaskChildSpecs is the hash of the children of task id's last children
// wait: child ID -> what spawns it (JSON: its name and envelope), which
// the children repair enqueues when a child does not exist.
func TaskChildSpecs(id string) string { return Prefix + "{task:" + id + "}:child_specs" }

// TaskChildEnds is the hash of how the children of task id's last
// children wait ended: child ID -> JSON {id, state, result, error_class,
// error} (record.Store.ChildEnded: the first write wins).
func TaskChildEnds(id string) string { return Prefix + "{task:" + id + "}:child_ends" }

// TaskTreeUsage is the hash of the usage of the tree whose root is task
// id, its own excepted: tokens and usd_micros summed over every
// descendant's calls (budget.Keeper.DebitTree), checked against the
// root's max_tokens and max_cost_usd.
func TaskTreeUsage(id string) string { return Prefix + "{task:" + id + "}:tree_usage" }

// WaitingChildren is the sorted set of the tasks waiting for children
// (task ID -> when the children repair looks at it next, Unix ms).
func WaitingChildren() string { return Prefix + "waiting:children" }

// ChildrenRepairClaim is the claim (SET NX PX) of the worker that runs
// the next children repair, so that a fleet repairs once per interval.
func ChildrenRepairClaim() string { return Prefix + "waiting:children:repair-claim" }

// TaskOutbox is the list of task id's events that its webhooks are still
// to be told of (the webhook outbox: the record's scripts push each event
// of a task that names webhooks, in the step that records it).
func TaskOutbox(id string) string { return Prefix + "{task:" + id + "}:outbox" }

// TaskHooks is the hash of task id's webhook deliveries ("<seq>:<webhook>"
// -> JSON: attempts, first and next try, last error), in the task's slot.
func TaskHooks(id string) string { return Prefix + "{task:" + id + "}:hooks" }

// Webhook keys share the {webhooks} tag: one script claims from both sets.

// WebhooksDue is the sorted set of the tasks with webhook deliveries to
// make (task ID -> when to look, Unix ms; 0: now).
func WebhooksDue() string { return Prefix + "{webhooks}:due" }

// WebhooksLeased is the sorted set of the tasks a worker is delivering
// (task ID -> lease expiry, Unix ms): a lease past its expiry goes back to
// WebhooksDue.
func WebhooksLeased() string { return Prefix + "{webhooks}:leased" }

// WebhooksGivenUp is the sorted set of the tasks with a delivery given up
// after its webhook's max_age (task ID -> when, Unix ms), kept for
// `inspector webhooks` and `inspector webhooks retry`.
func WebhooksGivenUp() string { return Prefix + "{webhooks}:given-up" }

// WebhooksRepairClaim is the claim (SET NX PX) of the worker that runs the
// next outbox repair on a Redis Cluster (webhook.Deliverer.Repair).
func WebhooksRepairClaim() string { return Prefix + "{webhooks}:repair-claim" }

// WebhooksStatus is the hash of each webhook's last outcome (name -> JSON:
// last success, last error and when).
func WebhooksStatus() string { return Prefix + "{webhooks}:status" }

// DLQ keys share the {dlq} tag: one script updates the entry and its indexes.

// DLQEntries is the hash id -> dead letter JSON.
func DLQEntries() string { return Prefix + "{dlq}:entries" }

// DLQIndex is the sorted set of dead-letter ids scored by dead_lettered_at (ms).
func DLQIndex() string { return Prefix + "{dlq}:index" }

// DLQByAgent is the sorted set of dead-letter ids of one agent.
func DLQByAgent(agent string) string { return Prefix + "{dlq}:agent:" + agent }

// DLQByClass is the sorted set of dead-letter ids of one error class.
func DLQByClass(class string) string { return Prefix + "{dlq}:class:" + class }

// ClassifyUnmatched is the stream of recent failed attempts whose verdict
// was weak (resilience.Verdict.Weak: nothing decided, or the model was
// unsure), newest last, capped near unmatched.MaxLen entries: what
// `inspector classify --unmatched` lists (internal/unmatched).
func ClassifyUnmatched() string { return Prefix + "classify:unmatched" }

// Breaker is the hash holding the shared state of the breaker key.
func Breaker(key string) string { return Prefix + "{breaker:" + key + "}" }

// BreakerTrials is the sorted set of half-open trial leases (token -> expiry ms).
func BreakerTrials(key string) string { return Prefix + "{breaker:" + key + "}:trials" }

// BreakerWindow is rate mode's sliding window of counted calls: a hash of
// ring buckets (expires 2 windows after the last counted call).
func BreakerWindow(key string) string { return Prefix + "{breaker:" + key + "}:window" }

// BreakerFailing is rate mode's sorted set of the tasks whose calls failed
// within the window (task ID -> last failure ms; bounded, expiring).
func BreakerFailing(key string) string { return Prefix + "{breaker:" + key + "}:failing" }

// Breakers is the set of every breaker key ever used (for listing).
func Breakers() string { return Prefix + "breakers" }

// BreakerChannel is the pub/sub channel on which breaker transitions are announced.
func BreakerChannel() string { return Prefix + "breaker-events" }

// ConsoleRevoked marks the console session sid (hex of its ID) as logged
// out, until the session would have expired (a string with a TTL).
func ConsoleRevoked(sid string) string { return Prefix + "{console:" + sid + "}:revoked" }

// ConsoleFlash is the last flash (JSON: what a form did, e.g. which dead
// letter it requeued) of the console session sid, read by the page the
// form redirects to (a string with a TTL).
func ConsoleFlash(sid string) string { return Prefix + "{console:" + sid + "}:flash" }

// RestartPending is the sorted set of tasks waiting for a restart (id -> due ms).
func RestartPending() string { return Prefix + "{restart}:pending" }

// DLQIndexes is the set of every per-agent and per-class dead-letter index
// key in use (DLQByAgent, DLQByClass), so Purge and CountBy find them
// without SCAN.
func DLQIndexes() string { return Prefix + "{dlq}:indexes" }

// DLQScratch is a sorted set a dead-letter script builds and deletes within
// one script run (the agent ∩ class intersection of a filtered listing).
func DLQScratch() string { return Prefix + "{dlq}:scratch" }

// DLQRefs is the hash id -> the agent and error class a dead letter is
// indexed under ("<len(agent)>:<agent><class>"), so scripts find its index
// keys without decoding its JSON.
func DLQRefs() string { return Prefix + "{dlq}:refs" }

// DLQRequeueClaim is the claim of the one requeue that may requeue dead
// letter id (a random token, with a TTL): concurrent requeues of it find
// it taken and write nothing.
func DLQRequeueClaim(id string) string { return Prefix + "{dlq}:requeue-claim:" + id }

// BreakerWake is the claim, per breaker generation, of the worker that
// wakes the tasks deferred on a breaker that closed (one scan, not one per
// worker).
func BreakerWake(key string, generation int64) string {
	return Prefix + "{breaker:" + key + "}:wake:" + strconv.FormatInt(generation, 10)
}

// Probe is the hash of the health-probe results of the breaker key
// (last_at, last_ok, latency_ms, error, recent outcomes).
func Probe(key string) string { return Prefix + "{breaker:" + key + "}:probe" }

// ProbeClaim is the claim (SET NX PX interval) of the worker that runs the
// next interval probe of the breaker key while it is closed, so that a
// cluster probes once per interval, not once per worker.
func ProbeClaim(key string) string { return Prefix + "{breaker:" + key + "}:probe-claim" }

// RestartRepairClaim is the claim (SET NX PX) of the worker that runs the
// next repair of the restart index, so that a fleet repairs once per
// interval, not once per worker.
func RestartRepairClaim() string { return Prefix + "{restart}:repair-claim" }

// GaugesClaim is the lease (internal/fleet) of the worker that computes
// the fleet's gauges (agentq_queue_tasks, agentq_worker_slots,
// agentq_dead_letters) and alone exports them, so that a sum over the
// workers' series counts the fleet's work once.
func GaugesClaim() string { return Prefix + "gauges-claim" }

// Deadlines is the sorted set of tasks that have a deadline (id -> the
// deadline, Unix ms), written when each is enqueued; the workers' sweeper
// dead-letters the waiting ones whose deadline has passed and drops the
// ended ones.
func Deadlines() string { return Prefix + "{deadline}:index" }

// WorkersRecoveryClaim is the lease (internal/fleet) of the worker that
// runs the next check of the gone workers' runs that asynq's lease
// recovery took back (registry.Recovery), so that a fleet checks once per
// interval, not once per worker.
func WorkersRecoveryClaim() string { return Prefix + "{workers}:recovery-claim" }

// DeadlineSweepClaim is the claim (SET NX PX) of the worker that runs the
// next sweep of Deadlines, so that a fleet sweeps once per tick, not once
// per worker.
func DeadlineSweepClaim() string { return Prefix + "{deadline}:sweep-claim" }

// AlertWindow is the hash (start: window start in ms, count: failures) in
// which the fleet counts the failures of agent in the current alert window,
// so that an alert is raised once per window for all workers together.
func AlertWindow(agent string) string { return Prefix + "{alert:" + agent + "}:window" }

// Wake is the list of wake-up tokens of queue: every write that makes a task
// of queue pending pushes one (up to a cap), and an idle worker waits on it
// with BLPOP instead of polling. It shares the queue's hash tag with asynq's
// keys of the queue ("asynq:{queue}:…"), so the scripts that enqueue and
// forward a task push its token in the same step, on Redis Cluster too.
func Wake(queue string) string { return Prefix + "{" + queue + "}:wake" }

// WakeStop is the private list, in queue's slot, on which one idle worker
// (waiter id) also blocks, so that its shutdown can end the wait at once.
func WakeStop(queue, id string) string { return Prefix + "{" + queue + "}:wake-stop:" + id }

// Fair dispatch keys (package internal/broker) share the queue's hash tag with
// asynq's keys of the queue, so the dequeue, forward and acknowledgement
// scripts touch them in the same step, on Redis Cluster too.

// FairReady is the sorted set of the tenants of queue that have runs
// waiting in their lanes and are not at their concurrency cap (tenant ->
// its pass: the lowest pass is served next).
func FairReady(queue string) string { return Prefix + "{" + queue + "}:fair:ready" }

// FairCapped is the sorted set of the tenants of queue that have runs
// waiting but are at their concurrency cap (tenant -> its pass); a
// tenant's acknowledged run moves it back to FairReady.
func FairCapped(queue string) string { return Prefix + "{" + queue + "}:fair:capped" }

// FairInflight is the hash of the runs of queue in asynq's active list
// that the fair dequeue handed out, by tenant (tenant -> count).
func FairInflight(queue string) string { return Prefix + "{" + queue + "}:fair:inflight" }

// FairTenants is the set of the tenants of queue that have had a lane:
// what `inspector tenants` and the repair look at (pruned by the repair
// when a tenant has nothing waiting and nothing in flight).
func FairTenants(queue string) string { return Prefix + "{" + queue + "}:fair:tenants" }

// FairConf is the hash of the named tenants' settings the workers last
// wrote for queue (tenant -> "<weight> <concurrency>").
func FairConf(queue string) string { return Prefix + "{" + queue + "}:fair:conf" }

// FairState is the hash of queue's dispatch state: p, the default
// tenant's pass while its runs wait in asynq's own pending list.
func FairState(queue string) string { return Prefix + "{" + queue + "}:fair:state" }

// FairLanePrefix starts the lane keys of queue; the scripts append
// "<h|n|l>:<tenant>" (FairLane).
func FairLanePrefix(queue string) string { return Prefix + "{" + queue + "}:fair:lane:" }

// FairLane is the list of the runs of tenant at priority p ("h", "n" or
// "l") waiting on queue, newest first (LPUSH, served from the right as
// asynq's pending list is).
func FairLane(queue, p, tenant string) string { return FairLanePrefix(queue) + p + ":" + tenant }

// FairRepairClaim is the claim (SET NX PX) of the worker that runs the
// next repair of queue's fair dispatch state.
func FairRepairClaim(queue string) string { return Prefix + "{" + queue + "}:fair:repair-claim" }

// ForwardCheckClaim is the lease (internal/fleet) of the worker that
// checks queue's scheduled and retry sets every worker.poll_interval for
// the fleet (internal/wake's Checks), so that the fleet checks once per
// interval, not once per worker.
func ForwardCheckClaim(queue string) string { return Prefix + "{" + queue + "}:forward-claim" }

// DueChannel is the pub/sub channel on which producers announce a task
// scheduled for later ("<due Unix s> <queue>"), so that a worker forwards it
// when it is due rather than when it next polls.
func DueChannel() string { return Prefix + "due" }

// Limit keys share the {limit:KEY} tag: one script admits a call against
// every limit of the key at once.

// LimitState is the hash of limits key key: the configured limits the
// workers last wrote (requests, tokens, per_ms, concurrency), the running
// token total of the window (tokens_used), the fleet-wide pause
// (paused_until ms, paused_reason) and a sequence for log members (seq).
func LimitState(key string) string { return Prefix + "{limit:" + key + "}" }

// LimitStarts is the sorted set of the starts of the calls of limits key
// key (member -> start ms), the sliding log of its request limit.
func LimitStarts(key string) string { return Prefix + "{limit:" + key + "}:starts" }

// LimitLeases is the sorted set of the concurrency leases of limits key
// key (lease token -> expiry ms): the calls in flight.
func LimitLeases(key string) string { return Prefix + "{limit:" + key + "}:leases" }

// LimitTokens is the sorted set of the token debits of limits key key
// ("<seq>:<tokens>" -> ms), the sliding log of its token limit.
func LimitTokens(key string) string { return Prefix + "{limit:" + key + "}:tokens" }

// Limits is the set of every limits key in use (for listing).
func Limits() string { return Prefix + "limits" }

// Worker registry keys share the {workers} tag: one script writes a
// worker's entry and drops the entries of workers long gone.

// Workers is the hash of the worker registry (worker process ID -> JSON:
// host, pid, version, queues, concurrency, started, last heartbeat, tasks
// in flight), which each worker rewrites every heartbeat.
func Workers() string { return Prefix + "{workers}:entries" }

// WorkersBeats is the sorted set of the registry's workers (ID -> last
// heartbeat, Unix ms), by which the heartbeat script finds the entries to
// drop.
func WorkersBeats() string { return Prefix + "{workers}:beats" }

// Chart keys share the {charts} tag: one script writes a minute's counts
// and trims the old ones from both.

// ChartCounts is the hash of the console's per-minute chart series: field
// "<unix minute>:ok" and "<unix minute>:fail" (attempts that succeeded and
// failed in that minute, HINCRBY by every worker) and "<unix minute>:q"
// (the queue sizes read in that minute: "pending active scheduled retry").
func ChartCounts() string { return Prefix + "{charts}:counts" }

// ChartMinutes is the sorted set of the minutes ChartCounts holds (unix
// minute -> the same), by which old minutes are trimmed.
func ChartMinutes() string { return Prefix + "{charts}:minutes" }

// ChartFlushed is the number of the last flush of charts counter id (a
// random ID per worker process) that the count script applied: a flush
// sent again after its reply was lost is counted once. It expires a day
// after the counter's last flush.
func ChartFlushed(id string) string { return Prefix + "{charts}:f:" + id }

// Schedule is the hash of schedule name's state (last_fire and
// last_skipped, Unix ms of the ticks; last_task, the last fired tick's
// task ID), one per configured schedule, expiring when the schedule stops
// firing (package schedule).
func Schedule(name string) string { return Prefix + "{schedule:" + name + "}" }

// Usage totals keys share the {usage} tag: one script adds a flush's
// counts to every hour it touches. On Redis Cluster they all sit in one
// slot, which is fine at this scale (one small script call per worker per
// flush interval, a bounded number of series per hour).

// UsageHour is the hash of the fleet's usage totals of the hour that
// starts at unix hour h (Unix seconds / 3600): field
// "<agent>\x1f<tenant>\x1f<model>\x1f<counter>" (counters: in, out,
// cached, total, cost in micro-dollars, n attempts), added to by every
// worker (saturating at usage.MaxSum); it expires usage.retention after
// the hour ends.
func UsageHour(h int64) string { return Prefix + "{usage}:h:" + strconv.FormatInt(h, 10) }

// UsageSeries is the set of the series ("<agent>\x1f<tenant>\x1f<model>")
// that UsageHour(h) counts, by which the flush script bounds them; it
// expires with UsageHour(h).
func UsageSeries(h int64) string { return Prefix + "{usage}:s:" + strconv.FormatInt(h, 10) }

// UsageFlushed is the number of the last flush of recorder id (a random
// ID per worker process) that the totals script applied: a flush sent
// again after its reply was lost is applied once. It expires a day after
// the recorder's last flush.
func UsageFlushed(id string) string { return Prefix + "{usage}:f:" + id }

// BudgetLimit is the limits key (a name for LimitState and its siblings,
// not a Redis key) of the unit ("tokens" or "usd") of the budget of kind
// ("tenant" or "agent") name: a budget is a token limit of its own, kept
// by internal/limit. The spaces keep it apart from every configured
// limits key (the config refuses whitespace there).
func BudgetLimit(kind, unit, name string) string { return "budget " + kind + " " + unit + " " + name }
