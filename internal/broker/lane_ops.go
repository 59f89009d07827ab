package broker

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// removeScript takes a pending run out of its lane and deletes its task
// hash (a canceled or expired task's run that no worker has taken).
//
// KEYS[1] the run's task hash
// ARGV[1] run ID, ARGV[2] lane prefix
// Returns 1 when removed, 0 when the run is not waiting in a lane (the
// default lane's runs are asynq's: its inspector deletes them).
var removeScript = redis.NewScript(`
local f = redis.call("HMGET", KEYS[1], "state", "` + FieldTenant + `", "` + FieldPriority + `")
if f[1] ~= "pending" or (not f[2] and not f[3]) then return 0 end
if redis.call("LREM", ARGV[2] .. (f[3] or "n") .. ":" .. (f[2] or ""), 0, ARGV[1]) == 0 then return 0 end
redis.call("DEL", KEYS[1])
return 1
`)

// RemoveFromLane takes run id of queue out of its lane and deletes it, when it
// waits in a lane; false when it does not (it is not pending, or waits in
// asynq's own pending list: delete it with asynq's inspector).
func RemoveFromLane(ctx context.Context, rdb redis.Scripter, queue, id string) (bool, error) {
	n, err := removeScript.Run(ctx, rdb, []string{TaskKey(queue, id)}, id, rkeys.FairLanePrefix(queue)).Int()
	return n == 1, err
}

// runNowScript moves a run from the scheduled or retry set to its lane
// now (asynq's pending list for the default lane), as asynq's forward
// does when it is due.
//
// KEYS[1] the run's task hash, KEYS[2] the set it waits in, KEYS[3]
// asynq's pending list, KEYS[4] the ready set, KEYS[5] the tenant registry
// ARGV[1] run ID, ARGV[2] lane prefix, ARGV[3] now (Unix ns)
// Returns 1 when moved, 0 when the run is not in the set.
var runNowScript = redis.NewScript(LaneLua + `
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then return 0 end
agentq_lane_push(KEYS[3], ARGV[2], KEYS[4], KEYS[5], KEYS[1], ARGV[1], false)
redis.call("HSET", KEYS[1], "state", "pending", "pending_since", ARGV[3])
return 1
`)

// RunNow makes run id of queue, waiting in set (asynq's scheduled or
// retry set of queue), pending at once, in its lane; false when it is not
// in set. The caller wakes a worker for it.
func RunNow(ctx context.Context, rdb redis.Scripter, queue, set, id string, nowNS int64) (bool, error) {
	ready, tenants, prefix := LaneKeys(queue)
	n, err := runNowScript.Run(ctx, rdb, []string{TaskKey(queue, id), set, PendingKey(queue), ready, tenants},
		id, prefix, nowNS).Int()
	return n == 1, err
}
