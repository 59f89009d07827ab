package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/agentq/agentq/internal/limit"
)

// Provider pauses for HTTP agents without limits (a pause-only limitSpec):
// a rate_limited reply that says when the key resets (Retry-After, the
// x-ratelimit-*/anthropic-ratelimit-* headers: limit.ExhaustedFor)
// pauses the agent's breaker key fleet-wide through the limiter, exactly
// as for an agent with limits, and does not count against the breaker
// (attempt.go). Admission stays cheap: each process reads a key's pause
// from Redis at most once per pauseCheckEvery and decides locally in
// between; its own pauses take effect at once. A Redis that does not
// answer admits (the breaker, not a pause, guards an unreachable store).

// pauseCheckEvery bounds how stale a process's view of a key's fleet-wide
// pause may be.
const pauseCheckEvery = time.Second

// pauseView is a process's view of the pauses of its pause-only keys.
type pauseView struct {
	mu   sync.Mutex
	keys map[string]pauseEntry
}

type pauseEntry struct {
	until   time.Time // local clock: end of the pause known (zero: none)
	checked time.Time // local clock: last read from Redis
}

// admit decides a call of pause-only key: refused while a pause is in
// force (limit.Paused, RetryIn its remainder).
func (v *pauseView) admit(ctx context.Context, log *taskLog, l *limit.Limiter, key string) limit.Admission {
	now := time.Now()
	v.mu.Lock()
	e, ok := v.keys[key]
	v.mu.Unlock()
	if !ok || now.Sub(e.checked) >= pauseCheckEvery || now.Before(e.checked) {
		left, err := l.PausedFor(ctx, key)
		if err != nil {
			if ctx.Err() == nil {
				log.Debug("provider pause unknown: Redis did not answer; the call goes ahead", "limit_key", key, "err", err)
			}
		} else {
			e = pauseEntry{checked: now}
			if left > 0 {
				e.until = now.Add(left)
			}
			v.mu.Lock()
			if v.keys == nil {
				v.keys = map[string]pauseEntry{}
			}
			if old := v.keys[key]; old.until.After(e.until) {
				e.until = old.until // a pause this process set meanwhile
			}
			v.keys[key] = e
			v.mu.Unlock()
		}
	}
	if left := e.until.Sub(now); left > 0 {
		return limit.Admission{Limit: limit.Paused, RetryIn: left, PausedUntil: e.until.UTC()}
	}
	return limit.Admission{Allowed: true}
}

// paused notes a pause of d this process just set on key.
func (v *pauseView) paused(key string, d time.Duration) {
	now := time.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.keys == nil {
		v.keys = map[string]pauseEntry{}
	}
	e := v.keys[key]
	if until := now.Add(d); until.After(e.until) {
		e.until = until
	}
	v.keys[key] = e
}
