// Package fleet is "one worker of the fleet does this every interval": the
// claim that makes one worker of all of them run a job in an interval (one
// SET NX PX on the job's key, built in internal/rkeys), and Every, the
// service that tries the claim at start and every interval until its
// context ends, on internal/startstop's lifecycle.
//
// The fleet's periodic work (the deadline sweep, the restart index and
// fair dispatch repairs, the webhook outboxes' repair on a Cluster) costs
// Redis one claim per worker and interval, and the work itself once per
// interval for the fleet.
package fleet

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/startstop"
)

// Claim claims key for ttl (SET key holder NX PX ttl, expiring on the
// Redis server's clock) and reports whether this caller won it: no other
// worker held it.
func Claim(ctx context.Context, rdb redis.Cmdable, key, holder string, ttl time.Duration) (bool, error) {
	return rdb.SetNX(ctx, key, holder, ttl).Result()
}

// TTL is the claim of a job run every interval: a tenth shorter than the
// interval, so that the claim has expired when the next tick of any
// worker comes, even one whose ticker runs a little early.
func TTL(interval time.Duration) time.Duration { return interval - interval/10 }

// Ticker is Every's clock: a time.Ticker, or a test's.
type Ticker interface {
	// C delivers the ticks.
	C() <-chan time.Time
	// Stop ends the ticks.
	Stop()
}

// NewTicker is a time.Ticker of period d.
func NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// Job is one claim of a tick and what its winner does.
type Job struct {
	// Key is the claim's key (internal/rkeys): one winner per key and
	// interval.
	Key string
	// Run is what the worker that claimed the interval does.
	Run func(ctx context.Context)
}

// Options are Every's.
type Options struct {
	// Holder is the claims' value (the worker's ID, which shows who holds
	// one); "": "1".
	Holder string
	// TTL is how long a claim holds; zero: TTL(interval).
	TTL time.Duration
	// Each runs on every worker at each tick, before the claims.
	Each func(ctx context.Context)
	// Delay skips the tick at start: the first is one interval after it.
	Delay bool
	// NewTicker is the clock (tests); nil: NewTicker.
	NewTicker func(time.Duration) Ticker

	tried func(key string, won bool) // tests: each claim's outcome
}

// Every runs, at start and every interval until its context ends or
// Stop, Options.Each and then each of its jobs whose claim this worker
// wins. A claim that fails for Redis is a tick lost for this worker: the
// next tick claims again.
type Every struct {
	startstop.Loop
	rdb      redis.UniversalClient
	interval time.Duration
	jobs     func() []Job
	o        Options
}

// New is the service that runs jobs (asked for at each tick: a fleet
// whose jobs are fixed returns the same ones) every interval.
func New(rdb redis.UniversalClient, interval time.Duration, jobs func() []Job, o Options) *Every {
	if o.Holder == "" {
		o.Holder = "1"
	}
	if o.TTL <= 0 {
		o.TTL = TTL(interval)
	}
	if o.NewTicker == nil {
		o.NewTicker = NewTicker
	}
	return &Every{rdb: rdb, interval: interval, jobs: jobs, o: o}
}

// One is New of a single job.
func One(rdb redis.UniversalClient, interval time.Duration, job Job, o Options) *Every {
	return New(rdb, interval, func() []Job { return []Job{job} }, o)
}

// Start runs the loop until ctx ends or Stop (once: see startstop.Loop).
func (e *Every) Start(ctx context.Context) { e.Go(ctx, e.Run) }

// Stop ends the loop and waits for it; idempotent.
func (e *Every) Stop() { e.Loop.Stop() }

// Run is the loop, on the caller's goroutine, until ctx ends.
func (e *Every) Run(ctx context.Context) {
	t := e.o.NewTicker(e.interval)
	defer t.Stop()
	if !e.o.Delay {
		e.Tick(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		e.Tick(ctx)
	}
}

// Tick is one tick: Each, then the jobs this worker claims.
func (e *Every) Tick(ctx context.Context) {
	if e.o.Each != nil {
		e.o.Each(ctx)
	}
	for _, j := range e.jobs() {
		if ctx.Err() != nil {
			return
		}
		won, err := Claim(ctx, e.rdb, j.Key, e.o.Holder, e.o.TTL)
		won = won && err == nil
		if e.o.tried != nil {
			e.o.tried(j.Key, won)
		}
		if won {
			j.Run(ctx)
		}
	}
}
