package broker

import (
	"time"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// RunLua defines agentq_run (lua/lib/run.lua, with lua/lib/wake.lua and
// lua/lib/lane.lua before it): asynq's enqueue of a run, in its lane, with
// its wake-up or due announcement. The record's enqueue script
// (internal/record) includes it.
var RunLua = scripts.Source("lib/wake.lua", "lib/lane.lua", "lib/run.lua")

// runScript puts one run of a task on its queue (RunCall; lua/run.lua
// documents its KEYS, ARGV and reply: RunKeys's and RunArgs's).
var runScript = scripts.Script("lib/wake.lua", "lib/lane.lua", "lib/run.lua", "run.lua")

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
	r := NewRun(t, lane, now, delay, announce)
	return []any{r.Msg, t.ID, r.At, r.Kind, WakeCap, rkeys.DueChannel(), r.Due, r.Tenant, r.Code}
}

// Run is what agentq_run is given for one run, by name (RunArgs's values
// but the constants and the ID).
type Run struct {
	Msg  []byte // asynq's message (AsynqTask.Message)
	At   int64  // pending: now, Unix ns; scheduled: its due time, Unix s
	Kind string // "pending" or "scheduled"
	Due  string // a scheduled run's due announcement (DueMessage), or ""
	// Tenant and Code are the lane's ("" and "" for the default lane).
	Tenant, Code string
}

// NewRun is the Run of t of lane at now after delay; announce gives a
// delayed run its due announcement.
func NewRun(t AsynqTask, lane Lane, now time.Time, delay time.Duration, announce bool) Run {
	r := Run{Msg: t.Message(), At: now.UnixNano(), Kind: "pending"}
	if !lane.Default() {
		r.Tenant, r.Code = lane.Tenant, lane.code()
	}
	if delay > 0 {
		at := now.Add(delay)
		r.At, r.Kind = at.Unix(), "scheduled"
		if announce {
			r.Due = DueMessage(t.Queue, at)
		}
	}
	return r
}
