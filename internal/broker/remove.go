package broker

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// removeScript takes a pending run out of its lane and deletes its task
// hash (lua/remove.lua).
var removeScript = scripts.Script("remove.lua")

// RemoveFromLane takes run id of queue out of its lane and deletes it, when it
// waits in a lane; false when it does not (it is not pending, or waits in
// asynq's own pending list: delete it with asynq's inspector).
func RemoveFromLane(ctx context.Context, rdb redis.Scripter, queue, id string) (bool, error) {
	n, err := removeScript.Run(ctx, rdb, []string{TaskKey(queue, id)}, id, rkeys.FairLanePrefix(queue)).Int()
	return n == 1, err
}
