package worker

import (
	"context"
	"time"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/internal/rkeys"
)

// repairInterval is how often the fleet repairs the restart index (one
// worker per interval, by claim).
const repairInterval = time.Minute

// repairRestarts, at start and every interval until ctx ends, registers
// the worker's queues in asynq's set of queues (every worker: see
// registerQueues) and frees orphaned slots of the restart index (of all
// workers, the one that claims the interval).
func (w *Worker) repairRestarts(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		w.registerQueues(ctx)
		if ok, err := w.rdb.SetNX(ctx, rkeys.RestartRepairClaim(), w.id, interval-interval/10).Result(); err == nil && ok {
			n, err := w.restarts.Repair(ctx, restart.InspectorLookup(w.insp), restart.RepairGrace)
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

// registerQueues adds the queues the worker serves to asynq's set of
// queues (broker.AllQueues), which asynq's inspector — the
// operators' views of tasks, tenants and queues, a cancel, the restart
// repair — reads queues from. Producers add a queue with each enqueue;
// a set lost under an idle fleet (a FLUSHALL, a restart without
// persistence, a failover to a replica that missed the write) is back
// within a repair interval.
func (w *Worker) registerQueues(ctx context.Context) {
	if err := broker.RegisterQueues(ctx, w.rdb, w.queues()...); err != nil && ctx.Err() == nil {
		w.log.Warn("registering the worker's queues in asynq's set of queues failed", "err", err)
	}
}
