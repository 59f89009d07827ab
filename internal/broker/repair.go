package broker

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// repairScript mends what only steers the fair dispatch's order, never
// where a run is (lua/repair.lua).
var repairScript = scripts.Script("repair.lua")

// RepairFair runs the repair of queue's fair dispatch state (see repairScript;
// its cost grows with asynq's active list and the tenant registry, so the
// workers run it once per interval for the fleet). It returns how many
// tenants it made ready (wake that many workers) and how many in-flight
// counts it corrected.
func RepairFair(ctx context.Context, rdb redis.Scripter, queue string, c FairConfig) (readied, fixed int64, err error) {
	keys := []string{ActiveKey(queue), rkeys.FairReady(queue), rkeys.FairCapped(queue),
		rkeys.FairInflight(queue), rkeys.FairTenants(queue), rkeys.FairConf(queue)}
	res, err := repairScript.Run(ctx, rdb, keys, TaskKeyPrefix(queue), rkeys.FairLanePrefix(queue),
		c.Default.Concurrency).Int64Slice()
	if err != nil || len(res) != 2 {
		return 0, 0, fmt.Errorf("fair: repair queue %s: %v %w", queue, res, err)
	}
	return res[0], res[1], nil
}
