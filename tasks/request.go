package tasks

import (
	"encoding/json"
	"fmt"
	"time"
)

// Request is a task as producers write it in JSON: one task of POST
// /api/v1/tasks, one line of `enqueuer --file`. Its fields are the stable
// JSON of both. It is an adapter of Task (Request.Task), not a shape of
// its own.
type Request struct {
	// ID is the task ID and idempotency key. Zero: a random ID.
	ID     string `json:"id,omitempty"`
	Agent  string `json:"agent"`
	Action string `json:"action,omitempty"`
	// Params is passed to the agent as is (any JSON value).
	Params        json.RawMessage `json:"params,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	// Queue is the asynq queue. Zero: "default".
	Queue string `json:"queue,omitempty"`
	// Tenant is who the task is for (Task.Tenant). Zero: the default tenant.
	Tenant string `json:"tenant,omitempty"`
	// Priority is "high", "normal" or "low" (Task.Priority). Zero: normal.
	Priority string `json:"priority,omitempty"`
	// In delays the first run by a Go duration ("30s", "5m"). Zero: now.
	In string `json:"in,omitempty"`
	// Deadline is when the task gives up (Task.Deadline): a Go duration
	// from the enqueue ("30s") or an RFC 3339 time. Zero: never.
	Deadline string `json:"deadline,omitempty"`
	// FailIfUnavailable refuses the task while the agent's breaker is open
	// (HTTP 409 agent_unavailable, exit status 3).
	FailIfUnavailable bool `json:"fail_if_unavailable,omitempty"`
	// Notify names configured webhooks to tell of the task's events.
	Notify []string `json:"notify,omitempty"`
	// MaxTokens and MaxCostUSD are the task's own cap (Task.MaxTokens,
	// Task.MaxCostUSD). Zero: none.
	MaxTokens  int64   `json:"max_tokens,omitempty"`
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
}

// Task checks r as every producer does (Task.Check with the queues the
// workers serve, and In) and returns its task and delay. A bad field is a
// *ValidationError naming it.
func (r Request) Task(served []string) (Task, time.Duration, error) {
	t := Task{ID: r.ID, Agent: r.Agent, Action: r.Action, Params: r.Params, CorrelationID: r.CorrelationID, Queue: r.Queue, Notify: r.Notify,
		Tenant: r.Tenant, Priority: r.Priority, MaxTokens: r.MaxTokens, MaxCostUSD: r.MaxCostUSD}
	if err := t.Check(served); err != nil {
		return Task{}, 0, err
	}
	var delay time.Duration
	if r.In != "" {
		d, err := time.ParseDuration(r.In)
		if err != nil || d < 0 {
			return Task{}, 0, &ValidationError{"in", fmt.Sprintf("is not a non-negative Go duration such as \"30s\" or \"5m\": %q", r.In)}
		}
		if err := CheckDelay(d); err != nil {
			return Task{}, 0, err
		}
		delay = d
	}
	if r.Deadline != "" {
		now := time.Now()
		dl, err := ParseDeadline(r.Deadline, now)
		if err != nil {
			return Task{}, 0, err
		}
		if err := CheckDeadline(dl, now, delay); err != nil {
			return Task{}, 0, err
		}
		t.Deadline = dl
	}
	return t, delay, nil
}

// ParseDeadline reads a task's deadline as producers write it (Request's
// "deadline", `enqueuer --deadline`): a positive Go duration from now
// ("30s", "5m") or an RFC 3339 time. A bad value is a *ValidationError
// naming field "deadline".
func ParseDeadline(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, &ValidationError{"deadline", fmt.Sprintf("is %q, which is already past: give a positive duration or a time in the future", s)}
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, &ValidationError{"deadline", fmt.Sprintf("is neither a Go duration such as \"30s\" nor an RFC 3339 time such as \"2026-01-02T15:04:05Z\": %q", s)}
	}
	return t, nil
}

// CheckDeadline returns a *ValidationError naming field "deadline" when
// deadline (zero: none) is not after now, is not after the task's first
// run is due (delay from now: the task could never run), or is further
// out than MaxDelay.
func CheckDeadline(deadline, now time.Time, delay time.Duration) error {
	switch {
	case deadline.IsZero():
		return nil
	case !deadline.After(now):
		return &ValidationError{"deadline", fmt.Sprintf("is %s, which is already past", deadline.UTC().Format(time.RFC3339Nano))}
	case delay > 0 && !deadline.After(now.Add(delay)):
		return &ValidationError{"deadline", fmt.Sprintf("is %s, not after the task's first run is due (in %s): the task could never run", deadline.UTC().Format(time.RFC3339), delay)}
	case deadline.Sub(now) > MaxDelay:
		return &ValidationError{"deadline", fmt.Sprintf("is too far: a deadline may be at most %s (10 years) away", MaxDelay)}
	}
	return nil
}

// MaxDelay is the longest a task's first run may be delayed (Request.In,
// ProcessIn, ProcessAt; `enqueuer --in`): 10 years. A longer delay is
// refused: its record's lifetime (the retention plus the delay) would be
// past what Redis and time.Duration can hold.
const MaxDelay = 10 * 365 * 24 * time.Hour

// CheckDelay returns a *ValidationError naming field "in" when delay is
// longer than MaxDelay.
func CheckDelay(delay time.Duration) error {
	if delay > MaxDelay {
		return &ValidationError{"in", fmt.Sprintf("is too large: a task may be delayed by at most %s (10 years)", MaxDelay)}
	}
	return nil
}

// Check validates t as a producer's task before it is enqueued: the
// envelope's fields (a tenant within CheckTenant, a priority CheckPriority
// accepts), an action and correlation ID without control or
// bidirectional formatting characters (CheckText), a caller ID without
// '#' (ValidateID), and a queue
// the workers serve (CheckQueue; nil served: any queue). A bad field is a
// *ValidationError naming it.
func (t Task) Check(served []string) error {
	env := Envelope{ID: t.ID, Agent: t.Agent, Action: t.Action, Params: t.Params, CorrelationID: t.CorrelationID, Notify: t.Notify,
		Tenant: t.Tenant, Priority: t.Priority, MaxTokens: t.MaxTokens, MaxCostUSD: t.MaxCostUSD}
	if env.ID == "" {
		env.ID = "x" // a generated ID is always valid
	}
	if err := env.Validate(); err != nil {
		return err
	}
	if err := env.checkText(); err != nil {
		return err
	}
	if t.ID != "" {
		if err := ValidateID(t.ID); err != nil {
			return err
		}
	}
	if served == nil {
		return nil
	}
	return CheckQueue(t.Queue, served)
}
