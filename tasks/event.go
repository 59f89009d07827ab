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
	// EventElided stands, in a long history, for the events between the
	// first HistoryHead and the last HistoryTail: Count says how many,
	// Attempts how many attempt outcomes were among them.
	EventElided = "history_elided"
)

// A history keeps its first HistoryHead events and its last HistoryTail;
// the events between are replaced by one EventElided event. Repeated
// deferrals are one event already (Event.Count), so only a task that
// makes very many attempts (many requeues) is elided.
const (
	HistoryHead = 20
	HistoryTail = 80
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
	// Count is how many events this one stands for: repeated deferrals
	// in a row are one "deferred" event (the last one's fields, counted;
	// Since is the first one's time), and EventElided counts the events
	// it replaces. Zero means one.
	Count int       `json:"count,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// Attempts is, for EventElided, how many attempt outcomes it replaces.
	Attempts int `json:"attempts,omitempty"`
}

// AttemptOutcome reports whether ev ends an attempt (and so counts one):
// succeeded, retrying, restarting or dead_lettered with an attempt number.
func (ev Event) AttemptOutcome() bool {
	switch ev.Event {
	case EventSucceeded, EventRetrying, EventRestarting, EventDeadLettered:
		return ev.Attempt > 0
	}
	return false
}
