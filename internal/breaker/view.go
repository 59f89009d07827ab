package breaker

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// ViewTTL bounds how long the local view of a CLOSED breaker is trusted
// without a Redis read, even while the event subscription is live (a silent
// network partition cannot hide an opening for longer than this).
const ViewTTL = time.Second

// closedLocally admits a call without Redis when the local view holds key
// CLOSED (fresh, subscription live).
func (b *Breakers) closedLocally(key string) (Admission, bool) {
	e, ok := b.view.closed(key, b.local())
	if !ok {
		return Admission{}, false
	}
	return Admission{Allowed: true, State: StateClosed, Generation: e.gen, ConsecutiveFailures: e.cf}, true
}

// view is a process-local mirror of the breakers known to be CLOSED, fed by
// Allow/Record replies and kept current by the breaker event channel
// (rkeys.BreakerChannel). While Start's subscription is live, Allow admits a
// call to a breaker the view holds CLOSED (and fresh) without a Redis round
// trip: invariant 7's "ideally none". Every other state, a stale entry, a
// dropped subscription, and a Breakers that was never started go to Redis as
// before. Entries only move forward: a reply read before a newer event
// cannot overwrite it (generation order), and a reconnect clears the view
// (epoch), since events may have been missed during the gap.
type view struct {
	mu      sync.Mutex
	live    bool
	epoch   uint64
	entries map[string]viewEntry
}

type viewEntry struct {
	state State
	gen   int64
	cf    int
	at    time.Time // local clock: when Redis last told us
}

// snapshot returns the epoch to pass to put for a Redis read started now.
func (v *view) snapshot() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.epoch
}

// isLive reports whether the subscription is live.
func (v *view) isLive() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.live
}

// closed returns the entry for key when it is CLOSED, fresh and the
// subscription is live.
func (v *view) closed(key string, now time.Time) (viewEntry, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.live {
		return viewEntry{}, false
	}
	e, ok := v.entries[key]
	if !ok || e.state != StateClosed || now.Sub(e.at) >= ViewTTL || now.Before(e.at) {
		return viewEntry{}, false
	}
	return e, true
}

// put records what Redis said about key, if the view is still in epoch and
// the news is not older than what it holds.
func (v *view) put(key string, epoch uint64, e viewEntry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.live || epoch != v.epoch {
		return
	}
	if old, ok := v.entries[key]; ok && old.gen > e.gen {
		return
	}
	v.entries[key] = e
}

// setLive starts (true) or ends (false) an epoch; either way the entries go.
func (v *view) setLive(live bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.live = live
	v.epoch++
	v.entries = map[string]viewEntry{}
}

// event is a message of the breaker event channel.
type event struct {
	Key                 string `json:"key"`
	State               State  `json:"state"`
	Generation          int64  `json:"generation"`
	ConsecutiveFailures *int   `json:"consecutive_failures"`
	Kind                string `json:"kind"`
	// WindowMS is, for kind "hot" (a rate-mode failure counted in CLOSED),
	// the breaker's window.
	WindowMS int64 `json:"window_ms"`
}

// apply folds an event into the view. An event without a failure count
// drops the entry's count knowledge to "unknown" for CLOSED by keeping no
// entry: the next Allow reads Redis.
func (v *view) apply(ev event, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.live {
		return
	}
	old, ok := v.entries[ev.Key]
	if ok && old.gen > ev.Generation {
		return
	}
	if ev.State == StateClosed && ev.ConsecutiveFailures == nil {
		delete(v.entries, ev.Key)
		return
	}
	e := viewEntry{state: ev.State, gen: ev.Generation, at: now}
	if ev.ConsecutiveFailures != nil {
		e.cf = *ev.ConsecutiveFailures
	}
	v.entries[ev.Key] = e
}

// watch keeps the view's subscription until ctx ends, resubscribing after
// errors (the view is not live between a failure and the next subscribe).
func (b *Breakers) watch(ctx context.Context) {
	defer b.view.setLive(false)
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		ps := b.rdb.Subscribe(ctx, rkeys.BreakerChannel())
		// Receive does not watch ctx unless the client has
		// ContextTimeoutEnabled: closing the subscription ends it.
		stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
		for {
			msg, err := ps.Receive(ctx)
			if err != nil {
				b.view.setLive(false)
				break
			}
			switch m := msg.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					b.view.setLive(true)
					backoff = 50 * time.Millisecond
				}
			case *redis.Message:
				var ev event
				if json.Unmarshal([]byte(m.Payload), &ev) == nil && ev.Key != "" {
					b.view.apply(ev, b.local())
					if ev.Kind == "hot" && ev.WindowMS > 0 {
						b.markHot(ev.Key, time.Duration(ev.WindowMS)*time.Millisecond)
					}
				}
			}
		}
		stop()
		_ = ps.Close()
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if backoff < time.Second {
			backoff *= 2
		}
	}
}
