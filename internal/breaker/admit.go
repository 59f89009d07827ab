package breaker

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/redisx"
)

// Admissions and outcomes of the shared breaker: Allow, Record, Trip,
// Reset (see doc.go for the state machine).

// Allow asks whether a call to the backend behind key may proceed. In CLOSED
// it costs one EVALSHA (the first call per key and process also adds the key
// to the index in the same round trip) — or nothing, after Start, while the
// local view holds the breaker CLOSED (see view.go: the view follows
// the breaker event channel and is re-read from Redis at least every
// ViewTTL). When Redis is unavailable it returns
// an error wrapping ErrUnavailable together with an Admission decided
// from the last state this process saw: closed or unknown → allowed; open
// before its open_until → denied until then; otherwise denied for
// FallbackRetry. A fallback admission is never a trial (no Token).
func (b *Breakers) Allow(ctx context.Context, key string, cfg Config) (Admission, error) {
	if adm, ok := b.closedLocally(key); ok {
		return adm, nil
	}
	epoch := b.view.snapshot()
	cfg = cfg.withDefaults()
	ctx, cancel := b.bound(ctx)
	defer cancel()
	rep, err := b.allow(ctx, allowArgs{key: key, halfOpenMax: cfg.HalfOpenMaxCalls, trialLease: cfg.TrialLease, token: rand.Text()})
	if err != nil {
		if redisx.Unanswered(err) {
			adm := b.fallback(key)
			b.log.Warn("breaker: redis unavailable, using last seen state",
				"key", key, "allowed", adm.Allowed, "state", adm.State, "err", err)
			return adm, fmt.Errorf("breaker %q: %w: %w", key, ErrUnavailable, err)
		}
		return Admission{}, fmt.Errorf("breaker %q: allow: %w", key, err)
	}
	return b.admitted(key, rep, epoch), nil
}

// admitted turns an admission script's reply into an Admission and
// remembers the state seen (for the fallback and, if still in epoch, the
// local view).
func (b *Breakers) admitted(key string, rep admissionReply, epoch uint64) Admission {
	adm := Admission{Allowed: rep.allowed, State: rep.state, Generation: rep.gen, Token: rep.token, ConsecutiveFailures: rep.cf}
	if rep.retryAtMS > 0 {
		adm.RetryAt = time.UnixMilli(rep.retryAtMS)
	}
	if rep.retryInMS > 0 {
		adm.RetryIn = time.Duration(rep.retryInMS) * time.Millisecond
	}
	ls := lastSeen{state: adm.State, gen: adm.Generation, cf: adm.ConsecutiveFailures}
	if adm.State == StateOpen {
		ls.openUntil = adm.RetryAt
	}
	b.remember(key, ls)
	b.view.put(key, epoch, viewEntry{state: adm.State, gen: adm.Generation, cf: adm.ConsecutiveFailures, at: b.local()})
	return adm
}

// fallback decides an admission from the last state seen, on the local clock.
func (b *Breakers) fallback(key string) Admission {
	b.mu.Lock()
	ls, ok := b.last[key]
	b.mu.Unlock()
	if !ok || ls.state == StateClosed || ls.state == "" {
		return Admission{Allowed: true, State: StateClosed, Generation: ls.gen, ConsecutiveFailures: ls.cf}
	}
	now := b.local()
	adm := Admission{State: ls.state, Generation: ls.gen, ConsecutiveFailures: ls.cf}
	if ls.state == StateOpen && now.Before(ls.openUntil) {
		adm.RetryAt = ls.openUntil
	} else {
		adm.RetryAt = now.Add(FallbackRetry)
	}
	adm.RetryIn = adm.RetryAt.Sub(now)
	return adm
}

func (b *Breakers) remember(key string, ls lastSeen) {
	b.mu.Lock()
	b.last[key] = ls
	b.mu.Unlock()
}

