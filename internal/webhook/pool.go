package webhook

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentq/agentq/internal/rkeys"
)

// Defaults of the delivery pool.
const (
	// DefaultConcurrency is Options.Concurrency's default: the most
	// deliveries a worker makes at once.
	DefaultConcurrency = 64
	// DefaultHookConcurrency is Hook.Concurrency's default.
	DefaultHookConcurrency = 8
	// MaxHookConcurrency bounds Hook.Concurrency: half the default pool,
	// so that no one receiver takes every slot of a worker.
	MaxHookConcurrency = DefaultConcurrency / 2
	// passRounds bounds the claims of one pass (of up to Options.Batch
	// tasks each): tasks whose webhooks are busy are handed back, so a
	// pass goes on claiming behind them.
	passRounds = 64
)

// lane is one webhook's share of the pool: its slots (Hook.Concurrency)
// and what it knows of how long an attempt takes, to space the tasks it
// hands back while its slots are all taken.
type lane struct {
	slots chan struct{}
	mu    sync.Mutex
	// avg is the moving average of its attempts' durations.
	avg time.Duration
	// fullSince is when its last slot was taken (zero: a slot is free).
	fullSince time.Time
	// deferred counts the tasks handed back since the last pass began.
	deferred int
}

// took accounts an attempt of duration t.
func (l *lane) took(t time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.avg == 0 {
		l.avg = t
	} else {
		l.avg += (t - l.avg) / 4
	}
}

// acquire takes a slot of webhook name's lane and one of the pool, without
// waiting; false (and the lane) when either has none free.
func (d *Deliverer) acquire(name string) (*lane, bool) {
	l := d.lanes[name]
	select {
	case l.slots <- struct{}{}:
	default:
		return l, false
	}
	select {
	case d.slots <- struct{}{}:
	default:
		<-l.slots
		return l, false
	}
	if len(l.slots) == cap(l.slots) {
		l.mu.Lock()
		l.fullSince = time.Now()
		l.mu.Unlock()
	}
	return l, true
}

// free gives back the slots acquire took, and wakes Run to claim more.
func (d *Deliverer) free(l *lane) {
	l.mu.Lock()
	l.fullSince = time.Time{}
	l.mu.Unlock()
	<-l.slots
	<-d.slots
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// deferral is how long a task whose webhook (lane l) has no free slot
// waits before it is claimed again: a poll, plus its place among the tasks
// handed back this pass times how long a slot takes to free (the lane's
// average attempt, or how long its slots have all been taken when that is
// longer, as with a receiver that hangs), spread over its slots. Tasks
// handed back so go behind the new events of other webhooks, and a busy
// webhook's backlog is not claimed again on every pass.
func (d *Deliverer) deferral(l *lane) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	est := l.avg
	if !l.fullSince.IsZero() {
		est = max(est, time.Since(l.fullSince))
	}
	wait := d.o.Poll + time.Duration(l.deferred)*est/time.Duration(cap(l.slots))
	l.deferred++
	return min(wait, d.o.MaxBackoff)
}

// pass claims due tasks, earliest first, while the pool has free slots,
// and starts their deliveries; it returns once each claimed task's
// attempts are under way or the task handed back, not when they end (a
// slow attempt holds its slot, not the pass). n counts the attempts.
func (d *Deliverer) pass(ctx context.Context, n *atomic.Int64) error {
	for _, l := range d.lanes {
		l.mu.Lock()
		l.deferred = 0
		l.mu.Unlock()
	}
	for range passRounds {
		limit := min(d.o.Batch, cap(d.slots)-len(d.slots))
		if limit <= 0 {
			return nil
		}
		now := d.o.Now()
		v, err := claimScript.Run(ctx, d.rdb, []string{rkeys.WebhooksDue(), rkeys.WebhooksLeased()},
			now.UnixMilli(), d.lease.Milliseconds(), limit).Slice()
		if err != nil {
			return fmt.Errorf("webhooks: claim: %w", err)
		}
		if len(v) > 0 {
			if p, ok := v[0].(int64); ok {
				d.o.Pending(int(p))
			}
		}
		ids := v[min(1, len(v)):]
		var started sync.WaitGroup
		for _, x := range ids {
			id, _ := x.(string)
			started.Add(1)
			d.active.Add(1)
			go func() {
				defer d.active.Done()
				d.task(ctx, id, float64(now.UnixMilli()+d.lease.Milliseconds()), started.Done, n)
			}()
		}
		started.Wait()
		if len(ids) < limit {
			return nil
		}
	}
	return nil
}

// Tick claims the due tasks and makes their due deliveries, once, and
// waits for them; it returns how many deliveries it attempted.
func (d *Deliverer) Tick(ctx context.Context) (int, error) {
	var n atomic.Int64
	err := d.pass(ctx, &n)
	d.active.Wait()
	if err != nil {
		return int(n.Load()), err
	}
	return int(n.Load()), ctx.Err()
}
