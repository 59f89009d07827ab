// Package tenants is the fleet's upkeep of fair dispatch's state in Redis
// (package internal/broker): a service that publishes the named tenants'
// settings to each queue a worker serves, then repairs each queue's fair
// dispatch state every RepairInterval, by one worker of the fleet per
// queue and interval (a fleet claim on rkeys.FairRepairClaim).
package tenants

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/fleet"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/startstop"
)

// RepairInterval is how often the fleet repairs each queue's fair
// dispatch state (one worker per queue and interval, by claim): the
// longest a tenant whose ready-set entry was lost waits (it cannot be lost
// by agentq's own scripts; a restore from an old backup, a hand edit can).
const RepairInterval = 15 * time.Second

// publishRetry is the wait before publishing to a queue again after a
// failure.
const publishRetry = time.Second

// Options are a Service's.
type Options struct {
	// Holder is the repair claims' value (the worker's ID).
	Holder string
	// Interval is the repair's; zero: RepairInterval.
	Interval time.Duration
	// Logger; nil: slog.Default.
	Logger *slog.Logger
}

// Service publishes and repairs the fair dispatch state of a worker's
// queues, from Start until its context ends or Stop.
type Service struct {
	startstop.Loop
	rdb    redis.UniversalClient
	fc     broker.FairConfig
	queues []string
	repair *fleet.Every
	log    *slog.Logger
}

// New is the upkeep of fair dispatch (settings fc) on queues.
func New(rdb redis.UniversalClient, fc broker.FairConfig, queues []string, o Options) *Service {
	o.Interval = defaults.Positive(o.Interval, RepairInterval)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Service{rdb: rdb, fc: fc, queues: queues, log: o.Logger}
	jobs := make([]fleet.Job, len(queues))
	for i, q := range queues {
		jobs[i] = fleet.Job{Key: rkeys.FairRepairClaim(q), Run: func(ctx context.Context) { s.repairQueue(ctx, q) }}
	}
	s.repair = fleet.New(rdb, o.Interval, func() []fleet.Job { return jobs }, fleet.Options{Holder: o.Holder, Delay: true})
	return s
}

// Start publishes, then repairs every interval (the first one interval
// after the publish). The first try of each queue's publish is made
// before Start returns — the worker starts dequeuing right after its
// components start, and a named tenant's run dequeued before its
// settings are in Redis is dispatched uncapped (not counted against its
// cap); a queue that failed is tried again in the background.
func (s *Service) Start(ctx context.Context) {
	var todo []string
	for _, q := range s.queues {
		if err := broker.PublishFair(ctx, s.rdb, q, s.fc); err != nil {
			todo = append(todo, q)
		}
	}
	s.Go(ctx, func(ctx context.Context) {
		if s.publish(ctx, todo) {
			s.repair.Run(ctx)
		}
	})
}

// Stop ends the service and waits for it; idempotent.
func (s *Service) Stop() { s.Loop.Stop() }

// publish publishes the named tenants' settings to each queue of todo (the fair
// dequeue reads them there; the defaults travel with each dequeue),
// trying a queue again every publishRetry until it takes them; false when
// ctx ended first.
func (s *Service) publish(ctx context.Context, todo []string) bool {
	for len(todo) > 0 {
		if err := broker.PublishFair(ctx, s.rdb, todo[0], s.fc); err != nil {
			if errors.Is(err, context.Canceled) || startstop.Sleep(ctx, publishRetry) != nil {
				return false
			}
			continue
		}
		todo = todo[1:]
	}
	return true
}

// repairQueue runs broker.RepairFair on queue q (this worker claimed the
// interval), and wakes a worker per tenant it made ready.
func (s *Service) repairQueue(ctx context.Context, q string) {
	readied, fixed, err := broker.RepairFair(ctx, s.rdb, q, s.fc)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("fair dispatch repair failed", "queue", q, "err", err)
		}
		return
	}
	if readied > 0 {
		_ = broker.PushWake(ctx, s.rdb, q, int(readied))
	}
	if fixed > 0 {
		s.log.Warn("corrected tenants' in-flight counts (a run left asynq's active list without its release)", "queue", q, "tenants", fixed)
	}
}
