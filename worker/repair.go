package worker

import (
	"context"
	"time"

	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/restart"
)

// repairInterval is how often the fleet repairs the restart index (one
// worker per interval, by claim).
const repairInterval = time.Minute

// repairRestarts frees orphaned slots of the restart index every interval
// until ctx ends; of all workers, the one that claims the interval does it.
func (w *Worker) repairRestarts(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if ok, err := w.rdb.SetNX(ctx, rkeys.RestartRepairClaim(), w.pipe.workerID, interval-interval/10).Result(); err == nil && ok {
			n, err := w.pipe.restarts.Repair(ctx, restart.InspectorLookup(w.pipe.insp), restart.RepairGrace)
			if err != nil && ctx.Err() == nil {
				w.log.Warn("restart index repair failed", "err", err)
			}
			if n > 0 {
				w.log.Warn("freed orphaned restart slots (their restart runs are in no queue)", "count", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
