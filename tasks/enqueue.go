package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/asynqcompat"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/wakeup"
)

// runLua defines agentq_run(task, list, wake, msg, id, at, kind, cap,
// channel, due): asynq's enqueue of a task (asynqcompat's enqueueCmd, or
// for kind "scheduled" its scheduleCmd: the same writes, held to them by
// TestRunScriptWritesAsynqs), plus the wake-up a pending task needs (a
// token on its queue's wake list) or the announcement a scheduled one
// needs (due, published on channel, when not ""). Returns 1 when written,
// 0 when a task with that ID exists on the queue.
const runLua = wakeup.PushLua + `
local function agentq_run(task, list, wake, msg, id, at, kind, cap, channel, due)
  if redis.call("EXISTS", task) == 1 then
    return 0
  end
  if kind == "pending" then
    redis.call("HSET", task, "msg", msg, "state", "pending", "pending_since", at)
    redis.call("LPUSH", list, id)
    agentq_wake(wake, 1, cap)
  else
    redis.call("HSET", task, "msg", msg, "state", "scheduled")
    redis.call("ZADD", list, at, id)
    if due ~= "" then
      redis.call("PUBLISH", channel, due)
    end
  end
  return 1
end
`

// runScript puts one run of a task on its queue (EnqueueRun, EnqueueMany).
//
// KEYS[1] asynq's task hash, KEYS[2] the queue's pending list (or, kind
// "scheduled", its scheduled set), KEYS[3] the queue's wake list (all
// three in the queue's slot)
// ARGV[1] asynq's encoded TaskMessage, ARGV[2] asynq task ID, ARGV[3]
// pending_since (Unix ns) or, scheduled, the due time (Unix s, the score),
// ARGV[4] kind ("pending" or "scheduled"), ARGV[5] wake list cap, ARGV[6]
// due channel, ARGV[7] due announcement ("" for none)
// Returns 1 when written, 0 when the asynq task ID exists (ErrDuplicate).
var runScript = redis.NewScript(runLua + `
return agentq_run(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7])
`)

// runCall is the runScript call that puts t on its queue at now, after
// delay. announce adds the due announcement of a delayed task (EnqueueMany
// announces the first task of a queue only: they are all due together).
func runCall(t asynqcompat.Task, now time.Time, delay time.Duration, announce bool) redisx.Call {
	return redisx.Call{Script: runScript, Keys: runKeys(t.Queue, t.ID, delay), Args: runArgs(t, now, delay, announce)}
}

func runKeys(queue, asynqID string, delay time.Duration) []string {
	list := asynqcompat.PendingKey(queue)
	if delay > 0 {
		list = asynqcompat.ScheduledKey(queue)
	}
	return []string{asynqcompat.TaskKey(queue, asynqID), list, rkeys.Wake(queue)}
}

func runArgs(t asynqcompat.Task, now time.Time, delay time.Duration, announce bool) []any {
	if delay <= 0 {
		return []any{t.Message(), t.ID, now.UnixNano(), "pending", wakeup.Cap, rkeys.DueChannel(), ""}
	}
	at := now.Add(delay)
	due := ""
	if announce {
		due = wakeup.DueMessage(t.Queue, at)
	}
	return []any{t.Message(), t.ID, at.Unix(), "scheduled", wakeup.Cap, rkeys.DueChannel(), due}
}

// enqueueTaskScript is all of Enqueue in one step, where every key lives on
// one server (not a Cluster): the duplicate check of a caller's ID, the
// run on its queue (agentq_run) and the record (agentq_create).
//
// KEYS[1] task record, KEYS[2] history, KEYS[3] dead letters
// (rkeys.DLQEntries), KEYS[4..6] runScript's KEYS
// ARGV[1] "1" to check for a duplicate (a caller's ID), ARGV[2] task ID,
// ARGV[3..9] runScript's ARGV, ARGV[10..17] createScript's ARGV[2..9]
// (agent, action, queue, enqueued_at, state, event, lifetime, correlation)
// Returns {0, state} when enqueued; {1, state} for a duplicate (a record,
// or "dead_lettered"); {2, state or ""} when the run was already queued.
var enqueueTaskScript = redis.NewScript(runLua + createLua + `
if ARGV[1] == "1" then
  local st = redis.call("HGET", KEYS[1], "state")
  if st then return {1, st} end
  if redis.call("HEXISTS", KEYS[3], ARGV[2]) == 1 then return {1, "dead_lettered"} end
end
if agentq_run(KEYS[4], KEYS[5], KEYS[6], ARGV[3], ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8], ARGV[9]) == 0 then
  return {2, redis.call("HGET", KEYS[1], "state") or ""}
end
agentq_create(KEYS[1], KEYS[2], ARGV[2], ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14], ARGV[15], ARGV[16], ARGV[17])
return {0, ARGV[14]}
`)

