package broker

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// runNowScript moves a run from the scheduled or retry set to its lane
// now (lua/run_now.lua).
var runNowScript = scripts.Script("lib/lane.lua", "run_now.lua")

// RunNow makes run id of queue, waiting in set (asynq's scheduled or
// retry set of queue), pending at once, in its lane; false when it is not
// in set. The caller wakes a worker for it.
func RunNow(ctx context.Context, rdb redis.Scripter, queue, set, id string, nowNS int64) (bool, error) {
	ready, tenants, prefix := LaneKeys(queue)
	n, err := runNowScript.Run(ctx, rdb, []string{TaskKey(queue, id), set, PendingKey(queue), ready, tenants},
		id, prefix, nowNS).Int()
	return n == 1, err
}

// Resume makes run id of queue, waiting in queue's scheduled set (a
// suspended task's next run), pending now and wakes a worker for it; it
// reports whether it moved the run (false: not there, its timer or
// another resume moved it first — a run moves once). Two calls, the
// second only when the first moved it: on a Redis Cluster each is in the
// queue's slot.
func Resume(ctx context.Context, rdb redis.Scripter, queue, id string, nowNS int64) (bool, error) {
	moved, err := RunNow(ctx, rdb, queue, ScheduledKey(queue), id, nowNS)
	if err != nil || !moved {
		return false, err
	}
	// A lost token delays the run by at most worker.poll_interval (Nudge).
	_ = PushWake(ctx, rdb, queue, 1)
	return true, nil
}
