package wakeup

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/asynqcompat"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// RunLua defines agentq_run(task, list, wake, msg, id, at, kind, cap,
// channel, due): asynq's enqueue of a task (asynqcompat's enqueueCmd, or
// for kind "scheduled" its scheduleCmd: the same writes, held to them by
// TestRunScriptWritesAsynqs), plus the wake-up a pending task needs (a
// token on its queue's wake list) or the announcement a scheduled one
// needs (due, published on channel, when not ""). Returns 1 when written,
// 0 when a task with that ID exists on the queue. The record's enqueue
// script (internal/record) includes it.
const RunLua = PushLua + `
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

// runScript puts one run of a task on its queue (RunCall).
//
// KEYS: RunKeys's. ARGV: RunArgs's: [1] asynq's encoded TaskMessage, [2]
// asynq task ID, [3] pending_since (Unix ns) or, scheduled, the due time
// (Unix s, the score), [4] kind ("pending" or "scheduled"), [5] wake list
// cap, [6] due channel, [7] due announcement ("" for none).
// Returns 1 when written, 0 when the asynq task ID exists.
var runScript = redis.NewScript(RunLua + `
return agentq_run(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7])
`)

// RunCall is the call that puts t on its queue at now, after delay.
// announce adds the due announcement of a delayed task (a batch announces
// the first task of a queue only: they are all due together).
func RunCall(t asynqcompat.Task, now time.Time, delay time.Duration, announce bool) redisx.Call {
	return redisx.Call{Script: runScript, Keys: RunKeys(t.Queue, t.ID, delay), Args: RunArgs(t, now, delay, announce)}
}

// RunKeys are agentq_run's keys: asynq's task hash, the queue's pending
// list (or, delayed, its scheduled set) and its wake list, all three in the
// queue's slot.
func RunKeys(queue, asynqID string, delay time.Duration) []string {
	list := asynqcompat.PendingKey(queue)
	if delay > 0 {
		list = asynqcompat.ScheduledKey(queue)
	}
	return []string{asynqcompat.TaskKey(queue, asynqID), list, rkeys.Wake(queue)}
}

// RunArgs are agentq_run's arguments for t at now after delay.
func RunArgs(t asynqcompat.Task, now time.Time, delay time.Duration, announce bool) []any {
	if delay <= 0 {
		return []any{t.Message(), t.ID, now.UnixNano(), "pending", Cap, rkeys.DueChannel(), ""}
	}
	at := now.Add(delay)
	due := ""
	if announce {
		due = DueMessage(t.Queue, at)
	}
	return []any{t.Message(), t.ID, at.Unix(), "scheduled", Cap, rkeys.DueChannel(), due}
}

// RunCommands are the plain commands that put t on its queue at now after
// delay, for a MULTI/EXEC of a task whose ID is new (agentq_run without
// its EXISTS check): asynq's task hash and queue entry, and the wake-up
// token (LPUSH, LTRIM to Cap) or the due announcement.
func RunCommands(t asynqcompat.Task, now time.Time, delay time.Duration) [][]any {
	if delay > 0 {
		at := now.Add(delay)
		return [][]any{
			{"hset", asynqcompat.TaskKey(t.Queue, t.ID), "msg", t.Message(), "state", "scheduled"},
			{"zadd", asynqcompat.ScheduledKey(t.Queue), at.Unix(), t.ID},
			{"publish", rkeys.DueChannel(), DueMessage(t.Queue, at)},
		}
	}
	return [][]any{
		{"hset", asynqcompat.TaskKey(t.Queue, t.ID), "msg", t.Message(), "state", "pending", "pending_since", now.UnixNano()},
		{"lpush", asynqcompat.PendingKey(t.Queue), t.ID},
		{"lpush", rkeys.Wake(t.Queue), "1"},
		{"ltrim", rkeys.Wake(t.Queue), 0, Cap - 1},
	}
}