// enqueueOne is Enqueue in one round trip, where every key lives on one
// server (not a Cluster). A caller's ID needs the duplicate check, so it
// runs enqueueTaskScript, through the client's group-committing batcher; a
// generated ID (random, 96 bits: no duplicate to look for) takes
// enqueueFresh, plain commands in MULTI/EXEC, which cost Redis about half
// as much as the script. Both go through the client's group-committing
// batcher, so concurrent Enqueue calls share round trips.
func (c *Client) enqueueOne(ctx context.Context, env *Envelope, caller bool, now time.Time, delay time.Duration) (Result, error) {
	t, err := asynqTask(env, now, delay)
	if err != nil {
		return Result{}, err
	}
	if err := c.register(ctx, env.Queue); err != nil {
		return Result{}, fmt.Errorf("tasks: enqueue %s: register queue: %w", env.ID, err)
	}
	state, event := firstState(delay)
	ev := Event{Event: event, DelayMS: delay.Milliseconds()}
	ev.At = c.store.stamp(ev.At)
	b := ev.marshal()
	if !caller {
		if err := c.enqueueFresh(ctx, env, t, now, delay, state, string(b), c.store.createTTL(ev)); err != nil {
			return Result{}, fmt.Errorf("tasks: enqueue %s: %w", env.ID, err)
		}
		return Result{ID: env.ID, State: state}, nil
	}
	keys := append([]string{rkeys.Task(env.ID), rkeys.TaskHistory(env.ID), rkeys.DLQEntries()}, runKeys(env.Queue, t.ID, delay)...)
	args := append([]any{"1", env.ID}, runArgs(t, now, delay, true)...)
	args = append(args, env.Agent, env.Action, env.Queue, env.EnqueuedAt.UTC().Format(time.RFC3339Nano),
		string(state), string(b), c.store.createTTL(ev), env.CorrelationID)
	res, err := c.runner.Run(ctx, enqueueTaskScript, keys, args...)
	if err != nil {
		return Result{}, fmt.Errorf("tasks: enqueue %s: %w", env.ID, err)
	}
	code, st, err := enqueueReply(res)
	if err != nil {
		return Result{}, fmt.Errorf("tasks: enqueue %s: %w", env.ID, err)
	}
	return Result{ID: env.ID, Duplicate: code != 0, State: st}, nil
}

// enqueueFresh writes what enqueueTaskScript writes for a task with a
// generated ID, as plain commands in one MULTI/EXEC (atomic: a connection
// lost before EXEC writes nothing), in one round trip shared with
// concurrent enqueues (the client's batcher), with the WAIT of
// redis.wait_replicas when asked: asynq's task hash and queue entry (as
// agentq_run, without its EXISTS: the ID is new), the record and its first
// event (as agentq_create for a missing record), and the wake-up token
// (LPUSH, LTRIM to wakeup.Cap) or the due announcement.
func (c *Client) enqueueFresh(ctx context.Context, env *Envelope, t asynqcompat.Task, now time.Time, delay time.Duration,
	state State, event string, ttl int64) error {
	rec, hist := rkeys.Task(env.ID), rkeys.TaskHistory(env.ID)
	calls := make([]redisx.Call, 0, 11)
	cmd := func(args ...any) { calls = append(calls, redisx.Call{Cmd: args}) }
	cmd("multi")
	if delay > 0 {
		at := now.Add(delay)
		cmd("hset", asynqcompat.TaskKey(env.Queue, t.ID), "msg", t.Message(), "state", "scheduled")
		cmd("zadd", asynqcompat.ScheduledKey(env.Queue), at.Unix(), t.ID)
		cmd("publish", rkeys.DueChannel(), wakeup.DueMessage(env.Queue, at))
	} else {
		cmd("hset", asynqcompat.TaskKey(env.Queue, t.ID), "msg", t.Message(), "state", "pending", "pending_since", now.UnixNano())
		cmd("lpush", asynqcompat.PendingKey(env.Queue), t.ID)
		cmd("lpush", rkeys.Wake(env.Queue), "1")
		cmd("ltrim", rkeys.Wake(env.Queue), 0, wakeup.Cap-1)
	}
	cmd("hset", rec, "id", env.ID, "agent", env.Agent, "action", env.Action, "queue", env.Queue,
		"enqueued_at", env.EnqueuedAt.UTC().Format(time.RFC3339Nano), "correlation_id", env.CorrelationID,
		"state", string(state), "run", "0")
	cmd("rpush", hist, event)
	cmd("expire", rec, ttl)
	cmd("expire", hist, ttl)
	cmd("exec")
	res, err := c.runner.RunCalls(ctx, calls)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	replies, _ := res[len(res)-1].Val.([]any) // EXEC's: one per command
	for _, r := range replies {
		if err, ok := r.(error); ok {
			return err
		}
	}
	return nil
}
func enqueueReply(res any) (int64, State, error) {
	if r, ok := res.([]any); ok && len(r) == 2 {
		code, ok1 := r[0].(int64)
		st, ok2 := r[1].(string)
		if ok1 && ok2 {
			return code, State(st), nil
		}
	}
	return 0, "", fmt.Errorf("unexpected reply %v", res)
}

// register adds queue to asynq's set of queues the first time this client
// enqueues on it (asynq's client keeps the same cache).
func (c *Client) register(ctx context.Context, queue string) error {
	if _, ok := c.registered.Load(queue); ok {
		return nil
	}
	if err := asynqcompat.RegisterQueues(ctx, c.store.rdb, queue); err != nil {
		return err
	}
	c.registered.Store(queue, true)
	return nil
}

// isCluster reports whether rdb is a Cluster client, on which one script
// cannot touch a task's record and its queue (they hash to different
// slots).
func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}
