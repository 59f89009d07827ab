package broker

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// Waiter is how an idle worker waits for work: a BLPOP on the wake lists of
// its queues, for at most its bound (worker.poll_interval), instead of a
// poll every few milliseconds. A token popped means a task may be pending;
// the bound is how late a task whose token was lost (or never pushed, by a
// producer that is not agentq's) can be picked up.
//
// On Redis Cluster a BLPOP takes keys of one slot only, so the queues are
// waited on in slot groups (one per queue), each by its own goroutine; one
// group (standalone, Sentinel, or one queue) is waited on in the caller's
// goroutine. Each group also blocks on a private stop list, so that Stop
// ends a wait at once.
type Waiter struct {
	rdb    redis.UniversalClient
	bound  time.Duration
	pause  time.Duration // after a failed wait (PauseOnFailure); bound
	groups [][]string    // each: wake lists of one slot, then that slot's stop list
	stop   chan struct{}
	once   sync.Once

	// Cluster with several groups: group goroutines and their handoff.
	woke     chan struct{}
	inflight []atomic.Bool
	wg       sync.WaitGroup
}

// Cause is why a Wait ended.
type Cause string

// The causes of a Wait's end.
const (
	Woken   Cause = "token"   // a token was popped: a task may be pending
	Timeout Cause = "bound"   // the bound passed with no token
	Stopped Cause = "stopped" // Stop, or the context ended
	Failed  Cause = "error"   // Redis failed; the bound was waited out
)

// NewWaiter returns a waiter on the wake lists of queues, waiting at most
// bound. id names this waiter's stop lists (unique per worker process).
func NewWaiter(rdb redis.UniversalClient, queues []string, bound time.Duration, id string) *Waiter {
	w := &Waiter{rdb: rdb, bound: bound, pause: bound, stop: make(chan struct{}), woke: make(chan struct{}, 1)}
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		for _, q := range queues {
			w.groups = append(w.groups, []string{rkeys.Wake(q), rkeys.WakeStop(q, id)})
		}
	} else if len(queues) > 0 {
		g := make([]string, 0, len(queues)+1)
		for _, q := range queues {
			g = append(g, rkeys.Wake(q))
		}
		w.groups = [][]string{append(g, rkeys.WakeStop(queues[0], id))}
	}
	w.inflight = make([]atomic.Bool, len(w.groups))
	return w
}

// PauseOnFailure sets how long a wait that Redis failed lasts in all (the
// bound by default: no spinning on a dead server), and returns w: a bound
// far longer than the poll interval must not keep a worker away from a
// Redis that is back. Call it before the first Wait.
func (w *Waiter) PauseOnFailure(d time.Duration) *Waiter {
	w.pause = min(d, w.bound)
	return w
}

// Bound is the longest one Wait lasts.
func (w *Waiter) Bound() time.Duration { return w.bound }

// Wait blocks until a wake-up token is popped, the bound has passed, Stop
// is called or ctx ends, and says which. After Stop it returns at once.
// When Redis fails it still waits out the bound, or PauseOnFailure's
// shorter pause (no spinning on a dead server).
func (w *Waiter) Wait(ctx context.Context) Cause {
	select {
	case <-w.stop:
		return Stopped
	case <-w.woke: // popped by a group goroutine after the last Wait returned
		return Woken
	default:
	}
	if len(w.groups) == 1 {
		start := time.Now()
		popped, err := w.blpop(ctx, w.groups[0])
		switch {
		case popped:
			return Woken
		case err == nil: // the stop token
			return Stopped
		case errors.Is(err, redis.Nil):
			return Timeout
		}
		w.Pause(ctx, w.pause-time.Since(start))
		return Failed
	}
	for i := range w.groups {
		if w.inflight[i].CompareAndSwap(false, true) {
			w.wg.Add(1)
			go w.waitGroup(ctx, i)
		}
	}
	t := time.NewTimer(w.bound)
	defer t.Stop()
	select {
	case <-w.woke:
		return Woken
	case <-t.C:
		return Timeout
	case <-w.stop:
		return Stopped
	case <-ctx.Done():
		return Stopped
	}
}

// waitGroup is one group's BLPOP on a Cluster; a token it pops is handed to
// the current (or next) Wait.
func (w *Waiter) waitGroup(ctx context.Context, i int) {
	defer w.wg.Done()
	defer w.inflight[i].Store(false)
	start := time.Now()
	popped, err := w.blpop(ctx, w.groups[i])
	switch {
	case popped:
		select {
		case w.woke <- struct{}{}:
		default:
		}
	case err != nil && !errors.Is(err, redis.Nil):
		w.Pause(ctx, w.pause-time.Since(start))
	}
}

// blpop pops one token from keys, blocking for at most the bound; popped
// is false on timeout (err redis.Nil), on error and for a stop token.
func (w *Waiter) blpop(ctx context.Context, keys []string) (popped bool, err error) {
	var kv []string
	if w.bound >= time.Second {
		// The typed command sets the read deadline past the bound; it
		// takes whole seconds.
		kv, err = w.rdb.BLPop(ctx, w.bound.Truncate(time.Second), keys...).Result()
	} else {
		// A sub-second bound (tests): Redis takes decimal seconds; the
		// client's read timeout (3s by default) outlasts the bound.
		args := make([]any, 0, len(keys)+2)
		args = append(args, "blpop")
		for _, k := range keys {
			args = append(args, k)
		}
		args = append(args, strconv.FormatFloat(w.bound.Seconds(), 'f', 3, 64))
		kv, err = w.rdb.Do(ctx, args...).StringSlice()
	}
	if err != nil {
		return false, err
	}
	return len(kv) == 2 && (kv[0] != keys[len(keys)-1] || kv[1] == nudgeToken), nil
}

// nudgeToken on a stop list ends a wait as a token would (Nudge).
const nudgeToken = "nudge"

// Nudge ends the wait under way as if a token had been popped (a run was
// fetched for this worker while it waited: prefetch.go); a nudge that no
// wait takes ends the next one early, and expires.
func (w *Waiter) Nudge(ctx context.Context) {
	if len(w.groups) == 0 {
		return
	}
	stopKey := w.groups[0][len(w.groups[0])-1]
	_, _ = w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, stopKey, nudgeToken)
		p.Expire(ctx, stopKey, stopTTL)
		return nil
	})
}

// Pause sleeps for d, or until Stop or ctx's end.
func (w *Waiter) Pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.stop:
	case <-ctx.Done():
	}
}

// Stop ends the wait under way (a stop token on each stop list, which
// expires if no wait takes it) and makes every later Wait return at once.
// It waits for the group goroutines of a Cluster (at most the bound).
// Stop is idempotent.
func (w *Waiter) Stop(ctx context.Context) {
	w.once.Do(func() {
		close(w.stop)
		_, _ = w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, g := range w.groups {
				stopKey := g[len(g)-1]
				p.RPush(ctx, stopKey, "stop")
				p.Expire(ctx, stopKey, stopTTL)
			}
			return nil
		})
	})
	w.wg.Wait()
}

// stopTTL is how long a stop token no wait took is kept.
const stopTTL = time.Minute
