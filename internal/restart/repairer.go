package restart

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/fleet"
	"github.com/agentq/agentq/internal/rkeys"
)

// RepairInterval is how often the fleet repairs the restart index (one
// worker per interval, by claim).
const RepairInterval = time.Minute

// RepairOptions are a Repairer's.
type RepairOptions struct {
	// Holder is the repair claim's value (the worker's ID).
	Holder string
	// Interval is the repair's; zero: RepairInterval.
	Interval time.Duration
	// Logger; nil: slog.Default.
	Logger *slog.Logger
}

// Repairer is the restart index's repair, a service (Start, Stop): at
// start and every interval until its context ends, it registers the
// worker's queues in asynq's set of queues (every worker) and frees the
// orphaned slots of the restart index (of all workers, the one that
// claims the interval: rkeys.RestartRepairClaim).
//
// asynq's set of queues (broker.AllQueues) is what asynq's inspector
// — the operators' views of tasks, tenants and queues, a cancel, this
// repair — reads queues from. Producers add a queue with each enqueue; a
// set lost under an idle fleet (a FLUSHALL, a restart without
// persistence, a failover to a replica that missed the write) is back
// within a repair interval.
type Repairer struct {
	*fleet.Every
	s      *Scheduler
	rdb    redis.UniversalClient
	lookup TaskLookup
	queues []string
	log    *slog.Logger
}

// NewRepairer repairs s's index, finding runs with lookup, for a worker
// that serves queues.
func NewRepairer(s *Scheduler, rdb redis.UniversalClient, lookup TaskLookup, queues []string, o RepairOptions) *Repairer {
	o.Interval = defaults.Positive(o.Interval, RepairInterval)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	r := &Repairer{s: s, rdb: rdb, lookup: lookup, queues: queues, log: o.Logger}
	r.Every = fleet.One(rdb, o.Interval, fleet.Job{Key: rkeys.RestartRepairClaim(), Run: r.repair},
		fleet.Options{Holder: o.Holder, Each: r.registerQueues})
	return r
}

// repair is one repair of the index, logged.
func (r *Repairer) repair(ctx context.Context) {
	n, err := r.s.Repair(ctx, r.lookup, RepairGrace)
	if err != nil && ctx.Err() == nil {
		r.log.Warn("restart index repair failed", "err", err)
	}
	if n > 0 {
		r.log.Warn("freed orphaned restart slots (their restart runs are in no queue)", "count", n)
	}
}

// registerQueues adds the worker's queues to asynq's set of queues.
func (r *Repairer) registerQueues(ctx context.Context) {
	if err := broker.RegisterQueues(ctx, r.rdb, r.queues...); err != nil && ctx.Err() == nil {
		r.log.Warn("registering the worker's queues in asynq's set of queues failed", "err", err)
	}
}
