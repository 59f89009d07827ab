package broker

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// RunLua defines agentq_run(task, list, wake, msg, id, at, kind, cap,
// channel, due, ready, tenants, tenant, code): asynq's enqueue of a task
// (asynq.go's enqueueCmd, or for kind "scheduled" its scheduleCmd: the
// same writes, held to them by TestRunScriptWritesAsynqs), plus the
// wake-up a pending task needs (a token on its queue's wake list) or the
// announcement a scheduled one needs (due, published on channel, when not
// ""). A run of a lane other than the default (code not "": see
// fair.go) waits in its lane (list is the lane's key), its task hash
// names the lane, and its tenant joins the ready set when the lane was
// empty (see LaneLua). Returns 1 when
// written, 0 when a task with that ID exists on the queue. The record's
// enqueue script (internal/record) includes it.
const RunLua = pushLua + LaneLua + `
local function agentq_run(task, list, wake, msg, id, at, kind, cap, channel, due, ready, tenants, tenant, code)
  if redis.call("EXISTS", task) == 1 then
    return 0
  end
  if kind == "pending" then
    if code ~= "" then
      redis.call("HSET", task, "msg", msg, "state", "pending", "pending_since", at, "` + FieldTenant + `", tenant, "` + FieldPriority + `", code)
    else
      redis.call("HSET", task, "msg", msg, "state", "pending", "pending_since", at)
    end
    if redis.call("LPUSH", list, id) == 1 and code ~= "" then agentq_lane_join(ready, tenants, tenant) end
    agentq_wake(wake, 1, cap)
  else
    redis.call("HSET", task, "msg", msg, "state", "scheduled")
    agentq_lane_fields(task, tenant, code)
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
// cap, [6] due channel, [7] due announcement ("" for none), [8] tenant,
// [9] priority code ("" for the default lane).
// Returns 1 when written, 0 when the asynq task ID exists.
var runScript = redis.NewScript(RunLua + `
return agentq_run(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7],
  KEYS[4], KEYS[5], ARGV[8], ARGV[9])
`)

// RunCall is the call that puts t, of lane, on its queue at now, after
// delay. announce adds the due announcement of a delayed task (a batch
// announces the first task of a queue only: they are all due together).
func RunCall(t AsynqTask, lane Lane, now time.Time, delay time.Duration, announce bool) redisx.Call {
	return redisx.Call{Script: runScript, Keys: RunKeys(t.Queue, t.ID, lane, delay), Args: RunArgs(t, lane, now, delay, announce)}
}

// RunKeys are agentq_run's keys: asynq's task hash, the list the run
// waits in (its lane: the queue's pending list for the default lane) or,
// delayed, the scheduled set, the queue's wake list, and the fair
// dispatch's ready set and tenant registry, all in the queue's slot.
func RunKeys(queue, asynqID string, lane Lane, delay time.Duration) []string {
	list := lane.Key(queue)
	if delay > 0 {
		list = ScheduledKey(queue)
	}
	ready, tenants, _ := LaneKeys(queue)
	return []string{TaskKey(queue, asynqID), list, rkeys.Wake(queue), ready, tenants}
}

// RunArgs are agentq_run's arguments for t of lane at now after delay.
func RunArgs(t AsynqTask, lane Lane, now time.Time, delay time.Duration, announce bool) []any {
	if delay <= 0 {
		return append([]any{t.Message(), t.ID, now.UnixNano(), "pending", WakeCap, rkeys.DueChannel(), ""}, lane.Args()...)
	}
	at := now.Add(delay)
	due := ""
	if announce {
		due = DueMessage(t.Queue, at)
	}
	return append([]any{t.Message(), t.ID, at.Unix(), "scheduled", WakeCap, rkeys.DueChannel(), due}, lane.Args()...)
}

// RunCommands are the plain commands that put t on its queue at now after
// delay, for a MULTI/EXEC of a task whose ID is new (agentq_run without
// its EXISTS check): asynq's task hash and queue entry, and the wake-up
// token (LPUSH, LTRIM to WakeCap) or the due announcement.
func RunCommands(t AsynqTask, lane Lane, now time.Time, delay time.Duration) [][]any {
	if delay > 0 {
		at := now.Add(delay)
		return [][]any{
			append([]any{"hset", TaskKey(t.Queue, t.ID), "msg", t.Message(), "state", "scheduled"}, lane.Fields()...),
			{"zadd", ScheduledKey(t.Queue), at.Unix(), t.ID},
			{"publish", rkeys.DueChannel(), DueMessage(t.Queue, at)},
		}
	}
	cmds := [][]any{
		append([]any{"hset", TaskKey(t.Queue, t.ID), "msg", t.Message(), "state", "pending", "pending_since", now.UnixNano()},
			lane.Fields()...),
		{"lpush", lane.Key(t.Queue), t.ID},
	}
	cmds = append(cmds, lane.Commands(t.Queue)...)
	return append(cmds, []any{"lpush", rkeys.Wake(t.Queue), "1"}, []any{"ltrim", rkeys.Wake(t.Queue), 0, WakeCap - 1})
}
