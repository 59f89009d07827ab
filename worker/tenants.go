package worker

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/startstop"
)

// fairRepairInterval is how often the fleet repairs each queue's fair
// dispatch state (one worker per queue and interval, by claim): the
// longest a tenant whose ready-set entry was lost waits (it cannot be lost
// by agentq's own scripts; a restore from an old backup, a hand edit can).
const fairRepairInterval = 15 * time.Second

// queueNames are the queues the worker serves, sorted.
func (w *Worker) queueNames() []string {
	names := slices.Collect(maps.Keys(serveQueues(w.cfg)))
	slices.Sort(names)
	return names
}

// tenants publishes the named tenants' settings to each queue the worker
// serves (the fair dequeue reads them there; the defaults travel with each
// dequeue), then repairs each queue's fair dispatch state every interval
// until ctx ends.
func (w *Worker) tenants(ctx context.Context, interval time.Duration) {
	fc := w.cfg.Fair()
	todo := w.queueNames()
	for len(todo) > 0 {
		if err := broker.PublishFair(ctx, w.rdb, todo[0], fc); err != nil {
			if errors.Is(err, context.Canceled) || startstop.Sleep(ctx, time.Second) != nil {
				return
			}
			continue
		}
		todo = todo[1:]
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, q := range w.queueNames() {
			w.repairFair(ctx, q, fc, interval)
		}
	}
}

// repairFair runs broker.RepairFair on queue when this worker claims the
// interval, and wakes a worker per tenant it made ready.
func (w *Worker) repairFair(ctx context.Context, q string, fc broker.FairConfig, interval time.Duration) {
	ok, err := w.rdb.SetNX(ctx, rkeys.FairRepairClaim(q), w.id, interval-interval/10).Result()
	if err != nil || !ok {
		return
	}
	readied, fixed, err := broker.RepairFair(ctx, w.rdb, q, fc)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("fair dispatch repair failed", "queue", q, "err", err)
		}
		return
	}
	if readied > 0 {
		_ = broker.PushWake(ctx, w.rdb, q, int(readied))
	}
	if fixed > 0 {
		w.log.Warn("corrected tenants' in-flight counts (a run left asynq's active list without its release)", "queue", q, "tenants", fixed)
	}
}