// Record reports the outcome of a call admitted by Allow and returns the
// breaker state after it.
//
// In consecutive mode the happy path costs nothing: a success of a call
// admitted in CLOSED with no consecutive failures is only counted in memory,
// and Flush (run by Start's loop) adds it to success_count later; such a
// success therefore does not reset a consecutive_failures count that other
// calls raised meanwhile. In rate mode every success and failure is one
// EVALSHA, so that the fleet's window holds the successes as soon as the
// failures (a late success would make a healthy backend's rate look
// worse). OutcomeIgnore of a closed-state admission costs nothing in either
// mode. Every other Record is one EVALSHA. Pass ForTask with the call's
// task: rate mode opens only when several distinct tasks failed.
//
// Record is detached from the caller's cancellation (a shutdown must still
// release its trial lease) but bounded by the call timeout. A fenced Record
// returns an error wrapping ErrStaleAdmission (a *StaleError); Redis being
// unreachable gives an error wrapping ErrUnavailable.
func (b *Breakers) Record(ctx context.Context, key string, cfg Config, adm Admission, out Outcome, opts ...RecordOption) (State, error) {
	var ro recordOptions
	for _, opt := range opts {
		opt(&ro)
	}
	o, ok := out.lua()
	if !ok {
		return "", fmt.Errorf("breaker %q: %w: %d", key, ErrInvalidOutcome, int(out))
	}
	if !adm.Allowed {
		return adm.State, fmt.Errorf("breaker %q: %w", key, ErrNotAdmitted)
	}
	if adm.Token == "" && adm.State == StateClosed {
		switch {
		case out == OutcomeIgnore:
			return StateClosed, nil
		case out == OutcomeSuccess && b.batch(key, cfg.withDefaults(), adm):
			return StateClosed, nil
		}
	}
	cfg = cfg.withDefaults()
	if cfg.Mode == ModeRate && out == OutcomeFailure {
		b.markHot(key, cfg.Window)
	}
	epoch := b.view.snapshot()
	ctx, cancel := b.bound(context.WithoutCancel(ctx))
	defer cancel()
	rep, err := b.record(ctx, recordArgs{key: key, cfg: cfg, outcome: o, gen: adm.Generation, token: adm.Token, task: ro.task})
	if err != nil {
		if redisx.Unanswered(err) {
			b.mu.Lock()
			st := b.last[key].state
			b.mu.Unlock()
			if st == "" {
				st = adm.State
			}
			return st, fmt.Errorf("breaker %q: record: %w: %w", key, ErrUnavailable, err)
		}
		return "", fmt.Errorf("breaker %q: record: %w", key, err)
	}
	state, gen := rep.state, rep.gen
	ls := lastSeen{state: state, gen: gen, cf: rep.cf}
	if rep.openUntilMS > 0 {
		ls.openUntil = time.UnixMilli(rep.openUntilMS)
	}
	b.remember(key, ls)
	b.view.put(key, epoch, viewEntry{state: state, gen: gen, cf: ls.cf, at: b.local()})
	if rep.code != recordApplied {
		return state, &StaleError{Key: key, Generation: adm.Generation, Current: gen, LeaseGone: rep.code == recordLeaseGone}
	}
	return state, nil
}

// batch counts a success of a call admitted in CLOSED (cfg with its
// defaults) in memory, for Flush, when it may wait: in consecutive mode
// when the admission saw no consecutive failures; in rate mode while this
// process knows the key's window holds no failure (cold: no failure
// recorded here or announced by another process within the window, and
// the event subscription is live, so that it would have heard of one). A
// success while the window holds failures is written at once, since a
// late success would make the backend's rate look worse than it is.
func (b *Breakers) batch(key string, cfg Config, adm Admission) bool {
	var windowMS int64
	switch cfg.Mode {
	case ModeRate:
		if !b.view.isLive() {
			return false
		}
		windowMS = cfg.Window.Milliseconds()
	default:
		if adm.ConsecutiveFailures != 0 {
			return false
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if windowMS > 0 && b.local().Before(b.hot[key]) {
		return false
	}
	ps := b.pending[key]
	ps.n++
	ps.windowMS = windowMS
	b.pending[key] = ps
	return true
}

// markHot notes that key's window holds a failure for the next window.
func (b *Breakers) markHot(key string, window time.Duration) {
	until := b.local().Add(window)
	b.mu.Lock()
	if until.After(b.hot[key]) {
		b.hot[key] = until
	}
	b.mu.Unlock()
}

// RecordOption adds to what Record reports.
type RecordOption func(*recordOptions)

type recordOptions struct{ task string }

// ForTask names the task whose call the outcome is: rate mode counts the
// distinct tasks whose calls failed within its window.
func ForTask(id string) RecordOption { return func(o *recordOptions) { o.task = id } }

// Trip opens the breaker of key until now+d (Redis time), whatever its
// state: an operator's override. Generation bumps, trials are dropped.
func (b *Breakers) Trip(ctx context.Context, key string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("breaker %q: trip duration must be positive, got %s", key, d)
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	gen, openUntil, err := b.trip(ctx, key, d)
	if err != nil {
		return b.wrap(key, "trip", err)
	}
	b.mu.Lock()
	ls := b.last[key]
	b.last[key] = lastSeen{state: StateOpen, gen: gen, cf: ls.cf, openUntil: time.UnixMilli(openUntil)}
	b.mu.Unlock()
	return nil
}

// Reset closes the breaker of key: consecutive failures 0, generation bumped,
// trials dropped (outstanding admissions become stale). The statistics
// (failure_count, success_count, timestamps) are kept.
func (b *Breakers) Reset(ctx context.Context, key string) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	gen, err := b.reset(ctx, key)
	if err != nil {
		return b.wrap(key, "reset", err)
	}
	b.remember(key, lastSeen{state: StateClosed, gen: gen})
	return nil
}
