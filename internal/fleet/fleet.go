// Package fleet is "one worker of the fleet does this every interval":
// Claim, one SET NX PX on a key (internal/rkeys) that one worker of all
// of them wins for a while, and Every, the service that runs jobs at
// start and every interval until its context ends, each on the one worker
// that holds its lease, on internal/startstop's lifecycle.
//
// Every's lease (lua/claim.lua) is a key the holder keeps: it renews it
// every half lease and runs the job at each tick; a worker that did not
// win it claims again only once the lease it saw has run out. A lease is
// max(Options.TTL, MinLease) long (TTL's default: TTL(interval)). When
// Every ends, the holder releases its leases (lua/release.lua) so that
// the next worker that claims takes the job over; a holder that dies
// without a release hands over within one lease and one interval.
//
// The fleet's periodic work (the deadline sweep, the restart index and
// fair dispatch repairs, the webhook outboxes' repair on a Cluster, the
// fleet's gauges, whose holder alone exports them: Job.Idle) thus
// costs Redis one claim per worker and lease (not per interval), and the
// work itself once per interval for the fleet.
package fleet

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/startstop"
)

// Claim claims key for ttl (SET key holder NX PX ttl, expiring on the
// Redis server's clock) and reports whether this caller won it: no other
// worker held it. It is the one-shot claim (a breaker's probe); Every
// holds leases instead.
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
	// Idle, when not nil, runs at each tick on a worker that does not
	// hold the lease (it lost it, or another worker holds it): a job
	// whose holder exports what it computed drops it there.
	Idle func(ctx context.Context)
}

// Options are Every's.
type Options struct {
	// Holder is the worker's ID: the leases' value is it and a random tag
	// of this Every (see holderID); "": "1".
	Holder string
	// TTL is the lease's length below MinLease; zero: TTL(interval).
	TTL time.Duration
	// Each runs on every worker at each tick, before the claims.
	Each func(ctx context.Context)
	// Delay skips the tick at start: the first is one interval after it.
	Delay bool
	// NewTicker is the clock (tests); nil: NewTicker.
	NewTicker func(time.Duration) Ticker
	// Now is the clock the leases are timed by; nil: time.Now.
	Now func() time.Time

	minLease time.Duration              // tests: MinLease
	tried    func(key string, won bool) // tests: each claim's outcome
	ticked   func()                     // tests: each tick's end
}

// Every runs, at start and every interval until its context ends or
// Stop, Options.Each and then each of its jobs whose lease this worker
// holds (see the package doc). A claim that fails for Redis is a tick
// lost for this worker: the next tick claims again.
type Every struct {
	startstop.Loop
	rdb      redis.UniversalClient
	interval time.Duration
	lease    time.Duration
	holder   string
	jobs     func() []Job
	o        Options

	mu     sync.Mutex
	leases map[string]lease // by job key
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
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.minLease <= 0 {
		o.minLease = MinLease
	}
	return &Every{rdb: rdb, interval: interval, lease: max(o.TTL, o.minLease), holder: holderID(o.Holder),
		jobs: jobs, o: o, leases: map[string]lease{}}
}

// One is New of a single job.
func One(rdb redis.UniversalClient, interval time.Duration, job Job, o Options) *Every {
	return New(rdb, interval, func() []Job { return []Job{job} }, o)
}

// Start runs the loop until ctx ends or Stop (once: see startstop.Loop).
func (e *Every) Start(ctx context.Context) { e.Go(ctx, e.Run) }

// Stop ends the loop and waits for it; idempotent.
func (e *Every) Stop() { e.Loop.Stop() }

// Run is the loop, on the caller's goroutine, until ctx ends; then it
// releases the leases it holds.
func (e *Every) Run(ctx context.Context) {
	t := e.o.NewTicker(e.interval)
	defer t.Stop()
	defer e.release(ctx)
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

// Tick is one tick: Each, then the jobs whose lease this worker holds,
// claiming a lease only when the one it knows has run out.
func (e *Every) Tick(ctx context.Context) {
	if e.o.Each != nil {
		e.o.Each(ctx)
	}
	for _, j := range e.jobs() {
		if ctx.Err() != nil {
			break
		}
		switch {
		case e.hold(ctx, j.Key):
			j.Run(ctx)
		case j.Idle != nil:
			j.Idle(ctx)
		}
	}
	if e.o.ticked != nil {
		e.o.ticked()
	}
}

// hold reports whether this worker holds key's lease now, claiming it
// (claim.lua) when the lease it knows of has run out.
func (e *Every) hold(ctx context.Context, key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.o.Now()
	claim, run := e.leases[key].step(now)
	if !claim {
		return run
	}
	won, left, err := claimLease(ctx, e.rdb, key, e.holder, e.lease)
	switch {
	case err != nil:
		delete(e.leases, key)
		won = false
	case won: // timed from before the claim: it runs out no sooner
		e.leases[key] = next(now, won, left, e.lease)
	default: // timed from after: the other's lease has run out by then
		e.leases[key] = next(e.o.Now(), won, left, e.lease)
	}
	if e.o.tried != nil {
		e.o.tried(key, won)
	}
	return won
}

// release deletes the leases this worker holds (release.lua), on a
// context that outlives ctx by releaseTimeout.
func (e *Every) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	for key, l := range e.leases {
		if l.held {
			_, _ = releaseLease(ctx, e.rdb, key, e.holder)
		}
		delete(e.leases, key)
	}
}
