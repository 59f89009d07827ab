package tasks

import (
	"encoding/json"
	"fmt"
	"time"
)

// Request is a task as producers write it in JSON: one task of POST
// /api/v1/tasks, one line of `enqueuer --file`. Its fields are the stable
// JSON of both.
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
	// In delays the first run by a Go duration ("30s", "5m"). Zero: now.
	In string `json:"in,omitempty"`
	// FailIfUnavailable refuses the task while the agent's breaker is open
	// (HTTP 409 agent_unavailable, exit status 3).
	FailIfUnavailable bool `json:"fail_if_unavailable,omitempty"`
	// Notify names configured webhooks to tell of the task's events.
	Notify []string `json:"notify,omitempty"`
}

// Task checks r as every producer does (Task.Check with the queues the
// workers serve, and In) and returns its task and delay. A bad field is a
// *ValidationError naming it.
func (r Request) Task(served []string) (Task, time.Duration, error) {
	t := Task{ID: r.ID, Agent: r.Agent, Action: r.Action, Params: r.Params, CorrelationID: r.CorrelationID, Queue: r.Queue, Notify: r.Notify}
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
	return t, delay, nil
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
// envelope's fields, an action and correlation ID without control or
// bidirectional formatting characters (CheckText), a caller ID without
// '#' (ValidateID), and a queue
// the workers serve (CheckQueue; nil served: any queue). A bad field is a
// *ValidationError naming it.
func (t Task) Check(served []string) error {
	env := Envelope{ID: t.ID, Agent: t.Agent, Action: t.Action, Params: t.Params, CorrelationID: t.CorrelationID, Notify: t.Notify}
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
