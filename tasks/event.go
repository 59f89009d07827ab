package tasks

import "time"

// State is a task's lifecycle state (stable names, DESIGN.md §3).
type State string

// Task states.
const (
	StatePending      State = "pending"
	StateScheduled    State = "scheduled"
	StateActive       State = "active"
	StateRetrying     State = "retrying"
	StateDeferred     State = "deferred"
	StateRestarting   State = "restarting"
	StateSucceeded    State = "succeeded"
	StateDeadLettered State = "dead_lettered"
)

// Terminal reports whether s is an end state.
func (s State) Terminal() bool { return s == StateSucceeded || s == StateDeadLettered }

// Event kinds recorded in a task's history.
const (
	EventQueued       = "queued"
	EventScheduled    = "scheduled"
	EventStarted      = "started"
	EventSucceeded    = "succeeded"
	EventFailed       = "failed" // an attempt failed (followed by retrying/restarting/dead_lettered)
	EventRetrying     = "retrying"
	EventDeferred     = "deferred"
	EventRestarting   = "restarting"
	EventRestarted    = "restarted"
	EventDeadLettered = "dead_lettered"
	EventRequeued     = "requeued"
	EventCanceled     = "canceled" // put back on shutdown; no attempt used
)

// Event is one entry of a task's history.
type Event struct {
	At         time.Time `json:"at"`
	Event      string    `json:"event"`
	Attempt    int       `json:"attempt"`
	Restart    int       `json:"restart"`
	Agent      string    `json:"agent,omitempty"`
	ErrorClass string    `json:"error_class"`
	Error      string    `json:"error"`
	DelayMS    int64     `json:"delay_ms"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	Worker     string    `json:"worker,omitempty"`
}
