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
