package record

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/rkeys"
)

// What holds a waiting task: a View's WaitingFor (stable names,
// docs/DESIGN.md "Waiting tasks explained"). The first three are also a
// deferral's Event.Reason.
const (
	WaitingBudget      = "budget"       // deferred: a tenant's or agent's budget has no room
	WaitingBreaker     = "breaker"      // deferred: its agent's breaker is open or half-open
	WaitingLimit       = "limit"        // deferred: its agent's rate, token or concurrency limit
	WaitingTenantCap   = "tenant_cap"   // pending: its tenant is at its cap of runs in flight
	WaitingQueuePaused = "queue_paused" // its queue is paused
	WaitingSignal      = "signal"       // suspended on a signal
	WaitingChildren    = "children"     // suspended on its children
	WaitingSleep       = "sleep"        // suspended on a sleep or a time
	WaitingRetry       = "retry"        // retrying: the backoff after a failed attempt
	WaitingRestart     = "restart"      // restarting: the delay before its next run
	WaitingSchedule    = "schedule"     // scheduled: its first run is due later
)

// holds is what the queue knows of a task's wait beside its record:
// whether its queue is paused and whether its tenant is at its cap.
type holds struct{ paused, capped bool }

// readHolds reads v's holds (one round trip), for a task that waits only:
// an active or ended task has none (no command).
func (s *Store) readHolds(ctx context.Context, v *View) (holds, error) {
	if v.State == StateActive || v.State.Terminal() || v.State == "" {
		return holds{}, nil
	}
	q := v.Queue
	if q == "" {
		q = "default"
	}
	var paused *redis.IntCmd
	var capped *redis.FloatCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		paused = p.Exists(ctx, broker.PausedKey(q))
		if v.State == StatePending {
			capped = p.ZScore(ctx, rkeys.FairCapped(q), v.Tenant)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return holds{}, fmt.Errorf("record: get %s: its queue: %w", v.ID, err)
	}
	return holds{paused: paused.Val() == 1, capped: capped != nil && capped.Err() == nil}, nil
}

// explain sets v's WaitingFor, WaitingDetail and NextAttemptAt from its
// state, its history, its wait and h; nothing for a task that nothing
// holds (active, ended, pending with a free way to a worker).
func (v *View) explain(h holds) {
	kind, detail, next := v.holder(h)
	if h.paused && v.State != StateActive && !v.State.Terminal() {
		q := v.Queue
		if q == "" {
			q = "default"
		}
		d := fmt.Sprintf("queue %q is paused", q)
		if kind != "" {
			d += "; then " + kind + ": " + detail
		}
		kind, detail = WaitingQueuePaused, d
	}
	v.WaitingFor, v.WaitingDetail = kind, detail
	if !next.IsZero() {
		v.NextAttemptAt = next.UTC().Format(time.RFC3339Nano)
	}
}

// holder is what holds v by its state (kind "" for nothing), why, and
// when its next attempt or run is due (zero: not known, or not timed).
func (v *View) holder(h holds) (kind, detail string, next time.Time) {
	switch v.State {
	case StatePending:
		if h.capped {
			return WaitingTenantCap, tenantLabel(v.Tenant) + " is at its cap of runs in flight", time.Time{}
		}
	case StateScheduled:
		if ev := v.lastEvent(EventScheduled); ev != nil {
			return WaitingSchedule, "its first run is scheduled", ev.due()
		}
		return WaitingSchedule, "its first run is scheduled", time.Time{}
	case StateRetrying:
		next := time.Time{}
		if v.nextAttemptMS > 0 {
			next = time.UnixMilli(v.nextAttemptMS)
		} else if ev := v.lastEvent(EventRetrying); ev != nil {
			next = ev.due()
		}
		return WaitingRetry, fmt.Sprintf("the backoff after attempt %d failed (%s)", v.Attempts, v.ErrorClass), next
	case StateDeferred:
		if ev := v.lastEvent(EventDeferred); ev != nil {
			return deferralKind(ev), ev.Error, ev.due()
		}
	case StateRestarting:
		d := fmt.Sprintf("restart %d, after its run ended (%s)", v.Restarts, v.ErrorClass)
		if ev := v.lastEvent(EventRestarting); ev != nil {
			return WaitingRestart, d, ev.due()
		}
		return WaitingRestart, d, time.Time{}
	case StateWaiting:
		return v.suspendedOn()
	}
	return "", "", time.Time{}
}

// suspendedOn is what a suspended task waits for (its wait's kind, an
// until as sleep), which one, and when its run is due at the latest.
func (v *View) suspendedOn() (kind, detail string, next time.Time) {
	var w struct {
		Kind     string `json:"kind"`
		Sleep    string `json:"sleep"`
		Until    string `json:"until"`
		Signal   string `json:"signal"`
		Children int    `json:"children"`
		Mode     string `json:"mode"`
		Due      string `json:"due"`
	}
	if len(v.Wait) == 0 || json.Unmarshal(v.Wait, &w) != nil {
		return "", "", time.Time{}
	}
	next, _ = time.Parse(time.RFC3339Nano, w.Due)
	switch w.Kind {
	case WaitingSignal:
		return WaitingSignal, fmt.Sprintf("signal %q", w.Signal), next
	case WaitingChildren:
		return WaitingChildren, fmt.Sprintf("%d children (mode %s)", w.Children, w.Mode), next
	case "until":
		return WaitingSleep, "until " + w.Until, next
	}
	return WaitingSleep, "sleep " + w.Sleep, next
}

// deferralKind is what a deferral waits for: its Reason, or, for an event
// written before deferrals had one, its error's first word.
func deferralKind(ev *Event) string {
	if ev.Reason != "" {
		return ev.Reason
	}
	for _, k := range []string{WaitingBudget, WaitingBreaker, WaitingLimit} {
		if strings.HasPrefix(ev.Error, k+" ") {
			return k
		}
	}
	return WaitingBudget // the caps' unavailability ("budget unavailable") and the rest
}

// lastEvent is v's last history event of kind (nil: none).
func (v *View) lastEvent(kind string) *Event {
	for i := len(v.History) - 1; i >= 0; i-- {
		if v.History[i].Event == kind {
			return &v.History[i]
		}
	}
	return nil
}

// due is when the run or attempt ev put off is due: its time plus its
// delay (zero without a delay).
func (ev *Event) due() time.Time {
	if ev.DelayMS <= 0 {
		return time.Time{}
	}
	return ev.At.Add(time.Duration(ev.DelayMS) * time.Millisecond)
}

// tenantLabel names tenant in a detail.
func tenantLabel(tenant string) string {
	if tenant == "" {
		return "the default tenant"
	}
	return "tenant " + strconv.Quote(tenant)
}
